//! `rubric test`: runs `example` blocks of rubric files and, for an example directory
//! (`main.rubric`, `inputs.jsonl`, `expected.jsonl`, optional `verdicts.jsonl`), scores the
//! inputs and compares every result with the expected line (the expected line is a subset:
//! every key it has must match exactly).

use super::bundle::{load_or_report, Rubric};
use super::{EngineArgs, ErrorFormat};
use crate::diag::Diagnostic;
use crate::ir::SiteId;
use crate::runtime::{self, examples::run_examples, VerdictFile};
use crate::source::Span;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Default)]
struct Tally {
    examples_ok: usize,
    examples_failed: usize,
    rows_ok: usize,
    rows_failed: usize,
    compile_failed: usize,
}

/// `bless`: write each directory's `expected.jsonl` from its current results instead of
/// comparing with it.
pub fn test_command(
    paths: &[PathBuf],
    engine: &EngineArgs,
    format: ErrorFormat,
    bless: bool,
    tolerance: f64,
) -> ExitCode {
    let mut t = Tally::default();
    if !(tolerance >= 0.0 && tolerance.is_finite()) {
        eprintln!("error: `--tolerance {tolerance}`: a tolerance is a number from 0 up");
        return ExitCode::from(2);
    }
    if paths.is_empty() {
        eprintln!("error: give .rubric files or example directories");
        return ExitCode::from(2);
    }
    for p in paths {
        test_path(p, engine, format, bless, tolerance, &mut t);
    }
    outln!(
        "{} passed, {} failed (examples: {} ok, {} failed; rows: {} ok, {} failed; {} did not compile)",
        t.examples_ok + t.rows_ok,
        t.examples_failed + t.rows_failed + t.compile_failed,
        t.examples_ok,
        t.examples_failed,
        t.rows_ok,
        t.rows_failed,
        t.compile_failed
    );
    if t.examples_failed + t.rows_failed + t.compile_failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn test_path(path: &Path, engine: &EngineArgs, format: ErrorFormat, bless: bool, tolerance: f64, t: &mut Tally) {
    if path.is_dir() {
        let main = path.join("main.rubric");
        if main.is_file() {
            test_dir(path, &main, engine, format, (bless, tolerance), t);
        } else {
            let mut subs: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rubric"))
                        .collect()
                })
                .unwrap_or_default();
            subs.sort();
            for s in subs {
                test_path(&s, engine, format, bless, tolerance, t);
            }
        }
    } else {
        test_file(path, engine, format, t);
    }
}

/// The span of a site, when the sources it lies in are at hand.
fn site_span(c: &Rubric, site: Option<SiteId>) -> Option<Span> {
    let s = c.sites.get(site?)?;
    Some(Span { file: c.sources.find(&s.file)?, start: s.start, end: s.end })
}

/// Run a file's (or a bundle's) examples; returns the program for directory tests.
fn test_file(path: &Path, engine: &EngineArgs, format: ErrorFormat, t: &mut Tally) -> Option<Rubric> {
    let Some(r) = load_or_report(path, format) else {
        let why = if super::bundle::is_bundle(path) { "bundle rejected" } else { "does not compile" };
        outln!("FAIL {}: {why}", path.display());
        t.compile_failed += 1;
        return None;
    };
    let (p, c) = (r.program(), &r);
    let outcomes = run_examples(engine.kind_for(&r, path).engine_for(p, engine.limits()).as_ref(), p);
    for o in outcomes {
        if o.passed() {
            t.examples_ok += 1;
            outln!("ok   {} example {:?}", path.display(), o.name);
        } else {
            t.examples_failed += 1;
            outln!("FAIL {} example {:?}", path.display(), o.name);
            for f in &o.failures {
                let mut d = Diagnostic::error("rubric::example::failed", f.message.clone());
                if let Some(span) = site_span(c, f.site).or_else(|| site_span(c, o.site)) {
                    d = d.with_label(span, "this expectation");
                }
                super::emit(&[d], &c.sources, format, false);
            }
        }
    }
    Some(r)
}

/// `mode`: whether to bless, and the numbers' tolerance when comparing.
fn test_dir(dir: &Path, main: &Path, engine: &EngineArgs, format: ErrorFormat, mode: (bool, f64), t: &mut Tally) {
    let (bless, tolerance) = mode;
    // A directory's recorded executions answer its rubric's `exec` calls, so that it runs
    // without a sandbox (with `--allow-exec`, what the transcript lacks runs for real).
    #[cfg(all(feature = "exec", target_os = "linux"))]
    if let (true, Some(ex)) = (dir.join("executions.jsonl").is_file(), crate::sandbox::executor::current()) {
        if let Err(e) = ex.add_transcript(&dir.join("executions.jsonl")) {
            outln!("FAIL {}: {e}", dir.display());
            t.rows_failed += 1;
            return;
        }
    }
    let Some(r) = test_file(main, engine, format, t) else { return };
    let p = r.program();
    let engine = engine.kind(&r).engine_for(p, engine.limits());
    let engine = engine.as_ref();
    let inputs = dir.join("inputs.jsonl");
    if !inputs.is_file() {
        return;
    }
    let expected_path = dir.join("expected.jsonl");
    let verdicts = dir.join("verdicts.jsonl");
    let vf = if verdicts.is_file() {
        match VerdictFile::load(&verdicts) {
            Ok(v) => Some(v),
            Err(e) => {
                outln!("FAIL {}: {e}", dir.display());
                t.rows_failed += 1;
                return;
            }
        }
    } else {
        None
    };
    let ident = r.identity().with_rows_file(&inputs);
    let text = match std::fs::read_to_string(&inputs) {
        Ok(x) => x,
        Err(e) => {
            outln!("FAIL {}: cannot read inputs: {e}", dir.display());
            t.rows_failed += 1;
            return;
        }
    };
    if bless {
        bless_dir(
            dir,
            &expected_path,
            &text,
            |i, line| runtime::score_line(engine, p, &ident, i, line, vf.as_ref()),
            t,
        );
        return;
    }
    let expected: Vec<Json> = match std::fs::read_to_string(&expected_path) {
        Ok(x) => {
            match x.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect::<Result<Vec<Json>, _>>()
            {
                Ok(v) => v,
                Err(e) => {
                    outln!("FAIL {}: expected.jsonl is not JSON lines: {e}", dir.display());
                    t.rows_failed += 1;
                    return;
                }
            }
        }
        Err(_) => {
            outln!("FAIL {}: has inputs.jsonl but no expected.jsonl", dir.display());
            t.rows_failed += 1;
            return;
        }
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != expected.len() {
        outln!("FAIL {}: {} input rows but {} expected rows", dir.display(), lines.len(), expected.len());
        t.rows_failed += 1;
        return;
    }
    let mut ok = 0;
    let mut scores = Vec::new();
    for (i, (line, want)) in lines.iter().zip(&expected).enumerate() {
        let got = runtime::score_line(engine, p, &ident, i, line, vf.as_ref());
        if let Some(s) = got.get("score").and_then(Json::as_f64) {
            scores.push(s);
        }
        // A row may set its own tolerance: `"within": TOL`.
        let (want, tol) = match want.get("within").and_then(Json::as_f64) {
            Some(w) => {
                let mut w2 = want.clone();
                if let Some(o) = w2.as_object_mut() {
                    o.remove("within");
                }
                (w2, w)
            }
            None => (want.clone(), tolerance),
        };
        match subset_within(&want, &got, "", tol) {
            Ok(()) => ok += 1,
            Err(why) => {
                t.rows_failed += 1;
                outln!("FAIL {} row {i}: {why}", dir.display());
            }
        }
    }
    t.rows_ok += ok;
    let mean = if scores.is_empty() {
        String::new()
    } else {
        format!(", mean score {:.6}", scores.iter().sum::<f64>() / scores.len() as f64)
    };
    let status = if ok == lines.len() { "ok  " } else { "FAIL" };
    outln!("{status} {}: {ok}/{} rows match expected.jsonl{mean}", dir.display(), lines.len());
}

/// Write `expected.jsonl` from the current results of `inputs`: for each row its index, id,
/// score, status (and error or unscored reason), and each criterion's id, status and value —
/// what a result means, not the engine, hashes or wording, so that the file survives a
/// rewording and holds on every engine.
fn bless_dir(dir: &Path, expected_path: &Path, inputs: &str, score: impl Fn(usize, &str) -> Json, t: &mut Tally) {
    let mut out = String::new();
    let lines: Vec<&str> = inputs.lines().filter(|l| !l.trim().is_empty()).collect();
    for (i, line) in lines.iter().enumerate() {
        let got = score(i, line);
        let mut want = serde_json::Map::new();
        for key in ["row", "id", "score", "status", "unscored_reason", "error"] {
            if let Some(v) = got.get(key) {
                want.insert(key.into(), v.clone());
            }
        }
        if let Some(cs) = got.get("criteria").and_then(Json::as_array) {
            let cs: Vec<Json> = cs
                .iter()
                .map(|c| {
                    let mut m = serde_json::Map::new();
                    for key in ["id", "status", "value"] {
                        if let Some(v) = c.get(key) {
                            m.insert(key.into(), v.clone());
                        }
                    }
                    Json::Object(m)
                })
                .collect();
            want.insert("criteria".into(), Json::Array(cs));
        }
        out.push_str(&Json::Object(want).to_string());
        out.push('\n');
    }
    match std::fs::write(expected_path, out) {
        Ok(()) => {
            t.rows_ok += lines.len();
            outln!("bless {}: wrote {} rows to {}", dir.display(), lines.len(), expected_path.display());
        }
        Err(e) => {
            t.rows_failed += lines.len().max(1);
            outln!("FAIL {}: cannot write {}: {e}", dir.display(), expected_path.display());
        }
    }
}

/// Every key of `want` must be in `got` with an equal value (objects compared recursively,
/// arrays element by element and of equal length, numbers exactly).
pub fn subset(want: &Json, got: &Json, path: &str) -> Result<(), String> {
    subset_within(want, got, path, 0.0)
}

/// The default tolerance of a test directory's numbers: floating-point noise (an `example`'s
/// `expect score N` has the same default).
pub const TOLERANCE: f64 = 1e-9;

/// [`subset`] with numbers equal when they differ by at most `tol`.
pub fn subset_within(want: &Json, got: &Json, path: &str, tol: f64) -> Result<(), String> {
    let subset = |w: &Json, g: &Json, p: &str| subset_within(w, g, p, tol);
    match (want, got) {
        (Json::Object(w), Json::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => subset(wv, gv, &p)?,
                    None => return Err(format!("`{p}` is missing (expected {wv})")),
                }
            }
            Ok(())
        }
        (Json::Array(w), Json::Array(g)) => {
            if w.len() != g.len() {
                return Err(format!("`{path}` has {} elements, expected {}", g.len(), w.len()));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                subset(wv, gv, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Json::Number(a), Json::Number(b)) if a.as_f64() == b.as_f64() => Ok(()),
        (Json::Number(a), Json::Number(b)) if a.as_f64().zip(b.as_f64()).is_some_and(|(a, b)| (a - b).abs() <= tol) => {
            Ok(())
        }
        (Json::Number(a), Json::Number(b)) if tol > 0.0 => Err(format!("`{path}` is {b}, expected {a} (within {tol})")),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("`{path}` is {b}, expected {a}")),
    }
}
