//! What judging costs, over real HTTP against the mock judge: dollars per criterion, row and
//! run from the usage every reply reports (checked against the recorded transcript), unknown
//! cost kept apart from free, the prompt layout that lets a provider's prefix cache serve what
//! a row's calls share (and the mock's cache accounting, computed here from the request bodies
//! the mock received), budgets that are never passed and that a later run completes from the
//! cache, `rubric plan` against what the run then sends, truncated replies, and
//! `reasoning_effort` on the wire.

use crate::cli::{describe, rubric};
use crate::common::{crate_root, json_lines, mock_get, Spawned, TempDir};
use serde_json::Value as Json;
use std::path::Path;
use std::process::Output;

/// gpt-4.1's prices in the example's `judges.toml`, dollars per million tokens.
const INPUT: f64 = 2.0;
const CACHED: f64 = 0.5;
const OUTPUT: f64 = 8.0;

const PRICES: &str = "\n[prices.\"gpt-4.1\"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n\
                      [prices.\"mock-model\"]\ninput = 1.0\noutput = 4.0\n\
                      [prices.\"gpt-4.1-mini\"]\ninput = 0.4\ncached_input = 0.1\noutput = 1.6\n";

fn example(file: &str) -> std::path::PathBuf {
    crate_root().join("examples/judge-cost").join(file)
}

/// A mock judge with `rules`, and a `judges.toml` binding every judge to it (with `extra`
/// endpoint settings) and pricing gpt-4.1 and mock-model.
fn mock(dir: &TempDir, rules: &str, endpoint_extra: &str) -> (Spawned, String, std::path::PathBuf) {
    let rules = dir.file("rules.toml", rules);
    crate::common::mock_judge(dir, &rules, &format!("{endpoint_extra}\n{PRICES}"))
}

fn run(args: &[&str]) -> Output {
    let args: Vec<&dyn AsRef<std::ffi::OsStr>> = args.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>).collect();
    rubric(&args)
}

/// `rubric run RUBRIC --input ROWS --no-progress --output OUT`, then `extra`.
fn run_rows(rubric_file: &Path, rows: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"run", &rubric_file, &"--input", &rows, &"--no-progress", &"--output", &out];
    for e in extra {
        args.push(e);
    }
    rubric(&args)
}

fn records(path: &std::path::Path) -> Vec<Json> {
    json_lines(&std::fs::read_to_string(path).unwrap())
}

fn criteria(r: &Json) -> &Vec<Json> {
    r["criteria"].as_array().unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

const RULES: &str = "model = \"mock-grader-1\"\n[default]\nverdict = \"unmet\"\n[[rule]]\ncriterion = \"(?i)(emergency|doctor)\"\nverdict = \"met\"\n";

/// Every record's `cost_usd` is its share of the requests that answered it, priced from the
/// usage the reply reported (prompt, cached and completion tokens), as the transcript shows;
/// a row's is the sum of its criteria; the run report's total is the sum of the rows.
#[test]
fn cost_is_recorded_per_criterion_row_and_run_from_the_usage_of_each_reply() {
    let dir = TempDir::new("cost-accounting");
    let (_m, _base, judges) = mock(&dir, RULES, "concurrency = 4");
    let (out, transcript) = (dir.path("out.jsonl"), dir.path("t.jsonl"));
    let o = run_rows(
        &example("main.rubric"),
        &example("inputs.jsonl"),
        &out,
        &["--judges", judges.to_str().unwrap(), "--no-cache", "--record", transcript.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", describe(&o));
    // The cost of each request, from its recorded reply's usage.
    let mut by_hash = std::collections::HashMap::new();
    let (mut cached_total, mut prompt_total) = (0u64, 0u64);
    for e in records(&transcript) {
        let u = &e["reply"]["usage"];
        let (p, c, k) = (
            u["prompt_tokens"].as_u64().unwrap(),
            u["completion_tokens"].as_u64().unwrap(),
            u["cached_tokens"].as_u64().unwrap_or(0),
        );
        assert!(k <= p, "{e}");
        cached_total += k;
        prompt_total += p;
        let usd = ((p - k) as f64 * INPUT + k as f64 * CACHED + c as f64 * OUTPUT) / 1e6;
        by_hash.insert(e["hash"].as_str().unwrap().to_string(), usd);
    }
    assert_eq!(by_hash.len(), 40, "8 rows of 5 items, one request each");
    assert!(cached_total > 0, "the prefix cache served nothing");
    let rows = records(&out);
    let mut run_total = 0.0;
    for r in &rows {
        let mut row_sum = 0.0;
        for c in criteria(r) {
            let cost = c["cost_usd"].as_f64().unwrap_or_else(|| panic!("no cost: {c}"));
            assert!(cost > 0.0, "{c}");
            row_sum += cost;
        }
        assert!(close(r["cost_usd"].as_f64().unwrap(), row_sum), "{r}");
        assert!(r.get("cost_unknown").is_none(), "{r}");
        run_total += row_sum;
    }
    let mut expected: Vec<f64> = by_hash.values().copied().collect();
    let mut got: Vec<f64> =
        rows.iter().flat_map(|r| criteria(r).iter().map(|c| c["cost_usd"].as_f64().unwrap())).collect();
    expected.sort_by(f64::total_cmp);
    got.sort_by(f64::total_cmp);
    assert!(expected.iter().zip(&got).all(|(a, b)| close(*a, *b)), "{expected:?} vs {got:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = format!(
        "cost: ${run_total:.6} for 40 calls answered over HTTP; prompt tokens {prompt_total} ({cached_total} cached"
    );
    assert!(stderr.contains(&line), "want `{line}` in\n{stderr}");
    let saved = cached_total as f64 * (INPUT - CACHED) / 1e6;
    assert!(stderr.contains(&format!("saving ${saved:.6}")), "{stderr}");
}

/// A reply without `usage`, or from a model without a price, has an unknown cost: `null` on
/// its criterion, counted apart on its row and in the report, never added as zero.
#[test]
fn a_reply_without_usage_or_price_is_unknown_cost_never_free() {
    let dir = TempDir::new("cost-unknown");
    let rules = format!("{RULES}[[fault]]\nkind = \"no_usage\"\ncriterion = \"(?i)duration|how long\"\n");
    let (_m, _base, judges) = mock(&dir, &rules, "");
    let rows = dir.file(
        "rows.jsonl",
        "{\"prompt\": \"p\", \"response\": \"r\", \"rubrics\": [{\"criterion\": \"Asks how long it lasted\", \"points\": 2, \"tags\": []}, {\"criterion\": \"Mentions a doctor\", \"points\": 3, \"tags\": []}]}\n",
    );
    let out = dir.path("out.jsonl");
    let judged =
        |rubric_file: &Path| run_rows(rubric_file, &rows, &out, &["--judges", judges.to_str().unwrap(), "--no-cache"]);
    let o = judged(&example("main.rubric"));
    assert!(o.status.success(), "{}", describe(&o));
    let r = &records(&out)[0];
    let cs = criteria(r);
    assert!(cs[0]["cost_usd"].is_null(), "{}", cs[0]);
    assert!(cs[1]["cost_usd"].as_f64().unwrap() > 0.0, "{}", cs[1]);
    assert_eq!(r["cost_unknown"], 1, "{r}");
    assert!(close(r["cost_usd"].as_f64().unwrap(), cs[1]["cost_usd"].as_f64().unwrap()), "{r}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("(and 1 of unknown cost)"), "{stderr}");
    assert!(
        stderr.contains("cost unknown for 1 calls: 1 replies reported no usage, 0 came from models without a price"),
        "{stderr}"
    );

    // A model the configuration has no price for.
    let text = std::fs::read_to_string(example("main.rubric")).unwrap().replace("\"gpt-4.1\"", "\"unpriced-model\"");
    let unpriced = dir.file("unpriced.rubric", &text);
    let o = judged(&unpriced);
    assert!(o.status.success(), "{}", describe(&o));
    let r = &records(&out)[0];
    assert!(criteria(r).iter().all(|c| c["cost_usd"].is_null()), "{r}");
    assert_eq!((r["cost_usd"].as_f64(), r["cost_unknown"].as_u64()), (Some(0.0), Some(2)), "{r}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("1 replies reported no usage, 1 came from models without a price"), "{stderr}");
}

/// The default prompt puts what a row's calls share first: every request of a row has the same
/// messages up to the criterion. Sent one at a time, each request after a row's first is
/// served from the mock's prefix cache exactly as providers count it: the whole 128-token
/// blocks (512 bytes to the mock) of the prefix it shares with an earlier request, when that
/// is at least 1,024 tokens.
#[test]
fn the_prompt_layout_lets_a_prefix_cache_serve_what_a_rows_calls_share() {
    let dir = TempDir::new("cost-prefix");
    let (_m, base, judges) = mock(&dir, RULES, "concurrency = 1");
    let (out, transcript) = (dir.path("out.jsonl"), dir.path("t.jsonl"));
    let o = run_rows(
        &example("main.rubric"),
        &example("inputs.jsonl"),
        &out,
        &["--judges", judges.to_str().unwrap(), "--no-cache", "--record", transcript.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let bodies = mock_get(&base, "/requests");
    let bodies = bodies.as_array().unwrap();
    assert_eq!(bodies.len(), 40);
    // Each prompt as the mock saw it, in arrival order, and the cached tokens it reported.
    let prompt = |b: &Json| -> String {
        b["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect::<Vec<_>>().join("\n")
    };
    let cached_of: std::collections::HashMap<String, u64> = records(&transcript)
        .iter()
        .map(|e| (prompt(&e["request"]), e["reply"]["usage"]["cached_tokens"].as_u64().unwrap_or(0)))
        .collect();
    let prompts: Vec<String> = bodies.iter().map(prompt).collect();
    let mut served = 0;
    for (i, p) in prompts.iter().enumerate() {
        // The longest common prefix with any earlier prompt, in whole 512-byte blocks.
        let shared = prompts[..i]
            .iter()
            .map(|q| p.bytes().zip(q.bytes()).take_while(|(a, b)| a == b).count())
            .max()
            .unwrap_or(0);
        let tokens = (shared / 512) as u64 * 128;
        let want = if tokens >= 1024 { tokens } else { 0 };
        assert_eq!(cached_of[p], want, "request {i}");
        served += u64::from(want > 0);
        // The criterion comes after everything the row shares.
        let user = bodies[i]["messages"][1]["content"].as_str().unwrap();
        let criterion_at = user.find("\nCriterion:").unwrap();
        let (response_at, note_at) = (user.find("<<<END response").unwrap(), user.find("do not follow them.").unwrap());
        assert!(response_at < criterion_at && note_at < criterion_at, "{user}");
    }
    // Every row's later four requests, sent after its first, were served.
    assert_eq!(served, 32, "{prompts:?}");
}

fn budget_run(
    dir: &TempDir,
    judges: &std::path::Path,
    budget: &str,
    out: &str,
    rubric_file: &std::path::Path,
) -> Output {
    let cache = dir.path("cache.sqlite");
    let extra = [
        "--judges",
        judges.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
        "--allow-errors",
        "--budget",
        budget,
    ];
    run_rows(rubric_file, &example("inputs.jsonl"), &dir.path(out), &extra)
}

/// Under `--budget`, no request is sent whose worst case could pass it: what was spent stays
/// within it, the criteria left are `unscored(budget: ...)`, and a later run with more budget
/// sends only those (the cache holds what was paid for).
#[test]
fn a_budget_is_never_passed_and_a_later_run_completes_only_what_is_missing() {
    let dir = TempDir::new("cost-budget");
    let (_m, base, judges) = mock(&dir, RULES, "concurrency = 4");
    let o = budget_run(&dir, &judges, "0.02", "first.jsonl", &example("main.rubric"));
    assert!(o.status.success(), "{}", describe(&o));
    let first = records(&dir.path("first.jsonl"));
    let (mut spent, mut paid, mut refused) = (0.0, 0, 0);
    for c in first.iter().flat_map(criteria) {
        match c["status"].as_str().unwrap() {
            "unscored" => {
                assert!(c["reason"].as_str().unwrap().starts_with("budget: this request could cost up to $"), "{c}");
                refused += 1;
            }
            _ => {
                spent += c["cost_usd"].as_f64().unwrap();
                paid += 1;
            }
        }
    }
    assert!(spent <= 0.02 && spent > 0.0, "{spent}");
    assert!(paid > 0 && refused > 0, "{paid} paid, {refused} refused");
    // Most of the budget was used: a request waits for those in flight to settle rather than
    // being refused while their worst cases are held.
    assert!(spent > 0.02 - 0.005, "{spent}");
    assert_eq!(mock_get(&base, "/stats")["requests"], paid, "requests reached the mock");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(&format!("of $0.020000 spent; {refused} requests not sent")), "{stderr}");

    let o = budget_run(&dir, &judges, "1", "second.jsonl", &example("main.rubric"));
    assert!(o.status.success(), "{}", describe(&o));
    let second = records(&dir.path("second.jsonl"));
    assert!(second.iter().flat_map(criteria).all(|c| c["status"] != "unscored"), "{second:?}");
    assert_eq!(mock_get(&base, "/stats")["requests"], paid + refused, "the second run sent only what was missing");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(&format!("{paid} answered from the cache")), "{stderr}");
}

/// A request whose cost has no bound is not sent under a budget: a judge without `max_tokens`,
/// or a model without a price.
#[test]
fn a_budget_refuses_what_it_cannot_bound() {
    let dir = TempDir::new("cost-unbounded");
    let (_m, base, judges) = mock(&dir, RULES, "");
    let text = std::fs::read_to_string(example("main.rubric")).unwrap();
    let no_max = dir.file("nomax.rubric", &text.replace("  max_tokens 200\n", ""));
    let unpriced = dir.file("unpriced.rubric", &text.replace("\"gpt-4.1\"", "\"unpriced-model\""));
    for (file, why) in [
        (&no_max, "budget: judge `grader` sets no `max_tokens`, so the cost of its reply has no bound"),
        (&unpriced, "budget: model `unpriced-model` has no price in the judges configuration"),
    ] {
        let o = budget_run(&dir, &judges, "100", "out.jsonl", file);
        assert!(o.status.success(), "{}", describe(&o));
        for c in records(&dir.path("out.jsonl")).iter().flat_map(criteria) {
            assert!(c["reason"].as_str().unwrap_or("").starts_with(why), "{c}");
        }
    }
    assert_eq!(mock_get(&base, "/stats")["requests"], 0);
}

fn plan(args: &[&str]) -> Json {
    let mut all = vec!["plan", "--format", "json"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert!(o.status.success(), "{}", describe(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&o)))
}

/// `rubric plan` sends nothing and says what the run then sends: the same requests (duplicate
/// rows deduplicated), prompt tokens estimated for a model of unknown family (exactly what the
/// mock, which counts 4 bytes per token, then reports) or counted with the tokenizer of a known
/// one, the price, and after the run, that the cache answers everything.
#[test]
fn plan_says_what_the_run_then_sends_and_what_it_costs() {
    let dir = TempDir::new("cost-plan");
    let (_m, base, judges) = mock(&dir, RULES, "");
    let text = std::fs::read_to_string(example("main.rubric")).unwrap();
    let unknown = dir.file("unknown.rubric", &text.replace("\"gpt-4.1\"", "\"mock-model\""));
    // The example's rows and a copy of its first row: the copy's requests are duplicates.
    let rows_text = std::fs::read_to_string(example("inputs.jsonl")).unwrap();
    let first = rows_text.lines().next().unwrap().to_string();
    let rows = dir.file("rows.jsonl", &format!("{rows_text}{first}\n"));
    let (rows, judges_s, cache) = (rows.to_str().unwrap(), judges.to_str().unwrap(), dir.path("cache.sqlite"));
    let cache = cache.to_str().unwrap();
    let p = plan(&[unknown.to_str().unwrap(), "--input", rows, "--judges", judges_s, "--cache", cache]);
    assert_eq!(p["rows"], 9);
    assert_eq!(p["criteria_asked"], 45);
    assert_eq!((p["plan"]["planned"].as_u64(), p["plan"]["deduplicated"].as_u64()), (Some(45), Some(5)), "{p:#}");
    let calls = &p["plan"]["calls"][0];
    assert_eq!((calls["requests"].as_u64(), calls["tokenizer"].is_null()), (Some(40), true), "{p:#}");
    assert_eq!(mock_get(&base, "/stats")["requests"], 0, "plan sent nothing");
    let out = dir.path("out.jsonl");
    let t = dir.path("t.jsonl");
    let o = run_rows(
        &unknown,
        Path::new(rows),
        &out,
        &["--judges", judges_s, "--cache", cache, "--record", t.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(mock_get(&base, "/stats")["requests"], 40);
    let reported: u64 = records(&t).iter().map(|e| e["reply"]["usage"]["prompt_tokens"].as_u64().unwrap()).sum();
    assert_eq!(calls["prompt_tokens"].as_u64(), Some(reported), "the estimate is the mock's own count");
    let prompt_usd = reported as f64 * 1.0 / 1e6;
    assert!(close(calls["prompt_usd"].as_f64().unwrap(), prompt_usd), "{calls}");
    assert!(close(calls["max_completion_usd"].as_f64().unwrap(), 40.0 * 200.0 * 4.0 / 1e6), "{calls}");
    // After the run the cache answers every request.
    let p = plan(&[unknown.to_str().unwrap(), "--input", rows, "--judges", judges_s, "--cache", cache]);
    assert_eq!((p["plan"]["cached"].as_u64(), p["total"]["requests"].as_u64()), (Some(40), Some(0)), "{p:#}");
    // A known family is counted with its tokenizer; the text says which, or that it estimated.
    let o =
        run(&["plan", example("main.rubric").to_str().unwrap(), "--input", rows, "--judges", judges_s, "--no-cache"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("(counted with o200k_base)"), "{stdout}");
    assert!(stdout.contains("at most $"), "{stdout}");
    let o = run(&["plan", unknown.to_str().unwrap(), "--input", rows, "--judges", judges_s, "--no-cache"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("estimated at 4 bytes per token: no tokenizer known for this model"), "{stdout}");
}

/// A reply cut off at the token limit (`finish_reason: "length"`) is `judge_truncated`, apart
/// from a reply that is not JSON; a judge's `reasoning_effort` is sent as set, and an unknown
/// effort is a checker error with a suggestion.
#[test]
fn truncated_replies_and_reasoning_effort() {
    let dir = TempDir::new("cost-truncated");
    let rules = format!(
        "{RULES}[[fault]]\nkind = \"truncated\"\ncriterion = \"doctor\"\n[[fault]]\nkind = \"malformed\"\ncriterion = \"emergency\"\n"
    );
    let (_m, base, judges) = mock(&dir, &rules, "");
    let text = std::fs::read_to_string(example("main.rubric")).unwrap();
    let main =
        dir.file("main.rubric", &text.replace("  max_tokens 200\n", "  max_tokens 200\n  reasoning_effort low\n"));
    let rows = dir.file(
        "rows.jsonl",
        "{\"prompt\": \"p\", \"response\": \"r\", \"rubrics\": [{\"criterion\": \"Sees a doctor\", \"points\": 2, \"tags\": []}, {\"criterion\": \"Calls emergency services\", \"points\": 3, \"tags\": []}]}\n",
    );
    let out = dir.path("out.jsonl");
    let o = run_rows(&main, &rows, &out, &["--judges", judges.to_str().unwrap(), "--no-cache", "--allow-errors"]);
    assert!(o.status.success(), "{}", describe(&o));
    let r = &records(&out)[0];
    let reasons: Vec<&str> = criteria(r).iter().map(|c| c["reason"].as_str().unwrap()).collect();
    assert!(reasons[0].starts_with("judge_truncated: the reply was cut off at the token limit"), "{reasons:?}");
    assert!(reasons[1].starts_with("judge_unparsable: the reply is not JSON"), "{reasons:?}");
    let bodies = mock_get(&base, "/requests");
    assert!(bodies.as_array().unwrap().iter().all(|b| b["reasoning_effort"] == "low"), "{bodies}");

    let bad = dir.file("bad.rubric", &text.replace("  max_tokens 200\n", "  reasoning_effort lo\n"));
    let o = run(&["check", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("rubric::judge::invalid_setting") && stderr.contains("unknown reasoning effort `lo`"),
        "{stderr}"
    );
    assert!(stderr.contains("`low`"), "{stderr}");
}

/// A cascade over HTTP: the cheap judge is asked every criterion and the strong one exactly
/// those whose cheap answer is uncertain (its P(yes), read back from the transcript, within the
/// band) or failed; each record names the judges asked and adds up what they cost; the report
/// counts the escalations; and replaying the transcript under the Wasm engine gives the same
/// records.
#[test]
fn a_cascade_asks_the_strong_judge_only_where_the_cheap_one_is_unsure() {
    let dir = TempDir::new("cost-cascade");
    // The example's personalities, and a cheap reply that is not JSON for one criterion of one
    // row: the cascade escalates it as `unscored`.
    let rules =
        "[[fault]]\nkind = \"malformed\"\nmodel = \"mini\"\ncriterion = \"how long\"\nprompt = \"knee swelling\"\n\n"
            .to_string()
            + &std::fs::read_to_string(example("mock-rules.toml")).unwrap();
    let (_m, base, judges) = mock(&dir, &rules, "");
    let (out, t) = (dir.path("out.jsonl"), dir.path("t.jsonl"));
    let cascade = example("cascade.rubric");
    let inputs = example("inputs.jsonl");
    let o = run_rows(
        &cascade,
        &inputs,
        &out,
        &["--no-cache", "--judges", judges.to_str().unwrap(), "--record", t.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let live = std::fs::read_to_string(&out).unwrap();
    // The cheap judge's P(yes) (or failure) per request, from the transcript.
    let mut cheap: Vec<Option<f64>> = Vec::new();
    let mut strong_requests = 0;
    for e in records(&t) {
        if e["request"]["model"] == "gpt-4.1-mini" {
            let content = e["reply"]["content"].as_str().unwrap_or("");
            let p = e["reply"]["logprobs"].as_array().and_then(|toks| {
                toks.iter().find(|x| x["token"] == "yes" || x["token"] == "no").map(|x| {
                    let yes = x["top"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|t| t[0] == "yes")
                        .map_or(f64::NEG_INFINITY, |t| t[1].as_f64().unwrap());
                    let no = x["top"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|t| t[0] == "no")
                        .map_or(f64::NEG_INFINITY, |t| t[1].as_f64().unwrap());
                    yes.exp() / (yes.exp() + no.exp())
                })
            });
            cheap.push(if content.starts_with('{') { p } else { None });
        } else {
            strong_requests += 1;
        }
    }
    assert_eq!(cheap.len(), 40, "every criterion went to the cheap judge first");
    let want_escalated = cheap.iter().filter(|p| p.is_none_or(|p| (0.2..=0.8).contains(&p))).count();
    assert!(cheap.iter().any(Option::is_none), "the injected fault reached the cheap judge");
    assert!(want_escalated > 1 && want_escalated < 40, "{cheap:?}");
    assert_eq!(strong_requests, want_escalated);
    assert_eq!(mock_get(&base, "/stats")["requests"], 40 + want_escalated as u64);
    let rows = records(&out);
    let mut escalated = 0;
    for c in rows.iter().flat_map(criteria) {
        let asked: Vec<&str> = c["cascade"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
        match asked.as_slice() {
            ["cheap"] => assert_eq!(c["model"], "gpt-4.1-mini", "{c}"),
            ["cheap", "strong"] => {
                escalated += 1;
                assert_eq!(c["model"], "gpt-4.1-mini,gpt-4.1", "{c}");
            }
            other => panic!("{other:?}"),
        }
        assert_ne!(c["status"], "unscored", "{c}");
        assert!(c["cost_usd"].as_f64().unwrap() > 0.0, "{c}");
    }
    assert_eq!(escalated, want_escalated);
    // The strong judge's verdicts are the truth; the cheap one's confident answers are right.
    let expected: Vec<Json> = records(&example("expected.jsonl"));
    for (r, e) in rows.iter().zip(&expected) {
        assert_eq!(r["score"], e["score"], "{r}");
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = format!("cascade `tiered`: 40 criteria, {escalated} escalated");
    assert!(stderr.contains(&line) && stderr.contains("would have cost about $"), "{stderr}");

    // Replayed offline under the Wasm engine: the same escalations, the same records.
    let replay = format!("replay:{}", t.display());
    let extra = ["--no-cache", "--judge", &replay, "--judges", judges.to_str().unwrap(), "--engine", "wasm"];
    let o = run_rows(&cascade, &inputs, &out, &extra);
    assert!(o.status.success(), "{}", describe(&o));
    let replayed = std::fs::read_to_string(&out).unwrap().replace("\"engine\":\"wasm\"", "\"engine\":\"interp\"");
    assert_eq!(replayed, live);
}

/// `--dispatch batch`: the requests go to the mock's Batch API as one file; a run stopped by
/// its deadline while the batch is in progress leaves it recorded in the cache, and the next
/// run polls that batch instead of submitting again; a failed line is that criterion's
/// `unscored` reason; replies through the batch are billed at the model's batch price.
#[test]
fn batch_dispatch_submits_once_resumes_polling_and_bills_the_batch_price() {
    let dir = TempDir::new("cost-batch");
    let rules = format!(
        "{RULES}[batch]\ncompletion_delay_ms = 1500\n[[fault]]\nkind = \"status\"\nstatus = 500\ncriterion = \"how long\"\nprompt = \"knee swelling\"\n"
    );
    let (_m, base, judges) = mock(&dir, &rules, "");
    let text = std::fs::read_to_string(&judges).unwrap().replace("output = 8.0\n", "output = 8.0\nbatch = 0.5\n");
    std::fs::write(&judges, text).unwrap();
    let (out, t, cache) = (dir.path("out.jsonl"), dir.path("t.jsonl"), dir.path("cache.sqlite"));
    let batch_run = |extra: &[&str]| {
        let mut a = vec![
            "--judges",
            judges.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--allow-errors",
            "--dispatch",
            "batch",
            "--batch-poll",
            "50ms",
        ];
        a.extend_from_slice(extra);
        run_rows(&example("main.rubric"), &example("inputs.jsonl"), &out, &a)
    };
    // Stopped while the batch is in progress.
    let o = batch_run(&["--deadline", "0.5s"]);
    assert!(o.status.success(), "{}", describe(&o));
    for c in records(&out).iter().flat_map(criteria) {
        assert!(c["reason"].as_str().unwrap().starts_with("judge_deadline: batch `batch_1`"), "{c}");
    }
    let stats = mock_get(&base, "/stats");
    assert_eq!(
        (stats["files"].as_u64(), stats["batches"].as_u64(), stats["requests"].as_u64()),
        (Some(1), Some(1), Some(0)),
        "{stats}"
    );
    assert_eq!(stats["batch_lines"], 40);
    // The next run polls the same batch.
    let o = batch_run(&["--record", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    let stats = mock_get(&base, "/stats");
    assert_eq!(
        (stats["files"].as_u64(), stats["batches"].as_u64(), stats["requests"].as_u64()),
        (Some(1), Some(1), Some(0)),
        "{stats}"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("batch: 40 requests through the Batch API in 0 batches submitted and 1 resumed"),
        "{stderr}"
    );
    let rows = records(&out);
    let failed: Vec<&Json> = rows.iter().flat_map(criteria).filter(|c| c["status"] == "unscored").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("judge_http_500: endpoint `mock` answered a batch line 500"));
    // Billed at half the price, from each reply's usage.
    let mut expected: Vec<f64> = records(&t)
        .iter()
        .filter(|e| e["reply"].is_object())
        .map(|e| {
            let u = &e["reply"]["usage"];
            assert_eq!(e["source"], "batch");
            let (p, c, k) = (
                u["prompt_tokens"].as_u64().unwrap(),
                u["completion_tokens"].as_u64().unwrap(),
                u["cached_tokens"].as_u64().unwrap_or(0),
            );
            0.5 * ((p - k) as f64 * INPUT + k as f64 * CACHED + c as f64 * OUTPUT) / 1e6
        })
        .collect();
    let mut got: Vec<f64> =
        rows.iter().flat_map(criteria).filter_map(|c| c["cost_usd"].as_f64()).filter(|x| *x > 0.0).collect();
    expected.sort_by(f64::total_cmp);
    got.sort_by(f64::total_cmp);
    assert_eq!(expected.len(), 39);
    assert!(expected.iter().zip(&got).all(|(a, b)| close(*a, *b)), "{expected:?} vs {got:?}");
    // A third run finds 39 replies in the cache and sends the failed one in a new batch.
    let o = batch_run(&[]);
    assert!(o.status.success(), "{}", describe(&o));
    let stats = mock_get(&base, "/stats");
    assert_eq!((stats["batches"].as_u64(), stats["batch_lines"].as_u64()), (Some(2), Some(41)), "{stats}");
}

/// A cascade escalates an answer the evidence rule would reject (met, with a quote that is not in
/// the input) as `unscored`: the strong judge, quoting the response, decides.
#[test]
fn a_cascade_escalates_an_answer_whose_evidence_is_not_found() {
    let dir = TempDir::new("cost-cascade-evidence");
    let rules = "[default]\nverdict = \"unmet\"\n\
                 [[rule]]\nmodel = \"small\"\nverdict = \"met\"\nevidence = \"words the response never says\"\n\
                 [[rule]]\nmodel = \"large\"\nverdict = \"met\"\nquote = \"Call \\\\d+ now\"\n";
    let (_m, base, judges) = mock(&dir, rules, "");
    let main = dir.file(
        "main.rubric",
        r#"rubric cost.evidence @ 1.0.0
input response: Text

judge small {
  model "m-small"
  sees response
  evidence must quote response
}

judge large {
  model "m-large"
  sees response
  evidence must quote response
}

judge tiered {
  cascade small, large
  escalate unscored
}

criterion er "Tells the user to call emergency services" by tiered
"#,
    );
    let rows = dir.file("rows.jsonl", "{\"response\": \"Call 911 now and stay with them.\"}\n");
    let out = dir.path("out.jsonl");
    let o = run_rows(&main, &rows, &out, &["--judges", judges.to_str().unwrap(), "--no-cache"]);
    assert!(o.status.success(), "{}", describe(&o));
    let recs = records(&out);
    let c = &criteria(&recs[0])[0];
    assert_eq!((c["status"].as_str(), c["evidence"].as_str()), (Some("met"), Some("Call 911 now")), "{c}");
    assert_eq!(c["cascade"], serde_json::json!(["small", "large"]), "{c}");
    assert_eq!(mock_get(&base, "/stats")["requests"], 2);
}
