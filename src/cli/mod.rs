//! The command line: `rubric check | run | test | explain | ir | fmt | import`. Thin: each
//! command compiles with `types`, runs with `runtime`, and renders diagnostics.

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

mod import;
pub mod suite;

use crate::diag::Diagnostic;
use crate::engine::Engine;
use crate::interp::Interpreter;
use crate::runtime::{self, RunOptions, VerdictFile};
use crate::source::SourceMap;
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
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum ErrorFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum EngineKind {
    /// The reference interpreter.
    Interp,
}

impl EngineKind {
    pub fn engine(self) -> Box<dyn Engine> {
        match self {
            EngineKind::Interp => Box::new(Interpreter),
        }
    }
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
    },
    /// Score every row of a JSONL file.
    Run {
        file: PathBuf,
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        output: PathBuf,
        /// Recorded judge verdicts, JSONL keyed by row and criterion.
        #[arg(long)]
        verdicts: Option<PathBuf>,
        /// Continue an interrupted run: keep the complete lines of OUTPUT, score the rest.
        #[arg(long)]
        resume: bool,
        #[arg(long, value_enum, default_value = "interp")]
        engine: EngineKind,
        #[arg(long, value_enum, default_value = "human")]
        error_format: ErrorFormat,
        /// Never show a progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// Run the `example` blocks of rubric files; for a directory, also score its
    /// `inputs.jsonl` and compare with `expected.jsonl`.
    Test {
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "interp")]
        engine: EngineKind,
        #[arg(long, value_enum, default_value = "human")]
        error_format: ErrorFormat,
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
        #[arg(long, value_enum, default_value = "interp")]
        engine: EngineKind,
    },
    /// Print the compiled IR (text form, or canonical JSON) and its hash.
    Ir {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Pretty-print a rubric file in canonical layout.
    Fmt {
        file: PathBuf,
        /// Exit non-zero if the file is not formatted (prints nothing).
        #[arg(long)]
        check: bool,
    },
    /// Convert another system's rubric into a `.rubric` file.
    Import {
        #[arg(value_enum)]
        format: import::Format,
        file: PathBuf,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

pub fn main_with(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Check { files, error_format, quiet } => {
            let mut failed = false;
            for f in &files {
                let c = compile_path(f);
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
        Command::Run { file, input, output, verdicts, resume, engine, error_format, no_progress } => {
            let Some(c) = compile_or_report(&file, error_format) else { return ExitCode::from(1) };
            let program = c.program.as_ref().expect("compiled");
            let vf = match verdicts.as_deref().map(VerdictFile::load).transpose() {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let engine = engine.engine();
            let start = std::time::Instant::now();
            let opts =
                RunOptions { input: &input, output: &output, verdicts: vf.as_ref(), resume, progress: !no_progress };
            match runtime::run_batch(engine.as_ref(), program, &opts) {
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
                        s.mean_score().map(|m| format!("; mean score {m:.6}")).unwrap_or_default()
                    );
                    eprintln!("results: {}", output.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Test { paths, engine, error_format } => {
            suite::test_command(&paths, engine.engine().as_ref(), error_format)
        }
        Command::Explain { file, input, row, verdicts, engine: _ } => explain(&file, &input, row, verdicts.as_deref()),
        Command::Ir { file, json } => {
            let Some(c) = compile_or_report(&file, ErrorFormat::Human) else { return ExitCode::from(1) };
            let p = c.program.as_ref().expect("compiled");
            if json {
                outln!("{}", String::from_utf8_lossy(&p.canonical_bytes()));
            } else {
                out!("{}", crate::ir::print_program(p));
            }
            eprintln!("ir_hash: {}", p.hash());
            ExitCode::SUCCESS
        }
        Command::Fmt { file, check } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: cannot read `{}`: {e}", file.display());
                    return ExitCode::from(2);
                }
            };
            let mut sources = SourceMap::new();
            let id = sources.add(file.display().to_string(), text.as_str());
            let parsed = crate::syntax::parse_file(id, &text);
            if !parsed.diagnostics.is_empty() {
                emit(&parsed.diagnostics, &sources, ErrorFormat::Human, false);
                return ExitCode::from(1);
            }
            if crate::syntax::scan_comments(&text).0 {
                eprintln!(
                    "error: `{}` has comments, which `rubric fmt` does not keep yet; nothing was changed",
                    file.display()
                );
                return ExitCode::from(2);
            }
            let out = crate::syntax::printer::print_file(&parsed.file);
            if check {
                return if out == text { ExitCode::SUCCESS } else { ExitCode::from(1) };
            }
            out!("{out}");
            ExitCode::SUCCESS
        }
        Command::Import { format, file, output } => import::run(format, &file, output.as_deref()),
    }
}

/// Compile a file, printing its diagnostics to stderr; `None` when it has errors.
pub fn compile_or_report(file: &Path, format: ErrorFormat) -> Option<Compiled> {
    let c = compile_path(file);
    let shown: Vec<Diagnostic> =
        c.diagnostics.iter().filter(|d| d.severity != crate::diag::Severity::Note).cloned().collect();
    emit(&shown, &c.sources, format, true);
    if c.has_errors() {
        None
    } else {
        Some(c)
    }
}

/// Print diagnostics: human (miette, colour on a terminal) to stderr, or JSON lines to stdout.
pub fn emit(diags: &[Diagnostic], sources: &SourceMap, format: ErrorFormat, hide_notes: bool) {
    let color = std::io::stderr().is_terminal();
    let mut stdout = std::io::stdout().lock();
    for d in diags {
        if hide_notes && d.severity == crate::diag::Severity::Note {
            continue;
        }
        match format {
            ErrorFormat::Human => eprintln!("{}", d.render(sources, color)),
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

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn explain(file: &Path, input: &Path, row: usize, verdicts: Option<&Path>) -> ExitCode {
    let Some(c) = compile_or_report(file, ErrorFormat::Human) else { return ExitCode::from(1) };
    let p = c.program.as_ref().expect("compiled");
    let text = match std::fs::read_to_string(input) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", input.display());
            return ExitCode::from(2);
        }
    };
    let Some(line) = text.lines().filter(|l| !l.trim().is_empty()).nth(row) else {
        eprintln!("error: `{}` has no row {row}", input.display());
        return ExitCode::from(2);
    };
    let json: serde_json::Value = match serde_json::from_str(line) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: row {row} is not valid JSON: {e}");
            return ExitCode::from(1);
        }
    };
    let inputs = match runtime::bind_row(p, &json) {
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
    let result = crate::interp::evaluate(p, &inputs, &row_verdicts, Some(&mut trace));
    outln!("rubric {} @ {}  ({})", p.rubric.name, p.rubric.version, p.hash());
    outln!("row {row}");
    let mut last_step = String::new();
    for ev in &trace {
        if ev.step != last_step {
            outln!("{}", ev.step);
            last_step = ev.step.clone();
        }
        match &ev.site {
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
    ExitCode::SUCCESS
}
