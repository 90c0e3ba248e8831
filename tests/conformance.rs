//! The per-feature conformance corpus, stages 3–6 end to end: every directory of
//! `tests/conformance/` holds `main.rubric`, `inputs.jsonl`, optional `verdicts.jsonl` and
//! `expected.jsonl` (one line per input row; each line is a subset of the result line, numbers
//! compared exactly, as `rubric test` compares them). Every row is scored through
//! `runtime::score_line` on every engine of [`ENGINES`]; each engine must match the expected
//! lines, and every engine must produce exactly the first engine's result lines (bar the
//! `engine` field). The `example` blocks of each `main.rubric` run on every engine too.
//!
//! A new engine joins by adding it to [`ENGINES`]; a case an engine cannot pass yet goes into
//! [`KNOWN_DIVERGENCES`] with its reason, never silently.

#[cfg(feature = "wasm")]
use rubric::backend::wasm::WasmEngine;
use rubric::cli::suite::subset;
use rubric::engine::Engine;
use rubric::interp::Interpreter;
use rubric::ir::Program;
use rubric::runtime::examples::run_examples;
use rubric::runtime::{score_line, Identity, VerdictFile};
use rubric::types::compile_path;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

use crate::common::read_lines;

/// Every engine the corpus runs on; the first is the reference the others are compared with.
const ENGINES: &[&dyn Engine] = &[
    &Interpreter as &dyn Engine,
    #[cfg(feature = "wasm")]
    &WasmEngine::new(),
    #[cfg(feature = "jit")]
    &rubric::backend::jit::JitEngine::new(),
];

/// Cases whose expected lines state the intended behaviour but an engine does not (yet)
/// produce it: `(directory, reason)`. They are left out of `conformance_corpus`, and
/// `known_divergences_still_diverge` fails once one of them passes, so that the entry is
/// removed (OPA's `exceptions.yaml`, in code).
const KNOWN_DIVERGENCES: &[(&str, &str)] = &[];

/// The minimum number of feature directories the corpus must hold.
const MIN_CASES: usize = 15;

fn corpus_root() -> PathBuf {
    let root = PathBuf::from("tests/conformance");
    assert!(
        root.is_dir(),
        "tests/conformance not found from {:?}: run the tests with cargo from the package root",
        std::env::current_dir().ok()
    );
    root
}

fn case_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus_root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && p.join("main.rubric").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn case_name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// Drop the fields that may legitimately differ between engines.
fn engine_neutral(mut v: Json) -> Json {
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
    }
    v
}

/// Run one case directory; returns every failure as a line of text.
fn run_case(dir: &Path) -> Vec<String> {
    let name = case_name(dir);
    let mut failures = Vec::new();
    let compiled = compile_path(&dir.join("main.rubric"));
    let Some(program) = compiled.program.as_ref() else {
        let codes: Vec<String> = compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect();
        return vec![format!("{name}: main.rubric does not compile: {}", codes.join("; "))];
    };
    let inputs = read_lines(&dir.join("inputs.jsonl"));
    let expected: Vec<Json> = read_lines(&dir.join("expected.jsonl"))
        .iter()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: expected.jsonl line {}: {e}", i + 1)))
        .collect();
    if inputs.len() != expected.len() {
        return vec![format!("{name}: {} input rows but {} expected lines", inputs.len(), expected.len())];
    }
    let verdicts_path = dir.join("verdicts.jsonl");
    let verdicts =
        verdicts_path.is_file().then(|| VerdictFile::load(&verdicts_path).unwrap_or_else(|e| panic!("{name}: {e}")));
    let ident = Identity::of(program, &compiled.sites);
    let mut reference: Option<(&str, Vec<Json>)> = None;
    for engine in ENGINES {
        let results: Vec<Json> = inputs
            .iter()
            .enumerate()
            .map(|(i, line)| score_line(*engine, program, &ident, i, line, verdicts.as_ref()))
            .collect();
        for (i, (want, got)) in expected.iter().zip(&results).enumerate() {
            if let Err(why) = subset(want, got, "") {
                failures.push(format!("{name} row {i} [{}]: {why}\n    got: {got}", engine.name()));
            }
        }
        failures.extend(example_failures(&name, *engine, program));
        let neutral: Vec<Json> = results.into_iter().map(engine_neutral).collect();
        match &reference {
            None => reference = Some((engine.name(), neutral)),
            Some((first, want)) => {
                for (i, (a, b)) in want.iter().zip(&neutral).enumerate() {
                    if a != b {
                        failures.push(format!(
                            "{name} row {i}: engine `{}` disagrees with `{first}`\n    {first}: {a}\n    {}: {b}",
                            engine.name(),
                            engine.name()
                        ));
                    }
                }
            }
        }
    }
    failures
}

fn example_failures(name: &str, engine: &dyn Engine, program: &Program) -> Vec<String> {
    run_examples(engine, program)
        .into_iter()
        .filter(|o| !o.passed())
        .flat_map(|o| {
            o.failures
                .iter()
                .map(|f| format!("{name} example {:?} [{}]: {}", o.name, engine.name(), f.message))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn conformance_corpus() {
    let dirs = case_dirs();
    let known: Vec<&str> = KNOWN_DIVERGENCES.iter().map(|(n, _)| *n).collect();
    for k in &known {
        assert!(dirs.iter().any(|d| case_name(d) == *k), "KNOWN_DIVERGENCES names `{k}`, which is no case directory");
    }
    let run: Vec<&PathBuf> = dirs.iter().filter(|d| !known.contains(&case_name(d).as_str())).collect();
    assert!(run.len() >= MIN_CASES, "expected at least {MIN_CASES} conformance cases, found {}", run.len());
    let failures: Vec<String> = run.iter().flat_map(|d| run_case(d)).collect();
    assert!(
        failures.is_empty(),
        "{} conformance failure(s) in {} cases:\n{}",
        failures.len(),
        run.len(),
        failures.join("\n")
    );
}

#[test]
fn known_divergences_still_diverge() {
    for (name, reason) in KNOWN_DIVERGENCES {
        assert!(
            !run_case(&corpus_root().join(name)).is_empty(),
            "`{name}` now passes ({reason}): remove it from KNOWN_DIVERGENCES"
        );
    }
}

/// Each case is a self-contained test directory for `rubric test` as well: the files it needs
/// are there and every expected line names its row.
#[test]
fn conformance_cases_are_well_formed() {
    for dir in case_dirs() {
        let name = case_name(&dir);
        for f in ["main.rubric", "inputs.jsonl", "expected.jsonl"] {
            assert!(dir.join(f).is_file(), "{name}: missing {f}");
        }
        let main = std::fs::read_to_string(dir.join("main.rubric")).unwrap();
        let uses_judge = main.lines().any(|l| l.trim_start().starts_with("judge "));
        assert_eq!(
            uses_judge,
            dir.join("verdicts.jsonl").is_file(),
            "{name}: a case with judges carries verdicts.jsonl (and one without has none)"
        );
        for (i, line) in read_lines(&dir.join("expected.jsonl")).iter().enumerate() {
            let v: Json = serde_json::from_str(line).unwrap();
            assert_eq!(
                v.get("row").and_then(Json::as_u64),
                Some(i as u64),
                "{name}: expected.jsonl line {} needs \"row\": {i}",
                i + 1
            );
        }
    }
}
