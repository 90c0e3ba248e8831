//! Panics contained at the row boundary (security issue "Untrusted means untrusted", item 4):
//! an engine that panics on one row — a stand-in for a bug anywhere in an engine, the step
//! driver or an intrinsic — gives that row a `rubric::trap::internal` error record, and every
//! other row is scored as usual: through `score_line`, `run_batch` (with and without groups),
//! `score_batch`, and `rubric serve`, which keeps answering (a panic that escaped a rayon task
//! would abort it).

use rubric::engine::{Engine, RowResult, VerdictSource};
use rubric::interp::Interpreter;
use rubric::ir::{Program, SiteTable};
use rubric::runtime::{self, Identity, RunOptions};
use rubric::types::compile_source;
use rubric::value::Value;
use serde_json::Value as Json;

use crate::common::{json_lines, TempDir};

const RUBRIC: &str = r#"rubric contained @ 1.0.0
input response: Text
criterion short "Short" check word_count(response) <= 5
criterion some "Says something" check word_count(response) >= 1
"#;

/// The interpreter, except that a row whose response is `boom` panics.
struct PanicsOnBoom;

impl Engine for PanicsOnBoom {
    fn name(&self) -> &'static str {
        "panics-on-boom"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        if inputs.first().and_then(Value::as_text) == Some("boom") {
            panic!("boom: an engine bug");
        }
        Interpreter.evaluate(program, inputs, verdicts)
    }
}

/// The program and where its sites lie.
fn program() -> (Program, SiteTable) {
    let c = compile_source("contained.rubric", RUBRIC);
    (c.program.unwrap_or_else(|| panic!("{:?}", c.diagnostics)), c.sites)
}

const ROWS: [&str; 4] = [
    r#"{"group": "g", "response": "a short answer"}"#,
    r#"{"group": "g", "response": "boom"}"#,
    r#"{"group": "g", "response": "fine"}"#,
    r#"{"group": "h", "response": "also fine here"}"#,
];

/// Row 1 is its error record; the others are scored.
fn check_records(records: &[Json], how: &str) {
    assert_eq!(records.len(), ROWS.len(), "{how}: {records:?}");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["row"], i, "{how}: {r}");
        if i == 1 {
            assert_eq!(r["error"]["code"], "rubric::trap::internal", "{how}: {r}");
            let message = r["error"]["message"].as_str().unwrap();
            assert!(message.contains("boom: an engine bug"), "{how}: {message}");
            assert!(r.get("score").is_none(), "{how}: {r}");
        } else {
            assert_eq!(r["score"], 1, "{how}: {r}");
            assert!(r.get("error").is_none(), "{how}: {r}");
        }
    }
}

#[test]
fn a_panicking_row_is_its_error_record_in_score_line_and_score_batch() {
    let (p, sites) = program();
    let ident = Identity::of(&p, &sites);
    let lines: Vec<(usize, String)> = ROWS.iter().map(|l| l.to_string()).enumerate().collect();
    let records: Vec<Json> =
        lines.iter().map(|(i, l)| runtime::score_line(&PanicsOnBoom, &p, &ident, *i, l, None)).collect();
    check_records(&records, "score_line");
    let rows: Vec<(usize, runtime::RowIn<'_>)> = lines.iter().map(|(i, l)| (*i, runtime::RowIn::Line(l))).collect();
    check_records(
        &runtime::score_batch(&PanicsOnBoom, &p, &ident, &rows, None, None, None, Default::default()),
        "score_batch",
    );
    let grouped = runtime::score_batch(&PanicsOnBoom, &p, &ident, &rows, None, None, Some("group"), Default::default());
    check_records(&grouped, "score_batch with groups");
}

#[test]
fn a_panicking_row_is_its_error_record_in_run_batch() {
    let (p, sites) = program();
    let dir = TempDir::new("contained");
    let input = dir.file("rows.jsonl", &(ROWS.join("\n") + "\n"));
    for groups in [None, Some("group")] {
        let output = dir.path("out.jsonl");
        let opts = RunOptions {
            input: &input,
            output: &output,
            verdicts: None,
            resume: false,
            progress: false,
            judges: None,
            compact: false,
            groups,
            numeric: None,
            provenance: None,
            policy: Default::default(),
            slow_rows: 0,
        };
        let summary = runtime::run_batch(&PanicsOnBoom, &p, &sites, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((summary.rows, summary.scored, summary.errors), (4, 3, 1), "{summary:?}");
        let records = json_lines(&std::fs::read_to_string(&output).unwrap());
        check_records(&records, &format!("run_batch, groups {groups:?}"));
    }
}

/// `rubric serve` with an engine that panics on a row: the row is its error record, and the
/// server answers the next request (a panic escaping its rayon task would abort it).
#[cfg(feature = "serve")]
#[test]
fn a_panicking_row_does_not_take_the_reward_server_down() {
    let (program, sites) = program();
    let program: &'static Program = Box::leak(Box::new(program));
    let addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let served =
        rubric::serve::Served { program, ident: Identity::of(program, &sites), engine: Box::new(PanicsOnBoom) };
    let opts = rubric::serve::Options {
        addr,
        token: None,
        max_body_bytes: 1 << 20,
        timeout: std::time::Duration::from_secs(60),
        row_deadline: None,
        limits: rubric::serve::Limits {
            header_timeout: std::time::Duration::from_secs(10),
            body_timeout: std::time::Duration::from_secs(60),
            keep_alive: std::time::Duration::from_secs(30),
            max_connections: 64,
            max_connections_per_client: 16,
        },
    };
    std::thread::spawn(move || rubric::serve::main(vec![served], None, opts));
    let addr = addr.to_string();
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(started.elapsed().as_secs() < 30, "the server does not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let rows: Vec<Json> = ROWS.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let body = serde_json::json!({ "rows": rows }).to_string();
    for attempt in 0..2 {
        let (status, text) = crate::serve::http(&addr, "POST", "/v1/score", &[], body.as_bytes());
        assert_eq!(status, 200, "request {attempt}: {text}");
        let answer: Json = serde_json::from_str(&text).unwrap();
        check_records(answer["results"].as_array().unwrap(), &format!("serve, request {attempt}"));
    }
    assert_eq!(crate::serve::http(&addr, "GET", "/healthz", &[], b""), (200, "ok".to_string()));
}
