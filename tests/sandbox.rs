//! The sandbox's limits hold inside host functions (issue "untrusted means untrusted"): each
//! case a security test of main found — a quadratic `replace`, a self-referencing JSON Schema,
//! a list of millions of pieces, a huge row's text index, embedding thousands of sentences, a
//! bundle that runs on the interpreter by default — stops at its limit as a
//! `rubric::trap::limit` (or `json`) result for that row only, in-process and through the
//! built binary under a memory ulimit, for `rubric run` and for `rubric serve` (which goes on
//! answering).

use crate::common::{crate_root, TempDir};
use rubric::backend::wasm::{Limits, WasmEngine};
use rubric::engine::{Engine, NoVerdicts, RowResult};
use rubric::interp::{Interpreter, LimitedInterpreter};
use rubric::ir::Program;
use rubric::runtime::bind_row;
use rubric::types::compile_source;
use serde_json::{json, Value as Json};
use std::process::Command;
use std::time::{Duration, Instant};

fn compile(src: &str) -> Program {
    let c = compile_source("<sandbox>", src);
    match c.program {
        Some(p) => p,
        None => {
            let errors: Vec<String> =
                c.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
            panic!("does not compile: {}\n{src}", errors.join("; "))
        }
    }
}

fn eval(engine: &dyn Engine, p: &Program, row: Json) -> RowResult {
    engine.evaluate(p, &bind_row(p, &row).unwrap(), &NoVerdicts)
}

fn trap_of(r: &RowResult) -> (&str, &str) {
    let t = r.trap.as_ref().unwrap_or_else(|| panic!("expected a trap, got {r:?}"));
    (t.code, t.message.as_str())
}

fn limits(heap_mb: usize, timeout_ms: u64) -> Limits {
    Limits { heap_bytes: heap_mb << 20, timeout: Duration::from_millis(timeout_ms), ..Limits::DEFAULT }
}

const REPLACE: &str = r#"rubric sandbox.replace @ 1.0.0
input response: Text
criterion small "Small" check len(response) > 0
criterion bomb "Bomb" check len(replace(response, "a", response)) > 0
score = fraction(all)
"#;

#[test]
fn a_quadratic_replace_is_refused_before_it_is_built() {
    let p = compile(REPLACE);
    // 40 KB of `a`: the result would be 1.6 GB.
    let row = json!({"response": "a".repeat(40_000)});
    let start = Instant::now();
    let r = eval(&WasmEngine::with_limits(limits(512, 10_000)), &p, row.clone());
    let (code, message) = trap_of(&r);
    assert_eq!(code, "rubric::trap::limit");
    assert!(message.starts_with("memory limit"), "{message}");
    assert!(start.elapsed() < Duration::from_secs(5), "the check comes before the work: {:?}", start.elapsed());
    // The first criterion keeps its verdict; only the bomb carries the trap.
    assert!(r.criteria[0].is_met(), "{r:?}");
    // The interpreter under the same limits stops the same way.
    let r = eval(&LimitedInterpreter { limits: limits(512, 10_000) }, &p, row);
    assert_eq!(trap_of(&r).0, "rubric::trap::limit");
    // A replacement that fits is made.
    let r = eval(&WasmEngine::with_limits(limits(512, 10_000)), &p, json!({"response": "abc"}));
    assert_eq!(r.score, Some(1.0), "{r:?}");
}

#[test]
fn a_long_join_separator_is_refused_before_it_is_built() {
    let p = compile(
        r#"rubric sandbox.join @ 1.0.0
input response: Text
criterion bomb "Bomb" check len(join(words(response), response)) > 0
"#,
    );
    let r = eval(&WasmEngine::with_limits(limits(64, 10_000)), &p, json!({"response": "ab ".repeat(20_000)}));
    let (code, message) = trap_of(&r);
    assert_eq!(code, "rubric::trap::limit", "{message}");
    assert!(message.starts_with("memory limit"), "{message}");
}

#[test]
fn a_list_of_millions_of_pieces_stops_at_the_memory_limit() {
    let p = compile(
        r#"rubric sandbox.split @ 1.0.0
input response: Text
criterion pieces "Pieces" check len(split(response, "a")) > 0
"#,
    );
    // 8 MB of `a`: 8 million empty pieces, about 400 MB of values.
    let row = json!({"response": "a".repeat(8 << 20)});
    let r = eval(&WasmEngine::with_limits(limits(64, 30_000)), &p, row.clone());
    let (code, message) = trap_of(&r);
    assert_eq!(code, "rubric::trap::limit", "{message}");
    assert!(message.starts_with("memory limit"), "{message}");
    // Within the default limits on a normal row it is a list.
    let r = eval(&WasmEngine::new(), &p, json!({"response": "banana"}));
    assert_eq!(r.score, Some(1.0), "{r:?}");
}

#[test]
fn the_text_index_of_a_huge_row_stops_at_the_memory_limit() {
    let p = compile(
        r#"rubric sandbox.index @ 1.0.0
input response: Text
criterion words "Words" check word_count(response) > 0
"#,
    );
    // 16 MB of one-letter words: 16 million tokens, about 400 MB of index.
    let row = json!({"response": "a ".repeat(8 << 20)});
    let r = eval(&WasmEngine::with_limits(limits(128, 30_000)), &p, row);
    let (code, message) = trap_of(&r);
    assert_eq!(code, "rubric::trap::limit", "{message}");
    assert!(message.starts_with("memory limit"), "{message}");
}

#[test]
fn self_references_through_every_in_place_keyword_are_json_traps() {
    let src = "rubric sandbox.loops @ 1.0.0\ninput response: Text\ninput schema: Text\n\
               criterion valid \"Valid\" check json_valid(json(response), json(schema))\n";
    let p = compile(src);
    let loops = [
        json!({"anyOf": [{"type": "string"}, {"$ref": "#"}]}),
        json!({"not": {"$ref": "#"}}),
        json!({"if": {"$ref": "#"}}),
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"oneOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}),
        json!({"propertyNames": {"allOf": [{"$ref": "#/propertyNames"}]}}),
        json!({"dependentSchemas": {"a": {"$ref": "#"}}}),
    ];
    for schema in loops {
        let row = json!({"response": "{\"a\": 1}", "schema": schema.to_string()});
        for engine in [&Interpreter as &dyn Engine, &WasmEngine::new()] {
            let r = eval(engine, &p, row.clone());
            let reason = r.criteria[0].reason.as_deref().unwrap_or_default();
            assert!(reason.contains("refers to itself"), "{}: {schema}: {r:?}", engine.name());
        }
    }
}

#[test]
fn a_schema_that_refers_to_itself_in_place_is_a_json_trap_on_every_engine() {
    let p = compile(
        r##"rubric sandbox.schema @ 1.0.0
input response: Text
criterion valid "Valid" check json_valid(json(response), json("{\"allOf\": [{\"$ref\": \"#\"}]}"))
"##,
    );
    let engines: [&dyn Engine; 3] = [&Interpreter, &WasmEngine::new(), &rubric::backend::jit::JitEngine::new()];
    for engine in engines {
        let start = Instant::now();
        let r = eval(engine, &p, json!({"response": "1"}));
        let reason = r.criteria[0].reason.as_deref().unwrap_or_default();
        assert!(reason.starts_with("rubric::trap::json"), "{}: {r:?}", engine.name());
        assert!(reason.contains("refers to itself"), "{}: {reason}", engine.name());
        assert!(start.elapsed() < Duration::from_secs(5), "{}: {:?}", engine.name(), start.elapsed());
    }
}

/// A schema whose validation visits 2^depth subschemas: each level is `anyOf` of the next
/// twice, with no self-reference.
fn exponential_schema(depth: usize) -> String {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/s{}", i + 1);
        defs.insert(format!("s{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next, "type": "string"}]}));
    }
    defs.insert(format!("s{depth}"), json!({"type": "boolean"}));
    json!({"$ref": "#/$defs/s0", "$defs": defs}).to_string()
}

#[test]
fn an_exponential_schema_stops_at_the_row_limits_or_the_step_bound() {
    let schema = exponential_schema(40);
    let src = "rubric sandbox.exp @ 1.0.0\ninput response: Text\ninput schema: Text\n\
         criterion valid \"Valid\" check json_valid(json(response), json(schema))\n";
    let p = compile(src);
    let row = json!({"response": "1", "schema": schema});
    // 1M units: the fuel runs out within a few seconds of a debug build on a slow 2-core
    // machine (5M took 13.7 s on one, past the 10 s time limit that then fired first).
    let wasm = WasmEngine::with_limits(Limits { fuel: 1_000_000, ..Limits::DEFAULT });
    let r = eval(&wasm, &p, row.clone());
    let reason = r.criteria[0].reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("rubric::trap::limit"), "{r:?}");
    assert!(reason.contains("fuel limit"), "{reason}");
    // Without limits (a trusted rubric) the walk's own bound stops it.
    let start = Instant::now();
    let r = eval(&Interpreter, &p, row);
    let reason = r.criteria[0].reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("rubric::trap::json") && reason.contains("too costly"), "{reason}");
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    // A shallow one validates as it always did.
    let row = json!({"response": "true", "schema": exponential_schema(3)});
    assert_eq!(eval(&WasmEngine::new(), &p, row).score, Some(1.0));
}

#[test]
fn schemas_with_references_by_pointer_anchor_and_id_still_validate() {
    let src = "rubric sandbox.refs @ 1.0.0\ninput response: Text\ninput schema: Text\n\
               criterion valid \"Valid\" check json_valid(json(response), json(schema))\n";
    let p = compile(src);
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"
    });
    let anchored = json!({"$defs": {"n": {"$anchor": "num", "type": "number"}}, "items": {"$ref": "#num"}});
    let cases = [
        (tree.clone(), json!({"kids": [{"kids": []}, {"kids": [{}]}]}), 1.0),
        (tree, json!({"kids": [1]}), 0.0),
        (anchored.clone(), json!([1, 2.5]), 1.0),
        (anchored, json!([1, "x"]), 0.0),
    ];
    for (schema, value, want) in cases {
        let row = json!({"response": value.to_string(), "schema": schema.to_string()});
        for engine in [&Interpreter as &dyn Engine, &WasmEngine::new()] {
            let r = eval(engine, &p, row.clone());
            assert_eq!(r.score, Some(want), "{}: {schema} on {value}: {r:?}", engine.name());
        }
    }
}

#[cfg(feature = "models")]
#[test]
fn embedding_thousands_of_sentences_stops_near_the_time_limit() {
    // The model the tests' environment names (`.cargo/config.toml`), fetched if missing.
    crate::common::minilm();
    let p = compile(
        r#"rubric sandbox.embed @ 1.0.0
input response: Text
criterion covers "Covers" check covers(response, "Call emergency services.", 0.5)
"#,
    );
    let sentences: String =
        (0..3_000).map(|i| format!("Sentence number {i} talks about topic {} at length. ", i * 7919 % 1000)).collect();
    let timeout = Duration::from_millis(1_000);
    let engine = WasmEngine::with_limits(Limits { timeout, fuel: u64::MAX / 2, ..Limits::DEFAULT });
    let start = Instant::now();
    let r = eval(&engine, &p, json!({"response": sentences}));
    let took = start.elapsed();
    let reason = r.criteria[0].reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("rubric::trap::limit") && reason.contains("time limit"), "{r:?}");
    // One batch of 64 sentences past the deadline at most, on a debug build of candle at
    // opt-level 3: far less than the tens of seconds all 3,000 take.
    assert!(took < timeout * 5, "stopped {took:?} after it started, for a {timeout:?} limit");
}

// ------------------------------------------------------------------ through the binary

fn rubric_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rubric"));
    c.current_dir(crate_root());
    c
}

/// Build `src` into a bundle in `dir`; returns its path.
fn bundle_of(dir: &TempDir, src: &str) -> std::path::PathBuf {
    let source = dir.file("main.rubric", src);
    let out = dir.path("main.rbk");
    let o = rubric_bin().arg("build").arg(&source).arg("-o").arg(&out).output().unwrap();
    assert!(o.status.success(), "build failed: {}", String::from_utf8_lossy(&o.stderr));
    out
}

const QUADRATIC: &str = r#"rubric sandbox.quadratic @ 1.0.0
input response: Text
let ws = words(response)
criterion repeats "Some word occurs twice" check count(ws, a => count(ws, b => a == b) > 1) > 0
"#;

#[test]
fn a_bundle_runs_on_the_sandbox_by_default() {
    let dir = TempDir::new("sandbox-default");
    let bundle = bundle_of(&dir, QUADRATIC);
    let huge = "alpha beta gamma delta ".repeat(20_000);
    let input = dir.file("rows.jsonl", &format!("{}\n{}\n", json!({"response": "a a"}), json!({"response": huge})));
    let output = dir.path("out.jsonl");
    let start = Instant::now();
    let o = rubric_bin()
        .args(["run", "--no-progress", "--row-timeout-ms", "300"])
        .arg(&bundle)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    // The second row is over its limit: exit status 3, the trap named.
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rubric::trap::limit 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    let lines = crate::common::json_lines(&std::fs::read_to_string(&output).unwrap());
    assert_eq!(lines[0]["engine"], json!("wasm"), "{}", lines[0]);
    assert_eq!(lines[0]["score"].as_f64(), Some(1.0), "{}", lines[0]);
    assert_eq!(lines[1]["trap"]["code"], json!("rubric::trap::limit"), "{}", lines[1]);
    assert!(lines[1]["trap"]["message"].as_str().unwrap().starts_with("time limit"), "{}", lines[1]);
    // `explain` traces a bundle's row under the same limits.
    let o = rubric_bin()
        .args(["explain", "--row", "1", "--row-timeout-ms", "300"])
        .arg(&bundle)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("time limit"), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    // Naming another engine says the bundle is trusted, with a note.
    let o = rubric_bin()
        .args(["run", "--no-progress", "--engine", "interp"])
        .arg(&bundle)
        .arg("--input")
        .arg(dir.file("one.jsonl", &format!("{}\n", json!({"response": "a a"}))))
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("without the sandbox"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One criterion per memory bomb, each armed by the row's `kind`.
const BOMBS: &str = r##"rubric sandbox.bombs @ 1.0.0
input response: Text
input kind: Text
criterion some "Some text" check len(response) > 0
criterion replace "Replace" check kind != "replace" or len(replace(response, "a", response)) > 0
criterion split "Split" check kind != "split" or len(split(response, "a")) > 0
criterion words "Words" check kind != "words" or word_count(response) > 0
criterion schema "Schema" check kind != "schema" or json_valid(json("1"), json("{\"allOf\": [{\"$ref\": \"#\"}]}"))
criterion quadratic "Quadratic" check kind != "quadratic" or count(words(response), a => count(words(response), b => a == b) > 1) > 0
score = fraction(all)
"##;

/// `rubric run` of a bundle under an address-space ulimit (`ulimit -v`): every row that would
/// take more than its memory limit is a limit trap, the process never runs out of memory and
/// the rows around it are scored.
#[test]
fn memory_bombs_stay_within_the_memory_limit_under_a_ulimit() {
    let dir = TempDir::new("sandbox-ulimit");
    let bundle = bundle_of(&dir, BOMBS);
    let rows = [
        json!({"response": "fine", "kind": "none"}),
        json!({"response": "a".repeat(40_000), "kind": "replace"}),
        json!({"response": "a".repeat(16 << 20), "kind": "split"}),
        // 16 million one-letter words: their ranges alone are 256 MiB.
        json!({"response": "a ".repeat(16 << 20), "kind": "words"}),
        json!({"response": "x", "kind": "schema"}),
        json!({"response": "fine", "kind": "none"}),
    ];
    let input = dir.file("rows.jsonl", &rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    let output = dir.path("out.jsonl");
    // 256 MiB per row on the host; 2 GiB of address space allows the binary, its threads (two
    // rows at once on two cores), the Wasm reservations and the rows themselves, but not one
    // bomb (the replacement alone is 1.6 GB).
    let script = format!(
        "ulimit -v {} && exec {} run --no-progress --row-memory-mb 256 {} --input {} --output {}",
        2 << 20,
        env!("CARGO_BIN_EXE_rubric"),
        bundle.display(),
        input.display(),
        output.display()
    );
    let o = Command::new("bash").arg("-c").arg(&script).output().unwrap();
    // Exit status 3: the run went through, and the bombs' rows failed (by their limits).
    assert_eq!(o.status.code(), Some(3), "the run failed under the ulimit: {}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("4 failed rows by code: rubric::trap::limit 3, rubric::trap::json 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines = crate::common::json_lines(&std::fs::read_to_string(&output).unwrap());
    assert_eq!(lines.len(), rows.len());
    assert_eq!(lines[0]["score"].as_f64(), Some(1.0), "{}", lines[0]);
    assert_eq!(lines[5]["score"].as_f64(), Some(1.0), "{}", lines[5]);
    for (i, kind) in [(1, "replace"), (2, "split"), (3, "words")] {
        let c = lines[i]["criteria"].as_array().unwrap().iter().find(|c| c["id"] == json!(kind)).unwrap();
        let reason = c["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("rubric::trap::limit: memory limit"), "row {i} ({kind}): {}", lines[i]);
    }
    let c = &lines[4]["criteria"].as_array().unwrap()[4];
    assert!(c["reason"].as_str().unwrap_or_default().starts_with("rubric::trap::json"), "{}", lines[4]);
}

/// `rubric serve` of the bombs bundle under the same address-space ulimit: every bomb in a
/// request is that row's limit (or json) trap, the rows beside it are scored, and the server
/// goes on answering (the security test of the old main saw each of these kill the server).
#[test]
fn memory_and_time_bombs_do_not_take_the_server_down() {
    let dir = TempDir::new("sandbox-serve");
    let bundle = bundle_of(&dir, BOMBS);
    let script = format!(
        "ulimit -v {} && exec {} serve --addr 127.0.0.1:0 --row-memory-mb 256 --row-timeout-ms 5000 --max-body-bytes 67108864 {}",
        2 << 20,
        env!("CARGO_BIN_EXE_rubric"),
        bundle.display()
    );
    let (mut child, line) = crate::common::Spawned::start(Command::new("bash").arg("-c").arg(&script));
    let addr = line.strip_prefix("http://").unwrap_or_else(|| panic!("first line: {line:?}")).to_string();
    let rows = json!([
        {"response": "fine", "kind": "none"},
        {"response": "a".repeat(40_000), "kind": "replace"},
        // 16 million one-letter words: their ranges alone are 256 MiB.
        {"response": "a ".repeat(16 << 20), "kind": "words"},
        {"response": "x", "kind": "schema"},
        {"response": "alpha beta gamma delta ".repeat(20_000), "kind": "quadratic"},
        {"response": "fine", "kind": "none"},
    ]);
    let body = json!({ "rows": rows }).to_string();
    let (status, text) = crate::serve::http(&addr, "POST", "/v1/score", &[], body.as_bytes());
    assert_eq!(status, 200, "{text}");
    let answer: Json = serde_json::from_str(&text).unwrap();
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 6, "{answer}");
    assert_eq!(results[0]["score"].as_f64(), Some(1.0), "{}", results[0]);
    assert_eq!(results[5]["score"].as_f64(), Some(1.0), "{}", results[5]);
    let reason = |i: usize, id: &str| -> String {
        let r = &results[i];
        if let Some(trap) = r.get("trap") {
            return format!("{}: {}", trap["code"].as_str().unwrap_or(""), trap["message"].as_str().unwrap_or(""));
        }
        let c = r["criteria"].as_array().unwrap().iter().find(|c| c["id"] == json!(id)).unwrap();
        c["reason"].as_str().unwrap_or_default().to_string()
    };
    for (i, id) in [(1, "replace"), (2, "words")] {
        assert!(reason(i, id).starts_with("rubric::trap::limit: memory limit"), "row {i}: {}", results[i]);
    }
    assert!(reason(3, "schema").starts_with("rubric::trap::json"), "{}", results[3]);
    assert!(reason(4, "quadratic").starts_with("rubric::trap::limit: time limit"), "{}", results[4]);
    // Still alive and still scoring.
    assert_eq!(crate::serve::http(&addr, "GET", "/healthz", &[], b""), (200, "ok".to_string()));
    let one = json!({ "rows": [{"response": "fine", "kind": "none"}] }).to_string();
    let (status, text) = crate::serve::http(&addr, "POST", "/v1/score", &[], one.as_bytes());
    assert_eq!(status, 200, "{text}");
    assert!(child.0.try_wait().unwrap().is_none(), "the server exited");
}
