//! The run's statistics (`crate::agree::stats`): printed at the end of `rubric run` when the
//! rubric declares `stat`s or `--summary` asks for the summary file, and recomputed from a
//! result file by `rubric stats`.

use super::ReportFormat;
use crate::agree::stats::{input_keys_of, render, summarize, StatsOptions, Summary};
use crate::ir::{Program, StatAgg, StatDecl, StatMeasure, StatPer};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How `rubric run` (and `rubric stats`) compute and keep the statistics.
#[derive(clap::Args, Debug, Clone)]
pub struct StatsArgs {
    /// Write the run's statistics (the mean score and the rubric's `stat`s, each with a
    /// bootstrap interval) to this JSON file (docs/statistics.md).
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Bootstrap resamples (of rows) for the statistics' intervals; 0: no intervals.
    #[arg(long, default_value_t = 1000)]
    pub bootstrap: usize,
    /// The bootstrap's seed: the same seed, the same intervals.
    #[arg(long, default_value_t = 0)]
    pub bootstrap_seed: u64,
    /// The intervals' confidence.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
}

impl StatsArgs {
    /// Bad options, before anything runs.
    pub fn check(&self) -> Result<(), String> {
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err("`--confidence` is a number between 0 and 1".into());
        }
        Ok(())
    }

    fn options(&self) -> StatsOptions {
        StatsOptions { resamples: self.bootstrap, seed: self.bootstrap_seed, confidence: self.confidence }
    }

    /// Whether a run of `program` computes statistics: it declares some, or a summary is asked.
    pub fn wanted(&self, program: &Program) -> bool {
        self.summary.is_some() || !program.stats.is_empty() || !program.scores.is_empty() || compares(program)
    }
}

/// Whether `program` has a comparing judge, whose run reports preference figures.
fn compares(program: &Program) -> bool {
    program.judges.iter().any(|j| j.compares.is_some())
}

/// What the run adds to its summary beside the statistics.
#[derive(Default)]
pub struct RunFacts {
    pub judges: Option<serde_json::Value>,
    pub seconds: Option<f64>,
}

/// The statistics of the records in `results` (rows from `input`, for `per input`).
pub fn compute(
    program: &Program,
    results: &Path,
    input: Option<&Path>,
    args: &StatsArgs,
    facts: RunFacts,
) -> Result<Summary, String> {
    let open = |p: &Path| std::fs::File::open(p).map(BufReader::new).map_err(|e| format!("{}: {e}", p.display()));
    let needs_rows = program.stats.iter().any(|s| matches!(s.per, Some(StatPer::Input { .. } | StatPer::Pair { .. })));
    let keys = match (needs_rows, input) {
        (true, Some(p)) if !crate::runtime::is_stdio(p) => {
            Some(input_keys_of(&program.stats, &program.inputs, open(p)?)?)
        }
        _ => None,
    };
    // After the built-in mean score: the mean of each report-only score, then the rubric's own.
    let mut stats: Vec<StatDecl> = program
        .scores
        .iter()
        .map(|s| StatDecl {
            name: s.name.clone(),
            agg: StatAgg::Mean,
            measure: StatMeasure::NamedScore { name: s.name.clone() },
            test: None,
            per: None,
            clip: None,
        })
        .collect();
    stats.extend(program.stats.iter().cloned());
    let mut summary = summarize(&stats, open(results)?, keys.as_ref(), args.options())?;
    summary.judges = facts.judges;
    if compares(program) {
        summary.preferences = crate::agree::prefs::tally(open(results)?)?;
    }
    summary.run_seconds = facts.seconds;
    if let Some(path) = &args.summary {
        let mut text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        text.push('\n');
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(summary)
}

/// After a run: print the statistics (stderr), write the summary. `Err` only when the asked
/// summary could not be written or computed.
pub fn after_run(
    program: &Program,
    output: &Path,
    input: &Path,
    args: &StatsArgs,
    facts: RunFacts,
) -> Result<(), String> {
    if !args.wanted(program) {
        return Ok(());
    }
    match compute(program, output, Some(input), args, facts) {
        Ok(s) => {
            eprintln!("{}", render(&s));
            if let Some(p) = &args.summary {
                eprintln!("summary: {}", p.display());
            }
            Ok(())
        }
        Err(e) if args.summary.is_some() => Err(format!("statistics: {e}")),
        Err(e) => {
            eprintln!("note: statistics not computed: {e}");
            Ok(())
        }
    }
}

/// What `rubric stats` was asked.
#[derive(clap::Args, Debug)]
pub struct StatsCommand {
    /// The rubric (or bundle) whose `stat`s to compute.
    pub file: PathBuf,
    /// The records of a run of it (`rubric run --output`).
    #[arg(long)]
    pub results: PathBuf,
    /// The rows that were scored (needed by `per input` statistics and `bradley_terry`
    /// rankings; without it they are listed as not computed).
    #[arg(long)]
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub stats: StatsArgs,
    /// `json`: the summary as one JSON document on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

pub fn run(a: StatsCommand) -> ExitCode {
    if let Err(e) = a.stats.check() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let Some(rubric) = super::bundle::load_or_report_as(&a.file, super::ErrorFormat::Human, false) else {
        return ExitCode::from(1);
    };
    match compute(rubric.program(), &a.results, a.input.as_deref(), &a.stats, RunFacts::default()) {
        Ok(s) => {
            match a.format {
                ReportFormat::Text => outln!("{}", render(&s)),
                ReportFormat::Json => match serde_json::to_string_pretty(&s) {
                    Ok(t) => outln!("{t}"),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(1);
                    }
                },
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
