//! Fuzzing that keeps running (issue 25): four targets fed generated and mutated input from a
//! seeded generator, on this toolchain (no nightly, no cargo-fuzz), in the one test binary.
//!
//! | target | input | must hold |
//! | --- | --- | --- |
//! | `source` | a shipped rubric (examples, UI cases, conformance) with 1–8 edits: deleted, duplicated and swapped runs, tokens and brackets inserted (up to thousands), long lines, bytes that are not ASCII | it compiles or reports diagnostics whose labels lie inside the source; every diagnostic renders (human and JSON); a program that compiles runs its examples |
//! | `bundle` | a shipped rubric's `ir.json` with 1–4 structured mutations (numbers out of range, strings and arrays changed, keys dropped, subtrees transplanted from elsewhere in the IR), forged into a bundle whose hashes are right | it is rejected with a code, or loads and runs every way a command uses it (`forged::exercise`: every engine, describe, print, diff, examples) |
//! | `rows` | a rows file of 1–24 lines: valid rows, mutated bytes, invalid UTF-8, deep JSON, huge numbers, long strings, NULs, CRLF, BOMs | `run_batch` writes one record per non-blank line, in order |
//! | `reply` | a judge reply for one of several rendered requests (binary, ordinal, nominal, continuous, extract, several criteria per call, an evidence rule): JSON built from the schema's field names with values of every type, then text edits | `reply::interpret` gives one sample per entry, each an answer or `unscored` |
//!
//! Every case runs on a thread of its own with the default stack (a stack overflow aborts the
//! binary, which fails the run), under `catch_unwind`; a case that panics is written to
//! `target/fuzz-crashes/TARGET/` and fails the test. `RUBRIC_FUZZ_CASES` sets the cases per
//! target (default 150 in CI; the long run is 10,000, see `docs/performance.md`),
//! `RUBRIC_FUZZ_SEED` the seed. With more than 1,000 cases a case over 5 s also fails the run.
//! Every input that ever crashed a target is kept under `tests/fuzz/TARGET/` and runs first.

use rubric::judge::prompt::{render, Answer, EntrySpec, Fences, Rendered, Role};
use rubric::judge::reply::{interpret, Reply, Usage};
use rubric::judge::{Ask, Criterion, SeenInput};
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{crate_root, TempDir};
use crate::forged;

/// Cases per target.
fn cases() -> usize {
    std::env::var("RUBRIC_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(150)
}

fn seed() -> u64 {
    std::env::var("RUBRIC_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(25)
}

/// What a target's run found.
#[derive(Default)]
struct Tally {
    cases: usize,
    panics: Vec<String>,
    slowest: (Duration, usize),
    over_5s: Vec<usize>,
    /// Outcomes by kind (for the report: how many compiled, were rejected, ran...).
    kinds: std::collections::BTreeMap<String, usize>,
}

/// Run `check` on `input` on a thread of its own (default stack), timing it; a panic is the
/// error, saved with the input.
fn run_case(target: &str, n: usize, input: &[u8], check: &(dyn Fn(&[u8]) -> String + Sync), t: &mut Tally) {
    forged::quiet_panics();
    let started = Instant::now();
    let outcome = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(format!("fuzz-{target}-{n}"))
            .spawn_scoped(s, || forged::caught(|| check(input)))
            .expect("a thread")
            .join()
            .unwrap_or_else(|_| Err("the case's thread panicked".into()))
    });
    let took = started.elapsed();
    t.cases += 1;
    if took > t.slowest.0 {
        t.slowest = (took, n);
    }
    if took > Duration::from_secs(5) {
        t.over_5s.push(n);
    }
    match outcome {
        Ok(kind) => *t.kinds.entry(kind).or_default() += 1,
        Err(why) => {
            let dir = crate_root().join("target/fuzz-crashes").join(target);
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join(format!("case-{n}"));
            std::fs::write(&file, input).unwrap();
            t.panics.push(format!("case {n} ({}): {why}", file.display()));
        }
    }
}

/// The kept regression inputs of `target`, then `cases()` generated ones; fails on any panic
/// (and, in a long run, on any case over 5 s).
fn fuzz(target: &str, generate: &dyn Fn(&mut fastrand::Rng) -> Vec<u8>, check: &(dyn Fn(&[u8]) -> String + Sync)) {
    let started = Instant::now();
    let mut t = Tally::default();
    let kept = crate_root().join("tests/fuzz").join(target);
    assert!(kept.join("README.md").is_file(), "`{}` (the kept regression inputs) is part of the test", kept.display());
    let mut regressions: Vec<PathBuf> = std::fs::read_dir(&kept)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    regressions.sort();
    for (k, path) in regressions.iter().enumerate() {
        run_case(target, k, &std::fs::read(path).unwrap(), check, &mut t);
    }
    let mut rng = fastrand::Rng::with_seed(seed() ^ fnv(target));
    let n = cases();
    for k in 0..n {
        let input = generate(&mut rng);
        run_case(target, regressions.len() + k, &input, check, &mut t);
    }
    eprintln!(
        "fuzz {target}: {} cases ({} kept, {n} generated, seed {}) in {:.1}s: {} panics, {} over 5 s, slowest {:.2}s (case {}); {:?}",
        t.cases,
        regressions.len(),
        seed(),
        started.elapsed().as_secs_f64(),
        t.panics.len(),
        t.over_5s.len(),
        t.slowest.0.as_secs_f64(),
        t.slowest.1,
        t.kinds
    );
    assert!(t.panics.is_empty(), "fuzz {target}: {} cases panicked:\n{}", t.panics.len(), t.panics.join("\n"));
    if n > 1000 {
        assert!(t.over_5s.is_empty(), "fuzz {target}: cases over 5 s: {:?}", t.over_5s);
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn pick<'a, T>(rng: &mut fastrand::Rng, xs: &'a [T]) -> &'a T {
    &xs[rng.usize(..xs.len())]
}

// ---------------------------------------------------------------- byte-level edits

/// Tokens the edits insert: the language's punctuation and keywords, brackets, comment and
/// string delimiters, and text that is not ASCII.
const SOUP: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "\"\"\"",
    "//",
    "/*",
    "*/",
    "\\",
    ":",
    ",",
    ".",
    "=",
    "==",
    "<=",
    "->",
    "=>",
    "?",
    "??",
    "+",
    "-",
    "*",
    "/",
    "%",
    "@",
    "\n",
    "\r\n",
    "\t",
    "\0",
    "é",
    "😀",
    "\u{2028}",
    "rubric",
    "input",
    "judge",
    "gate",
    "criterion",
    "criteria",
    "tier",
    "group",
    "let",
    "fn",
    "score",
    "reward",
    "example",
    "import",
    "module",
    "each",
    "in",
    "by",
    "check",
    "value",
    "points",
    "weight",
    "if",
    "then",
    "else",
    "and",
    "or",
    "not",
    "null",
    "true",
    "false",
    "Text",
    "Number",
    "List[",
    "Json",
    "Conversation",
    "samples 3",
    "min_samples 2",
    "1e308",
    "-0",
    "0.1",
    "99999999999999999999",
    "all",
    "mean(",
    "tree(",
    "sum(",
    "word_count(",
];

/// 1–`max` random edits of `bytes`: deletions, duplications and swaps of runs, insertions of
/// tokens, of a token repeated (up to 5,000 times) and of long runs, and single-byte changes.
fn edit(rng: &mut fastrand::Rng, mut bytes: Vec<u8>, max: usize) -> Vec<u8> {
    for _ in 0..rng.usize(1..=max) {
        let at = rng.usize(..=bytes.len());
        match rng.u8(..9) {
            0 => {
                let end = (at + rng.usize(1..64)).min(bytes.len());
                bytes.drain(at..end);
            }
            1 => {
                let end = (at + rng.usize(1..256)).min(bytes.len());
                let run = bytes[at..end].to_vec();
                let to = rng.usize(..=bytes.len());
                bytes.splice(to..to, run);
            }
            2 | 3 => {
                let t = pick(rng, SOUP).as_bytes().to_vec();
                bytes.splice(at..at, t);
            }
            4 => {
                let t = pick(
                    rng,
                    &["(", "[", "{", "{a: ", "List[", "not ", "1 + ", "group g weight 1 {\n", "if true then 1 else "],
                );
                let n = *pick(rng, &[10, 90, 101, 700, 5000]);
                bytes.splice(at..at, t.repeat(n).into_bytes());
            }
            5 => {
                let n = *pick(rng, &[200, 70_000]);
                bytes.splice(at..at, std::iter::repeat_n(b'x', n));
            }
            6 if !bytes.is_empty() => {
                let i = at.min(bytes.len() - 1);
                bytes[i] = rng.u8(..);
            }
            7 => {
                let end = (at + rng.usize(1..32)).min(bytes.len());
                let a = bytes[at..end].to_vec();
                let to = rng.usize(..=bytes.len().saturating_sub(a.len()));
                let b = bytes[to..(to + a.len()).min(bytes.len())].to_vec();
                if to >= end || to + b.len() <= at {
                    bytes.splice(to..to + b.len(), a.clone());
                }
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

// ---------------------------------------------------------------- source

fn rubric_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            rubric_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rubric") {
            out.push(p);
        }
    }
}

/// Compile a source, render every diagnostic both ways, check its labels, run a program's
/// examples: what a `rubric check` or `rubric test` of the file does.
fn check_source(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let c = rubric::types::compile_source("fuzz.rubric", &text);
    for d in &c.diagnostics {
        for l in &d.labels {
            let len = c.sources.get(l.span.file).text.len() as u32;
            assert!(l.span.start <= l.span.end && l.span.end <= len, "label {:?} outside its file ({len})", l.span);
        }
        let _ = d.render(&c.sources, false);
        let _ = d.to_json(&c.sources);
    }
    match &c.program {
        Some(p) => {
            let _ = rubric::runtime::examples::run_examples(&rubric::interp::Interpreter, p);
            "compiled".into()
        }
        None => "diagnosed".into(),
    }
}

#[test]
fn fuzz_source() {
    let mut files = Vec::new();
    for dir in ["examples", "tests/ui", "tests/conformance"] {
        rubric_files(&crate_root().join(dir), &mut files);
    }
    files.sort();
    let corpus: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(corpus.len() > 50, "the corpus is the shipped rubrics: {} found", corpus.len());
    fuzz(
        "source",
        &|rng| {
            let base = pick(rng, &corpus).clone();
            let max = *pick(rng, &[1, 1, 2, 8]);
            edit(rng, base, max)
        },
        &check_source,
    );
}

// ---------------------------------------------------------------- bundle

/// Every node of `v` by its path of keys and indices.
fn node_paths(v: &Json, path: &mut Vec<Json>, out: &mut Vec<Vec<Json>>) {
    out.push(path.clone());
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                path.push(json!(k));
                node_paths(x, path, out);
                path.pop();
            }
        }
        Json::Array(xs) => {
            for (i, x) in xs.iter().enumerate() {
                path.push(json!(i));
                node_paths(x, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(v: &'a mut Json, path: &[Json]) -> Option<&'a mut Json> {
    path.iter().try_fold(v, |v, seg| match seg {
        Json::String(k) => v.get_mut(k.as_str()),
        Json::Number(i) => v.get_mut(i.as_u64()? as usize),
        _ => None,
    })
}

/// One structured mutation of the IR at a random node.
fn mutate_ir(rng: &mut fastrand::Rng, ir: &mut Json, paths: &[Vec<Json>], original: &Json) {
    let path = pick(rng, paths);
    let donor = {
        let from = pick(rng, paths);
        let mut o = original.clone();
        node_mut(&mut o, from).cloned().unwrap_or(Json::Null)
    };
    let Some(node) = node_mut(ir, path) else { return };
    let choice = rng.u8(..8);
    *node = match (node.clone(), choice) {
        (Json::Number(_), 0..=3) => pick(
            rng,
            &[json!(-1), json!(0), json!(1), json!(u32::MAX), json!(u64::MAX), json!(1e308), json!(-1e308), json!(0.5)],
        )
        .clone(),
        (Json::String(_), 0..=2) => pick(rng, &[json!(""), json!("x"), json!("é".repeat(3000)), json!("main")]).clone(),
        (Json::Array(mut xs), 0..=3) if !xs.is_empty() => {
            match rng.u8(..3) {
                0 => xs.truncate(rng.usize(..xs.len())),
                1 => {
                    let x = pick(rng, &xs).clone();
                    xs.push(x);
                }
                _ => rng.shuffle(&mut xs),
            }
            Json::Array(xs)
        }
        (Json::Object(mut m), 0..=2) if !m.is_empty() => {
            let key = m.keys().nth(rng.usize(..m.len())).cloned().unwrap_or_default();
            m.remove(&key);
            Json::Object(m)
        }
        (Json::Bool(b), _) => Json::Bool(!b),
        (_, 4..=6) => donor,
        (_, _) => Json::Null,
    };
}

#[test]
fn fuzz_bundle() {
    let cases = forged::cases();
    let paths: Vec<Vec<Vec<Json>>> = cases
        .iter()
        .map(|c| {
            let mut out = Vec::new();
            node_paths(&c.ir, &mut Vec::new(), &mut out);
            out
        })
        .collect();
    // The input is the case's index and the mutated IR, so that a kept crash replays alone.
    let generate = |rng: &mut fastrand::Rng| {
        let k = rng.usize(..cases.len());
        let mut ir = cases[k].ir.clone();
        let n = if rng.bool() { 1 } else { rng.usize(2..=4) };
        for _ in 0..n {
            mutate_ir(rng, &mut ir, &paths[k], &cases[k].ir);
        }
        let mut input = format!("{}\n", cases[k].name).into_bytes();
        input.extend(serde_json::to_vec(&ir).unwrap());
        input
    };
    let check = |input: &[u8]| -> String {
        let newline = input.iter().position(|&b| b == b'\n').unwrap_or(input.len());
        let name = String::from_utf8_lossy(&input[..newline]);
        let case = cases.iter().find(|c| c.name == name).unwrap_or(&cases[0]);
        let ir = input.get(newline + 1..).unwrap_or_default().to_vec();
        match forged::exercise(case, &forged::forge(case, ir)) {
            forged::Outcome::Rejected(code, _) => code.to_string(),
            forged::Outcome::Ran => "ran".into(),
            forged::Outcome::Panicked(why) => panic!("{why}"),
        }
    };
    fuzz("bundle", &generate, &check);
}

// ---------------------------------------------------------------- rows

const ROWS_RUBRIC: &str = r#"rubric fuzz.rows @ 1.0.0
input response: Text
input prompt: Conversation = []
input n: Number? = null
input tags: List[Text] = []
input meta: {source: Text, score: Number}? = null
input extra: Json? = null
gate nonempty: word_count(response) >= 1 else score 0 reason "empty"
criterion short "Short" check word_count(response) <= 50
criterion tagged "Tagged" check len(tags) > 0
criterion counted "Counted" check (n ?? 0) > 1
score = mean(all, unscored: skip)
"#;

/// One generated line of a rows file.
fn row_line(rng: &mut fastrand::Rng) -> Vec<u8> {
    let valid = [
        r#"{"response": "a short answer", "tags": ["x"], "n": 3}"#,
        r#"{"id": "r1", "response": "two words", "prompt": [{"role": "user", "content": "hi"}]}"#,
        r#"{"response": "x", "meta": {"source": "s", "score": 1e300}, "extra": {"a": [1, 2, {"b": null}]}}"#,
        r#"{"response": "", "n": -0.0}"#,
    ];
    let base = pick(rng, &valid).as_bytes().to_vec();
    match rng.u8(..10) {
        0..=2 => edit(rng, base, 3),
        3 => [b"{\"response\": \"".to_vec(), vec![0xff, 0xfe, 0xc3], b"\"}".to_vec()].concat(),
        4 => {
            let n = *pick(rng, &[100, 129, 5_000, 100_000]);
            format!("{{\"response\": \"d\", \"extra\": {}1{}}}", "[".repeat(n), "]".repeat(n)).into_bytes()
        }
        5 => format!("{{\"response\": \"{}\", \"n\": 1e999999}}", "w ".repeat(rng.usize(..20_000))).into_bytes(),
        6 => pick(
            rng,
            &[
                "",
                "   ",
                "\r",
                "\u{feff}{\"response\": \"bom\"}",
                "null",
                "[]",
                "\"text\"",
                "{\"response\": \"\\ud800\"}",
                "{\"response\": \"a\", \"response\": \"b\"}",
                "{\"response\": \"nul\u{0}\"}",
            ],
        )
        .as_bytes()
        .to_vec(),
        _ => base,
    }
}

#[test]
fn fuzz_rows() {
    let compiled = rubric::types::compile_source("rows.rubric", ROWS_RUBRIC);
    let program = compiled.program.clone().unwrap_or_else(|| panic!("{:?}", compiled.diagnostics));
    let sites = compiled.sites.clone();
    let dir = TempDir::new("fuzz-rows");
    let generate = |rng: &mut fastrand::Rng| {
        let mut bytes = Vec::new();
        for _ in 0..rng.usize(1..=24) {
            bytes.extend(row_line(rng));
            bytes.extend_from_slice(if rng.bool() { b"\n" } else { b"\r\n" });
        }
        if rng.u8(..4) == 0 {
            bytes.pop();
        }
        bytes
    };
    let check = |bytes: &[u8]| -> String {
        let name = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
        let (input, output) = (dir.path(&format!("in-{name}.jsonl")), dir.path(&format!("out-{name}.jsonl")));
        std::fs::write(&input, bytes).unwrap();
        let opts = rubric::runtime::RunOptions {
            input: &input,
            output: &output,
            verdicts: None,
            resume: false,
            progress: false,
            judges: None,
            compact: false,
            groups: None,
            numeric: None,
            provenance: None,
            policy: Default::default(),
            slow_rows: 0,
        };
        let summary = rubric::runtime::run_batch(&rubric::interp::Interpreter, &program, &sites, &opts)
            .unwrap_or_else(|e| panic!("the batch failed: {e}"));
        // Blank lines are those whose text is only whitespace; every other line is a record.
        let lines = bytes.split(|&b| b == b'\n').filter(|l| !std::str::from_utf8(l).is_ok_and(|t| t.trim().is_empty()));
        let want = lines.count();
        let records = std::fs::read_to_string(&output).unwrap();
        let got: Vec<Json> = records.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(got.len(), want, "one record per non-blank line ({summary:?})");
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r["row"], i, "records in input order: {r}");
        }
        if got.iter().any(|r| r.get("error").is_some()) { "some errors" } else { "all scored" }.into()
    };
    fuzz("rows", &generate, &check);
}

// ---------------------------------------------------------------- reply

const REPLY_RUBRIC: &str = r#"rubric fuzz.reply @ 1.0.0
input response: Text
judge binary { model "m" sees response }
judge quoting { model "m" sees response evidence must quote response }
judge levels { model "m" sees response returns level }
judge labels { model "m" sees response returns label }
judge values { model "m" sees response returns value }
judge extractor { model "m" sees response returns extract }
judge several { model "m" sees response per_call 3 }
judge odds { model "m" sees response scoring logprob }
criterion a "A" by binary
criterion q "Q" by quoting
criterion o "O" ordinal [1 "low", 2 "mid", 3 "high"] by levels
criterion l "L" nominal {warm: 1, curt: 0} by labels
criterion c "C" continuous by values
criterion x "X"
  extract dose: Number from response by extractor
  check dose > 1
criterion s1 "S1" by several
criterion s2 "S2" by several
criterion s3 "S3" by several
criterion p "P" by odds
score = mean(all, unscored: skip)
"#;

/// A reply that validates for `r`: each entry's answer, evidence quoted from what the judge
/// sees, a rationale.
fn valid_reply(r: &Rendered) -> Json {
    let entry = |e: &EntrySpec| -> Json {
        let mut m = serde_json::Map::new();
        for (name, role) in &e.fields {
            let v = match (role, &e.answer) {
                (Role::Answer, Answer::Verdict) => json!("met"),
                (Role::Answer, Answer::Bool) => json!(true),
                (Role::Answer, Answer::YesNo) => json!("yes"),
                (Role::Answer, Answer::Level(levels)) => json!(levels.first().copied().unwrap_or(1.0)),
                (Role::Answer, Answer::Label(labels)) => json!(labels.first().cloned().unwrap_or_default()),
                (Role::Answer, Answer::Unit) => json!(0.7),
                (Role::Answer, Answer::Extract(_)) => json!(5),
                (Role::Answer, Answer::Generate(_)) => json!([]),
                (Role::Answer, Answer::Preference) => json!("second"),
                (Role::Answer, Answer::Scores(n)) => json!(vec![0.5; *n]),
                (Role::Answer, Answer::Ranking(n)) => json!((1..=*n).rev().collect::<Vec<_>>()),
                (Role::Evidence, _) => json!("5 mg"),
                (Role::Rationale, _) => json!("because"),
                (Role::Other(_), _) => Json::Null,
            };
            m.insert(name.clone(), v);
        }
        Json::Object(m)
    };
    if r.multi {
        Json::Object(r.entries.iter().map(|e| (e.key.clone().unwrap_or_default(), entry(e))).collect())
    } else {
        r.entries.first().map(entry).unwrap_or(Json::Null)
    }
}

/// A JSON value of any type, biased towards the reply schema's names and answers.
fn any_json(rng: &mut fastrand::Rng, depth: usize) -> Json {
    let names = ["verdict", "met", "level", "label", "value", "answer", "evidence", "rationale", "c1", "c2", "c3"];
    match rng.u8(..if depth > 3 { 6 } else { 9 }) {
        0 => Json::Null,
        1 => json!(rng.bool()),
        2 => {
            pick(rng, &[json!(0), json!(1), json!(2), json!(3), json!(-1), json!(0.5), json!(1e308), json!(7)]).clone()
        }
        3 | 4 => pick(
            rng,
            &[
                json!("met"),
                json!("unmet"),
                json!("yes"),
                json!("no"),
                json!("warm"),
                json!("curt"),
                json!("short answer"),
                json!(""),
            ],
        )
        .clone(),
        5 => json!("é😀\u{0}\"\\"),
        6 | 7 => Json::Object(
            (0..rng.usize(..5)).map(|_| (pick(rng, &names).to_string(), any_json(rng, depth + 1))).collect(),
        ),
        _ => Json::Array((0..rng.usize(..4)).map(|_| any_json(rng, depth + 1)).collect()),
    }
}

#[test]
fn fuzz_reply() {
    let compiled = rubric::types::compile_source("reply.rubric", REPLY_RUBRIC);
    let program = compiled.program.clone().unwrap_or_else(|| panic!("{:?}", compiled.diagnostics));
    let seen = [SeenInput {
        index: 0,
        name: "response".into(),
        ty: rubric::ir::Type::Text,
        value: rubric::value::Value::Text("a short answer that says 5 mg".into()),
    }];
    // One rendered request per judge (the `several` judge asks about its three criteria at once).
    let mut rendered = Vec::new();
    for (j, judge) in program.judges.iter().enumerate() {
        let criteria: Vec<Criterion> = program
            .criteria
            .iter()
            .filter(|d| match &d.verifier {
                rubric::ir::Verifier::Judge { judge } | rubric::ir::Verifier::Extract { judge, .. } => {
                    *judge as usize == j
                }
                _ => false,
            })
            .filter_map(|d| Criterion::for_decl(&program, d, d.id.clone(), "criterion text".into()))
            .collect();
        assert!(!criteria.is_empty(), "judge `{}` grades something", judge.name);
        let refs: Vec<&Criterion> = criteria.iter().collect();
        rendered.push(render(judge, &refs, &seen, &Fences::Stable));
    }
    assert!(rendered.iter().any(|r| r.multi), "a request with several criteria");
    for r in &rendered {
        let reply = Reply {
            model: "m".into(),
            content: Some(valid_reply(r).to_string()),
            refusal: None,
            finish_reason: None,
            logprobs: None,
            usage: Usage::default(),
            batched: false,
        };
        let logprob = r.entries.iter().any(|e| e.logprob);
        assert!(logprob || interpret(r, &reply).1, "the seed reply validates: {}", valid_reply(r));
    }
    assert!(matches!(
        Criterion::for_decl(&program, &program.criteria[5], "x".into(), "X".into()).map(|c| c.ask),
        Some(Ask::Extract { .. })
    ));
    let valid: Vec<Json> = rendered.iter().map(valid_reply).collect();
    let generate = |rng: &mut fastrand::Rng| {
        let k = rng.usize(..rendered.len());
        // A valid reply with a few structured mutations, or a value of any shape.
        let value = if rng.u8(..4) == 0 {
            any_json(rng, 0)
        } else {
            let mut v = valid[k].clone();
            let mut paths = Vec::new();
            node_paths(&v, &mut Vec::new(), &mut paths);
            for _ in 0..rng.usize(..3) {
                mutate_ir(rng, &mut v, &paths, &valid[k]);
            }
            v
        };
        let mut content = serde_json::to_vec(&value).unwrap();
        if rng.u8(..3) == 0 {
            content = edit(rng, content, 3);
        }
        if rng.u8(..6) == 0 {
            content = [b"```json\n".to_vec(), content, b"\n```".to_vec()].concat();
        }
        let mut input = vec![k as u8, rng.u8(..4)];
        input.extend(content);
        input
    };
    let check = |input: &[u8]| -> String {
        let r = &rendered[usize::from(*input.first().unwrap_or(&0)) % rendered.len()];
        let variant = input.get(1).copied().unwrap_or(0);
        let content = String::from_utf8_lossy(input.get(2..).unwrap_or_default()).into_owned();
        let logprobs = (variant == 1).then(|| {
            serde_json::from_value(
                json!([{"token": "yes", "logprob": -0.1, "top_logprobs": [{"token": "no", "logprob": -2.3}]}]),
            )
            .unwrap()
        });
        let reply = Reply {
            model: "m".into(),
            content: (variant != 2).then_some(content),
            refusal: (variant == 3).then(|| "no".into()),
            finish_reason: None,
            logprobs,
            usage: Usage::default(),
            batched: false,
        };
        let (samples, ok) = interpret(r, &reply);
        assert_eq!(samples.len(), r.entries.len(), "one sample per entry");
        for s in &samples {
            assert!(s.is_object(), "a sample is an object: {s}");
        }
        if ok { "valid" } else { "unscored" }.into()
    };
    fuzz("reply", &generate, &check);
}

/// The harness itself: a check that panics is caught, counted and its input kept.
#[test]
fn fuzz_harness_catches_a_panic_and_keeps_its_input() {
    let mut t = Tally::default();
    let check = |input: &[u8]| -> String {
        assert!(input != b"boom", "a planted failure");
        "fine".into()
    };
    run_case("selftest", 0, b"calm", &check, &mut t);
    run_case("selftest", 1, b"boom", &check, &mut t);
    assert_eq!((t.cases, t.kinds.get("fine"), t.panics.len()), (2, Some(&1), 1), "{:?}", t.panics);
    assert!(t.panics[0].contains("a planted failure"), "{}", t.panics[0]);
    let kept = crate_root().join("target/fuzz-crashes/selftest/case-1");
    assert_eq!(std::fs::read(&kept).unwrap(), b"boom");
}
