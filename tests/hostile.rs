//! Hostile input at the edges (issue 25): every reproducer of the fault-injection run as a test.
//! Rows that are bytes and not text, sources nested past any sane depth or with lines past
//! column 65,535, a judge cache with flipped bytes, an endpoint that never answers, votes with
//! failed samples. Each ends in a diagnostic or an error record, never a panic, an abort or a
//! lost batch.

use serde_json::Value as Json;
use std::process::Command;

use crate::cli::{describe, rubric};
use crate::common::{json_lines, TempDir};

const SHORT: &str = r#"rubric hostile.rows @ 1.0.0
input response: Text
criterion short "Short" check word_count(response) <= 3
"#;

/// 1,201 rows, the one at index 1,000 with a byte that is not UTF-8 (the issue's case: 689 rows
/// were lost and `--resume` could never get past it).
fn rows_with_a_bad_byte() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..1201 {
        if i == 1000 {
            bytes.extend_from_slice(b"{\"id\": \"bad\", \"response\": \"caf\xe9\"}\n");
        } else {
            bytes.extend_from_slice(format!("{{\"id\": {i}, \"response\": \"row {i}\"}}\r\n").as_bytes());
        }
    }
    bytes
}

#[test]
fn a_line_that_is_not_utf8_is_its_own_error_record_and_resume_goes_past_it() {
    let dir = TempDir::new("hostile-utf8");
    let file = dir.file("r.rubric", SHORT);
    let input = dir.path("rows.jsonl");
    std::fs::write(&input, rows_with_a_bad_byte()).unwrap();
    let out = dir.path("out.jsonl");
    let run = |resume: bool| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &file, &"--input", &input, &"--output", &out, &"--no-progress"];
        if resume {
            args.push(&"--resume");
        }
        rubric(&args)
    };
    let o = run(false);
    // One row failed: exit 3, every record written.
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let full = std::fs::read(&out).unwrap();
    let rows = json_lines(&String::from_utf8(full.clone()).unwrap());
    assert_eq!(rows.len(), 1201, "one record per line, the bad one included");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["row"], i, "{r}");
        if i == 1000 {
            assert_eq!(r["error"]["code"], "rubric::row::not_utf8", "{r}");
            let message = r["error"]["message"].as_str().unwrap();
            assert!(message.contains("offset 30"), "the message says where: {message}");
            assert!(r.get("id").is_none(), "a line that is not text has no id to read: {r}");
        } else {
            assert_eq!(r["status"], "scored", "{r}");
            assert_eq!(r["id"], i, "{r}");
        }
    }
    // Interrupted before the bad row and just after it: resuming finishes the same file.
    let text = String::from_utf8(full.clone()).unwrap();
    for keep in [999, 1001] {
        let cut: usize = text.split_inclusive('\n').take(keep).map(str::len).sum();
        std::fs::write(&out, &full[..cut]).unwrap();
        let o = run(true);
        // The exit status counts the rows this run scored: the bad one, or none failed.
        assert_eq!(o.status.code(), Some(if keep < 1000 { 3 } else { 0 }), "{}", describe(&o));
        assert!(std::fs::read(&out).unwrap() == full, "resume after {keep} records differs from the full run");
    }
}

#[test]
fn a_line_that_is_not_utf8_on_standard_input_costs_only_itself() {
    let dir = TempDir::new("hostile-utf8-stdin");
    let file = dir.file("r.rubric", SHORT);
    let mut child = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .args(["run".as_ref(), file.as_os_str(), "--input".as_ref(), "-".as_ref(), "--output".as_ref(), "-".as_ref()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"{\"response\": \"a\"}\n\xff\xfe\n{\"response\": \"b c d e\"}\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let rows = json_lines(&String::from_utf8(o.stdout).unwrap());
    let codes: Vec<Json> = rows.iter().map(|r| r["error"]["code"].clone()).collect();
    assert_eq!(codes, [Json::Null, "rubric::row::not_utf8".into(), Json::Null], "{rows:?}");
    assert_eq!((rows[0]["score"].as_f64(), rows[2]["score"].as_f64()), (Some(1.0), Some(0.0)), "{rows:?}");
}

/// A source of `n` copies of `open`, then `middle`, then `n` copies of `close`.
fn nested(open: &str, middle: &str, close: &str, n: usize) -> String {
    format!("{}{middle}{}", open.repeat(n), close.repeat(n))
}

const HEADER: &str = "rubric hostile.deep @ 1.0.0\ninput response: Text\n";

/// The fault-injection run's deep sources (groups 7,000 deep, record types 10,000 deep, list
/// types 20,000 deep overflowed the checker's stack) and their relatives: each is a diagnostic
/// with a code, and the run ends.
#[test]
fn sources_nested_past_every_limit_are_diagnostics_not_crashes() {
    let dir = TempDir::new("hostile-deep");
    let groups: String = (0..7000).map(|i| format!("group g{i} weight 1 {{\n")).collect();
    let cases = [
        ("groups", format!("{HEADER}{groups}criterion c \"c\" check true\n{}score = tree(g0)\n", "}\n".repeat(7000))),
        ("record types", format!("{HEADER}input x: {}\n", nested("{a: ", "Number", "}", 10_000))),
        ("list types", format!("{HEADER}input x: {}\n", nested("List[", "Number", "]", 20_000))),
        ("optional types", format!("{HEADER}input x: {}\n", nested("List[", "Number", "]?", 5_000))),
        ("parentheses", format!("{HEADER}criterion c \"c\" check {}\n", nested("(", "true", ")", 20_000))),
        ("list literals", format!("{HEADER}let x = {}\n", nested("[", "1", "]", 20_000))),
        ("record literals", format!("{HEADER}let x = {}\n", nested("{a: ", "1", "}", 20_000))),
        ("calls", format!("{HEADER}let x = {}\n", nested("abs(", "1", ")", 20_000))),
        ("negations", format!("{HEADER}criterion c \"c\" check {}true\n", "not ".repeat(20_000))),
        ("an operator chain", format!("{HEADER}let x = {}1\n", "1 + ".repeat(20_000))),
        ("conditionals", format!("{HEADER}let x = {}1\n", "if true then 1 else ".repeat(20_000))),
        ("an unclosed bracket run", format!("{HEADER}let x = {}\ncriterion c \"c\" check true\n", "(".repeat(5_000))),
        ("deep lines at column 0", format!("{HEADER}{}", "group g weight 1 {\n".repeat(7000))),
    ];
    for (what, source) in cases {
        let file = dir.file(&format!("{}.rubric", what.replace(' ', "_")), &source);
        let o = rubric(&[&"check", &file]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", describe(&o));
        assert!(err.contains("rubric::parse::"), "{what}: a parse diagnostic with its code\n{err}");
        assert!(!err.contains("panicked") && !err.contains("overflow"), "{what}: {err}");
    }
}

/// At the limits (brackets 99 deep in a type and in groups), a rubric compiles, runs on every
/// engine and as a bundle, and the engines agree.
#[test]
fn a_rubric_at_the_nesting_limits_runs_everywhere() {
    let dir = TempDir::new("hostile-limit");
    let n = rubric::syntax::MAX_NESTING - 1;
    let groups: String = (0..n).map(|i| format!("{}group g{i} weight 1 {{\n", "  ".repeat(i))).collect();
    let closes: String = (0..n).rev().map(|i| format!("{}}}\n", "  ".repeat(i))).collect();
    let source = format!(
        "{HEADER}input x: {} = null\n{groups}{}criterion c \"c\" check response == \"a\"\n{closes}score = tree(g0)\n",
        nested("{a: ", "Number", "}?", n),
        "  ".repeat(n),
    );
    let file = dir.file("limit.rubric", &source);
    let input = dir.file("rows.jsonl", "{\"response\": \"a\"}\n{\"response\": \"b\", \"x\": {\"a\": {\"a\": null}}}\n");
    let scores = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let out = dir.path("out.jsonl");
        let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = args.to_vec();
        all.extend([&"--input" as &dyn AsRef<std::ffi::OsStr>, &input, &"--output", &out, &"--no-progress"]);
        let o = rubric(&all);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        json_lines(&std::fs::read_to_string(&out).unwrap()).iter().map(|r| r["score"].clone()).collect::<Vec<_>>()
    };
    let want = vec![Json::from(1), Json::from(0)];
    for engine in ["interp", "wasm", "jit"] {
        assert_eq!(scores(&[&"run", &file, &"--engine", &engine]), want, "{engine}");
    }
    let bundle = dir.path("limit.rbk");
    let o = rubric(&[&"build", &file, &"-o", &bundle]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(scores(&[&"run", &bundle]), want, "the bundle");
}

/// 20,000 criteria with one name: the duplicates were found in linear time but rendering each
/// one scanned the whole file (45 s). Now each renders from the lines around it, a person sees
/// the first hundred and a count, and the JSON form lists them all.
#[test]
fn twenty_thousand_duplicates_render_the_first_hundred_and_count_the_rest() {
    let dir = TempDir::new("hostile-dups");
    let source = format!("{HEADER}{}", "criterion c \"c\" check true\n".repeat(20_000));
    let file = dir.file("dups.rubric", &source);
    let o = rubric(&[&"check", &file]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert_eq!(err.matches("rubric::resolve::duplicate").count(), 100, "{}", &err[..2000]);
    assert!(err.contains("… and 19899 more not shown"), "{}", &err[err.len() - 500..]);
    assert!(err.contains("19999 errors, 0 warnings"), "{}", &err[err.len() - 500..]);
    // The last one rendered is placed right: the duplicate on line 102.
    assert!(err.contains("dups.rubric:102:11]"), "{}", &err[err.len() - 2000..]);
    let o = rubric(&[&"check", &"--error-format", &"json", &file]);
    let lines = json_lines(&String::from_utf8(o.stdout).unwrap());
    assert_eq!(lines.len(), 19_999);
    assert_eq!(
        (lines[19_998]["labels"][0]["line"].as_u64(), lines[19_998]["labels"][1]["line"].as_u64()),
        (Some(20_002), Some(3))
    );
}

/// An error past column 65,535 panicked inside miette ("Formatting argument out of range");
/// the line is now shown cut around the label, and the header still gives the true column.
#[test]
fn an_error_past_column_65535_renders_its_line_cut_around_the_label() {
    let dir = TempDir::new("hostile-long-line");
    for filler in ["x", "é"] {
        let source = format!("{HEADER}criterion c \"{}\" check wordcount(response) > 1\n", filler.repeat(70_000));
        let file = dir.file("long.rubric", &source);
        let o = rubric(&[&"check", &file]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
        assert!(err.contains("unknown function `wordcount`"), "{err}");
        // miette counts columns in bytes.
        let column = 13 + 70_000 * filler.len() + 8 + 1;
        assert!(err.contains(&format!("long.rubric:3:{column}]")), "{err}");
        let shown = err.lines().find(|l| l.contains("check wordcount(response)")).unwrap();
        assert!(shown.contains('…') && shown.chars().count() < 200, "{shown}");
        let json = rubric(&[&"check", &"--error-format", &"json", &file]);
        let d = &json_lines(&String::from_utf8(json.stdout).unwrap())[0];
        assert_eq!(d["labels"][0]["column"].as_u64(), Some(13 + 70_000 + 8 + 1), "JSON counts characters: {d}");
    }
}

/// Replace the first occurrence of `from` in the file at `path` by `to` (same length).
fn flip(path: &std::path::Path, from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.windows(from.len()).position(|w| w == from).expect("the bytes to flip are in the file");
    bytes[at..at + to.len()].copy_from_slice(to);
    std::fs::write(path, bytes).unwrap();
}

/// The fault-injection run's damaged cache: four flipped bytes turned a criterion met→unmet
/// and served it with no HTTP call. Now every entry carries a digest: the flipped one does not
/// verify, is asked again (and counted), and is rewritten; a file whose pages are damaged is set
/// aside when a run opens it, and the run starts a new cache. `rubric cache verify` says which.
#[test]
fn a_damaged_judge_cache_is_asked_again_never_believed() {
    let dir = TempDir::new("hostile-cache");
    let ex = crate::common::crate_root().join("examples/healthbench");
    let (_mock, _base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let cache = dir.path("cache.sqlite");
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let run = || {
        let out = dir.path("out.jsonl");
        let o = rubric(&[
            &"run",
            &main,
            &"--input",
            &input,
            &"--output",
            &out,
            &"--judges",
            &judges,
            &"--cache",
            &cache,
            &"--no-progress",
            &"--allow-errors",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        (String::from_utf8_lossy(&o.stderr).into_owned(), std::fs::read_to_string(&out).unwrap())
    };
    let verify = || rubric(&[&"cache", &"verify", &cache]);
    let (first, records) = run();
    assert!(first.contains("9 calls over HTTP"), "{first}");
    let o = verify();
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("9 entries, 9 verified"), "{}", describe(&o));
    // The issue's case: a verdict flipped inside a stored reply, still valid JSON.
    flip(&cache, br#"true, \"rationale"#, br#"false,\"rationale"#);
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 that do not verify"), "{}", describe(&o));
    let (second, again) = run();
    assert_eq!(again, records, "the flipped verdict was not served");
    assert!(second.contains("1 calls over HTTP") && second.contains("8 answered from the cache"), "{second}");
    assert!(second.contains("1 entries did not verify and were asked again"), "{second}");
    let (third, _) = run();
    assert!(third.contains("0 calls over HTTP") && third.contains("9 answered from the cache"), "rewritten: {third}");
    assert_eq!(verify().status.code(), Some(0));
    // Damaged pages: the file fails SQLite's check, is set aside, and a new cache starts.
    let mut bytes = std::fs::read(&cache).unwrap();
    assert!(bytes.len() >= 8192, "a cache of more than one page");
    bytes[4096..8192].fill(0xab);
    std::fs::write(&cache, bytes).unwrap();
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("integrity: FAILED"), "{}", describe(&o));
    let (fourth, again) = run();
    assert_eq!(again, records);
    assert!(fourth.contains("failed its integrity check and was set aside as"), "{fourth}");
    assert!(fourth.contains("9 calls over HTTP"), "{fourth}");
    let aside: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("cache.sqlite.damaged-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(verify().status.code(), Some(0), "the new cache is sound");
}

/// An endpoint that accepts every connection and never answers: how many it was sent.
fn hanging_endpoint() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    (base, count)
}

/// The reasons of every judged criterion of `records` (gates and checks aside).
fn judged_reasons(records: &str) -> Vec<String> {
    json_lines(records)
        .iter()
        .flat_map(|r| r["criteria"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["source"].as_str().is_some_and(|s| s.starts_with("judge:")))
        .map(|c| c["reason"].as_str().unwrap_or("(none)").split(':').next().unwrap_or("").to_string())
        .collect()
}

/// The fault-injection run's hanging judge: the 5-row HealthBench example against an endpoint
/// that never answers took 243 s (calls ÷ concurrency × attempts × timeout). The circuit
/// breaker now considers the endpoint down after 5 failed attempts in a row, and the requests
/// still waiting end `endpoint_down` unsent; a run deadline stops judging when it passes.
#[test]
fn a_hanging_judge_trips_the_breaker_and_a_deadline_ends_the_wait() {
    let dir = TempDir::new("hostile-hang");
    let ex = crate::common::crate_root().join("examples/healthbench");
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let run = |breaker: u32, extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let (base, sent) = hanging_endpoint();
        let judges = dir.file(
            "judges.toml",
            &format!(
                "default = \"hang\"\n[endpoints.hang]\nbase_url = \"{base}\"\ntimeout_s = 0.5\nattempts = 4\n\
                 backoff_ms = 20\nconcurrency = 2\nbreaker_failures = {breaker}\n"
            ),
        );
        let out = dir.path("out.jsonl");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &main, &"--input", &input, &"--output", &out, &"--judges", &judges, &"--no-cache"];
        args.push(&"--no-progress");
        args.extend_from_slice(extra);
        let o = rubric(&args);
        assert_eq!(o.status.code(), Some(3), "every judged row failed: {}", describe(&o));
        let records = std::fs::read_to_string(&out).unwrap();
        assert_eq!(json_lines(&records).len(), 5, "every row has its record");
        (
            String::from_utf8_lossy(&o.stderr).into_owned(),
            judged_reasons(&records),
            sent.load(std::sync::atomic::Ordering::SeqCst),
        )
    };
    // The default breaker (5 failed attempts in a row): at most one more attempt was in flight.
    let (err, reasons, sent) = run(5, &[]);
    assert_eq!(reasons.len(), 9, "{reasons:?}");
    assert!(reasons.iter().all(|r| r == "judge_timeout" || r == "endpoint_down"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "endpoint_down"), "{reasons:?}");
    assert!(sent <= 6, "{sent} attempts reached the endpoint, where 9 requests × 4 attempts would be 36");
    assert!(err.contains("endpoint `hang` was considered down 1 time (its circuit breaker tripped)"), "{err}");
    // The breaker off, a 1.5 s deadline: what was not answered by then is `judge_deadline`.
    let (_, reasons, sent) = run(0, &[&"--deadline", &"1.5s"]);
    assert_eq!(reasons.len(), 9, "{reasons:?}");
    assert!(reasons.iter().all(|r| r == "judge_timeout" || r == "judge_deadline"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "judge_deadline"), "{reasons:?}");
    assert!(sent < 36, "{sent} attempts");
    let o = rubric(&[&"run", &main, &"--input", &input, &"--deadline", &"soon"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`soon` is not a duration"), "{}", describe(&o));
}

const VOTES: &str = r#"rubric hostile.votes @ 1.0.0
input response: Text

judge grader {
  model "m"
  samples 3
  sees response
}

judge strict {
  model "m"
  samples 3
  min_samples 2
  sees response
}

criterion a "Answers the question" by grader
criterion b "Answers it well" by strict
score = weighted_mean(all, unscored: skip)
"#;

/// The criteria `a` and `b` of the first record in `records`.
fn votes_of(records: &str) -> (Json, Json) {
    let r = &json_lines(records)[0];
    let find = |id: &str| r["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).cloned().unwrap();
    (find("a"), find("b"))
}

/// The fault-injection run's shrunken votes: with 2 of 3 samples failing, every criterion was
/// decided by the one left and looked like a full vote. A record now says how many samples
/// voted, and a judge with `min_samples 2` leaves such a criterion `too_few_samples`: over HTTP
/// (the mock judge failing samples 1 and 2) and from recorded samples on every engine.
#[test]
fn votes_say_how_many_voted_and_min_samples_holds_them_to_it() {
    let dir = TempDir::new("hostile-votes");
    let file = dir.file("votes.rubric", VOTES);
    let input = dir.file("rows.jsonl", "{\"response\": \"Paris is the capital of France.\"}\n");
    let rules = dir.file(
        "rules.toml",
        "[[rule]]\nverdict = \"met\"\n\n[[fault]]\nkind = \"status\"\nstatus = 400\nsamples = [1, 2]\n",
    );
    let (_mock, _base, judges) = crate::common::mock_judge(&dir, &rules, "attempts = 1\n");
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &file,
        &"--input",
        &input,
        &"--output",
        &out,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
        &"--allow-errors",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let (a, b) = votes_of(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(a["status"], "met", "{a}");
    assert_eq!(a["votes"], serde_json::json!({"samples": 3, "voted": 1, "failed": 2, "agreed": 1}), "{a}");
    assert_eq!(b["status"], "unscored", "{b}");
    assert_eq!(b["votes"], serde_json::json!({"samples": 3, "voted": 1, "failed": 2, "agreed": 0}), "{b}");
    let reason = b["reason"].as_str().unwrap();
    assert!(reason.starts_with("too_few_samples: 1 of 3 samples voted, judge `strict` needs 2"), "{reason}");
    assert!(reason.contains("judge_http_400"), "the others' failure is named: {reason}");
    // The same from recorded samples, on every engine.
    let failed = serde_json::json!({"samples": ["met", {"unscored": "judge_timeout"}, {"unscored": "judge_timeout"}]});
    let verdicts = dir.file(
        "verdicts.jsonl",
        &format!("{}\n", serde_json::json!({"row": 0, "verdicts": {"a": failed, "b": failed}})),
    );
    let mut seen = Vec::new();
    for engine in ["interp", "wasm", "jit"] {
        let o = rubric(&[
            &"run",
            &file,
            &"--input",
            &input,
            &"--output",
            &out,
            &"--verdicts",
            &verdicts,
            &"--engine",
            &engine,
            &"--no-progress",
            &"--allow-errors",
        ]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
        let (a, b) = votes_of(&std::fs::read_to_string(&out).unwrap());
        assert_eq!((&a["status"], &a["votes"]["voted"]), (&"met".into(), &1.into()), "{engine}: {a}");
        assert!(b["reason"].as_str().unwrap().starts_with("too_few_samples: 1 of 3"), "{engine}: {b}");
        seen.push((a, b));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "the engines agree: {seen:?}");
    // `min_samples` above `samples` is a checker error; `fmt` keeps the setting.
    let bad = dir.file("bad.rubric", &VOTES.replace("min_samples 2", "min_samples 4"));
    let o = rubric(&[&"check", &bad]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("`min_samples` is 4, more than the judge's 3 samples"),
        "{}",
        describe(&o)
    );
    let o = rubric(&[&"fmt", &"--stdout", &file]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("  min_samples 2\n"), "{}", describe(&o));
}

/// `rubric explain` counts rows as `rubric run` does: a line that is not UTF-8 is a row (it
/// says so when asked for it), and the rows after it are explained.
#[test]
fn explain_reads_past_a_line_that_is_not_utf8() {
    let dir = TempDir::new("hostile-explain");
    let file = dir.file("r.rubric", SHORT);
    let input = dir.path("rows.jsonl");
    std::fs::write(&input, b"{\"response\": \"a\"}\n\xff\n\n{\"response\": \"b c d e\"}\n").unwrap();
    let o = rubric(&[&"explain", &file, &"--input", &input, &"--row", &"2"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("score"), "{}", describe(&o));
    let o = rubric(&[&"explain", &file, &"--input", &input, &"--row", &"1"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("row 1 is not valid UTF-8"), "{}", describe(&o));
}
