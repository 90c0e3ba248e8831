//! The Wasm engine against the reference interpreter, and its sandbox: every `examples/`
//! directory (rows, verdicts and `example` blocks) and the HealthBench data give exactly the
//! interpreter's result lines; compiled modules are deterministic; resource limits (fuel, a
//! wall-clock timeout, the value heap, linear memory) stop a runaway row with
//! `rubric::trap::limit` in that row's result only; the CLI runs, tests and explains with
//! `--engine wasm`. Random well-typed rubrics are compared on every engine in
//! `engine_props.rs`.

#![cfg(feature = "wasm")]

use rubric::backend::wasm::{compile_module, Limits, WasmEngine};
use rubric::engine::{Engine, RowResult};
use rubric::interp::Interpreter;
use rubric::ir::{Program, SiteTable};
use rubric::runtime::examples::run_examples;
use rubric::runtime::{bind_row, score_line, Identity, VerdictFile};
use rubric::types::{compile_path, compile_source};
use serde_json::{json, Map, Value as Json};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::common::{crate_root, example_dirs, read_lines};

const WASM: WasmEngine = WasmEngine::new();

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

#[test]
fn every_example_directory_gives_identical_results_on_both_engines() {
    let mut rows = 0;
    for dir in example_dirs() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let compiled = compile_path(&dir.join("main.rubric"));
        let p = compiled.program.as_ref().unwrap_or_else(|| panic!("{name} does not compile"));
        let verdicts = dir.join("verdicts.jsonl");
        let verdicts = verdicts.is_file().then(|| VerdictFile::load(&verdicts).unwrap());
        let ident = Identity::of(p, &compiled.sites);
        for (i, line) in read_lines(&dir.join("inputs.jsonl")).iter().enumerate() {
            let a = score_line(&Interpreter, p, &ident, i, line, verdicts.as_ref());
            let b = score_line(&WASM, p, &ident, i, line, verdicts.as_ref());
            let engine = json!("wasm");
            assert_eq!(b.get("engine"), if b.get("error").is_some() { None } else { Some(&engine) });
            assert_eq!(without_engine(a), without_engine(b), "{name} row {i}");
            rows += 1;
        }
        let ours = run_examples(&Interpreter, p);
        let theirs = run_examples(&WASM, p);
        assert_eq!(ours.len(), theirs.len());
        for (a, b) in ours.iter().zip(&theirs) {
            assert!(b.passed(), "{name} example {:?} fails on wasm: {:?}", b.name, b.failures);
            assert_eq!(
                a.result.as_ref().map(exact),
                b.result.as_ref().map(exact),
                "{name} example {:?} differs between the engines",
                a.name
            );
        }
    }
    assert!(rows >= 40, "only {rows} example rows ran");
}

/// HealthBench's published rows (`../shared/conformance/healthbench`), each scored with
/// met/unmet/unscored verdicts, give identical results on both engines.
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
        let inputs = bind_row(&p, &row).unwrap();
        let mut verdicts = Map::new();
        for i in 0..rubrics.len() {
            let v = match i % 5 {
                0 | 3 => json!("met"),
                1 | 4 => json!("unmet"),
                _ => json!({"unscored": "judge_timeout"}),
            };
            verdicts.insert(format!("items[{i}]"), v);
        }
        let a = Interpreter.evaluate(&p, &inputs, &verdicts);
        let b = WASM.evaluate(&p, &inputs, &verdicts);
        assert_eq!(exact(&a), exact(&b), "{}", path.display());
        n += 1;
    }
    assert!(n >= 10, "only {n} HealthBench rows");
}

#[test]
fn compiled_modules_are_deterministic_and_path_independent() {
    let text = std::fs::read_to_string(crate_root().join("examples/webapp-gates/main.rubric")).unwrap();
    let a = compile_module(&compile_path(&crate_root().join("examples/webapp-gates/main.rubric")).program.unwrap());
    let tmp = std::env::temp_dir().join(format!("rubric-wasm-det-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("main.rubric"), &text).unwrap();
    let b = compile_module(&compile_path(&tmp.join("main.rubric")).program.unwrap());
    let _ = std::fs::remove_dir_all(&tmp);
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a, b, "the same rubric compiled from two paths gives different modules");
    assert_eq!(&a[..4], b"\0asm");
    for dir in example_dirs() {
        let p = compile_path(&dir.join("main.rubric")).program.unwrap();
        assert_eq!(compile_module(&p).unwrap(), compile_module(&p).unwrap(), "{}", dir.display());
    }
}

#[test]
fn a_module_importing_anything_else_is_refused() {
    let p = std::sync::Arc::new(compile("rubric t @ 1.0.0\ninput r: Text\ncriterion a \"a\" check len(r) > 0\n"));
    // (module (type (func)) (import "wasi_snapshot_preview1" "fd_write" (func (type 0))))
    let mut types = wasm_encoder::TypeSection::new();
    types.ty().function([], []);
    let mut imports = wasm_encoder::ImportSection::new();
    imports.import("wasi_snapshot_preview1", "fd_write", wasm_encoder::EntityType::Function(0));
    let mut module = wasm_encoder::Module::new();
    module.section(&types).section(&imports);
    let bytes = module.finish();
    let err = rubric::backend::wasm::Compiled::from_bytes(p, bytes).err().expect("refused");
    assert!(err.contains("wasi_snapshot_preview1"), "{err}");
}

// ------------------------------------------------------------------ limits

/// A check whose cost is quadratic in the number of words of the response.
const QUADRATIC: &str = r#"rubric limits.quadratic @ 1.0.0
input response: Text
let ws = words(response)
criterion nonempty "Says something" check len(ws) > 0
criterion repeats "Some word occurs twice" check count(ws, a => count(ws, b => a == b) > 1) > 0
score = fraction(all)
"#;

fn rows_with_one_runaway() -> Vec<String> {
    let huge = "alpha beta gamma delta ".repeat(20_000);
    vec![
        json!({"response": "one two two"}).to_string(),
        json!({"response": huge}).to_string(),
        json!({"response": "three four"}).to_string(),
    ]
}

fn assert_only_row_1_hit_the_limit(engine: &WasmEngine, what: &str) {
    let (p, sites) = compile_with_sites(QUADRATIC);
    let ident = Identity::of(&p, &sites);
    let rows = rows_with_one_runaway();
    for (i, line) in rows.iter().enumerate() {
        let got = score_line(engine, &p, &ident, i, line, None);
        if i == 1 {
            assert_eq!(got["status"], json!("unscored"), "{got}");
            assert_eq!(got["trap"]["code"], json!("rubric::trap::limit"), "{got}");
            let message = got["trap"]["message"].as_str().unwrap();
            assert!(message.contains(what), "expected a {what} trap, got {got}");
            assert!(got["trap"]["site"].is_object(), "the trap maps back to a span: {got}");
            assert!(got["unscored_reason"].as_str().unwrap().starts_with("rubric::trap::limit"), "{got}");
        } else {
            let want = score_line(&Interpreter, &p, &ident, i, line, None);
            assert_eq!(without_engine(want), without_engine(got), "row {i} must not be affected");
        }
    }
}

#[test]
fn fuel_stops_a_runaway_row_and_only_that_row() {
    let engine =
        WasmEngine::with_limits(Limits { fuel: 20_000_000, timeout: Duration::from_secs(600), ..Limits::DEFAULT });
    assert_only_row_1_hit_the_limit(&engine, "fuel");
}

#[test]
fn the_wall_clock_timeout_stops_a_runaway_row_and_only_that_row() {
    let engine =
        WasmEngine::with_limits(Limits { fuel: u64::MAX / 2, timeout: Duration::from_millis(300), ..Limits::DEFAULT });
    let start = std::time::Instant::now();
    assert_only_row_1_hit_the_limit(&engine, "time limit");
    assert!(start.elapsed() < Duration::from_secs(120), "the timeout did not stop the row early enough");
}

#[test]
fn a_memory_bomb_hits_the_heap_cap() {
    // Each function doubles its argument twice as often as the one before: 2^32 copies.
    let src = r#"rubric limits.bomb @ 1.0.0
input response: Text
fn d1(t: Text) -> Text = t + t
fn d2(t: Text) -> Text = d1(d1(t))
fn d4(t: Text) -> Text = d2(d2(t))
fn d8(t: Text) -> Text = d4(d4(t))
fn d16(t: Text) -> Text = d8(d8(t))
fn d32(t: Text) -> Text = d16(d16(t))
criterion small "Small" check len(response) < 100
criterion bomb "Bomb" check len(d32(response)) > 0
score = fraction(all)
"#;
    let p = compile(src);
    let engine = WasmEngine::with_limits(Limits { heap_bytes: 32 << 20, ..Limits::DEFAULT });
    let r = engine.evaluate(&p, &bind_row(&p, &json!({"response": "boom"})).unwrap(), &rubric::engine::NoVerdicts);
    let trap = r.trap.as_ref().expect("a trap");
    assert_eq!(trap.code, "rubric::trap::limit");
    assert!(trap.message.contains("memory limit"), "{}", trap.message);
    assert_eq!(r.score, None);
    // The criterion decided before the bomb keeps its result; the bomb's carries the trap.
    assert_eq!(r.criteria[0].status, rubric::engine::Status::Met);
    assert!(r.criteria[1].reason.as_deref().unwrap().starts_with("rubric::trap::limit"), "{:?}", r.criteria[1]);
    // A list bomb: every element of a long list replaced by the whole list, joined.
    let src = r#"rubric limits.list_bomb @ 1.0.0
input response: Text
let ws = words(response)
criterion bomb "Bomb" check len(join(map(ws, w => join(ws, " ")), " ")) > 0
"#;
    let p = compile(src);
    let words = "word ".repeat(3_000);
    let r = engine.evaluate(&p, &bind_row(&p, &json!({"response": words})).unwrap(), &rubric::engine::NoVerdicts);
    assert_eq!(r.trap.as_ref().map(|t| t.code), Some("rubric::trap::limit"), "{r:?}");
}

#[test]
fn linear_memory_is_capped() {
    let big = "x".repeat(200_000);
    let src = format!("rubric limits.data @ 1.0.0\ninput r: Text\ncriterion a \"a\" check r != \"{big}\"\n");
    let p = compile(&src);
    let inputs = bind_row(&p, &json!({"r": "y"})).unwrap();
    let tight = WasmEngine::with_limits(Limits { memory_bytes: 64 << 10, ..Limits::DEFAULT });
    let r = tight.evaluate(&p, &inputs, &rubric::engine::NoVerdicts);
    assert_eq!(r.trap.as_ref().map(|t| t.code), Some("rubric::trap::limit"), "{r:?}");
    let r = WASM.evaluate(&p, &inputs, &rubric::engine::NoVerdicts);
    assert_eq!(r.score, Some(1.0), "{r:?}");
}

#[test]
fn the_same_module_serves_many_threads() {
    let (p, sites) = compile_with_sites(QUADRATIC);
    let rows: Vec<String> =
        (0..64).map(|i| json!({"response": format!("w{} w{} x", i % 7, i % 3)}).to_string()).collect();
    let ident = Identity::of(&p, &sites);
    let want: Vec<Json> = rows
        .iter()
        .enumerate()
        .map(|(i, l)| without_engine(score_line(&Interpreter, &p, &ident, i, l, None)))
        .collect();
    let got: Vec<Json> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (p, rows, ident) = (&p, &rows, &ident);
                s.spawn(move || {
                    rows.iter()
                        .enumerate()
                        .filter(|(i, _)| i % 4 == t)
                        .map(|(i, l)| (i, without_engine(score_line(&WASM, p, ident, i, l, None))))
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
fn cli_runs_tests_and_explains_with_the_wasm_engine() {
    let out = rubric_bin().args(["test", "--engine", "wasm", "examples"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" 0 failed"), "{stdout}");

    let out = rubric_bin()
        .args(["explain", "examples/webapp-gates/main.rubric", "--input", "examples/webapp-gates/inputs.jsonl"])
        .args(["--verdicts", "examples/webapp-gates/verdicts.jsonl", "--row", "3", "--engine", "wasm"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("engine wasm: same result as the interpreter"), "{stdout}");

    let tmp = std::env::temp_dir().join(format!("rubric-wasm-cli-{}.jsonl", std::process::id()));
    let out = rubric_bin()
        .args(["run", "examples/tiers/main.rubric", "--input", "examples/tiers/inputs.jsonl"])
        .args(["--verdicts", "examples/tiers/verdicts.jsonl", "--engine", "wasm", "--no-progress", "--output"])
        .arg(&tmp)
        .output()
        .unwrap();
    // The example's rows include failures by design (bad labels, a row of the wrong type).
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&tmp).unwrap();
    let _ = std::fs::remove_file(&tmp);
    let scored: Vec<&str> = text.lines().filter(|l| !l.contains("\"error\"")).collect();
    assert!(scored.len() >= 5 && scored.iter().all(|l| l.contains("\"engine\":\"wasm\"")), "{text}");
}
