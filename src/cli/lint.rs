//! `rubric lint FILE [--input ROWS] [--reference FIELD]` and `rubric check --lint`: the rules
//! of `crate::lint` over a rubric's static criteria (warnings with spans, as `check` shows
//! them) and, with `--input`, over the criteria each row produces (the rows are scored on the
//! interpreter with no judge and no verdict: only the criteria's texts, points and sources
//! are read), with the leak rule against each row's reference text.

use super::{emit, ErrorFormat};
use crate::api::{EngineKind, Rubric};
use crate::lint::{check_path, lint_rows, Item, RowFinding, RowItems};
use crate::runtime::RowIn;
use crate::types::Compiled;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `rubric lint` was asked.
#[derive(clap::Args, Debug)]
pub struct LintArgs {
    /// The rubric (a source file; a bundle has no source to lint).
    pub file: PathBuf,
    /// Rows whose per-instance criteria to lint as well (JSONL, as `rubric run --input`).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// The row field holding the reference answer the policy does not see (a dotted path such
    /// as `ideal_completions_data.ideal_completion`); criteria quoting eight or more of its
    /// words in a row are leaks. Default: the first of `reference`, `ideal`, `ideal_completion`,
    /// `gold`, `answer`, `solution` that the row has as text.
    #[arg(long, value_name = "FIELD")]
    pub reference: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    pub error_format: ErrorFormat,
    /// Exit 1 when there is any finding (for a CI gate); by default findings are warnings.
    #[arg(long)]
    pub deny_warnings: bool,
}

const REFERENCE_FIELDS: &[&str] = &["reference", "ideal", "ideal_completion", "gold", "answer", "solution"];

fn lookup<'a>(row: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(row, |v, k| match v {
        Json::Array(xs) => k.parse::<usize>().ok().and_then(|i| xs.get(i)),
        v => v.get(k),
    })
}

/// The row's reference text: the named field, else the first known one present as text.
fn reference_of(row: &Json, field: Option<&str>) -> Option<(String, String)> {
    match field {
        Some(f) => lookup(row, f).and_then(Json::as_str).map(|t| (f.to_string(), t.to_string())),
        None => REFERENCE_FIELDS
            .iter()
            .find_map(|f| row.get(*f).and_then(Json::as_str).map(|t| (f.to_string(), t.to_string()))),
    }
}

/// The criteria of one record, as the rules read them.
fn items_of(record: &Json) -> Vec<Item> {
    record["criteria"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| Item {
            id: c["id"].as_str().unwrap_or_default().to_string(),
            text: c["text"].as_str().unwrap_or_default().to_string(),
            points: c["points"].as_f64(),
            weight: None,
            judged: c["source"].as_str().is_some_and(|s| s.starts_with("judge:")),
            check_numbers: None,
            span: None,
        })
        .collect()
}

/// Score the rows (no judge, no verdict) and lint the criteria each one produced.
fn lint_input(compiled: Compiled, input: &Path, reference: Option<&str>) -> Result<(Vec<RowFinding>, usize), String> {
    let rubric = Rubric::from_compiled(compiled).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let rows: Vec<(usize, RowIn<'_>)> = lines.iter().enumerate().map(|(i, l)| (i, RowIn::Line(l))).collect();
    let engine = EngineKind::Interp.engine_for(rubric.program(), crate::stdlib::Limits::default());
    let records = rubric.score(engine.as_ref(), &rows, None, None, None);
    let mut per_row = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let row: Option<Json> = serde_json::from_str(lines[i]).ok();
        let id = match &record["id"] {
            Json::String(s) => Some(s.clone()),
            Json::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let reference = row.as_ref().and_then(|r| reference_of(r, reference));
        per_row.push(RowItems { row: i, id, items: items_of(record), reference });
    }
    Ok((lint_rows(&per_row), records.len()))
}

pub fn run(a: LintArgs) -> ExitCode {
    if crate::api::is_bundle(&a.file) {
        eprintln!("error: `{}` is a bundle: lint reads a rubric's source", a.file.display());
        return ExitCode::from(2);
    }
    let compiled = check_path(&a.file);
    let static_findings = compiled.diagnostics.iter().filter(|d| d.code.starts_with("rubric::lint::")).count();
    emit(&compiled.diagnostics, &compiled.sources, a.error_format, true);
    if compiled.has_errors() {
        return ExitCode::from(1);
    }
    let mut row_findings = 0;
    if let Some(input) = &a.input {
        match lint_input(compiled, input, a.reference.as_deref()) {
            Ok((found, rows)) => {
                for f in &found {
                    match a.error_format {
                        ErrorFormat::Json => match serde_json::to_string(f) {
                            Ok(line) => outln!("{line}"),
                            Err(e) => eprintln!("error: {e}"),
                        },
                        ErrorFormat::Human => {
                            let id = f.id.as_deref().map(|i| format!(" ({i})")).unwrap_or_default();
                            eprintln!(
                                "warning[{}]: {}\n  at {} row {}{id}, criterion `{}`\n  help: {}\n",
                                f.code,
                                f.message,
                                input.display(),
                                f.row,
                                f.criterion,
                                f.help
                            );
                        }
                    }
                }
                row_findings = found.len();
                if a.error_format == ErrorFormat::Human {
                    eprintln!("{} findings in {rows} rows of {}", found.len(), input.display());
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        }
    }
    if a.error_format == ErrorFormat::Human {
        eprintln!("lint: {static_findings} findings in the rubric's static criteria");
    }
    if a.deny_warnings && static_findings + row_findings > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
