//! `rubric agree RUBRIC --input ROWS --labels LABELS`: the judge's verdicts against human
//! labels (`crate::agree`). The verdicts come from scoring the rows exactly as `rubric run`
//! does (recorded verdicts, `judges.toml`, a replayed transcript, the cache), or from the
//! records of an earlier run (`--results`).

use super::{bundle, judge_settings, EngineArgs, ErrorFormat};
use crate::agree::{self, By, Options};
use crate::runtime::{self, RunOptions, VerdictFile};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `rubric agree` was asked.
pub struct AgreeArgs {
    pub file: PathBuf,
    pub input: PathBuf,
    pub labels: PathBuf,
    pub results: Option<PathBuf>,
    pub verdicts: Option<PathBuf>,
    pub judges: Option<PathBuf>,
    pub judge: Option<String>,
    pub cache: Option<PathBuf>,
    pub no_cache: bool,
    pub engine: EngineArgs,
    pub by: Vec<String>,
    pub bootstrap: usize,
    pub seed: u64,
    pub confidence: f64,
    pub json: bool,
    pub no_progress: bool,
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
    let text = match &a.results {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: cannot read the results {}: {e}", p.display());
                return ExitCode::from(1);
            }
        },
        None => match score(&a) {
            Ok(t) => t,
            Err(code) => return code,
        },
    };
    let records = match agree::read_records(&text) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let labels_text = match std::fs::read_to_string(&a.labels) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read the labels {}: {e}", a.labels.display());
            return ExitCode::from(1);
        }
    };
    let labels = match agree::labels::read(&labels_text, &records) {
        Ok(l) => l,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!("{} label{} could not be used: nothing was compared", errors.len(), plural(errors.len()));
            return ExitCode::from(1);
        }
    };
    if labels.is_empty() {
        eprintln!("error: {} holds no label", a.labels.display());
        return ExitCode::from(1);
    }
    let defaults = Options::default();
    let opts = Options {
        by: if by.is_empty() { defaults.by } else { by },
        resamples: a.bootstrap,
        seed: a.seed,
        confidence: a.confidence,
    };
    let report = agree::report(&records, &labels, &opts);
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

/// Score the rows as `rubric run` would, into a temporary file, and return the records.
fn score(a: &AgreeArgs) -> Result<String, ExitCode> {
    let Some(rubric) = bundle::load_or_report_as(&a.file, ErrorFormat::Human, false) else {
        return Err(ExitCode::from(1));
    };
    let program = rubric.program();
    let ident = rubric.identity();
    let judging = judge_settings(a.judges.as_deref(), a.judge.as_deref(), None, a.cache.as_deref(), a.no_cache)
        .map_err(|e| fail(&e, 2))?;
    let vf = a.verdicts.as_deref().map(VerdictFile::load).transpose().map_err(|e| fail(&e.to_string(), 2))?;
    let engine = a.engine.kind_for(&rubric, &a.file).engine_for(program, a.engine.limits());
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
