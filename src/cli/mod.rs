//! The command line: `rubric check | run | test | explain | ir | fmt | lsp | import | build |
//! inspect | diff | mock-judge | serve`. Thin: each command compiles with `types` (or loads a
//! bundle with `bundle`), runs with `runtime` (or `judge` for the mock judge, `serve` for the
//! reward server), and renders diagnostics.

/// `println!` that ignores a closed stdout (`rubric ir | head` must not panic).
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

mod agree;
mod bench;
#[cfg(feature = "models")]
mod embed_bench;
#[cfg(all(feature = "exec", target_os = "linux"))]
mod exec_bench;
#[cfg(feature = "models")]
pub use embed_bench::sentences as bench_sentences;
#[cfg(feature = "models")]
mod bench_numeric;
pub mod bundle;
mod compare;
mod import;
mod init;
#[cfg(feature = "judges")]
mod lint;
#[cfg(all(feature = "models", feature = "judges"))]
mod model;
mod plan;
mod report;
mod stats;
pub mod suite;

use crate::api::{CacheSetting, EngineChoice, JudgeSettings};
use crate::diag::Diagnostic;
use crate::runtime::{self, RunOptions, VerdictFile};
use crate::source::SourceMap;
use crate::stdlib::Limits;
use crate::syntax::printer::FormatError;
use crate::types::{compile_path, Compiled};
use clap::{Parser, Subcommand, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "rubric", version, about = "A typed language and toolchain for evaluation rubrics")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Where local models (embedding verifiers, local judges) run: cpu, cuda or cuda:N
    /// (cuda needs a build with the `cuda` feature). Default: the CPU, or $RUBRIC_DEVICE.
    #[arg(long, global = true, value_name = "DEVICE")]
    pub device: Option<String>,
    /// The sentence-embedding model directory of `similarity`, `covers` and `best_match`
    /// (safetensors, config.json, tokenizer.json). Default: $RUBRIC_EMBEDDING_MODEL, else
    /// all-MiniLM-L6-v2 in `models/` beside the binary's directory (`target/models/`) or in
    /// `~/.local/share/rubric/models/` (`bash scripts/fetch-models.sh [--user]` puts it there).
    #[arg(long, global = true, value_name = "DIR")]
    pub embedding_model: Option<PathBuf>,
    #[command(flatten)]
    pub exec: ExecArgs,
}

/// Code execution (the `exec` intrinsic, docs/exec.md): whether programs may run in the sandbox,
/// and where their results are cached, recorded and replayed from.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExecArgs {
    /// Let the rubric run programs (`exec`) in the sandbox. Without it nothing is executed: an
    /// execution not in the cache or the replayed transcript is unscored (`exec_not_allowed`).
    #[arg(long, global = true)]
    pub allow_exec: bool,
    /// The execution cache; default: `~/.cache/rubric/exec` ($XDG_CACHE_HOME).
    #[arg(long, global = true, value_name = "DIR")]
    pub exec_cache: Option<PathBuf>,
    /// Use no execution cache.
    #[arg(long, global = true)]
    pub no_exec_cache: bool,
    /// Append every execution (identity, runtime, result) to this JSONL transcript.
    #[arg(long, global = true, value_name = "FILE")]
    pub exec_record: Option<PathBuf>,
    /// Answer executions from a transcript written by `--exec-record`, offline.
    #[arg(long, global = true, value_name = "FILE")]
    pub exec_replay: Option<PathBuf>,
    /// Sandboxes running at once; default: the machine's cores.
    #[arg(long, global = true, value_name = "N")]
    pub exec_concurrency: Option<usize>,
    /// A runtime besides the built-in ones (python3, node, bash, sh), as
    /// `NAME:FILE:COMMAND [ARG...]`: `ruby:main.rb:/usr/bin/ruby` runs the program, written to
    /// `FILE` in the scratch directory, as `COMMAND ARG... FILE`, with the system's read-only
    /// paths; repeatable; a name given here overrides a built-in one.
    #[arg(long, global = true, value_name = "NAME:FILE:COMMAND")]
    pub exec_runtime: Vec<String>,
    /// The directory under which `exec(..., dir: PATH)` reads submission directories (rows name
    /// them relative to it); without it a `dir` is unscored (`exec_dir`).
    #[arg(long, global = true, value_name = "DIR")]
    pub exec_dir_root: Option<PathBuf>,
}

impl ExecArgs {
    /// Set the process's executor from these options (a transcript beside a directory example,
    /// `executions.jsonl`, is given by `rubric test` itself).
    pub fn configure(&self) -> Result<(), String> {
        #[cfg(all(feature = "exec", target_os = "linux"))]
        {
            let config = crate::sandbox::executor::ExecConfig {
                allow: self.allow_exec,
                concurrency: self.exec_concurrency.unwrap_or(0),
                cache: if self.no_exec_cache {
                    None
                } else {
                    self.exec_cache.clone().or_else(crate::sandbox::executor::default_cache_dir)
                },
                record: self.exec_record.clone(),
                replay: self.exec_replay.clone(),
                runtimes: self
                    .exec_runtime
                    .iter()
                    .map(|r| crate::sandbox::parse_runtime(r))
                    .collect::<Result<_, _>>()?,
                dir_root: match &self.exec_dir_root {
                    None => None,
                    Some(d) => Some(d.canonicalize().map_err(|e| format!("--exec-dir-root {}: {e}", d.display()))?),
                },
            };
            crate::sandbox::executor::configure(config)
        }
        #[cfg(not(all(feature = "exec", target_os = "linux")))]
        {
            if self.allow_exec || self.exec_replay.is_some() || !self.exec_runtime.is_empty() {
                return Err(
                    "this build of rubric runs no programs (built without the `exec` feature, or not for Linux)".into(),
                );
            }
            Ok(())
        }
    }
}

/// The fit of `rubric calibrate`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum CalibrationMethod {
    Isotonic,
    Platt,
    Confusion,
}

/// How a report is printed.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum ErrorFormat {
    Human,
    Json,
}

pub use crate::api::EngineKind;

/// Which engine runs a rubric, and the sandbox's limits: what `run`, `test`, `explain` and
/// `serve` take. A bundle (a rubric from elsewhere) runs on the Wasm engine unless the user
/// names another; a source on the engine its shape calls for (`EngineKind::for_source`).
#[derive(clap::Args, Clone, Debug)]
pub struct EngineArgs {
    /// The engine; default: `wasm` for bundles (sandboxed, with the limits below); for
    /// sources `jit` when checks on the inputs alone make up the rubric (8 or more, at least
    /// three times its other criteria), else `interp`. Naming `interp` or `jit` for a bundle
    /// says it is trusted.
    #[arg(long, value_enum)]
    pub engine: Option<EngineKind>,
    /// Fuel per row on the Wasm engine: Wasm instructions, and bytes or elements that
    /// intrinsics read or make.
    #[arg(long, value_name = "UNITS", default_value_t = Limits::DEFAULT.fuel)]
    pub row_fuel: u64,
    /// Wall-clock time per row on the Wasm engine.
    #[arg(long, value_name = "MS", default_value_t = Limits::DEFAULT.timeout.as_millis() as u64)]
    pub row_timeout_ms: u64,
    /// Memory a row may allocate on the host on the Wasm engine (values, text indexes, JSON,
    /// regexes, embeddings).
    #[arg(long, value_name = "MIB", default_value_t = (Limits::DEFAULT.heap_bytes >> 20) as u64)]
    pub row_memory_mb: u64,
}

impl Default for EngineArgs {
    fn default() -> EngineArgs {
        EngineArgs {
            engine: None,
            row_fuel: Limits::DEFAULT.fuel,
            row_timeout_ms: Limits::DEFAULT.timeout.as_millis() as u64,
            row_memory_mb: (Limits::DEFAULT.heap_bytes >> 20) as u64,
        }
    }
}

impl EngineArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            fuel: self.row_fuel,
            timeout: std::time::Duration::from_millis(self.row_timeout_ms),
            heap_bytes: usize::try_from(self.row_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
            ..Limits::DEFAULT
        }
    }

    /// The library's engine choice these flags make.
    pub fn choice(&self) -> EngineChoice {
        EngineChoice { engine: self.engine, limits: self.limits() }
    }

    /// The engine for `rubric` (`EngineChoice::kind_for`).
    pub fn kind(&self, rubric: &bundle::Rubric) -> EngineKind {
        self.choice().kind_for(rubric)
    }

    /// [`EngineArgs::kind`], with a note when a bundle (named `what`) leaves the sandbox.
    pub fn kind_for(&self, rubric: &bundle::Rubric, what: &Path) -> EngineKind {
        let choice = self.choice();
        if choice.leaves_sandbox(rubric) {
            eprintln!(
                "note: `--engine {}` runs the bundle `{}` without the sandbox: run bundles you did not build \
                 yourself on the default Wasm engine",
                choice.kind_for(rubric).name(),
                what.display()
            );
        }
        choice.kind_for(rubric)
    }
}

/// Where `rubric run` computes scores, aggregations, advantages and token credit.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum NumericMode {
    /// Row by row, by the engine (and `runtime::groups`).
    Scalar,
    /// The batch numeric stage on a tensor backend, on the configured device (`numeric`).
    Tensor,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and type-check rubric files; print errors, warnings and the facts the checker proves.
    Check {
        files: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "human")]
        error_format: ErrorFormat,
        /// Hide notes (proven facts such as the score range).
        #[arg(long)]
        quiet: bool,
        /// Also the lint rules over the static criteria (`rubric lint`: compound, vague,
        /// duplicate criteria, ...), as warnings.
        #[arg(long)]
        lint: bool,
    },
    /// The rubric-quality rules (docs/lint.md): compound criteria, vague wording, duplicates and
    /// near-duplicates, points whose sign and wording disagree, one criterion with most of the
    /// points, a check whose numbers are not its text's; with `--input`, the same over each
    /// row's criteria and criteria that quote the row's reference answer.
    Lint {
        #[command(flatten)]
        args: lint::LintArgs,
    },
    /// Score every row of a JSONL file. Exits 0 when every row is scored, 3 when rows failed (an
    /// error record, or a criterion, gate or score unscored) beyond `--max-failures`, 1 when the
    /// run could not go on (an unreadable input, an unwritable output), 2 on bad options.
    Run {
        file: PathBuf,
        /// The rows, JSONL; `-` for standard input.
        #[arg(long)]
        input: PathBuf,
        /// Where the records go, JSONL; `-` for standard output.
        #[arg(long)]
        output: PathBuf,
        /// Recorded judge verdicts, JSONL keyed by row and criterion.
        #[arg(long)]
        verdicts: Option<PathBuf>,
        /// The row field that names a row (default `id`): records carry it as `id`, and
        /// verdict files may name rows by it (HealthBench's `prompt_id`, say).
        #[arg(long, value_name = "FIELD")]
        id_field: Option<String>,
        /// Continue an interrupted run: keep the complete lines of OUTPUT, score the rest.
        #[arg(long)]
        resume: bool,
        #[command(flatten)]
        engine: EngineArgs,
        #[arg(long, value_enum, default_value = "human")]
        error_format: ErrorFormat,
        /// Print the checker's warnings (by default a run counts them in one line: `rubric
        /// check` is where they are read).
        #[arg(long)]
        warnings: bool,
        /// Never show a progress bar.
        #[arg(long)]
        no_progress: bool,
        /// Compact records: instead of the `criteria` list (and `gates`, `groups`), `values`:
        /// each criterion's value in criteria order, `null` when unscored or skipped.
        #[arg(long)]
        compact: bool,
        /// RL groups: rows with the same value of this field (default `group`), consecutive in
        /// the input, form a group; each record gets its reward, group-relative advantage,
        /// verdict vector, strict flag and the group's statistics (docs/rl.md).
        #[arg(long, num_args = 0..=1, default_missing_value = "group", value_name = "FIELD")]
        groups: Option<String>,
        /// Call judges for criteria without a recorded verdict: the endpoints of `judges.toml`.
        #[arg(long)]
        judges: Option<PathBuf>,
        /// `replay:TRANSCRIPT.jsonl`: answer judge calls from a recorded transcript, offline.
        #[arg(long)]
        judge: Option<String>,
        /// Write every judge request and reply to this JSONL transcript.
        #[arg(long)]
        record: Option<PathBuf>,
        /// The judge cache (SQLite); default: the user's cache directory.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Do not read or write the judge cache.
        #[arg(long)]
        no_cache: bool,
        /// Stop judging after this long (`90`, `90s`, `20m`, `2h`): requests still unanswered
        /// then end `unscored(judge_deadline)`, and the run finishes with what it has.
        #[arg(long, value_parser = parse_duration)]
        deadline: Option<std::time::Duration>,
        /// Give each row this many milliseconds (counted from the start of its chunk of 512
        /// rows, which are scored together): judge calls still unanswered then are given up,
        /// and a row that lost one is unscored with reason `timeout` (score and reward
        /// `null`); the other rows are unchanged (docs/trainers.md, "Never block").
        #[arg(long, value_name = "MS")]
        row_deadline_ms: Option<u64>,
        /// Add each row's `timing` to its record: milliseconds evaluating it and waiting for
        /// its judges, per criterion (records with timings are not reproducible).
        #[arg(long)]
        timings: bool,
        /// After the run, list the N slowest rows and the criteria that took their time.
        #[arg(long, value_name = "N", default_value_t = 0)]
        slow_rows: usize,
        /// Spend at most this many US dollars on judge calls (prices from `judges.toml`): a
        /// request whose worst case (its prompt and `max_tokens` of reply) could pass it is not
        /// sent, and its criteria end `unscored(budget)`; a later run with more budget asks
        /// only what the cache does not hold.
        #[arg(long, value_name = "USD", value_parser = parse_budget)]
        budget: Option<f64>,
        /// `batch`: send the requests through the endpoints' OpenAI Batch API (one file per
        /// endpoint and planning round, polled until it ends; a run stopped meanwhile polls the
        /// same batch next time, from the cache) instead of one request at a time.
        #[arg(long, value_enum, default_value = "immediate")]
        dispatch: DispatchMode,
        /// How often a batch is polled (`--dispatch batch`).
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        batch_poll: std::time::Duration,
        /// `tensor`: compute scores, aggregations and (with `--groups`) advantages and token
        /// credit with the batch numeric stage on the device (rubrics whose score has no plan
        /// stay on the scalar path, with a notice); the records are the same.
        #[arg(long, value_enum, default_value = "scalar")]
        numeric: NumericMode,
        /// Exit 0 however many rows failed.
        #[arg(long, conflicts_with = "max_failures")]
        allow_errors: bool,
        /// How many failed rows still exit 0: a count (`3`) or a share of the rows scored in
        /// this run (`5%`); default 0.
        #[arg(long, value_name = "N|P%", value_parser = Allowance::parse)]
        max_failures: Option<Allowance>,
        #[command(flatten)]
        stats: stats::StatsArgs,
    },
    /// One self-contained HTML page of a run (no network): headline statistics with intervals,
    /// per-criterion and per-axis bars, a score histogram, failure classes, judge statistics,
    /// and a filterable table of rows that open to their criteria, reasons and evidence.
    Report {
        #[command(flatten)]
        args: report::ReportArgs,
    },
    /// The statistics of a result file: the mean score and the rubric's `stat`s, each with a
    /// seeded bootstrap interval over rows (docs/statistics.md).
    Stats {
        #[command(flatten)]
        args: stats::StatsCommand,
    },
    /// What `rubric run` would ask the judges and what it would cost, sending nothing: the
    /// requests left after planning, deduplication and the cache, their prompt tokens (counted
    /// with the model's tokenizer where its family is known, else estimated) and their price
    /// from `judges.toml` (docs/cost.md).
    #[cfg(feature = "judges")]
    Plan {
        #[command(flatten)]
        args: plan::PlanArgs,
    },
    /// Two result files of the same rows compared: per-row score differences with a paired
    /// bootstrap interval, pass/fail flips with McNemar's test, per-criterion flips, rows in
    /// one file only; `--fail-if` conditions set the exit status (1) for a CI gate, `--junit`
    /// writes JUnit XML.
    Compare {
        #[command(flatten)]
        args: compare::CompareArgs,
    },
    /// A new rubric directory that passes `rubric test DIR` as it is: a rubric with checks, a
    /// judged criterion, a gate and examples; rows, recorded verdicts and expected results; a
    /// `judges.toml` for the mock judge; a README with the next commands.
    Init {
        /// The directory to create (it must not exist, or be empty).
        dir: PathBuf,
    },
    /// How far a judge agrees with human labels: per criterion, axis, tag and judge, the
    /// judge's verdicts against the labels (accuracy, TPR/TNR, precision/recall/F1, macro and
    /// balanced forms, Cohen's κ, Krippendorff's α), the annotators' own agreement, and binary
    /// met rates corrected for the judge's errors, with bootstrap intervals (docs/agreement.md).
    Agree {
        #[command(flatten)]
        scoring: agree::Scoring,
        /// Groups to report, comma-separated: overall, criterion, axis, tag, judge (default
        /// overall,criterion,axis,judge).
        #[arg(long, value_name = "GROUPS")]
        by: Vec<String>,
        /// Bootstrap resamples (of rows) for the intervals; 0: no intervals.
        #[arg(long, default_value_t = 1000)]
        bootstrap: usize,
        /// The bootstrap's seed: the same seed, the same intervals.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The intervals' confidence.
        #[arg(long, default_value_t = 0.95)]
        confidence: f64,
        /// `json`: the whole report as one JSON document on stdout.
        #[arg(long, value_enum, default_value = "text")]
        format: ReportFormat,
    },
    /// Fit a judge's calibration from human labels: a monotone map of its P(yes) (isotonic or
    /// Platt) or, for a judge without P(yes), the probability of met given its verdict, with
    /// the threshold of best balanced accuracy; the rubric names the file with `calibration
    /// "FILE"` in the judge (docs/agreement.md).
    Calibrate {
        #[command(flatten)]
        scoring: agree::Scoring,
        /// Where the calibration goes (JSON).
        #[arg(long, short)]
        output: PathBuf,
        /// The judge to calibrate (default: the only one with labelled binary items).
        #[arg(long = "for", value_name = "JUDGE")]
        for_judge: Option<String>,
        /// The fit; default `isotonic` when every pair has P(yes), else `confusion`.
        #[arg(long, value_enum)]
        method: Option<CalibrationMethod>,
        /// Also fit one map per criterion (a block's instances together) that has at least
        /// this many labelled pairs.
        #[arg(long, value_name = "PAIRS")]
        per_criterion: Option<usize>,
    },
    /// Run the `example` blocks of rubric files; for a directory, also score its
    /// `inputs.jsonl` and compare with `expected.jsonl`.
    Test {
        paths: Vec<PathBuf>,
        #[command(flatten)]
        engine: EngineArgs,
        #[arg(long, value_enum, default_value = "human")]
        error_format: ErrorFormat,
        /// Write each example directory's `expected.jsonl` from its current results (row,
        /// id, score, status, and each criterion's id, status and value) instead of comparing.
        #[arg(long)]
        bless: bool,
        /// How far a number of a result may be from `expected.jsonl` (an expected row's own
        /// `"within": TOL` wins); 0 compares exactly.
        #[arg(long, default_value_t = suite::TOLERANCE)]
        tolerance: f64,
    },
    /// Measure the engines on one rubric and one set of rows, in the same run: cold start,
    /// rows per second on one thread and on all cores, ratios, and agreement.
    Bench {
        file: PathBuf,
        #[arg(long)]
        input: PathBuf,
        /// Rows per run (the input is cycled to this many).
        #[arg(long, default_value_t = 20000)]
        rows: usize,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Engines to compare, the first being the baseline (default: every engine).
        #[arg(long, value_enum, value_delimiter = ',')]
        engines: Vec<EngineKind>,
    },
    /// Executions per second through the sandbox against plain spawning of the same runtime, in
    /// the same run: a trivial Python program and a unit-test suite (docs/exec.md).
    #[cfg(all(feature = "exec", target_os = "linux"))]
    BenchExec {
        /// Executions per side and program.
        #[arg(long, default_value_t = 50)]
        runs: usize,
    },
    /// Sentence-embedding throughput of an embedding model on `--device`, sentences per second
    /// at each batch size (local models: the `models` feature).
    #[cfg(feature = "models")]
    BenchEmbed {
        /// The model directory (config.json, tokenizer.json, model.safetensors).
        #[arg(long)]
        model: PathBuf,
        /// Random weights of the model's shape (only config.json and tokenizer.json are read).
        #[arg(long)]
        random: bool,
        #[arg(long, value_delimiter = ',', default_value = "1,8,32,128,256")]
        batch_sizes: Vec<usize>,
        #[arg(long, default_value_t = 512)]
        sentences: usize,
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// List the devices local models can run on (`--device`); exits with 3 when `--require-cuda`
    /// is given and no CUDA device opens.
    #[cfg(feature = "models")]
    Devices {
        #[arg(long)]
        require_cuda: bool,
    },
    /// Measure the batch numeric stage on a synthetic criterion-result matrix: the scalar
    /// path, the tensor stage on the CPU and, when the configured device is CUDA, on CUDA, in
    /// the same run, with rows per second, ratios and agreement.
    #[cfg(feature = "models")]
    BenchNumeric {
        /// Rows of the synthetic matrix.
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        /// Criteria per row.
        #[arg(long, default_value_t = 50)]
        criteria: usize,
        /// Rows per RL group.
        #[arg(long, default_value_t = 8)]
        group_size: usize,
        /// Rows generated and computed at a time (bounds memory).
        #[arg(long, default_value_t = 65_536)]
        block: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Show, for one row, every gate and check with the values it computed.
    Explain {
        file: PathBuf,
        #[arg(long)]
        input: PathBuf,
        /// 0-based row index.
        #[arg(long, default_value_t = 0)]
        row: usize,
        #[arg(long)]
        verdicts: Option<PathBuf>,
        /// Also run the row on this engine and compare (the trace is always the interpreter's,
        /// under the limits below for a bundle).
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Print the compiled IR (text form, or canonical JSON) and its hash.
    Ir {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Lay rubric files out in canonical layout, in place, keeping their comments (a
    /// trailing comment on its line, any other above the node it precedes).
    Fmt {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Change nothing: print what would change (a unified diff) and exit 1 if any file is
        /// not formatted.
        #[arg(long, conflicts_with = "stdout")]
        check: bool,
        /// Print the formatted text to standard output instead of writing the file.
        #[arg(long)]
        stdout: bool,
    },
    /// Run the language server on standard input and output (diagnostics, hover, go to
    /// definition, completion and formatting for editors; see docs/editor.md).
    Lsp,
    /// Generate what a rubric's generators write (`generator NAME { ... fills INPUT }`) for
    /// every row that lacks it, through the judges' endpoints (or a transcript), and write the
    /// rows with the items and their provenance, for `rubric run` to score (docs/generate.md).
    #[cfg(feature = "judges")]
    Generate {
        file: PathBuf,
        #[arg(long)]
        input: PathBuf,
        /// Where to write the rows (required unless `--plan`).
        #[arg(long, required_unless_present = "plan")]
        output: Option<PathBuf>,
        /// The endpoints to call: `judges.toml`, as for `rubric run --judges`.
        #[arg(long)]
        judges: Option<PathBuf>,
        /// `replay:TRANSCRIPT.jsonl`: answer from a recorded transcript, offline.
        #[arg(long)]
        judge: Option<String>,
        /// Write every request and reply to this JSONL transcript.
        #[arg(long)]
        record: Option<PathBuf>,
        /// The judge cache (SQLite); default: the user's cache directory.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Do not read or write the judge cache.
        #[arg(long, conflicts_with = "cache")]
        no_cache: bool,
        /// Spend at most this many US dollars (prices from `judges.toml`).
        #[arg(long, value_name = "USD", value_parser = parse_budget)]
        budget: Option<f64>,
        /// Exit 0 even when rows could not be given their items (their reason is in the rows).
        #[arg(long)]
        allow_errors: bool,
        /// Never show a progress bar.
        #[arg(long)]
        no_progress: bool,
        /// Send nothing: print what generating would ask and cost, as `rubric plan` does for a
        /// run (no key is read; `--output` is not written).
        #[arg(long)]
        plan: bool,
        /// With `--plan`: `json`, the plan as one JSON document.
        #[arg(long, value_enum, default_value = "text")]
        format: ReportFormat,
    },
    /// Convert another system's rubric or tests into a `.rubric` file (and, where criteria
    /// differ per row, the rows to score with it); see docs/import.md.
    Import {
        #[arg(value_enum)]
        format: import::Format,
        file: PathBuf,
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Write the converted rows here (promptfoo tests, HealthBench and IFEval rows).
        #[arg(long)]
        rows_out: Option<PathBuf>,
        /// Model responses to put into the rows, JSONL in order: a string, or an object with
        /// `response` (or `output`); for IFEval, `{prompt, response}` joined on the prompt.
        #[arg(long)]
        responses: Option<PathBuf>,
    },
    /// Compile a rubric into a bundle (`NAME.rbk`): manifest, canonical IR, Wasm module,
    /// examples and source map in one verifiable file.
    Build {
        file: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        /// Also store the sources, so that diagnostics from the bundle show source lines.
        #[arg(long)]
        with_sources: bool,
        #[arg(long, value_enum, default_value = "human")]
        error_format: ErrorFormat,
    },
    /// Show what a bundle or source holds: manifest, hash, criteria, gates, judges, score range,
    /// sizes.
    Inspect {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// What changed between two versions of a rubric (sources or bundles), criterion by
    /// criterion; with `--probe`, both scored on the same rows.
    Diff {
        a: PathBuf,
        b: PathBuf,
        /// Rows (JSONL) to score with both versions.
        #[arg(long)]
        probe: Option<PathBuf>,
        /// Recorded judge verdicts for the probe rows.
        #[arg(long, requires = "probe")]
        verdicts: Option<PathBuf>,
        /// A row passes when its score is at least this.
        #[arg(long, default_value_t = 0.5)]
        pass: f64,
        #[arg(long)]
        json: bool,
    },
    /// Serve a mock LLM judge: an OpenAI-compatible chat-completions server on loopback whose
    /// replies follow a rules file (for tests, demos and benchmarks). Prints its base URL.
    #[cfg(feature = "judges")]
    MockJudge {
        /// Rules (TOML, or JSON for a `.json` file); without it every verdict is `unmet`.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Loopback address (or port) to listen on; port 0 picks a free one.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        /// Delay added to every reply, overriding the rules file.
        #[arg(long)]
        latency_ms: Option<u64>,
    },
    /// The judge cache: `verify [FILE]` checks a cache file (default: the user's) without
    /// changing it: SQLite's integrity check and every entry's digest. Exit 0 when it is sound.
    #[cfg(feature = "judges")]
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Local judge models: `init` writes a random-weight model directory of a real
    /// architecture; `bench` times a local judge on synthetic responses.
    #[cfg(all(feature = "models", feature = "judges"))]
    Model {
        #[command(subcommand)]
        command: model::ModelCommand,
    },
    /// Serve rubrics (bundles or sources) over HTTP for RL trainers: `POST /v1/score` scores
    /// rows into the records `rubric run` writes; `GET /v1/bundles`, `/healthz`, `/metrics`.
    /// Prints its base URL as the first line of stdout.
    #[cfg(feature = "serve")]
    Serve {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Address to listen on; port 0 picks a free one.
        #[arg(long, default_value = "127.0.0.1:8700")]
        addr: String,
        #[command(flatten)]
        engine: EngineArgs,
        /// Call judges for criteria without a recorded verdict: the endpoints of `judges.toml`.
        #[arg(long)]
        judges: Option<PathBuf>,
        /// `replay:TRANSCRIPT.jsonl`: answer judge calls from a recorded transcript, offline.
        #[arg(long)]
        judge: Option<String>,
        /// The judge cache (SQLite); default: the user's cache directory.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Do not read or write the judge cache.
        #[arg(long, conflicts_with = "cache")]
        no_cache: bool,
        /// Spend at most this many US dollars on judge calls over the server's life (as
        /// `rubric run --budget`).
        #[arg(long, value_name = "USD", value_parser = parse_budget)]
        budget: Option<f64>,
        /// Require `Authorization: Bearer <token>`, the token being this environment
        /// variable's value (on every endpoint but `/healthz`).
        #[arg(long, value_name = "VAR")]
        token_env: Option<String>,
        /// Larger request bodies are refused with 413 (a larger `Content-Length` before the
        /// body is read; a chunked body where it passes the limit).
        #[arg(long, default_value_t = 16 * 1024 * 1024)]
        max_body_bytes: usize,
        /// Scoring requests that take longer are answered 503.
        #[arg(long, default_value_t = 300.0)]
        timeout_s: f64,
        /// Give each request's rows this many milliseconds (a request may ask for less with
        /// `deadline_ms`): judge calls still unanswered then are given up, and a row that
        /// lost one comes back unscored with reason `timeout`, the others as they are.
        #[arg(long, value_name = "MS")]
        row_deadline_ms: Option<u64>,
        #[command(flatten)]
        limits: crate::serve::LimitArgs,
    },
}

/// The run report's line on executions, for a rubric that runs programs: how many ran in the
/// sandbox, and how many were answered without running (cache, transcript, the same execution
/// earlier in the run). `executes`: whether the rubric runs programs (`Program::executes`).
fn exec_report(executes: bool) -> Option<String> {
    #[cfg(all(feature = "exec", target_os = "linux"))]
    {
        let ex = crate::sandbox::executor::current().filter(|_| executes)?;
        let s = ex.stats();
        Some(format!(
            "executions: {} run in the sandbox, {} from the execution cache, {} replayed, {} identical to one \
             before them, {} not made",
            s.executed, s.cache_hits, s.replayed, s.deduplicated, s.failed
        ))
    }
    #[cfg(not(all(feature = "exec", target_os = "linux")))]
    {
        let _ = executes;
        None
    }
}

/// The process's local-model settings from `--device` and `--embedding-model` (falling back to
/// the environment), set before anything is scored.
fn configure_models(device: Option<&str>, embedding: Option<PathBuf>) -> Result<(), String> {
    #[cfg(feature = "models")]
    {
        let env = crate::models::ModelsConfig {
            device: match std::env::var("RUBRIC_DEVICE") {
                Ok(d) => d.parse().map_err(|e| format!("RUBRIC_DEVICE: {e}"))?,
                Err(_) => Default::default(),
            },
            embedding: crate::models::env_embedding(),
        };
        // an explicit directory is checked now; one from the environment when first used
        if let Some(dir) = &embedding {
            if !dir.join("config.json").is_file() {
                return Err(format!("--embedding-model {}: not a model directory (no config.json)", dir.display()));
            }
        }
        let config = crate::models::ModelsConfig {
            device: match device {
                Some(d) => d.parse()?,
                None => env.device,
            },
            embedding: embedding.or(env.embedding),
        };
        crate::models::configure(config);
        Ok(())
    }
    #[cfg(not(feature = "models"))]
    {
        match (device, embedding) {
            (None | Some("cpu"), None) => Ok(()),
            _ => Err("this build of rubric has no local models (built without the `models` feature)".into()),
        }
    }
}

pub fn main_with(cli: Cli) -> ExitCode {
    // the command owns its process: the sandbox's orphaned namespace inits are reaped here
    crate::sandbox::adopt_orphans();
    if let Err(e) = configure_models(cli.device.as_deref(), cli.embedding_model) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = cli.exec.configure() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let may_exec = cli.exec.allow_exec || cli.exec.exec_replay.is_some();
    match cli.command {
        Command::Check { files, error_format, quiet, lint } => {
            let mut failed = false;
            for f in &files {
                let c = if lint { crate::lint::check_path(f) } else { compile_path(f) };
                failed |= c.has_errors();
                emit(&c.diagnostics, &c.sources, error_format, quiet);
            }
            if files.is_empty() {
                eprintln!("error: give at least one .rubric file");
                return ExitCode::from(2);
            }
            if failed {
                ExitCode::from(1)
            } else {
                if error_format == ErrorFormat::Human {
                    eprintln!("ok: {} file{} checked", files.len(), if files.len() == 1 { "" } else { "s" });
                }
                ExitCode::SUCCESS
            }
        }
        Command::Run {
            file,
            input,
            output,
            verdicts,
            id_field,
            resume,
            engine,
            error_format,
            warnings,
            no_progress,
            compact,
            groups,
            judges,
            judge,
            record,
            cache,
            no_cache,
            deadline,
            row_deadline_ms,
            timings,
            slow_rows,
            budget,
            dispatch,
            batch_poll,
            numeric,
            allow_errors,
            max_failures,
            stats,
        } => {
            let policy =
                runtime::RowPolicy { deadline: row_deadline_ms.map(std::time::Duration::from_millis), timings };
            if let Err(e) = stats.check() {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            if stats.summary.is_some() && runtime::is_stdio(&output) {
                eprintln!("error: `--summary` reads the records back: write them to a file (`--output FILE`)");
                return ExitCode::from(2);
            }
            let allowance = if allow_errors { Allowance::Any } else { max_failures.unwrap_or(Allowance::Rows(0)) };
            crate::stdlib::allow_warm_ups();
            // The input's SHA-256 for the provenance record, read on a thread of its own while
            // the rubric compiles on this one (about 6 ms for 9 MB, which held up the first row).
            let input_hash = (!runtime::is_stdio(&output) && runtime::is_regular_file(&input)).then(|| {
                let input = input.clone();
                std::thread::spawn(move || file_hash(&input))
            });
            let Some(rubric) = bundle::load_or_report_as(&file, error_format, warnings) else {
                return ExitCode::from(1);
            };
            let program = rubric.program();
            // Read once: it serialises the whole program.
            let executes = program.executes();
            if executes && !may_exec {
                eprintln!(
                    "error: `{}` runs programs (`exec`): pass `--allow-exec` to run them in the sandbox (docs/exec.md), \
                     or `--exec-replay FILE` to answer from a recorded transcript",
                    file.display()
                );
                return ExitCode::from(2);
            }
            let ident = rubric.identity().with_id_field(id_field.as_deref()).with_rows_file(&input);
            let judging = match judge_settings(
                judges.as_deref(),
                judge.as_deref(),
                record.as_deref(),
                cache.as_deref(),
                no_cache,
            ) {
                Ok(s) => JudgeSettings {
                    deadline,
                    budget_usd: budget,
                    batch_poll: (dispatch == DispatchMode::Batch).then_some(batch_poll),
                    ..s
                },
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            // What determines the records, beside a file output (a resume must match it).
            let provenance = if runtime::is_stdio(&output) {
                None
            } else {
                let settings = RunSettings {
                    input: &input,
                    verdicts: verdicts.as_deref(),
                    id_field: id_field.as_deref(),
                    judging: &judging,
                    engine: engine.kind(&rubric).name(),
                    compact,
                    groups: groups.as_deref(),
                    tensor: numeric == NumericMode::Tensor,
                    policy,
                };
                match provenance(&ident, &settings, input_hash) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                }
            };
            let numeric = match numeric_stage(numeric, program) {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let vf = match verdicts.as_deref().map(VerdictFile::load).transpose() {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let engine = engine.kind_for(&rubric, &file).engine_for(program, engine.limits());
            let start = std::time::Instant::now();
            let dispatching = match judging.dispatcher(&[program]) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let opts = RunOptions {
                input: &input,
                output: &output,
                verdicts: vf.as_ref(),
                resume,
                progress: !no_progress,
                judges: dispatching.as_deref(),
                compact,
                groups: groups.as_deref(),
                numeric: numeric.as_deref(),
                provenance: provenance.as_ref(),
                policy,
                slow_rows,
            };
            match runtime::run_batch_as(engine.as_ref(), program, &ident, &opts) {
                Ok(s) => {
                    let secs = start.elapsed().as_secs_f64();
                    eprintln!(
                        "{} rows scored in {:.2}s ({} scored, {} unscored, {} errors{}){}",
                        s.rows,
                        secs,
                        s.scored,
                        s.unscored,
                        s.errors,
                        if s.skipped_resume > 0 {
                            format!(", {} already done", s.skipped_resume)
                        } else {
                            String::new()
                        },
                        match (s.skipped_resume, s.mean_score_of_file()) {
                            (0, _) => s.mean_score().map(|m| format!("; mean score {m:.6}")).unwrap_or_default(),
                            (_, Some(m)) => format!(
                                "; mean score {m:.6} over all {} scored rows of the output{}",
                                s.scored + s.kept.scored,
                                s.mean_score().map(|m| format!(" ({m:.6} over this run's)")).unwrap_or_default()
                            ),
                            (_, None) => String::new(),
                        }
                    );
                    if let Some(d) = &dispatching {
                        eprintln!("{}", d.report());
                        match (&judge, &judging.cache_path()) {
                            (Some(spec), _) => eprintln!("judge replies from `{spec}` only (no cache)"),
                            (None, Some(p)) => eprintln!("judge cache: {} (`--no-cache` to bypass it)", p.display()),
                            (None, None) => {}
                        }
                    }
                    if let Some(line) = exec_report(executes) {
                        eprintln!("{line}");
                    }
                    if !s.failures.is_empty() {
                        eprintln!("{}", failures_line(&s));
                    }
                    if !s.slow_rows.is_empty() {
                        eprintln!("slowest rows:");
                        for r in &s.slow_rows {
                            eprintln!("  {}", r.line());
                        }
                    }
                    if let (Some(v), Some(path)) = (&vf, &verdicts) {
                        for line in unmatched_lines(&v.unmatched(), path, s.skipped_resume > 0) {
                            eprintln!("{line}");
                        }
                    }
                    if !runtime::is_stdio(&output) {
                        let facts =
                            stats::RunFacts { judges: dispatching.as_ref().map(|d| d.stats()), seconds: Some(secs) };
                        if let Err(e) = stats::after_run(program, &output, &input, &stats, facts) {
                            eprintln!("error: {e}");
                            return ExitCode::from(1);
                        }
                        eprintln!("results: {}", output.display());
                    }
                    if allowance.allows(s.failed_rows, s.rows) {
                        ExitCode::SUCCESS
                    } else {
                        eprintln!(
                            "error: {} of {} rows failed, more than {}; exit status 3 (`--max-failures N|P%` or `--allow-errors` to accept)",
                            s.failed_rows,
                            s.rows,
                            allowance
                        );
                        ExitCode::from(3)
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Test { paths, engine, error_format, bless, tolerance } => {
            suite::test_command(&paths, &engine, error_format, bless, tolerance)
        }
        Command::Bench { file, input, rows, runs, engines } => {
            let engines = if engines.is_empty() { EngineKind::value_variants().to_vec() } else { engines };
            bench::bench_command(&file, &bench::BenchOptions { input: &input, rows, runs, engines: &engines })
        }
        #[cfg(all(feature = "exec", target_os = "linux"))]
        Command::BenchExec { runs } => exec_bench::run(&exec_bench::ExecBench { runs }),
        #[cfg(feature = "models")]
        Command::BenchEmbed { model, random, batch_sizes, sentences, runs } => {
            embed_bench::run(&embed_bench::EmbedBench {
                model: &model,
                random,
                batch_sizes: &batch_sizes,
                sentences,
                runs,
            })
        }
        #[cfg(feature = "models")]
        Command::Devices { require_cuda } => {
            let (lines, cuda) = crate::models::describe_devices();
            for l in lines {
                outln!("{l}");
            }
            if require_cuda && cuda == 0 {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }
        #[cfg(feature = "models")]
        Command::BenchNumeric { rows, criteria, group_size, block, seed } => {
            bench_numeric::command(&bench_numeric::Options { rows, criteria, group_size, block, seed })
        }
        #[cfg(feature = "judges")]
        Command::Plan { args } => plan::run(args),
        Command::Compare { args } => compare::run(args),
        Command::Stats { args } => stats::run(args),
        Command::Lint { args } => lint::run(args),
        Command::Report { args } => report::run(args),
        Command::Init { dir } => init::run(&dir),
        Command::Agree { scoring, by, bootstrap, seed, confidence, format } => agree::run(agree::AgreeArgs {
            scoring,
            by,
            bootstrap,
            seed,
            confidence,
            json: format == ReportFormat::Json,
        }),
        Command::Calibrate { scoring, output, for_judge, method, per_criterion } => {
            agree::calibrate(agree::CalibrateArgs {
                scoring,
                output,
                judge: for_judge,
                method: method.map(|m| match m {
                    CalibrationMethod::Isotonic => crate::agree::calibrate::Fit::Isotonic,
                    CalibrationMethod::Platt => crate::agree::calibrate::Fit::Platt,
                    CalibrationMethod::Confusion => crate::agree::calibrate::Fit::Confusion,
                }),
                per_criterion,
            })
        }
        Command::Explain { file, input, row, verdicts, engine } => {
            explain(&file, &input, row, verdicts.as_deref(), &engine)
        }
        Command::Ir { file, json } => {
            let Some(r) = bundle::load_or_report(&file, ErrorFormat::Human) else { return ExitCode::from(1) };
            let p = r.program();
            if json {
                outln!("{}", String::from_utf8_lossy(&p.canonical_bytes()));
            } else {
                // The program, then where its sites lie: the site table is not part of the IR.
                out!("{}", crate::ir::print_program(p));
                out!("\n{}", crate::ir::print_sites(&r.sites));
            }
            eprintln!("ir_hash: {}", p.hash());
            ExitCode::SUCCESS
        }
        Command::Fmt { files, check, stdout } => {
            let mut status = 0u8;
            for file in &files {
                status = status.max(fmt_file(file, check, stdout));
            }
            ExitCode::from(status)
        }
        Command::Lsp => ExitCode::from(crate::lsp::main()),
        Command::Import { format, file, output, rows_out, responses } => import::run(
            format,
            &file,
            &import::ImportArgs {
                output: output.as_deref(),
                rows_out: rows_out.as_deref(),
                responses: responses.as_deref(),
            },
        ),
        #[cfg(feature = "judges")]
        Command::Generate {
            file,
            input,
            output,
            judges,
            judge,
            record,
            cache,
            no_cache,
            budget,
            allow_errors,
            no_progress,
            plan: dry,
            format,
        } => {
            let Some(rubric) = bundle::load_or_report_as(&file, ErrorFormat::Human, false) else {
                return ExitCode::from(1);
            };
            let program = rubric.program();
            if program.generators.is_empty() {
                eprintln!(
                    "error: `{}` declares no generator: nothing to generate (`generator NAME {{ ... fills INPUT }}`)",
                    file.display()
                );
                return ExitCode::from(2);
            }
            let settings = match judge_settings(
                judges.as_deref(),
                judge.as_deref(),
                record.as_deref(),
                cache.as_deref(),
                no_cache,
            ) {
                Ok(s) => JudgeSettings { budget_usd: budget, ..s },
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            if dry {
                let dispatcher = match settings.dry_dispatcher() {
                    Ok(d) => d,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                };
                return match runtime::generate::plan(program, &dispatcher, &input) {
                    Ok((d, rows, asked)) => {
                        plan::generation(&d, rows, asked, format);
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::from(2)
                    }
                };
            }
            let dispatcher = match settings.generation_dispatcher() {
                Ok(Some(d)) => d,
                Ok(None) => {
                    eprintln!("error: generating needs endpoints (`--judges judges.toml`) or a transcript (`--judge replay:FILE`)");
                    return ExitCode::from(2);
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let Some(output) = output else {
                eprintln!("error: `--output ROWS.jsonl` says where to write the rows");
                return ExitCode::from(2);
            };
            match runtime::generate::generate(program, &dispatcher, &input, &output, !no_progress) {
                Ok(s) => {
                    eprintln!(
                        "{} rows: {} inputs generated, {} kept (the rows had them), {} failed",
                        s.rows, s.generated, s.kept, s.failed
                    );
                    eprintln!("{}", runtime::dispatch::report(&dispatcher.stats().to_json()));
                    if !s.failures.is_empty() {
                        let codes: Vec<String> = s.failures.iter().map(|(c, n)| format!("{c} {n}")).collect();
                        eprintln!("failed by code: {} (each row's `generated` says why)", codes.join(", "));
                    }
                    eprintln!("rows: {}", output.display());
                    if s.failed > 0 && !allow_errors {
                        eprintln!(
                            "error: {} inputs could not be generated; exit status 3 (`--allow-errors` to accept)",
                            s.failed
                        );
                        ExitCode::from(3)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Build { file, output, with_sources, error_format } => {
            bundle::build_command(&file, &output, with_sources, error_format)
        }
        Command::Inspect { file, json } => bundle::inspect_command(&file, json),
        Command::Diff { a, b, probe, verdicts, pass, json } => {
            let opts = bundle::DiffOptions { probe: probe.as_deref(), verdicts: verdicts.as_deref(), pass, json };
            bundle::diff_command(&a, &b, &opts)
        }
        #[cfg(feature = "judges")]
        Command::MockJudge { rules, addr, latency_ms } => crate::judge::mock::main(rules.as_deref(), &addr, latency_ms),
        #[cfg(all(feature = "models", feature = "judges"))]
        Command::Model { command } => model::main(command),
        #[cfg(feature = "judges")]
        Command::Cache { command: CacheCommand::Verify { file } } => verify_cache(file),
        #[cfg(feature = "serve")]
        Command::Serve {
            files,
            addr,
            engine,
            judges,
            judge,
            cache,
            no_cache,
            budget,
            token_env,
            max_body_bytes,
            timeout_s,
            row_deadline_ms,
            limits,
        } => {
            let addr: std::net::SocketAddr = match addr.parse() {
                Ok(a) => a,
                Err(_) => {
                    eprintln!("error: `{addr}` is not an address (e.g. 127.0.0.1:8700)");
                    return ExitCode::from(2);
                }
            };
            let token = match token_env {
                None => None,
                Some(var) => match std::env::var(&var) {
                    Ok(t) if !t.is_empty() => Some(t),
                    _ => {
                        eprintln!("error: `--token-env {var}`: the environment variable `{var}` is not set");
                        return ExitCode::from(2);
                    }
                },
            };
            if !(timeout_s > 0.0 && timeout_s.is_finite()) {
                eprintln!("error: `--timeout-s` must be a positive number of seconds");
                return ExitCode::from(2);
            }
            let limits = match limits.resolve() {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            crate::stdlib::allow_warm_ups();
            let mut served = Vec::new();
            for f in &files {
                let rubric = match bundle::Rubric::load(f) {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::from(1);
                    }
                };
                // The server runs until the process ends: its rubrics live as long.
                let rubric: &'static bundle::Rubric = Box::leak(Box::new(rubric));
                let kind = engine.kind_for(rubric, f);
                let program = rubric.program();
                served.push(crate::serve::Served {
                    program,
                    ident: rubric.identity(),
                    engine: kind.engine_for(program, engine.limits()),
                });
            }
            let programs: Vec<&crate::ir::Program> = served.iter().map(|s| s.program).collect();
            let settings = judge_settings(judges.as_deref(), judge.as_deref(), None, cache.as_deref(), no_cache)
                .map(|s| JudgeSettings { budget_usd: budget, ..s });
            let dispatching = match settings.and_then(|s| s.dispatcher(&programs).map_err(|e| e.to_string())) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let opts = crate::serve::Options {
                addr,
                token,
                max_body_bytes,
                timeout: std::time::Duration::from_secs_f64(timeout_s),
                row_deadline: row_deadline_ms.map(std::time::Duration::from_millis),
                limits,
            };
            crate::serve::main(served, dispatching, opts)
        }
    }
}

/// The tensor numeric stage of `rubric run --numeric tensor`, on the process's device
/// (`models::device()`); `None` for `scalar`, and for a rubric whose score has no plan, which
/// stays on the scalar path with a notice.
#[cfg(feature = "models")]
fn numeric_stage(
    mode: NumericMode,
    program: &crate::ir::Program,
) -> Result<Option<Box<dyn runtime::ChunkNumeric>>, String> {
    if mode == NumericMode::Scalar {
        return Ok(None);
    }
    match crate::numeric::TensorStage::new(program, crate::models::device().clone()) {
        Ok(stage) => Ok(Some(Box::new(stage))),
        Err(why) => {
            eprintln!("note: `--numeric tensor`: {why}; this rubric is scored on the scalar path");
            Ok(None)
        }
    }
}

#[cfg(not(feature = "models"))]
fn numeric_stage(
    mode: NumericMode,
    _program: &crate::ir::Program,
) -> Result<Option<Box<dyn runtime::ChunkNumeric>>, String> {
    match mode {
        NumericMode::Scalar => Ok(None),
        NumericMode::Tensor => Err("`--numeric tensor` needs a build with the `models` feature".into()),
    }
}

/// A duration on the command line: seconds (`90`, `1.5`), or a number with `s`, `m` or `h`.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, 's')) if t.ends_with("ms") => (&t[..i - 1], 0.001),
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        _ => (t, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n > 0.0 && (n * unit).is_finite() && n * unit < 1e9 => {
            Ok(std::time::Duration::from_secs_f64(n * unit))
        }
        _ => Err(format!(
            "`{text}` is not a duration: write seconds (`90`) or a number with `ms`, `s`, `m` or `h` (`20m`)"
        )),
    }
}

/// The judge settings of `--judges`, `--judge replay:FILE`, `--record`, `--cache` and
/// `--no-cache` (`api::JudgeSettings`, whose `dispatcher` builds what `run` and `serve` call).
pub fn judge_settings(
    judges: Option<&Path>,
    judge: Option<&str>,
    record: Option<&Path>,
    cache: Option<&Path>,
    no_cache: bool,
) -> Result<JudgeSettings, String> {
    let replay = match judge {
        None => None,
        Some(spec) => match spec.strip_prefix("replay:") {
            Some(path) => Some(PathBuf::from(path)),
            None => return Err(format!("`--judge {spec}`: the only judge source is `replay:TRANSCRIPT.jsonl`")),
        },
    };
    let cache = match (no_cache, cache) {
        (true, _) => CacheSetting::Off,
        (false, Some(p)) => CacheSetting::At(p.to_path_buf()),
        (false, None) => CacheSetting::Default,
    };
    Ok(JudgeSettings {
        config: judges.map(Path::to_path_buf),
        replay,
        record: record.map(Path::to_path_buf),
        cache,
        deadline: None,
        budget_usd: None,
        batch_poll: None,
    })
}

/// How `rubric run` sends its judge requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DispatchMode {
    /// One request at a time, as soon as it is planned.
    Immediate,
    /// Through the endpoints' Batch APIs.
    Batch,
}

/// `--budget USD`: a number of dollars (`0.50`, `$2`).
fn parse_budget(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("`{text}` is not a budget: write a number of US dollars (`0.50`)")),
    }
}

/// Compile a file, printing its diagnostics to stderr; `None` when it has errors.
pub fn compile_or_report(file: &Path, format: ErrorFormat) -> Option<Compiled> {
    compile_or_report_as(file, format, true)
}

/// [`compile_or_report`]; without `warnings`, only errors are printed and the warnings are
/// counted in one line (what `rubric run` prints on every run).
pub fn compile_or_report_as(file: &Path, format: ErrorFormat, warnings: bool) -> Option<Compiled> {
    use crate::diag::Severity;
    let c = compile_path(file);
    let shown: Vec<Diagnostic> = c
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error || (warnings && d.severity == Severity::Warning))
        .cloned()
        .collect();
    emit(&shown, &c.sources, format, true);
    let hidden = c.diagnostics.iter().filter(|d| d.severity == Severity::Warning).count();
    if !warnings && hidden > 0 && format == ErrorFormat::Human && !c.has_errors() {
        eprintln!(
            "{hidden} warning{} not shown (`rubric check {}` or `--warnings` shows them)",
            plural(hidden),
            file.display()
        );
    }
    if c.has_errors() {
        None
    } else {
        Some(c)
    }
}

#[cfg(feature = "judges")]
#[derive(clap::Subcommand, Debug)]
pub enum CacheCommand {
    /// Check a judge cache file without changing it: SQLite's integrity check, then each
    /// entry's digest. Exit 0 when every entry verifies, 1 when something does not.
    Verify {
        /// The cache file (default: `$XDG_CACHE_HOME/rubric/judge-cache.sqlite`).
        file: Option<PathBuf>,
    },
}

#[cfg(feature = "judges")]
fn verify_cache(file: Option<PathBuf>) -> ExitCode {
    let Some(path) = file.or_else(crate::judge::Cache::default_path) else {
        eprintln!("error: no cache file given and no home directory to find the default one");
        return ExitCode::from(2);
    };
    let v = match crate::judge::cache::verify(&path) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let shown = path.display();
    outln!(
        "judge cache `{shown}`: {} entries, {} verified, {} without a digest (written by an older rubric; asked again once), {} that do not verify",
        v.entries,
        v.verified,
        v.without_digest,
        v.unverified.len()
    );
    for (hash, why) in v.unverified.iter().take(20) {
        outln!("  {hash}: {why}");
    }
    if v.unverified.len() > 20 {
        outln!("  … and {} more", v.unverified.len() - 20);
    }
    match &v.damage {
        Some(d) => outln!("integrity: FAILED ({d}); the next run that opens it sets it aside and starts a new cache"),
        None => outln!("integrity: ok"),
    }
    if v.is_sound() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The most diagnostics rendered for a person (a generated file can hold thousands); the
/// count line after them still counts every one.
pub const MAX_RENDERED: usize = 100;

/// Print diagnostics: human (miette, colour on a terminal) to stderr, or JSON lines to stdout.
pub fn emit(diags: &[Diagnostic], sources: &SourceMap, format: ErrorFormat, hide_notes: bool) {
    let color = std::io::stderr().is_terminal();
    let mut stdout = std::io::stdout().lock();
    let mut shown = 0;
    for d in diags {
        if hide_notes && d.severity == crate::diag::Severity::Note {
            continue;
        }
        match format {
            ErrorFormat::Human if shown == MAX_RENDERED => {
                let rest = diags.iter().filter(|d| !hide_notes || d.severity != crate::diag::Severity::Note).count();
                eprintln!(
                    "… and {} more not shown (the first {MAX_RENDERED} are; `--error-format json` lists every one)\n",
                    rest - MAX_RENDERED
                );
                shown += 1;
            }
            ErrorFormat::Human if shown > MAX_RENDERED => {}
            ErrorFormat::Human => {
                eprintln!("{}", d.render(sources, color));
                shown += 1;
            }
            ErrorFormat::Json => {
                let _ = writeln!(stdout, "{}", d.to_json(sources));
            }
        }
    }
    if format == ErrorFormat::Human {
        let errors = diags.iter().filter(|d| d.is_error()).count();
        let warnings = diags.iter().filter(|d| d.severity == crate::diag::Severity::Warning).count();
        if errors > 0 {
            eprintln!("{errors} error{}, {warnings} warning{}", plural(errors), plural(warnings));
        }
    }
}

/// `rubric fmt` of one file: 0 formatted (or already so), 1 a parse error or (with `check`)
/// not formatted, 2 unreadable, unwritable or holding comments.
fn fmt_file(file: &Path, check: bool, to_stdout: bool) -> u8 {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", file.display());
            return 2;
        }
    };
    let mut sources = SourceMap::new();
    let id = sources.add(file.display().to_string(), text.as_str());
    let out = match crate::syntax::printer::format_source(id, &text) {
        Ok(out) => out,
        Err(FormatError::Parse(diagnostics)) => {
            emit(&diagnostics, &sources, ErrorFormat::Human, false);
            return 1;
        }
        // Never write what would lose a comment or change the tree.
        Err(e) => {
            eprintln!(
                "error: `{}`: formatting would {} (a bug; please report it); nothing was changed",
                file.display(),
                if e == FormatError::LosesComment { "lose a comment" } else { "change the rubric" }
            );
            return 2;
        }
    };
    if to_stdout {
        out!("{out}");
        return 0;
    }
    if out == text {
        return 0;
    }
    if check {
        let name = file.display().to_string();
        let diff = similar::TextDiff::from_lines(text.as_str(), out.as_str());
        out!("{}", diff.unified_diff().context_radius(3).header(&name, &format!("{name} (formatted)")));
        return 1;
    }
    // Written beside and renamed over, so that a failed write never leaves half a file.
    let tmp = file.with_extension("rubric.fmt-tmp");
    if let Err(e) = std::fs::write(&tmp, &out).and_then(|()| std::fs::rename(&tmp, file)) {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("error: cannot write `{}`: {e}", file.display());
        return 2;
    }
    eprintln!("formatted {}", file.display());
    0
}

/// The settings of a `rubric run` that decide its records, beside the rubric.
struct RunSettings<'a> {
    input: &'a Path,
    verdicts: Option<&'a Path>,
    id_field: Option<&'a str>,
    /// `judges.toml` and a replayed transcript are read from here.
    judging: &'a JudgeSettings,
    engine: &'static str,
    compact: bool,
    groups: Option<&'a str>,
    tensor: bool,
    policy: runtime::RowPolicy,
}

/// The provenance record of a run (`OUTPUT.run.json`): the rubric's identity, the SHA-256 of
/// the input, the verdict file, `judges.toml` and a replayed transcript, and the options that
/// shape the records. An input that is not a regular file (a pipe) is recorded as `-`.
/// `input_hash`, when given, is the input's hash read ahead on another thread.
fn provenance(
    ident: &runtime::Identity,
    s: &RunSettings<'_>,
    input_hash: Option<std::thread::JoinHandle<Result<String, String>>>,
) -> Result<serde_json::Value, String> {
    let hash = |p: Option<&Path>| p.map(file_hash).transpose();
    let input = match input_hash {
        Some(h) => h.join().map_err(|_| format!("reading `{}` failed", s.input.display()))??,
        None if runtime::is_regular_file(s.input) => file_hash(s.input)?,
        None => "-".to_string(),
    };
    Ok(serde_json::json!({
        "rubric": ident.rubric,
        "version": ident.version,
        "ir_hash": ident.ir_hash,
        "bundle": ident.bundle,
        "input": input,
        "verdicts": hash(s.verdicts)?,
        "judges": hash(s.judging.config.as_deref())?,
        "replay": hash(s.judging.replay.as_deref())?,
        "engine": s.engine,
        "compact": s.compact,
        "groups": s.groups,
        "numeric": if s.tensor { "tensor" } else { "scalar" },
    }))
    .map(|mut v| {
        // Only when set, so that outputs written before the option existed still resume.
        if let Some(f) = s.id_field {
            v["id_field"] = serde_json::json!(f);
        }
        if let Some(d) = s.policy.deadline {
            v["row_deadline_ms"] = serde_json::json!(d.as_millis() as u64);
        }
        if s.policy.timings {
            v["timings"] = serde_json::json!(true);
        }
        v
    })
}

/// `sha256:<hex>` of the file at `path`.
fn file_hash(path: &Path) -> Result<String, String> {
    std::fs::File::open(path)
        .and_then(crate::bundle::sha256_reader)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

/// The warnings of a run whose verdict file names rows or criteria the run did not have.
fn unmatched_lines(u: &runtime::Unmatched, path: &Path, resumed: bool) -> Vec<String> {
    let mut out = Vec::new();
    let some = |xs: Vec<String>| {
        let n = xs.len();
        let shown: Vec<String> = xs.into_iter().take(5).collect();
        format!("{}{}", shown.join(", "), if n > 5 { format!(", and {} more", n - 5) } else { String::new() })
    };
    if !resumed && (!u.indices.is_empty() || !u.ids.is_empty()) {
        let mut parts = Vec::new();
        if !u.indices.is_empty() {
            parts.push(format!(
                "{} by index ({})",
                u.indices.len(),
                some(u.indices.iter().map(u64::to_string).collect())
            ));
        }
        if !u.ids.is_empty() {
            parts.push(format!("{} by id ({})", u.ids.len(), some(u.ids.iter().map(|i| format!("{i:?}")).collect())));
        }
        out.push(format!(
            "warning: `{}` names rows no input row has, their verdicts unused: {}",
            path.display(),
            parts.join(", ")
        ));
    }
    if !u.criteria.is_empty() {
        let listed = some(
            u.criteria.iter().map(|(c, n)| format!("`{c}` in {n} row{}", if *n == 1 { "" } else { "s" })).collect(),
        );
        out.push(format!(
            "warning: `{}` has verdicts for criteria the rows do not have, unused: {listed}",
            path.display()
        ));
    }
    out
}

/// How many failed rows a run may have and still exit 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Allowance {
    Any,
    Rows(usize),
    /// A percentage of the rows of the run.
    Share(f64),
}

impl Allowance {
    fn parse(s: &str) -> Result<Allowance, String> {
        let bad = || format!("`{s}` is neither a count of rows (`3`) nor a percentage (`5%`)");
        match s.trim().strip_suffix('%') {
            Some(p) => {
                let p: f64 = p.trim().parse().map_err(|_| bad())?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(format!("`{s}`: a percentage is between 0% and 100%"));
                }
                Ok(Allowance::Share(p))
            }
            None => s.trim().parse().map(Allowance::Rows).map_err(|_| bad()),
        }
    }

    fn allows(self, failed: usize, rows: usize) -> bool {
        match self {
            Allowance::Any => true,
            Allowance::Rows(n) => failed <= n,
            Allowance::Share(p) => failed as f64 <= p / 100.0 * rows as f64,
        }
    }
}

impl std::fmt::Display for Allowance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Allowance::Any => write!(f, "any number"),
            Allowance::Rows(0) => write!(f, "none allowed"),
            Allowance::Rows(n) => write!(f, "the {n} allowed"),
            Allowance::Share(p) => write!(f, "the {p}% allowed"),
        }
    }
}

/// The summary's line of failure codes, most frequent first: `failed rows by code:
/// no_verdict 4, rubric::row::malformed_json 1`.
fn failures_line(s: &runtime::Summary) -> String {
    let top = s.top_failures();
    let shown: Vec<String> = top.iter().take(6).map(|(code, n)| format!("{code} {n}")).collect();
    let more = if top.len() > 6 { format!(", and {} more codes", top.len() - 6) } else { String::new() };
    format!("{} failed row{} by code: {}{more}", s.failed_rows, plural(s.failed_rows), shown.join(", "))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn explain(file: &Path, input: &Path, row: usize, verdicts: Option<&Path>, engine: &EngineArgs) -> ExitCode {
    let Some(r) = bundle::load_or_report(file, ErrorFormat::Human) else { return ExitCode::from(1) };
    let (c, p) = (&r, r.program());
    // Rows are counted as `rubric run` counts them: a line that is not UTF-8 is a row.
    let line = match runtime::nth_row(input, row) {
        Ok(Some(runtime::LineRead::Text(t))) => t,
        Ok(Some(runtime::LineRead::NotUtf8(_))) => {
            eprintln!("error: row {row} is not valid UTF-8 (`rubric::row::not_utf8`)");
            return ExitCode::from(1);
        }
        Ok(None) => {
            eprintln!("error: `{}` has no row {row}", input.display());
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", input.display());
            return ExitCode::from(2);
        }
    };
    let json: serde_json::Value = match serde_json::from_str(&line) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: row {row} is not valid JSON: {e}");
            return ExitCode::from(1);
        }
    };
    let inputs = match runtime::bind_row_in(p, &json, Some(runtime::rows_dir(input))) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: row {row}: {e}");
            return ExitCode::from(1);
        }
    };
    let vf = match verdicts.map(VerdictFile::load).transpose() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let row_verdicts = vf.map(|v| v.for_row(row, json.get("id"))).unwrap_or_default();
    let mut trace = Vec::new();
    // A bundle's trace runs under the sandbox's limits.
    let limits = r.bundle.as_ref().map(|_| engine.limits());
    let result = crate::interp::evaluate_within(p, &inputs, &row_verdicts, Some(&mut trace), limits);
    outln!("rubric {} @ {}  ({})", p.rubric.name, p.rubric.version, p.hash());
    outln!("row {row}");
    let mut last_step = String::new();
    for ev in &trace {
        if ev.step != last_step {
            outln!("{}", ev.step);
            last_step = ev.step.clone();
        }
        match ev.site.and_then(|id| c.sites.get(id)) {
            Some(site) => {
                let src = c
                    .sources
                    .find(&site.file)
                    .map(|f| {
                        c.sources.slice(crate::source::Span { file: f, start: site.start, end: site.end }).to_string()
                    })
                    .unwrap_or_default();
                let src: String = src.split_whitespace().collect::<Vec<_>>().join(" ");
                outln!("    {src} = {}", ev.value);
            }
            None => outln!("    {}", ev.value),
        }
    }
    for g in &result.gates {
        let state = match g.passed {
            Some(true) => "passed".to_string(),
            Some(false) => format!("FIRED ({} {})", g.action, g.value.map_or("?".into(), |v| v.to_string())),
            None => "not reached".to_string(),
        };
        outln!("gate {}: {state}", g.name);
    }
    for cr in &result.criteria {
        outln!(
            "criterion {}: {}{}",
            cr.id,
            cr.status.as_str(),
            cr.reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
        );
    }
    match result.score {
        Some(s) => outln!("score = {s}"),
        None => outln!("score = unscored ({})", result.unscored_reason.as_deref().unwrap_or("")),
    }
    if let Some(f) = &result.failure_class {
        outln!("failure class: {f}");
    }
    // The trace comes from the reference interpreter; another engine is run on the same row
    // and must agree with it exactly.
    let kind = engine.engine.unwrap_or(EngineKind::Interp);
    if kind != EngineKind::Interp {
        let other = kind.engine_for(p, engine.limits());
        let theirs = other.evaluate(p, &inputs, &row_verdicts);
        if theirs == result {
            outln!("engine {}: same result as the interpreter (the trace above is the interpreter's)", other.name());
        } else {
            outln!(
                "engine {}: DIFFERENT result: score {}, unscored reason {:?}; criteria: {}",
                other.name(),
                theirs.score.map_or("unscored".into(), |s| s.to_string()),
                theirs.unscored_reason,
                theirs
                    .criteria
                    .iter()
                    .map(|c| format!("{} {}", c.id, c.status.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
