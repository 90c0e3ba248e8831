//! The JIT engine against the reference interpreter (and the Wasm engine): every `examples/`
//! directory (rows, verdicts and `example` blocks) and the HealthBench data give exactly the
//! interpreter's result lines on all three engines; traps of every kind land in the same
//! results with the same messages and sites; deep call chains and deeply nested expressions
//! run, even on a thread with a small stack; compiled code is cached per process by IR hash
//! and serves many threads at once; the CLI runs, tests and explains with `--engine jit`.
//! Random well-typed rubrics are compared on every engine in `engine_props.rs`; the
//! conformance corpus, the stdlib doc examples and the IFEval corpus run on the JIT too.

#![cfg(feature = "jit")]

use rubric::backend::jit::{code, JitEngine};
use rubric::engine::{Engine, NoVerdicts, RowResult};
use rubric::interp::Interpreter;
use rubric::ir::{Program, SiteTable};
use rubric::runtime::examples::run_examples;
use rubric::runtime::{bind_row, score_line, Identity, VerdictFile};
use rubric::types::{compile_path, compile_source};
use serde_json::{json, Map, Value as Json};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use crate::common::{crate_root, example_dirs, read_lines, TempDir};

const JIT: JitEngine = JitEngine::new();

/// The engines compared with the interpreter.
const ENGINES: &[&dyn Engine] = &[
    &JIT,
    #[cfg(feature = "wasm")]
    &rubric::backend::wasm::WasmEngine::new(),
];

fn compile(src: &str) -> Program {
    compile_with_sites(src).0
}

/// The program and the site table beside it (which locates a trap in a record).
fn compile_with_sites(src: &str) -> (Program, SiteTable) {
    let c = compile_source("<test>", src);
    match c.program {
        Some(p) => (p, c.sites),
        None => {
            let errors: Vec<String> =
                c.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
            panic!("does not compile: {}\n{src}", errors.join("; "))
        }
    }
}

/// Everything a result says, exactly (`Debug` prints every float and NaN the same way).
fn exact(r: &RowResult) -> String {
    format!("{r:?}")
}

fn without_engine(mut v: Json) -> Json {
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
    }
    v
}

/// Evaluate `row` on every engine; each must give the interpreter's result exactly, which is
/// returned.
fn agree(p: &Program, row: &Json, verdicts: &Map<String, Json>) -> RowResult {
    let inputs = bind_row(p, row).unwrap_or_else(|e| panic!("{e}: {row}"));
    let want = Interpreter.evaluate(p, &inputs, verdicts);
    for engine in ENGINES {
        let got = engine.evaluate(p, &inputs, verdicts);
        assert_eq!(exact(&want), exact(&got), "engine {} on row {row}", engine.name());
    }
    want
}

#[test]
fn every_example_directory_gives_identical_results_on_every_engine() {
    // The examples that run programs answer from their transcripts.
    #[cfg(all(feature = "exec", target_os = "linux"))]
    crate::common::executor_ready();
    let mut rows = 0;
    for dir in example_dirs() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let compiled = compile_path(&dir.join("main.rubric"));
        let p = compiled.program.as_ref().unwrap_or_else(|| panic!("{name} does not compile"));
        let verdicts = dir.join("verdicts.jsonl");
        let verdicts = verdicts.is_file().then(|| VerdictFile::load(&verdicts).unwrap());
        let ident = Identity::of(p, &compiled.sites);
        let bound = JIT.bind(p);
        for (i, line) in read_lines(&dir.join("inputs.jsonl")).iter().enumerate() {
            let a = score_line(&Interpreter, p, &ident, i, line, verdicts.as_ref());
            let b = score_line(&bound, p, &ident, i, line, verdicts.as_ref());
            let engine = json!("jit");
            assert_eq!(b.get("engine"), if b.get("error").is_some() { None } else { Some(&engine) });
            assert_eq!(without_engine(a.clone()), without_engine(b), "{name} row {i}");
            for engine in ENGINES {
                let c = score_line(*engine, p, &ident, i, line, verdicts.as_ref());
                assert_eq!(without_engine(a.clone()), without_engine(c), "{name} row {i} on {}", engine.name());
            }
            rows += 1;
        }
        let ours = run_examples(&Interpreter, p);
        for engine in ENGINES {
            let theirs = run_examples(*engine, p);
            assert_eq!(ours.len(), theirs.len());
            for (a, b) in ours.iter().zip(&theirs) {
                assert!(b.passed(), "{name} example {:?} fails on {}: {:?}", b.name, engine.name(), b.failures);
                assert_eq!(
                    a.result.as_ref().map(exact),
                    b.result.as_ref().map(exact),
                    "{name} example {:?} differs on {}",
                    a.name,
                    engine.name()
                );
            }
        }
    }
    assert!(rows >= 40, "only {rows} example rows ran");
}

/// HealthBench's published rows (`../shared/conformance/healthbench`), each scored with
/// met/unmet/unscored verdicts, give identical results on every engine.
#[test]
fn healthbench_rows_agree_between_engines() {
    let dir = crate_root().join("../shared/conformance/healthbench");
    assert!(dir.is_dir(), "missing {}: the shared conformance data is required", dir.display());
    let compiled = compile_path(&crate_root().join("examples/healthbench/main.rubric"));
    let p = compiled.program.expect("the healthbench example compiles");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut n = 0;
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let example: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let Some(rubrics) = example.get("rubrics").and_then(Json::as_array) else { continue };
        let row = json!({
            "prompt": example["prompt"],
            "response": "Rest, fluids, and see a doctor if it gets worse.",
            "rubrics": rubrics,
        });
        let mut verdicts = Map::new();
        for i in 0..rubrics.len() {
            let v = match i % 5 {
                0 | 3 => json!("met"),
                1 | 4 => json!("unmet"),
                _ => json!({"unscored": "judge_timeout"}),
            };
            verdicts.insert(format!("items[{i}]"), v);
        }
        agree(&p, &row, &verdicts);
        n += 1;
    }
    assert!(n >= 10, "only {n} HealthBench rows");
}

// ------------------------------------------------------------------ traps

/// A trap in a gate condition, a gate value, a criterion's text, points, check and value, an
/// `each` list, a `let` read twice, a function, a fold and the score: each must land in the
/// same place with the same kind, message and site on every engine.
const TRAPS: &str = r#"rubric jit.traps @ 1.0.0
input x: Number
input xs: List[Number]
input j: Json
input t: Text
input pat: Text
let bad = xs[x]
fn inv(n: Number) -> Number = 1 / n
fn rem(n: Number) -> Number = 7 % n
gate g1: x != 99 or xs[5] > 0 else score 0
gate g2: x != 98 else cap (1 / (x - 98))
criterion pts "Points" points (xs[x + 10]) check true
criterion div "Divides" check inv(x) > 0
criterion modulo "Remainder" check rem(x) >= 0
criterion letted "Let" check bad > 0
criterion letted_again "Let again" check bad + 1 > 0
criterion field "Field" check json_get(j, "a") != null
criterion fold "Fold" check all(xs, v => inv(v - 1) > 0)
criterion regex "Regex" check matches(t, pat)
criterion val "Value" value clip(inv(x), 0, 1)
criteria items each v in (if x == 96 then [xs[9]] else xs) {
  criterion "Item " + (if x == 97 then ["a"][5] else t) check v / x >= 0
}
score = mean(all, unscored: skip) / (x - 95)
"#;

#[test]
fn traps_land_in_the_same_place_with_the_same_message_on_every_engine() {
    let p = compile(TRAPS);
    let mut trapped = 0;
    for x in [0.0, 1.0, 2.0, 95.0, 96.0, 97.0, 98.0, 99.0, -1.0, 0.5] {
        for (xs, j, pat) in [
            (json!([1, 2, 3]), json!({"a": 1}), "a+"),
            (json!([]), json!([1, 2]), "("),
            (json!([0, 1]), json!("text"), "x"),
        ] {
            let row = json!({"x": x, "xs": xs, "j": j, "t": "aaa", "pat": pat});
            let r = agree(&p, &row, &Map::new());
            trapped += r.trap.is_some() as usize
                + r.criteria
                    .iter()
                    .filter(|c| c.reason.as_deref().is_some_and(|r| r.contains("rubric::trap::")))
                    .count();
        }
    }
    assert!(trapped >= 40, "the rows should raise many traps, only {trapped} did");
}

/// A `let` whose value traps, read by several criteria and inside a function's argument and a
/// fold: the interpreter caches the error; every engine reports it the same way each time.
#[test]
fn a_trapping_let_is_cached_like_the_interpreter_s() {
    let p = compile(
        r#"rubric jit.let_trap @ 1.0.0
input xs: List[Number]
let first = xs[0]
let second = first * 2
fn twice(n: Number) -> Number = n + n
criterion a "A" check second > 0
criterion b "B" check twice(first) > 0
criterion c "C" check any(xs, v => v > first)
criterion d "D" check len(xs) == 0 or first > 0
score = fraction(all)
"#,
    );
    for xs in [json!([]), json!([1]), json!([-1, 2])] {
        agree(&p, &json!({"xs": xs}), &Map::new());
    }
}

/// Folds whose elements are not plain: unscored criterion values and `null`s inside number
/// and boolean lists, read by lambdas in registers, nested folds, `filter` keeping elements.
#[test]
fn folds_over_unscored_and_null_elements_agree() {
    let p = compile(
        r#"rubric jit.fold_values @ 1.0.0
input xs: List[Number]
input on: Number?
judge j { model "m" sees xs }
criterion j1 "J1" by j
criterion m "Map" check (sum(map([j1.value, 2, on ?? 3], v => v * 2)) ?? 0) > 1
criterion f "Filter" check len(filter([j1.met, true, false], b => b)) >= 1
criterion a "All" check all([j1.met, true], b => b or false)
criterion c "Count" check count([j1.value, 1, 0.5], v => v > 0.7) == 1
criterion n "Nested" check any(xs, a => all([a, j1.value], b => b >= 0))
criterion k "Kept" check len(filter(map(xs, v => if v > 1 then j1.value else v), v => v < 3)) > 0
score = mean(all, unscored: skip)
"#,
    );
    for verdict in [json!("met"), json!("unmet"), json!({"unscored": "judge_timeout"})] {
        for (xs, on) in [(json!([]), json!(null)), (json!([0.5, 2, -1]), json!(4)), (json!([3]), json!(null))] {
            let mut verdicts = Map::new();
            verdicts.insert("j1".into(), verdict.clone());
            agree(&p, &json!({"xs": xs, "on": on}), &verdicts);
        }
    }
}

/// `max` and `min` of two Numbers, which the JIT calls directly on plain numbers (`HostFn::NumMax`,
/// `NumMin`) and through the intrinsic otherwise: every engine gives the interpreter's number,
/// on signed zeros, infinities and NaN (made by arithmetic: rows hold none), and the unscored
/// value of a judged criterion passes through as the intrinsic passes it.
#[test]
fn max_and_min_of_two_numbers_agree_on_every_engine() {
    let p = compile(
        r#"rubric jit.extremes @ 1.0.0
input x: Number
input y: Number
judge j { model "m" sees x }
criterion j1 "J1" by j
criterion c "Clipped" check min(max(x, y), 1) >= 0
let inf = x * 1e308 * 10
score hi = max(x, y)
score lo = min(x, y)
score yx = max(y, x)
score ny = min(y, x)
score nan_hi = max(inf - inf, y)
score nan_lo = min(y, inf - inf)
score judged_hi = max(j1.value, x)
score judged_lo = min(y, j1.value)
score nested = max(min(x, 0.25), min(y, 0.75))
score = 1
"#,
    );
    let values = [json!(0.0), json!(-0.0), json!(1), json!(-1), json!(0.5), json!(1e308), json!(-1e308)];
    for verdict in [json!("met"), json!({"unscored": "judge_timeout"})] {
        let mut verdicts = Map::new();
        verdicts.insert("j1".into(), verdict.clone());
        for x in &values {
            for y in &values {
                agree(&p, &json!({"x": x, "y": y}), &verdicts);
            }
        }
    }
    // The signed zeros and NaN reach the scores (the cases are not vacuous).
    let row = |x: f64, y: f64| bind_row(&p, &json!({"x": x, "y": y})).unwrap();
    let r = Interpreter.evaluate(&p, &row(1.0, 2.0), &Map::new());
    let score = |name: &str| r.scores.iter().find(|s| s.name == name).and_then(|s| s.value);
    assert_eq!((score("hi"), score("lo"), score("nan_hi")), (Some(2.0), Some(1.0), Some(2.0)), "{r:?}");
}

// ------------------------------------------------------------------ depth

/// A chain of functions, each calling the next, and an expression nested nearly as deep as the
/// parser allows.
fn deep_rubric(functions: usize, nesting: usize) -> String {
    let mut src = String::from("rubric jit.deep @ 1.0.0\ninput x: Number\ninput t: Text\n");
    src.push_str("fn f0(n: Number) -> Number = n + 1\n");
    for i in 1..functions {
        src.push_str(&format!("fn f{i}(n: Number) -> Number = f{}(n) + len(lower(\"ab\"))\n", i - 1));
    }
    let mut e = String::from("x");
    for i in 0..nesting {
        e = if i % 3 == 0 { format!("({e} + 1)") } else { format!("(if x < {i} then 0 else {e} * 2)") };
    }
    src.push_str(&format!("criterion chain \"Chain\" check f{}(x) > 0\n", functions - 1));
    src.push_str(&format!("criterion nested \"Nested\" check {e} > 0\n"));
    src.push_str("score = fraction(all)\n");
    src
}

#[test]
fn deep_call_chains_and_deep_nesting_agree_even_on_a_small_stack() {
    let p = compile(&deep_rubric(300, 60));
    let row = json!({"x": 100, "t": "t"});
    let want = agree(&p, &row, &Map::new());
    assert_eq!(want.score, Some(1.0), "{want:?}");
    // On a thread with a 256 KiB stack the JIT runs its roots on a segment of its own.
    let got = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let inputs = bind_row(&p, &row).unwrap();
            JIT.evaluate(&p, &inputs, &NoVerdicts)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(exact(&want), exact(&got));
}

// ------------------------------------------------------------------ compilation and threads

#[test]
fn compiled_code_is_cached_per_process_by_ir_hash() {
    let src = "rubric jit.cache @ 1.0.0\ninput r: Text\ncriterion a \"a\" check len(r) > 1 + 2\n";
    let p = compile(src);
    let q = compile(src);
    assert!(!std::ptr::eq(&p, &q));
    let a = code(&p).unwrap();
    let b = code(&q).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "the same IR compiled twice");
    assert_eq!(*a.program(), p);
    let bound = JIT.bind(&p);
    let inputs = bind_row(&p, &json!({"r": "hello"})).unwrap();
    assert_eq!(bound.evaluate(&p, &inputs, &NoVerdicts).score, Some(1.0));
    // A program at another address goes through the general path and still agrees.
    assert_eq!(bound.evaluate(&q, &inputs, &NoVerdicts).score, Some(1.0));
}

#[test]
fn the_same_code_serves_many_threads() {
    let (p, sites) = compile_with_sites(
        r#"rubric jit.threads @ 1.0.0
input response: Text
let ws = words(response)
criterion nonempty "Says something" check len(ws) > 0
criterion repeats "Some word occurs twice" check count(ws, a => count(ws, b => a == b) > 1) > 0
score = fraction(all)
"#,
    );
    let rows: Vec<String> =
        (0..64).map(|i| json!({"response": format!("w{} w{} x", i % 7, i % 3)}).to_string()).collect();
    let ident = Identity::of(&p, &sites);
    let want: Vec<Json> = rows
        .iter()
        .enumerate()
        .map(|(i, l)| without_engine(score_line(&Interpreter, &p, &ident, i, l, None)))
        .collect();
    let bound = JIT.bind(&p);
    let got: Vec<Json> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (p, rows, ident, bound) = (&p, &rows, &ident, &bound);
                s.spawn(move || {
                    rows.iter()
                        .enumerate()
                        .filter(|(i, _)| i % 4 == t)
                        .map(|(i, l)| (i, without_engine(score_line(bound, p, ident, i, l, None))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(usize, Json)> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, v)| v).collect()
    });
    assert_eq!(want, got);
}

// ------------------------------------------------------------------ CLI

fn rubric_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rubric"));
    c.current_dir(crate_root());
    c
}

#[test]
fn cli_runs_tests_and_explains_with_the_jit_engine() {
    let out = rubric_bin().args(["test", "--engine", "jit", "examples"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" 0 failed"), "{stdout}");

    let out = rubric_bin()
        .args(["explain", "examples/webapp-gates/main.rubric", "--input", "examples/webapp-gates/inputs.jsonl"])
        .args(["--verdicts", "examples/webapp-gates/verdicts.jsonl", "--row", "3", "--engine", "jit"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("engine jit: same result as the interpreter"), "{stdout}");

    let tmp = TempDir::new("jit-cli");
    let output = tmp.path("out.jsonl");
    let out = rubric_bin()
        .args(["run", "examples/tiers/main.rubric", "--input", "examples/tiers/inputs.jsonl"])
        .args(["--verdicts", "examples/tiers/verdicts.jsonl", "--engine", "jit", "--no-progress", "--output"])
        .arg(&output)
        .output()
        .unwrap();
    // The example's rows include failures by design (bad labels, a row of the wrong type).
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&output).unwrap();
    let scored: Vec<&str> = text.lines().filter(|l| !l.contains("\"error\"")).collect();
    assert!(scored.len() >= 5 && scored.iter().all(|l| l.contains("\"engine\":\"jit\"")), "{text}");

    // A bundle runs on the JIT with a note on stderr, and gives the interpreter's lines.
    let bundle = tmp.path("tiers.rbk");
    let out = rubric_bin().args(["build", "examples/tiers/main.rubric", "-o"]).arg(&bundle).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut lines = Vec::new();
    for engine in ["interp", "jit"] {
        let output = tmp.path(&format!("bundle.{engine}.jsonl"));
        let out = rubric_bin()
            .arg("run")
            .arg(&bundle)
            .args(["--input", "examples/tiers/inputs.jsonl", "--verdicts", "examples/tiers/verdicts.jsonl"])
            .args(["--engine", engine, "--no-progress", "--output"])
            .arg(&output)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        // Naming an engine other than Wasm for a bundle leaves the sandbox, with a note.
        assert!(stderr.contains("without the sandbox"), "{stderr}");
        let text = std::fs::read_to_string(&output).unwrap();
        lines.push(crate::common::json_lines(&text).into_iter().map(without_engine).collect::<Vec<_>>());
    }
    assert_eq!(lines[0], lines[1]);
}
