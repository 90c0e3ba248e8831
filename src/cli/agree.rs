//! `rubric agree RUBRIC --input ROWS --labels LABELS`: the judge's verdicts against human
//! labels (`crate::agree`), and `rubric calibrate`, which fits a judge's calibration from them
//! (`crate::agree::calibrate`). The verdicts come from scoring the rows exactly as `rubric run`
//! does (recorded verdicts, `judges.toml`, a replayed transcript, the cache), or from the
//! records of an earlier run (`--results`).

use super::{bundle, judge_settings, EngineArgs, ErrorFormat};
use crate::agree::{self, By, Options};
use crate::runtime::{self, RunOptions, VerdictFile};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The rubric, its rows and labels, and where the verdicts compared with the labels come from.
#[derive(clap::Args, Debug)]
pub struct Scoring {
    pub file: PathBuf,
    /// The rows, JSONL.
    #[arg(long)]
    pub input: PathBuf,
    /// Human labels, JSONL: `{"row": 0 | "ID", "criterion": "C", "label": X, "annotator": "A"}`
    /// or `{"row": ..., "annotator": ..., "labels": {"C": X, ...}}`.
    #[arg(long)]
    pub labels: PathBuf,
    /// The records of an earlier `rubric run` of these rows: use those verdicts instead of
    /// scoring the rows again.
    #[arg(long, conflicts_with_all = ["verdicts", "judges", "judge"])]
    pub results: Option<PathBuf>,
    /// Recorded judge verdicts, JSONL keyed by row and criterion.
    #[arg(long)]
    pub verdicts: Option<PathBuf>,
    /// Call judges for criteria without a recorded verdict: the endpoints of `judges.toml`.
    #[arg(long)]
    pub judges: Option<PathBuf>,
    /// `replay:TRANSCRIPT.jsonl`: answer judge calls from a recorded transcript, offline.
    #[arg(long)]
    pub judge: Option<String>,
    /// The judge cache (SQLite); default: the user's cache directory.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Do not read or write the judge cache.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// What `rubric agree` was asked.
pub struct AgreeArgs {
    pub scoring: Scoring,
    pub by: Vec<String>,
    pub bootstrap: usize,
    pub seed: u64,
    pub confidence: f64,
    pub json: bool,
}

/// What `rubric calibrate` was asked.
pub struct CalibrateArgs {
    pub scoring: Scoring,
    pub output: PathBuf,
    pub judge: Option<String>,
    pub method: Option<agree::calibrate::Fit>,
    pub per_criterion: Option<usize>,
}

/// The records and the checked labels, or the exit code after reporting why not.
/// The rubric, loaded once for scoring the rows and scoring them again with the labels.
fn load(s: &Scoring) -> Result<bundle::Rubric, ExitCode> {
    bundle::load_or_report_as(&s.file, ErrorFormat::Human, false).ok_or(ExitCode::from(1))
}

fn records_and_labels(
    s: &Scoring,
    rubric: &bundle::Rubric,
) -> Result<(Vec<agree::Record>, Vec<agree::labels::LabelEntry>), ExitCode> {
    let text = match &s.results {
        Some(p) => {
            std::fs::read_to_string(p).map_err(|e| fail(&format!("cannot read the results {}: {e}", p.display()), 1))?
        }
        None => score(s, rubric)?,
    };
    let records = agree::read_records(&text).map_err(|e| fail(&e, 1))?;
    let labels_text = std::fs::read_to_string(&s.labels)
        .map_err(|e| fail(&format!("cannot read the labels {}: {e}", s.labels.display()), 1))?;
    let labels = match agree::labels::read(&labels_text, &records) {
        Ok(l) => l,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!("{} label{} could not be used: nothing was compared", errors.len(), plural(errors.len()));
            return Err(ExitCode::from(1));
        }
    };
    if labels.is_empty() {
        return Err(fail(&format!("{} holds no label", s.labels.display()), 1));
    }
    Ok((records, labels))
}

pub fn calibrate(a: CalibrateArgs) -> ExitCode {
    let loaded = load(&a.scoring).and_then(|rubric| Ok((records_and_labels(&a.scoring, &rubric)?, rubric)));
    let ((records, labels), _) = match loaded {
        Ok(x) => x,
        Err(code) => return code,
    };
    let opts = agree::calibrate::Options { judge: a.judge, fit: a.method, per_criterion: a.per_criterion };
    let provenance = serde_json::json!({
        "rubric": a.scoring.file.display().to_string(),
        "labels": a.scoring.labels.display().to_string(),
        "rows": records.len(),
        "labels_used": labels.len(),
    });
    let fitted = match agree::calibrate::fit(&records, &labels, &opts, provenance) {
        Ok(f) => f,
        Err(e) => return fail(&e, 1),
    };
    let text = match serde_json::to_string_pretty(&fitted.file) {
        Ok(t) => t + "\n",
        Err(e) => return fail(&e.to_string(), 1),
    };
    if let Err(e) = std::fs::write(&a.output, text) {
        return fail(&format!("cannot write {}: {e}", a.output.display()), 1);
    }
    eprintln!("calibration of judge `{}` → {}", fitted.file.judge, a.output.display());
    for line in &fitted.summary {
        eprintln!("  {line}");
    }
    eprintln!(
        "  (figures on the pairs it was fitted on; measure it on other labels with `rubric agree`; use it with `calibration \"{}\"` in judge `{}`)",
        a.output.display(),
        fitted.file.judge
    );
    ExitCode::SUCCESS
}

pub fn run(a: AgreeArgs) -> ExitCode {
    let mut by = Vec::new();
    for name in a.by.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        match By::ALL.iter().find(|(n, _)| *n == name) {
            Some((_, b)) if !by.contains(b) => by.push(*b),
            Some(_) => {}
            None => {
                let known: Vec<&str> = By::ALL.iter().map(|(n, _)| *n).collect();
                eprintln!("error: `--by {name}`: group by one of {}", known.join(", "));
                return ExitCode::from(2);
            }
        }
    }
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        eprintln!("error: `--confidence {}` must lie strictly between 0 and 1", a.confidence);
        return ExitCode::from(2);
    }
    let loaded = load(&a.scoring).and_then(|rubric| Ok((records_and_labels(&a.scoring, &rubric)?, rubric)));
    let ((records, labels), rubric) = match loaded {
        Ok(x) => x,
        Err(code) => return code,
    };
    let defaults = Options::default();
    let opts = Options {
        by: if by.is_empty() { defaults.by } else { by },
        resamples: a.bootstrap,
        seed: a.seed,
        confidence: a.confidence,
    };
    let mut report = agree::report(&records, &labels, &opts);
    match human_scores(&a.scoring, &rubric, &records, &labels) {
        Ok(rows) if rows.iter().any(|r| r.1.is_some()) => report.score = Some(agree::score_correction(&rows, &opts)),
        Ok(_) => {}
        Err(code) => return code,
    }
    if a.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => outln!("{s}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        out!("{}", agree::render(&report));
    }
    ExitCode::SUCCESS
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Every scored row's judge score with its human score, when an annotator labelled every judged
/// criterion of the row (not those behind a gate that fired): the row scored with that
/// annotator's labels as its verdicts, averaged over such annotators.
fn human_scores(
    s: &Scoring,
    rubric: &bundle::Rubric,
    records: &[agree::Record],
    labels: &[agree::labels::LabelEntry],
) -> Result<Vec<(f64, Option<f64>)>, ExitCode> {
    use agree::labels::Label;
    let program = rubric.program();
    let ident = rubric.identity().with_rows_file(&s.input);
    let engine = s.engine.kind(rubric).engine_for(program, s.engine.limits());
    let text = std::fs::read_to_string(&s.input)
        .map_err(|e| fail(&format!("cannot read the rows {}: {e}", s.input.display()), 1))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    // Row → annotator → the (criterion, label) pairs it gave.
    type Given<'a> = std::collections::BTreeMap<&'a str, Vec<(&'a str, &'a Label)>>;
    let mut by_row: std::collections::BTreeMap<usize, Given> = Default::default();
    for l in labels {
        by_row
            .entry(l.row)
            .or_default()
            .entry(l.annotator.as_str())
            .or_default()
            .push((l.criterion.as_str(), &l.label));
    }
    let mut out = Vec::new();
    for r in records {
        let Some(f) = r.score else { continue };
        let judged: Vec<&str> = r
            .criteria
            .iter()
            .filter(|c| c.source.starts_with("judge:") || c.source.starts_with("extract:"))
            .filter(|c| !matches!(&c.judged, agree::Judged::Unscored(why) if why.starts_with("gated")))
            .map(|c| c.id.as_str())
            .collect();
        let mut human = Vec::new();
        if let (Some(annotators), Some(line)) = (by_row.get(&r.row), lines.get(r.row)) {
            for given in annotators.values() {
                if judged.is_empty() || !judged.iter().all(|id| given.iter().any(|(c, _)| c == id)) {
                    continue;
                }
                let verdicts: serde_json::Map<String, serde_json::Value> = given
                    .iter()
                    .map(|(c, l)| {
                        let v = match l {
                            Label::Bool(b) => serde_json::json!(if *b { "met" } else { "unmet" }),
                            Label::Number(x) => serde_json::json!(x),
                            Label::Name(n) => serde_json::json!(n),
                        };
                        (c.to_string(), v)
                    })
                    .collect();
                let mut vf = VerdictFile::default();
                if vf.add(&serde_json::json!({"row": r.row, "verdicts": verdicts})).is_err() {
                    continue;
                }
                let rec = runtime::score_line(engine.as_ref(), program, &ident, r.row, line, Some(&vf));
                if let Some(y) = rec.get("score").and_then(serde_json::Value::as_f64) {
                    human.push(y);
                }
            }
        }
        let y = (!human.is_empty()).then(|| human.iter().sum::<f64>() / human.len() as f64);
        out.push((f, y));
    }
    Ok(out)
}

/// Score the rows as `rubric run` would, into a temporary file, and return the records.
fn score(a: &Scoring, rubric: &bundle::Rubric) -> Result<String, ExitCode> {
    let program = rubric.program();
    let ident = rubric.identity().with_rows_file(&a.input);
    let judging = judge_settings(a.judges.as_deref(), a.judge.as_deref(), None, a.cache.as_deref(), a.no_cache)
        .map_err(|e| fail(&e, 2))?;
    let vf = a.verdicts.as_deref().map(VerdictFile::load).transpose().map_err(|e| fail(&e.to_string(), 2))?;
    let engine = a.engine.kind_for(rubric, &a.file).engine_for(program, a.engine.limits());
    let dispatching = judging.dispatcher(&[program]).map_err(|e| fail(&e.to_string(), 2))?;
    let out = Temp::new();
    let opts = RunOptions {
        input: &a.input,
        output: out.path(),
        verdicts: vf.as_ref(),
        resume: false,
        progress: !a.no_progress,
        judges: dispatching.as_deref(),
        compact: false,
        groups: None,
        numeric: None,
        provenance: None,
        policy: runtime::RowPolicy::default(),
        slow_rows: 0,
    };
    let summary =
        runtime::run_batch_as(engine.as_ref(), program, &ident, &opts).map_err(|e| fail(&e.to_string(), 1))?;
    eprintln!(
        "scored {} rows ({} scored, {} unscored, {} errors){}",
        summary.rows,
        summary.scored,
        summary.unscored,
        summary.errors,
        dispatching.as_ref().map(|d| format!("; {}", d.report())).unwrap_or_default()
    );
    std::fs::read_to_string(out.path()).map_err(|e| fail(&format!("cannot read the records back: {e}"), 1))
}

fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

/// A file in the temporary directory, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new() -> Temp {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Temp(std::env::temp_dir().join(format!("rubric-agree-{}-{nanos}.jsonl", std::process::id())))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
