//! `rubric import`: converts another system's rubric or test file into `.rubric` source, and,
//! for formats whose criteria differ from row to row, into the rows `rubric run` scores with it.
//! One file per format (`paperbench`, `promptfoo`, `openai`, `healthbench`, `ifeval`,
//! `autorubric`); this file
//! holds the command, the shared error type and the helpers every importer writes source with.
//! An importer never approximates in silence: a construct it cannot reproduce exactly is an
//! `rubric::import::unsupported` error naming it (docs/import.md lists them).

mod autorubric;
mod healthbench;
mod ifeval;
mod openai;
mod paperbench;
mod promptfoo;

use clap::ValueEnum;
use serde_json::Value as Json;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

pub use paperbench::paperbench;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Format {
    /// PaperBench rubric trees (openai/preparedness `paperbench`).
    Paperbench,
    /// promptfoo test configurations (`promptfooconfig.yaml`: tests with `assert` lists).
    Promptfoo,
    /// OpenAI graders (`string_check`, `text_similarity`, `score_model`, `label_model`, `multi`).
    OpenaiGrader,
    /// HealthBench rows (JSONL: `prompt`, `completion`/`response`, `rubrics`, `prompt_id`).
    Healthbench,
    /// IFEval inputs (`input_data.jsonl`) joined with responses (`--responses`).
    Ifeval,
    /// Autorubric rubrics (JSON or YAML: binary and multi-choice criteria, weights, the
    /// CANNOT_ASSESS strategy).
    Autorubric,
}

/// What `rubric import` was asked to do besides the format and the file.
pub struct ImportArgs<'a> {
    pub output: Option<&'a Path>,
    /// Where to write the converted rows, for formats with per-row criteria.
    pub rows_out: Option<&'a Path>,
    /// Model responses to put into the rows (JSONL, one line per test or row, in order).
    pub responses: Option<&'a Path>,
}

/// An importer's refusal: a stable code, a message naming the construct, and a help line.
#[derive(Debug)]
pub struct ImportError {
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
}

impl ImportError {
    /// The input has a construct whose meaning the rubric cannot reproduce exactly.
    pub fn unsupported(message: impl Into<String>, help: impl Into<String>) -> Self {
        ImportError { code: "rubric::import::unsupported", message: message.into(), help: Some(help.into()) }
    }

    /// The input is not a well-formed file of its format.
    pub fn malformed(message: impl Into<String>) -> Self {
        ImportError { code: "rubric::import::malformed", message: message.into(), help: None }
    }
}

impl From<String> for ImportError {
    fn from(message: String) -> Self {
        ImportError::malformed(message)
    }
}

impl From<&str> for ImportError {
    fn from(message: &str) -> Self {
        ImportError::malformed(message)
    }
}

/// What an importer produces: the rubric source, the rows for per-instance formats, and notes
/// for the user (printed to stderr) about what it could only keep with a stated difference.
pub struct Imported {
    pub source: String,
    pub rows: Option<Vec<Json>>,
    pub notes: Vec<String>,
}

pub fn run(format: Format, file: &Path, args: &ImportArgs) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let name = file.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "rubric".into());
    let responses = match args.responses.map(read_responses).transpose() {
        Ok(r) => r,
        Err(e) => return report(args.responses.unwrap_or(file), &e),
    };
    let imported = match format {
        Format::Paperbench => parse_json(&text)
            .and_then(|j| Ok(Imported { source: paperbench(&j, &name)?, rows: None, notes: Vec::new() })),
        Format::Promptfoo => promptfoo::import(&text, &name, responses.as_deref()),
        Format::OpenaiGrader => parse_json(&text).and_then(|j| openai::import(&j, &name)),
        Format::Healthbench => healthbench::import(&text, responses.as_deref()),
        Format::Ifeval => ifeval::import(&text, responses.as_deref()),
        Format::Autorubric => autorubric::import(&text, &name),
    };
    let imported = match imported.and_then(compiles) {
        Ok(i) => i,
        Err(e) => return report(file, &e),
    };
    for note in &imported.notes {
        eprintln!("note: {note}");
    }
    if let Some(rows) = &imported.rows {
        let Some(path) = args.rows_out else {
            return report(
                file,
                &ImportError {
                    code: "rubric::import::malformed",
                    message: format!("a {format:?} import has per-row criteria: it needs `--rows-out ROWS.jsonl`"),
                    help: Some("the rubric reads each row's criteria from the rows file this option writes".into()),
                },
            );
        };
        let mut out = String::new();
        for r in rows {
            out.push_str(&r.to_string());
            out.push('\n');
        }
        if let Err(e) = std::fs::write(path, out) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    match args.output {
        Some(path) => match std::fs::write(path, &imported.source) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: cannot write `{}`: {e}", path.display());
                ExitCode::from(2)
            }
        },
        None => {
            out!("{}", imported.source);
            ExitCode::SUCCESS
        }
    }
}

/// The imported source must compile: a construct the importer passed on whose rubric does not
/// type-check (a `calculate_output` calling `min` with three arguments) is refused, never
/// written out broken.
fn compiles(imported: Imported) -> Result<Imported, ImportError> {
    let compiled = crate::types::compile_source("imported.rubric", &imported.source);
    match compiled.diagnostics.iter().find(|d| d.is_error()) {
        Some(d) => Err(ImportError::unsupported(
            format!("the imported rubric does not compile: {} ({})", d.message, d.code),
            "the input uses a construct the rubric cannot express this way; see docs/import.md",
        )),
        None => Ok(imported),
    }
}

fn report(file: &Path, e: &ImportError) -> ExitCode {
    eprintln!("error[{}]: `{}`: {}", e.code, file.display(), e.message);
    if let Some(help) = &e.help {
        eprintln!("  help: {help}");
    }
    ExitCode::from(1)
}

fn parse_json(text: &str) -> Result<Json, ImportError> {
    serde_json::from_str(text).map_err(|e| ImportError::malformed(format!("not JSON: {e}")))
}

/// The lines of a JSONL file, each parsed.
pub(crate) fn jsonl(text: &str) -> Result<Vec<Json>, ImportError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| ImportError::malformed(format!("line {}: not JSON: {e}", i + 1)))
        })
        .collect()
}

/// `--responses`: one JSON value per line, in order: a string, or an object whose `response`
/// (or `output`) is the response text; an object with `prompt` keeps it (the IFEval join). A
/// file that is one JSON list (promptfoo's `--llm-outputs outputs.json`) gives its elements.
fn read_responses(path: &Path) -> Result<Vec<Json>, ImportError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ImportError::malformed(format!("cannot read `{}`: {e}", path.display())))?;
    if text.trim_start().starts_with('[') {
        if let Ok(Json::Array(items)) = serde_json::from_str(&text) {
            return Ok(items);
        }
    }
    jsonl(&text)
}

/// `--responses`, when given, has one line per `what` (test, row) of the file.
pub(crate) fn check_responses(responses: Option<&[Json]>, n: usize, what: &str) -> Result<(), ImportError> {
    match responses {
        Some(r) if r.len() != n => Err(ImportError::malformed(format!(
            "{} responses for {n} {what}s: `--responses` needs one line per {what}, in order",
            r.len()
        ))),
        _ => Ok(()),
    }
}

/// A required string field of a JSON object; `at` says where, for the error.
pub(crate) fn str_field<'a>(v: &'a Json, key: &str, at: &str) -> Result<&'a str, ImportError> {
    v.get(key).and_then(Json::as_str).ok_or_else(|| ImportError::malformed(format!("{at}: no string `{key}`")))
}

/// A required number field of a JSON object; `at` says where, for the error.
pub(crate) fn num_field(v: &Json, key: &str, at: &str) -> Result<f64, ImportError> {
    v.get(key).and_then(Json::as_f64).ok_or_else(|| ImportError::malformed(format!("{at}: no numeric `{key}`")))
}

/// Refuse an object key the importer does not read: it could change the meaning.
pub(crate) fn check_keys(v: &Json, what: &str, allowed: &[&str]) -> Result<(), ImportError> {
    let o = v.as_object().ok_or_else(|| ImportError::malformed(format!("{what} is not an object")))?;
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ImportError::unsupported(
            format!("{what} has `{k}`, which the importer does not reproduce"),
            format!(
                "the keys it reads here are {}",
                allowed.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// The response text of one `--responses` line.
pub(crate) fn response_text(line: &Json, index: usize) -> Result<String, ImportError> {
    match line {
        Json::String(s) => Ok(s.clone()),
        Json::Object(o) => {
            o.get("response").or_else(|| o.get("output")).and_then(Json::as_str).map(str::to_string).ok_or_else(|| {
                ImportError::malformed(format!("response line {}: no string `response` or `output`", index + 1))
            })
        }
        _ => Err(ImportError::malformed(format!("response line {}: expected a string or an object", index + 1))),
    }
}

/// A rubric identifier for a PaperBench node id.
pub fn node_name(id: &str) -> String {
    let mut s = String::from("n_");
    s.extend(id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }));
    s
}

/// A string literal in rubric syntax (the printer's: every escape the grammar admits).
pub fn quote(s: &str) -> String {
    crate::syntax::printer::print_string(s)
}

/// A file name turned into the last segment of a dotted rubric name.
pub fn sanitize_package(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) || s.is_empty() {
        format!("r_{s}")
    } else {
        s
    }
}

/// A `//` comment block, one line per line of `text`.
pub(crate) fn comment(out: &mut String, text: &str) {
    for line in text.lines() {
        if line.is_empty() {
            out.push_str("//\n");
        } else {
            let _ = writeln!(out, "// {line}");
        }
    }
}
