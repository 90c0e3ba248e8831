//! Rewards that never block (issue 21): a row deadline in `rubric run`, `rubric serve` and
//! (through the same `runtime::score_batch`) the Python package. A judge that stalls for one row
//! (the mock judge's `timeout` fault, 30 s, on the row whose response says `SLOWROW`) makes
//! that row `unscored` with reason `timeout` when its deadline passes, while every other row's
//! record is exactly the record of a run without a deadline; the slow-row report names the
//! row and the criteria that took its time; records carry their `timing` when asked. And
//! `rubric serve`'s OpenRLHF endpoint answers OpenRLHF's remote reward-model request.

use crate::common::{crate_root, mock_judge, read_lines, TempDir};
use crate::serve::{http, Server};
use serde_json::{json, Value as Json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The mock's rules: HealthBench's example rules, and a 30 s stall for the slow row.
fn stalling_rules(dir: &TempDir) -> std::path::PathBuf {
    let base = std::fs::read_to_string(crate_root().join("examples/healthbench/mock-rules.toml")).unwrap();
    dir.file("rules.toml", &format!("{base}\n[[fault]]\nkind = \"timeout\"\nprompt = \"SLOWROW\"\ndelay_ms = 30000\n"))
}

/// HealthBench's example rows, then the slow row (last, so that the others keep their index).
fn rows(dir: &TempDir) -> (std::path::PathBuf, std::path::PathBuf, usize) {
    // the example's rows that can be scored (it also has a malformed one)
    let lines: Vec<String> = read_lines(&crate_root().join("examples/healthbench/inputs.jsonl"))
        .into_iter()
        .filter(|l| serde_json::from_str::<Json>(l).is_ok_and(|r| r["response"].is_string()))
        .collect();
    let fast = dir.file("fast.jsonl", &lines.iter().map(|l| format!("{l}\n")).collect::<String>());
    let mut slow: Json = serde_json::from_str(&lines[0]).unwrap();
    slow["id"] = json!("slow");
    slow["response"] = json!("SLOWROW: rest and drink water.");
    let all = dir.file("all.jsonl", &format!("{}{slow}\n", lines.iter().map(|l| format!("{l}\n")).collect::<String>()));
    (fast, all, lines.len())
}

/// `rubric run` with `args`: its records and standard error.
fn run(dir: &TempDir, input: &Path, judges: &Path, args: &[&str]) -> (Vec<Json>, String) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let out = dir.path(&format!("out-{}.jsonl", RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    let o = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .arg("run")
        .arg(crate_root().join("examples/healthbench/main.rubric"))
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .arg("--judges")
        .arg(judges)
        .args(["--no-cache", "--no-progress", "--allow-errors"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    (read_lines(&out).iter().map(|l| serde_json::from_str(l).unwrap()).collect(), stderr)
}

/// The slow row's record: unscored by its deadline, its score and reward null, the judged
/// criteria the deadline cut saying so.
fn assert_timed_out(record: &Json) {
    assert_eq!(record["id"], "slow", "{record}");
    assert_eq!(record["score"], Json::Null, "{record}");
    let why = record["unscored_reason"].as_str().unwrap_or_default();
    assert!(why.starts_with("timeout: the row's deadline passed before it could decide `"), "{record}");
    let cut: Vec<&Json> = record["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reason"].as_str().is_some_and(|r| r.starts_with("judge_deadline")))
        .collect();
    assert!(!cut.is_empty(), "{record}");
    for c in cut {
        assert_eq!(c["status"], "unscored", "{c}");
        assert!(why.contains(&format!("`{}`", c["id"].as_str().unwrap())), "{why} names {c}");
    }
}

#[test]
fn a_row_past_its_deadline_is_unscored_and_the_rest_of_the_run_is_unchanged() {
    let dir = TempDir::new("deadline-run");
    let (_mock, _base, judges) = mock_judge(&dir, &stalling_rules(&dir), "");
    let (fast, all, n) = rows(&dir);
    let (want, _) = run(&dir, &fast, &judges, &[]);
    assert_eq!(want.len(), n);
    assert!(want.iter().all(|r| r["score"].is_number()), "the fast rows are scored: {want:?}");

    let start = Instant::now();
    let (got, stderr) = run(&dir, &all, &judges, &["--row-deadline-ms", "1500", "--slow-rows", "2"]);
    // The stall is 30 s: the run ended at the deadline, not when the judge answered.
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    assert_eq!(got.len(), n + 1);
    assert_eq!(&got[..n], &want[..], "rows within the deadline are scored as without one");
    assert_timed_out(&got[n]);
    assert!(got.iter().all(|r| r.get("timing").is_none()), "timings only when asked for");
    assert!(stderr.contains("timeout"), "the failures line counts the timeout: {stderr}");

    // The slow-row report: the timed-out row first, with the criteria it waited for.
    let report: Vec<&str> =
        stderr.lines().skip_while(|l| *l != "slowest rows:").skip(1).take_while(|l| l.starts_with("  ")).collect();
    assert_eq!(report.len(), 2, "{stderr}");
    assert!(report[0].starts_with(&format!("  row {n} (id \"slow\"): ")), "{stderr}");
    assert!(report[0].contains("judges ") && report[0].contains("; timeout: "), "{stderr}");
    let slow_ms: f64 = report[0].split(": ").nth(1).unwrap().trim_end_matches(" ms").parse().unwrap();
    assert!(slow_ms >= 1000.0, "the slow row waited for its deadline: {stderr}");

    // `--timings`: every record says where its time went, per judged criterion.
    let (timed, _) = run(&dir, &all, &judges, &["--row-deadline-ms", "1500", "--timings"]);
    for r in &timed {
        let t = &r["timing"];
        let total = t["ms"].as_f64().unwrap();
        let parts = t["evaluate_ms"].as_f64().unwrap() + t["judges_ms"].as_f64().unwrap();
        assert!((total - parts).abs() < 0.01, "{t}");
        let judged: Vec<&str> = r["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c.get("model").is_some() || c["reason"].as_str().is_some_and(|x| x.starts_with("judge_")))
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        let timed_ids: Vec<&str> = t["criteria"].as_object().unwrap().keys().map(String::as_str).collect();
        for id in judged {
            assert!(timed_ids.contains(&id), "{id} has a timing: {t}");
        }
    }
    assert!(timed[n]["timing"]["judges_ms"].as_f64().unwrap() >= 1000.0, "{}", timed[n]["timing"]);
    let mut without: Vec<Json> = timed[..n].to_vec();
    for r in &mut without {
        r.as_object_mut().unwrap().remove("timing");
    }
    assert_eq!(without, want, "timings change nothing else");
}

#[test]
fn the_server_answers_on_time_with_the_slow_row_unscored() {
    let dir = TempDir::new("deadline-serve");
    let (_mock, _base, judges) = mock_judge(&dir, &stalling_rules(&dir), "");
    let (fast, all, n) = rows(&dir);
    let (want, _) = run(&dir, &fast, &judges, &[]);
    let rubric = crate_root().join("examples/healthbench/main.rubric");
    let server = Server::start(&[&rubric, &"--judges", &judges, &"--no-cache", &"--row-deadline-ms", &"20000"], &[]);
    let rows: Vec<Json> = read_lines(&all).iter().map(|l| serde_json::from_str(l).unwrap()).collect();

    // The request asks for less than the server's 20 s.
    let start = Instant::now();
    let (status, body) = server.score(&json!({ "rows": rows, "deadline_ms": 1500, "timings": true }));
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}", start.elapsed());
    assert_eq!(status, 200, "{body}");
    let got = body["results"].as_array().unwrap();
    assert_eq!(got.len(), n + 1);
    assert_timed_out(&got[n]);
    for (g, w) in got[..n].iter().zip(&want) {
        assert!(g["timing"]["ms"].is_number(), "{g}");
        let mut g = g.clone();
        g.as_object_mut().unwrap().remove("timing");
        assert_eq!(&g, w);
    }
}

/// OpenRLHF's remote reward model request (`query`, `prompts`, `labels`), as its
/// `SingleTurnAgentExecutor` posts it to `--remote_rm_url`: rewards equal to `rubric run` on
/// the rows it stands for; a row the rubric cannot score is 0.0 and flagged.
#[test]
fn the_openrlhf_endpoint_answers_openrlhfs_request() {
    let dir = TempDir::new("openrlhf");
    let source = dir.file(
        "answer.rubric",
        "rubric t.answer @ 1.0.0\n\
         input prompt: Text\ninput response: Text\ninput answer: Text\n\
         criterion has_answer \"States the expected answer\" weight 3 check contains(response, answer)\n\
         criterion short \"Answers in under 40 characters\" check len(response) < 40\n",
    );
    let prompts = ["Q: 2+2? A:", "Q: capital of France? A:", "Q: 3*3? A:"];
    let responses = [" 4", " It is Paris, the capital city of France.", " 6"];
    let labels = [json!({"answer": "4"}), json!({"answer": "Paris"}), json!({"answer": "9"})];
    let queries: Vec<String> = prompts.iter().zip(responses).map(|(p, r)| format!("{p}{r}")).collect();
    let rows: String = prompts
        .iter()
        .zip(&responses)
        .zip(&labels)
        .zip(&queries)
        .map(|(((p, r), l), q)| {
            format!("{}\n", json!({"answer": l["answer"], "prompt": p, "response": r, "query": q, "label": l}))
        })
        .collect();
    let input = dir.file("rows.jsonl", &rows);
    let out = dir.path("out.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .args(["run"])
        .arg(&source)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .arg("--no-progress")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let want: Vec<f64> =
        read_lines(&out).iter().map(|l| serde_json::from_str::<Json>(l).unwrap()["score"].as_f64().unwrap()).collect();
    assert_eq!(want, vec![1.0, 0.75, 0.25]);

    let server = Server::start(&[&source], &[]);
    let post = |path: &str, body: &Json| {
        let (status, text) = http(server.addr(), "POST", path, &[], body.to_string().as_bytes());
        (status, serde_json::from_str::<Json>(&text).unwrap_or_else(|e| panic!("{status} {text}: {e}")))
    };
    let request = json!({ "query": queries, "prompts": prompts, "labels": labels });
    let (status, r) = post("/v1/openrlhf", &request);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["rewards"], json!(want), "{r}");
    assert_eq!(r["scores"], r["rewards"]);
    assert_eq!(r["extra_logs"]["unscored"], json!([0.0, 0.0, 0.0]));
    let (status, r) = post("/v1/openrlhf?rubric=t.answer", &request);
    assert_eq!((status, &r["rewards"]), (200, &json!(want)), "{r}");

    // A label without the rubric's `answer`: that row cannot be bound; 0.0, flagged.
    let partial = json!({ "query": queries, "prompts": prompts, "labels": [labels[0], "no answer here", labels[2]] });
    let (status, r) = post("/v1/openrlhf", &partial);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["rewards"], json!([want[0], 0.0, want[2]]), "{r}");
    assert_eq!(r["extra_logs"]["unscored"], json!([0.0, 1.0, 0.0]));

    // Requests it refuses.
    let (status, r) = post("/v1/openrlhf", &json!({ "query": ["a"], "prompts": [] }));
    assert_eq!((status, r["error"]["code"].as_str()), (400, Some("rubric::serve::bad_request")), "{r}");
    let (status, r) = post("/v1/openrlhf?rubric=nope", &request);
    assert_eq!((status, r["error"]["code"].as_str()), (404, Some("rubric::serve::unknown_rubric")), "{r}");
}
