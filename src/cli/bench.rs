//! `rubric bench`: the engines side by side on one rubric and one set of rows, measured in the
//! same run. Rows are read, parsed and bound once, outside the timings; then, per engine: the
//! cold start (building the engine for the program: nothing for the interpreter, compiling the
//! module for Wasm, compiling to native code for the JIT), rows per second on one thread (a
//! plain loop on the calling thread) and on all cores (rayon), best of `--runs`, and agreement
//! with the first engine on every row. Ratios are against the first engine listed. Judged
//! criteria get no verdicts (they are `unscored`), so this measures the deterministic path.

use super::{bundle, EngineKind, ErrorFormat};
use crate::engine::{NoVerdicts, RowResult};
use crate::runtime::{bind_row_in, rows_dir, BoundRow};
use rayon::prelude::*;
use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub struct BenchOptions<'a> {
    pub input: &'a Path,
    /// Rows to score per run: the input is cycled (or cut) to this many.
    pub rows: usize,
    pub runs: usize,
    pub engines: &'a [EngineKind],
}

struct Measured {
    name: &'static str,
    cold_ms: f64,
    one_core: f64,
    all_cores: f64,
    disagree: usize,
}

pub fn bench_command(file: &Path, opts: &BenchOptions<'_>) -> ExitCode {
    let Some(rubric) = bundle::load_or_report(file, ErrorFormat::Human) else { return ExitCode::from(1) };
    let program = rubric.program();
    let rows = match load_rows(program, opts.input, opts.rows) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let threads = rayon::current_num_threads();
    outln!(
        "bench: {} ({} criteria, {} steps), {} rows from {}, best of {}, {} threads for `all cores`",
        file.display(),
        program.criteria.len(),
        program.steps.len(),
        rows.len(),
        opts.input.display(),
        opts.runs.max(1),
        threads
    );
    let shares = crate::interp::prepared(program).scan(program).shares();
    outln!(
        "scan plan: {} exact and {} case-folded needles counted once per text, {} regexes answered once per text ({} led by literals asked alone, the rest in one set), {} intrinsics memoised per row",
        shares.exact, shares.folded, shares.patterns, shares.patterns_alone, shares.memoised
    );
    // The first engine's results as a digest of each row's whole result (`Debug`: every float
    // and NaN exactly), not the results themselves: a million rows of results do not fit.
    let mut oracle: Option<Vec<u64>> = None;
    let mut measured = Vec::new();
    for kind in opts.engines {
        let start = Instant::now();
        let engine = kind.engine_for(program, crate::stdlib::Limits::DEFAULT);
        let cold_ms = start.elapsed().as_secs_f64() * 1000.0;
        let one = |inputs: &BoundRow| engine.evaluate(program, inputs, &NoVerdicts);
        // Agreement first (also the warm-up: per-thread instances, caches).
        let results: Vec<u64> = rows.par_iter().map(|r| digest(&one(r))).collect();
        let disagree = match &oracle {
            Some(o) => o.iter().zip(&results).filter(|(a, b)| a != b).count(),
            None => 0,
        };
        oracle.get_or_insert(results);
        let mut best_one = f64::INFINITY;
        let mut best_all = f64::INFINITY;
        for _ in 0..opts.runs.max(1) {
            let t = Instant::now();
            let mut scored = 0usize;
            for r in &rows {
                scored += usize::from(one(r).score.is_some());
            }
            std::hint::black_box(scored);
            best_one = best_one.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let scored: usize = rows.par_iter().map(|r| usize::from(one(r).score.is_some())).sum();
            std::hint::black_box(scored);
            best_all = best_all.min(t.elapsed().as_secs_f64());
        }
        measured.push(Measured {
            name: engine.name(),
            cold_ms,
            one_core: rows.len() as f64 / best_one,
            all_cores: rows.len() as f64 / best_all,
            disagree,
        });
    }
    outln!(
        "{:<8} {:>12} {:>16} {:>16} {:>10} {:>10} {:>10}",
        "engine",
        "cold start",
        "rows/s 1 thread",
        "rows/s all",
        "x 1 thread",
        "x all",
        "disagree"
    );
    let base = &measured[0];
    for m in &measured {
        outln!(
            "{:<8} {:>9.1} ms {:>16.0} {:>16.0} {:>9.2}x {:>9.2}x {:>10}",
            m.name,
            m.cold_ms,
            m.one_core,
            m.all_cores,
            m.one_core / base.one_core,
            m.all_cores / base.all_cores,
            m.disagree
        );
    }
    // After the measurements: choosing compiles the JIT's code, which would hide its cold start.
    let shape = crate::api::SourceShape::of(program);
    let default = if rubric.is_bundle() {
        "wasm (a bundle runs sandboxed unless `--engine` names another)".to_string()
    } else {
        format!(
            "{} ({} checks in plain runs, {} other criteria: the JIT takes a source with at least {} such checks, {}x its other criteria)",
            crate::api::EngineKind::for_source(program).name(),
            shape.plain_checks,
            shape.other_criteria,
            crate::api::SourceShape::MIN_PLAIN_CHECKS,
            crate::api::SourceShape::CHECK_SHARE
        )
    };
    outln!("default engine: {default}");
    if measured.iter().any(|m| m.disagree > 0) {
        eprintln!("error: engines disagree with `{}` on some rows", base.name);
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Parse and bind the input's rows once, then cycle them to `want` rows. Rows that are not
/// JSON or do not bind are left out (`rubric run` would write error records for them).
fn load_rows(program: &crate::ir::Program, input: &Path, want: usize) -> Result<Vec<BoundRow>, String> {
    let file = std::fs::File::open(input).map_err(|e| format!("cannot read `{}`: {e}", input.display()))?;
    let mut bound = Vec::new();
    let mut left_out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read `{}`: {e}", input.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let row = serde_json::from_str::<serde_json::Value>(&line)
            .map_err(|e| e.to_string())
            .and_then(|json| bind_row_in(program, &json, Some(rows_dir(input))).map_err(|e| e.to_string()));
        match row {
            Ok(r) => bound.push(r),
            Err(e) => left_out.push(format!("line {}: {e}", i + 1)),
        }
        if bound.len() >= want {
            break;
        }
    }
    if !left_out.is_empty() {
        eprintln!("note: {} rows left out of the benchmark ({})", left_out.len(), left_out.join("; "));
    }
    if bound.is_empty() {
        return Err(format!("`{}` has no rows that bind to the rubric's inputs", input.display()));
    }
    let distinct = bound.len();
    let rows = (0..want.max(1)).map(|i| bound[i % distinct].clone()).collect();
    Ok(rows)
}

/// A row's whole result as a number: equal results give equal digests.
fn digest(r: &RowResult) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{r:?}").hash(&mut h);
    h.finish()
}
