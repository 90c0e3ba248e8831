//! `rubric serve` on the built binary, over real HTTP on loopback: results equal to `rubric run`
//! on the same rows (with and without groups, a source on the interpreter and a bundle on
//! Wasm, token credit from token offsets, judged criteria against the mock judge), concurrent
//! clients, size limits, malformed requests, the bearer token, metrics, the per-request
//! timeout, and graceful shutdown finishing the batch in flight; and clients that try to hold
//! the server: silent, slow and idle connections closed by the timeouts, idle connections past
//! the connection limits (in all and per client address, `127.0.0.x` being other clients),
//! over-size bodies refused before they are read.

use crate::common::{crate_root, read_lines, TempDir};
use serde_json::{json, Value as Json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `rubric serve` process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    addr: String,
}

impl Server {
    pub(crate) fn start(args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
        cmd.arg("serve").args(args).args(["--addr", "127.0.0.1:0"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("http://").unwrap_or_else(|| panic!("first line: {line:?}")).to_string();
        Server { child, addr }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    fn get(&self, path: &str) -> (u16, String) {
        http(&self.addr, "GET", path, &[], b"")
    }

    pub(crate) fn score(&self, body: &Json) -> (u16, Json) {
        let (status, text) = http(&self.addr, "POST", "/v1/score", &[], body.to_string().as_bytes());
        (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status} {text:?}: {e}")))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): the status and the body.
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    // The server may answer (413) before it reads the whole body.
    let _ = s.write_all(&request);
    // Read to the end; a server that refused a body it did not read may reset the connection
    // after its answer, which stays readable.
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if !raw.is_empty() => {
                eprintln!("read after the answer: {e}");
                break;
            }
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response head: {text:?}"));
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    (status, body.to_string())
}

fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) {
    let o = Command::new(env!("CARGO_BIN_EXE_rubric")).args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

/// What `rubric run` writes for `input` (extra arguments: `--engine`, `--groups`).
fn run_records(dir: &TempDir, rubric_file: &Path, input: &Path, extra: &[&str]) -> Vec<Json> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let out = dir.path(&format!("run-{}.jsonl", RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"run", &rubric_file, &"--input", &input, &"--output", &out, &"--no-progress", &"--allow-errors"];
    for e in extra {
        args.push(e);
    }
    rubric(&args);
    read_lines(&out).iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn rows_of(input: &Path) -> Vec<Json> {
    read_lines(input).iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The ifeval rows with a `group` field, three rows to a group.
fn grouped_ifeval(dir: &TempDir) -> PathBuf {
    let rows = rows_of(&crate_root().join("examples/ifeval/inputs.jsonl"));
    let text: String = rows
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r.as_object_mut().unwrap().insert("group".into(), json!(format!("g{}", i / 3)));
            format!("{r}\n")
        })
        .collect();
    dir.file("grouped.jsonl", &text)
}

/// Two rubrics served together (the tiers source on the interpreter, the ifeval bundle on Wasm):
/// every answer equals `rubric run`, under 16 concurrent clients, while bad requests are
/// refused beside them.
#[test]
fn serve_scores_like_run_under_concurrent_clients() {
    let dir = TempDir::new("serve");
    let tiers = crate_root().join("examples/tiers/main.rubric");
    let tiers_input = crate_root().join("examples/tiers/inputs.jsonl");
    let bundle = dir.path("ifeval.rbk");
    rubric(&[&"build", &crate_root().join("examples/ifeval/main.rubric"), &"-o", &bundle]);
    let grouped = grouped_ifeval(&dir);

    let want_tiers = run_records(&dir, &tiers, &tiers_input, &[]);
    let want_ifeval = run_records(&dir, &bundle, &grouped, &["--engine", "wasm"]);
    let want_grouped = run_records(&dir, &bundle, &grouped, &["--engine", "wasm", "--groups"]);
    let tiers_rows = rows_of(&tiers_input);
    let ifeval_rows = rows_of(&grouped);
    let bundle_hash = want_ifeval[0]["bundle"].as_str().unwrap().to_string();
    assert!(bundle_hash.starts_with("sha256:"), "{bundle_hash}");

    let server = Server::start(&[&tiers, &bundle, &"--max-body-bytes", &"16384"], &[]);
    assert_eq!(server.get("/healthz"), (200, "ok".to_string()));

    // What is loaded, with hashes; the bundle runs on Wasm, the source on the interpreter.
    let (status, text) = server.get("/v1/bundles");
    assert_eq!(status, 200, "{text}");
    let listed: Json = serde_json::from_str(&text).unwrap();
    let list = listed["rubrics"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{listed}");
    assert_eq!(list[0]["ir_hash"], want_tiers[0]["ir_hash"]);
    assert_eq!(list[0]["bundle"], Json::Null);
    assert_eq!(list[0]["engine"], want_tiers[0]["engine"]);
    assert_eq!(list[1]["bundle"], json!(bundle_hash));
    assert_eq!(list[1]["ir_hash"], want_ifeval[0]["ir_hash"]);
    assert_eq!(list[1]["engine"], "wasm");

    // Byte-equal records, by name, by IR hash and by bundle hash; with groups too.
    let (s, r) = server.score(&json!({ "rubric": want_tiers[0]["rubric"], "rows": tiers_rows }));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["results"].as_array().unwrap(), &want_tiers);
    let (s, r) = server.score(&json!({ "rubric": want_tiers[0]["ir_hash"], "rows": tiers_rows }));
    assert_eq!((s, r["results"].as_array().unwrap()), (200, &want_tiers));
    let (s, r) = server.score(&json!({ "rubric": bundle_hash, "rows": ifeval_rows }));
    assert_eq!((s, r["results"].as_array().unwrap()), (200, &want_ifeval));
    let (s, r) = server.score(&json!({ "rubric": bundle_hash, "rows": ifeval_rows, "groups": "group" }));
    assert_eq!((s, r["results"].as_array().unwrap()), (200, &want_grouped));
    assert!(want_grouped[0].get("advantage").is_some(), "{}", want_grouped[0]);

    // A malformed row is an error record in its place, as in `rubric run`.
    let (s, r) = server.score(&json!({ "rubric": bundle_hash, "rows": [ifeval_rows[0], 7, ifeval_rows[1]] }));
    assert_eq!(s, 200, "{r}");
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[1]["error"]["code"], "rubric::row::not_an_object");
    assert_eq!(results[1]["row"], 1);
    let mut second = want_ifeval[1].clone();
    second["row"] = json!(2);
    assert_eq!(results[2], second);

    // Requests the server refuses.
    let (s, r) = server.score(&json!({ "rows": tiers_rows }));
    assert_eq!((s, r["error"]["code"].as_str()), (400, Some("rubric::serve::bad_request")), "{r}");
    let (s, r) = server.score(&json!({ "rubric": "nope", "rows": [] }));
    assert_eq!((s, r["error"]["code"].as_str()), (404, Some("rubric::serve::unknown_rubric")), "{r}");

    // 16 clients, each scoring rotated rows several times; beside them, oversize and
    // malformed bodies.
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for client in 0..16usize {
            let (server, tiers_rows, want_tiers) = (&server, &tiers_rows, &want_tiers);
            let (ifeval_rows, want_grouped) = (&ifeval_rows, &want_grouped);
            handles.push(scope.spawn(move || {
                for round in 0..4usize {
                    let k = (client + round) % tiers_rows.len();
                    let rows: Vec<Json> =
                        (0..tiers_rows.len()).map(|j| tiers_rows[(j + k) % tiers_rows.len()].clone()).collect();
                    let (s, r) = server.score(&json!({ "rubric": want_tiers[0]["rubric"], "rows": rows }));
                    assert_eq!(s, 200, "{r}");
                    for (j, got) in r["results"].as_array().unwrap().iter().enumerate() {
                        let mut want = want_tiers[(j + k) % tiers_rows.len()].clone();
                        want["row"] = json!(j);
                        assert_eq!(got, &want);
                    }
                    let (s, r) = server
                        .score(&json!({ "rubric": list_hash(want_grouped), "rows": ifeval_rows, "groups": "group" }));
                    assert_eq!((s, r["results"].as_array().unwrap()), (200, want_grouped));
                }
            }));
        }
        for _ in 0..4 {
            let big = json!({ "rubric": "tiers", "rows": [{ "response": "x".repeat(20_000) }] }).to_string();
            let (s, body) = http(&server.addr, "POST", "/v1/score", &[], big.as_bytes());
            assert_eq!(s, 413, "{body}");
            assert!(body.contains("rubric::serve::too_large"), "{body}");
            let (s, body) = http(&server.addr, "POST", "/v1/score", &[], b"{\"rows\": [");
            assert_eq!(s, 400, "{body}");
            assert!(body.contains("rubric::serve::bad_request"), "{body}");
        }
        for h in handles {
            h.join().unwrap();
        }
    });

    // The counters saw all of it.
    let (s, text) = server.get("/metrics");
    assert_eq!(s, 200);
    let m: Json = serde_json::from_str(&text).unwrap();
    assert!(m["requests_by_status"]["200"].as_u64().unwrap() >= 16 * 8 + 5, "{m}");
    assert_eq!(m["requests_by_status"]["413"], 4, "{m}");
    assert!(m["rows_scored"].as_u64().unwrap() >= 16 * 4 * 22, "{m}");
    assert!(m["score_latency_ms"]["p99"].as_f64().unwrap() >= m["score_latency_ms"]["p50"].as_f64().unwrap(), "{m}");
}

fn list_hash(records: &[Json]) -> String {
    records[0]["bundle"].as_str().unwrap().to_string()
}

/// With `--token-env`, every endpoint but `/healthz` needs the bearer token, and the token
/// appears in no response.
#[test]
fn serve_enforces_the_bearer_token() {
    let tiers = crate_root().join("examples/tiers/main.rubric");
    let token = "s3cret-token-value";
    let server =
        Server::start(&[&tiers, &"--token-env", &"RUBRIC_SERVE_TEST_TOKEN"], &[("RUBRIC_SERVE_TEST_TOKEN", token)]);
    let body = json!({ "rows": [{ "response": "hello" }] }).to_string();
    assert_eq!(server.get("/healthz").0, 200);
    for headers in [vec![], vec![("Authorization", "Bearer wrong")], vec![("Authorization", token)]] {
        let (s, text) = http(&server.addr, "POST", "/v1/score", &headers, body.as_bytes());
        assert_eq!(s, 401, "{text}");
        assert!(text.contains("rubric::serve::unauthorized") && !text.contains(token), "{text}");
        assert_eq!(http(&server.addr, "GET", "/v1/bundles", &headers, b"").0, 401);
    }
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    let (s, text) = http(&server.addr, "POST", "/v1/score", &auth, body.as_bytes());
    assert_eq!(s, 200, "{text}");
    assert!(!text.contains(token));
    let (s, text) = http(&server.addr, "GET", "/metrics", &auth, b"");
    assert_eq!(s, 200, "{text}");
    assert!(!text.contains(token));
    // Without the variable, the server does not start.
    let o = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .args(["serve", "--token-env", "RUBRIC_SERVE_TEST_UNSET_VAR"])
        .arg(&tiers)
        .env_remove("RUBRIC_SERVE_TEST_UNSET_VAR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

// ------------------------------------------------------------------ token credit

/// A rubric whose checks have spans (a regex, a substring) and one that has none (a count).
const CREDIT: &str = r#"rubric serve.credit @ 1.0.0
input response: Text
criterion cite "Cites a source" check matches(response, "\\[\\d+\\]")
criterion polite "Says please" check contains_ci(response, "please")
criterion short "At most 12 words" check word_count(response) <= 12
score = fraction(all)

reward {
  advantage mean
  uncovered row
}
"#;

/// Character offsets of the whitespace-separated tokens of `text` (as Python counts them).
fn word_offsets(text: &str) -> Json {
    let mut out = Vec::new();
    let mut start = None;
    for (i, ch) in text.chars().chain(std::iter::once(' ')).enumerate() {
        match (ch.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push(json!([s, i]));
                start = None;
            }
            _ => {}
        }
    }
    Json::Array(out)
}

/// Token offsets in the rows or in a list beside them give exactly the token credit of
/// `rubric run --groups` on the same rows; offsets that do not fit the request are refused.
#[test]
fn serve_gives_token_credit_like_run_groups() {
    let dir = TempDir::new("serve-credit");
    let rubric_file = dir.file("credit.rubric", CREDIT);
    let responses = [
        ("g1", "Please see [1] and [2], please."),
        ("g1", "Café au lait [3]: ask nicely, please."),
        ("g1", "No."),
        ("g2", "A long answer that never cites anything at all and keeps going on and on."),
        ("g2", "Please [4]"),
    ];
    let plain: Vec<Json> = responses.iter().map(|(g, r)| json!({ "group": g, "response": r })).collect();
    let mut offsets: Vec<Json> = responses.iter().map(|(_, r)| word_offsets(r)).collect();
    offsets[2] = Json::Null; // a row without offsets: no credit
    offsets[3] = json!([[5, 2]]); // a token that ends before it starts: `token_credit_error`
    let inline: Vec<Json> = plain
        .iter()
        .zip(&offsets)
        .map(|(row, o)| {
            let mut row = row.clone();
            if !o.is_null() {
                row["token_offsets"] = o.clone();
            }
            row
        })
        .collect();
    let input = dir.file("rows.jsonl", &inline.iter().map(|r| format!("{r}\n")).collect::<String>());
    let want = run_records(&dir, &rubric_file, &input, &["--groups"]);
    // The figures are there to compare: credit on the rows with offsets, an error for the bad ones.
    assert_eq!(want[0]["token_credit"].as_array().map(Vec::len), Some(6), "{}", want[0]);
    assert_eq!(want[1]["token_credit"].as_array().map(Vec::len), Some(7), "{}", want[1]);
    assert!(want[1]["criterion_spans"]["cite"].is_array(), "{}", want[1]);
    assert!(want[2].get("token_credit").is_none(), "{}", want[2]);
    assert!(want[3]["token_credit_error"].is_string(), "{}", want[3]);
    assert_eq!(want[4]["token_credit"].as_array().map(Vec::len), Some(2), "{}", want[4]);

    let server = Server::start(&[&rubric_file], &[]);
    // Offsets in the rows, as `rubric run` reads them.
    let (s, r) = server.score(&json!({ "rows": inline, "groups": "group" }));
    assert_eq!(results(s, &r), &want);
    // Offsets beside the rows, `null` for the row without.
    let (s, r) = server.score(&json!({ "rows": plain, "groups": "group", "token_offsets": offsets }));
    assert_eq!(results(s, &r), &want);
    // Both ways for different rows of one request.
    let mut mixed = plain.clone();
    mixed[0] = inline[0].clone();
    let mut rest = offsets.clone();
    rest[0] = Json::Null;
    let (s, r) = server.score(&json!({ "rows": mixed, "groups": "group", "token_offsets": rest }));
    assert_eq!(results(s, &r), &want);
    // Without groups, rows' own offsets are ignored, as by `rubric run` without `--groups`.
    let ungrouped = run_records(&dir, &rubric_file, &input, &[]);
    assert!(ungrouped[0].get("token_credit").is_none());
    let (s, r) = server.score(&json!({ "rows": inline }));
    assert_eq!(results(s, &r), &ungrouped);

    // Refused with 400: a list beside the rows without groups, of the wrong length, or for a
    // row that has its own.
    let refusals = [
        json!({ "rows": plain, "token_offsets": offsets }),
        json!({ "rows": plain, "groups": "group", "token_offsets": offsets[..4] }),
        json!({ "rows": inline, "groups": "group", "token_offsets": offsets }),
        json!({ "rows": plain, "groups": "group", "token_offsets": "all" }),
    ];
    for body in &refusals {
        let (s, r) = server.score(body);
        assert_eq!((s, r["error"]["code"].as_str()), (400, Some("rubric::serve::bad_request")), "{body}: {r}");
    }
    // A row that is not an object stays an error record in its place.
    let mut odd = plain.clone();
    odd[2] = json!(7);
    let (s, r) = server.score(&json!({ "rows": odd, "groups": "group", "token_offsets": offsets }));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["results"][2]["error"]["code"], "rubric::row::not_an_object", "{r}");
}

// ------------------------------------------------------------------ judges, timeouts, shutdown

/// The mock judge of `examples/healthbench/mock-rules.toml`, with `latency_ms` replaced, in
/// process on loopback, and a `judges.toml` binding every judge to it.
struct Mock {
    // Dropped last: the server runs on it.
    server: rubric::judge::mock::MockServer,
    judges: PathBuf,
    _rt: tokio::runtime::Runtime,
}

impl Mock {
    fn start(dir: &TempDir, latency_ms: u64) -> Mock {
        let rules_text = std::fs::read_to_string(crate_root().join("examples/healthbench/mock-rules.toml")).unwrap();
        let rules_text = rules_text.replace("latency_ms = 5", &format!("latency_ms = {latency_ms}"));
        assert!(rules_text.contains(&format!("latency_ms = {latency_ms}")), "the rules set their latency");
        let rt = crate::judge::rt();
        let server = rt.block_on(crate::judge::server(crate::judge::rules(&rules_text)));
        let judges = dir.file(
            &format!("judges-{latency_ms}.toml"),
            &format!("default = \"mock\"\n[endpoints.mock]\nbase_url = \"{}\"\nconcurrency = 16\n", server.base_url()),
        );
        Mock { server, judges, _rt: rt }
    }

    fn requests(&self) -> u64 {
        self.server.requests()
    }
}

fn healthbench() -> PathBuf {
    crate_root().join("examples/healthbench/main.rubric")
}

/// The first `n` healthbench rows with a group id each (two to a group).
fn healthbench_rows(dir: &TempDir, n: usize) -> (PathBuf, Vec<Json>) {
    let rows: Vec<Json> = rows_of(&crate_root().join("examples/healthbench/inputs.jsonl"))
        .into_iter()
        .take(n)
        .enumerate()
        .map(|(i, mut r)| {
            if let Some(o) = r.as_object_mut() {
                o.insert("group".into(), json!(format!("p{}", i / 2)));
            }
            r
        })
        .collect();
    let path = dir.file(&format!("healthbench-{n}.jsonl"), &rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    (path, rows)
}

fn metrics(server: &Server) -> Json {
    let (s, text) = server.get("/metrics");
    assert_eq!(s, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Wait until the server has `n` requests in flight besides the `/metrics` request asking.
fn wait_in_flight(server: &Server, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while metrics(server)["in_flight"].as_u64().unwrap() < n + 1 {
        assert!(std::time::Instant::now() < deadline, "no request in flight: {}", metrics(server));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `rubric serve --judges` dispatches judged criteria as `rubric run --judges` does: the same
/// records, with and without groups, the calls counted in `/metrics`, and a request seen before
/// answered without new calls.
#[test]
fn serve_with_judges_scores_like_run_with_judges() {
    let dir = TempDir::new("serve-judges");
    let mock = Mock::start(&dir, 5);
    let (input, rows) = healthbench_rows(&dir, usize::MAX);
    let judges: &Path = &mock.judges;
    let run_cache = dir.path("run-cache.sqlite");
    let run_cache: &Path = &run_cache;
    let want =
        run_records(&dir, &healthbench(), &input, &["--judges", path_str(judges), "--cache", path_str(run_cache)]);
    let calls = mock.requests();
    assert!(calls > 0, "rubric run called the judge");
    assert!(want.iter().any(|r| r["criteria"][0]["model"] == "mock-grader-1"), "{want:?}");
    let want_grouped = run_records(
        &dir,
        &healthbench(),
        &input,
        &["--groups", "--judges", path_str(judges), "--cache", path_str(run_cache)],
    );
    assert_eq!(mock.requests(), calls, "the second run is answered from its cache");

    // The server has a cache of its own: it calls the judge for every request once.
    let server =
        Server::start(&[&healthbench(), &"--judges", &judges, &"--cache", &dir.path("serve-cache.sqlite")], &[]);
    let (s, r) = server.score(&json!({ "rows": rows }));
    assert_eq!(results(s, &r), &want);
    assert_eq!(mock.requests(), 2 * calls, "serve made the calls `rubric run` made");
    let (s, r) = server.score(&json!({ "rows": rows, "groups": "group" }));
    assert_eq!(results(s, &r), &want_grouped);
    assert_eq!(mock.requests(), 2 * calls, "the same requests again cost no call");
    let judged = &metrics(&server)["judges"];
    assert_eq!(judged["http_requests"], json!(calls), "{judged}");
    assert!(judged["memo_hits"].as_u64().unwrap() + judged["cache_hits"].as_u64().unwrap() >= calls, "{judged}");
}

/// The records of a 200 answer (a failure shows the answer).
fn results(status: u16, answer: &Json) -> &Vec<Json> {
    assert_eq!(status, 200, "{answer}");
    answer["results"].as_array().unwrap_or_else(|| panic!("no results: {answer}"))
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A request that outlives `--timeout-s` gets 503 while the requests beside it are answered.
#[test]
fn serve_times_out_a_slow_request_without_holding_up_the_others() {
    let dir = TempDir::new("serve-timeout");
    let mock = Mock::start(&dir, 3000);
    let (_, rows) = healthbench_rows(&dir, 2);
    // A rubric without judged criteria beside it (the tiers example has some).
    let ifeval = crate_root().join("examples/ifeval/main.rubric");
    let ifeval_input = crate_root().join("examples/ifeval/inputs.jsonl");
    let want_ifeval = run_records(&dir, &ifeval, &ifeval_input, &[]);
    let ifeval_rows = rows_of(&ifeval_input);
    let server =
        Server::start(&[&healthbench(), &ifeval, &"--judges", &mock.judges, &"--no-cache", &"--timeout-s", &"1"], &[]);
    let slow_done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| {
            let started = std::time::Instant::now();
            let answer = server.score(&json!({ "rubric": "healthbench.example", "rows": rows }));
            slow_done.store(true, std::sync::atomic::Ordering::SeqCst);
            (answer, started.elapsed())
        });
        wait_in_flight(&server, 1);
        // Beside the slow request: answered, and before it.
        for _ in 0..3 {
            let (s, r) = server.score(&json!({ "rubric": "ifeval", "rows": ifeval_rows }));
            assert_eq!(results(s, &r), &want_ifeval);
        }
        assert!(!slow_done.load(std::sync::atomic::Ordering::SeqCst), "the slow request ended first");
        let ((s, r), took) = slow.join().unwrap();
        assert_eq!((s, r["error"]["code"].as_str()), (503, Some("rubric::serve::timeout")), "{r}");
        assert!(took < std::time::Duration::from_millis(2900), "the 503 came after {took:?}, not at the timeout");
    });
    // The server goes on.
    let (s, r) = server.score(&json!({ "rubric": "ifeval", "rows": ifeval_rows }));
    assert_eq!(results(s, &r), &want_ifeval);
    let m = metrics(&server);
    assert_eq!(m["requests_by_status"]["503"], 1, "{m}");
    assert!(mock.requests() > 0);
}

/// SIGTERM while a batch is being judged: the batch is answered in full, then the server exits
/// successfully.
#[cfg(unix)]
#[test]
fn serve_finishes_the_batch_in_flight_on_sigterm() {
    let dir = TempDir::new("serve-shutdown");
    let mock = Mock::start(&dir, 1500);
    let (input, rows) = healthbench_rows(&dir, 2);
    // What `rubric run` gives for those rows.
    let want = run_records(&dir, &healthbench(), &input, &["--judges", path_str(&mock.judges), "--no-cache"]);
    let mut server = Server::start(&[&healthbench(), &"--judges", &mock.judges, &"--no-cache"], &[]);
    let (s, r) = std::thread::scope(|scope| {
        let request = scope.spawn(|| server.score(&json!({ "rows": rows })));
        wait_in_flight(&server, 1);
        let kill = Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap();
        assert!(kill.success());
        request.join().unwrap()
    });
    // The batch in flight is answered in full.
    assert_eq!(results(s, &r), &want);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the server did not exit after SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

// ------------------------------------------------------------------ connection limits

/// A connection to `addr` from the loopback address `src` (Linux accepts any 127.x.y.z, so
/// each source address is another client).
fn connect_from(src: [u8; 4], addr: &str) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::from((src, 0))).unwrap();
        let s = socket.connect(addr.parse().unwrap()).await.unwrap();
        let s = s.into_std().unwrap();
        s.set_nonblocking(false).unwrap();
        s
    })
}

/// Read until the server closes `s` (end of file or a reset); what it sent first. Panics if it
/// is still open after `within`.
fn read_until_closed(s: &mut TcpStream, within: std::time::Duration) -> Vec<u8> {
    let deadline = std::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(
            !left.is_zero(),
            "the connection is still open after {within:?}; got {:?}",
            String::from_utf8_lossy(&got)
        );
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return got, // reset: closed
        }
    }
}

/// `GET /healthz` from the loopback address `src` on a fresh connection.
fn healthz_from(src: [u8; 4], addr: &str) -> (u16, String) {
    let mut s = connect_from(src, addr);
    s.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let text = String::from_utf8(read_until_closed(&mut s, std::time::Duration::from_secs(20))).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response head: {text:?}"));
    (head.split(' ').nth(1).unwrap().parse().unwrap(), body.to_string())
}

fn connections(server: &Server) -> Json {
    metrics(server)["connections"].clone()
}

/// A client that sends nothing, one that trickles its headers slower than
/// `--header-timeout-s`, a kept-alive connection left idle past `--keep-alive-s`, and a body
/// slower than `--body-timeout-s`: each is closed (the last after a 408), and the server answers
/// other clients all along.
#[test]
fn serve_closes_silent_slow_and_idle_connections() {
    let tiers = crate_root().join("examples/tiers/main.rubric");
    let server = Server::start(
        &[&tiers, &"--header-timeout-s", &"0.3", &"--keep-alive-s", &"0.3", &"--body-timeout-s", &"0.5"],
        &[],
    );
    let long = std::time::Duration::from_secs(10);
    // Opened, nothing sent.
    let mut silent = connect_from([127, 0, 0, 1], &server.addr);
    // Headers one byte every 50 ms: complete after about 3 s, ten times the timeout.
    let trickled = std::thread::scope(|scope| {
        let slow = scope.spawn(|| {
            let mut s = connect_from([127, 0, 0, 1], &server.addr);
            let head = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\nX-Slow: {}\r\n\r\n", server.addr, "s".repeat(20));
            let mut sent = 0;
            for b in head.as_bytes() {
                if s.write_all(std::slice::from_ref(b)).is_err() {
                    break;
                }
                sent += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            (sent, head.len(), read_until_closed(&mut s, long))
        });
        // Meanwhile, others are answered.
        for _ in 0..3 {
            assert_eq!(server.get("/healthz"), (200, "ok".to_string()));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        slow.join().unwrap()
    });
    let (sent, len, answer) = trickled;
    assert!(sent < len, "the server read all {len} bytes of the trickled headers");
    assert!(answer.is_empty(), "a trickled request was answered: {:?}", String::from_utf8_lossy(&answer));
    assert!(read_until_closed(&mut silent, long).is_empty(), "the silent connection got an answer");

    // A kept-alive connection: one request answered, then closed when left idle.
    let mut kept = connect_from([127, 0, 0, 1], &server.addr);
    kept.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", server.addr).as_bytes()).unwrap();
    let answer = String::from_utf8(read_until_closed(&mut kept, long)).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("ok"), "{answer:?}");

    // Headers complete, the body never: 408, and the connection closes.
    let mut stalled = connect_from([127, 0, 0, 1], &server.addr);
    stalled
        .write_all(
            format!("POST /v1/score HTTP/1.1\r\nHost: {}\r\nContent-Length: 100\r\n\r\n{{\"rows\": [", server.addr)
                .as_bytes(),
        )
        .unwrap();
    let answer = String::from_utf8(read_until_closed(&mut stalled, long)).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(answer.contains("rubric::serve::body_timeout"), "{answer:?}");

    assert_eq!(server.get("/healthz"), (200, "ok".to_string()));
    let c = connections(&server);
    assert!(c["timed_out"].as_u64().unwrap() >= 3, "{c}");
    let m = metrics(&server);
    assert_eq!(m["requests_by_status"]["408"], 1, "{m}");
}

/// More idle connections than `--max-connections-per-client` from one address, and than
/// `--max-connections` from several: over the per-client limit a connection is refused at
/// once (503 or closed) while other addresses are answered; at the whole limit a new client
/// takes the slot of the connection idle longest, and is answered at once.
#[test]
fn serve_answers_new_clients_past_idle_connection_limits() {
    let tiers = crate_root().join("examples/tiers/main.rubric");
    // Headers may take 60 s: only the limits close the idle connections here.
    let server = Server::start(
        &[&tiers, &"--max-connections", &"8", &"--max-connections-per-client", &"4", &"--header-timeout-s", &"60"],
        &[],
    );
    let quick = std::time::Duration::from_secs(10);
    // One address: 4 idle connections held, the 5th and 6th refused at once.
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect_from([127, 0, 0, 2], &server.addr)).collect();
    for _ in 0..2 {
        let mut over = connect_from([127, 0, 0, 2], &server.addr);
        let got = String::from_utf8(read_until_closed(&mut over, quick)).unwrap();
        assert!(got.is_empty() || got.starts_with("HTTP/1.1 503"), "{got:?}");
        assert!(got.is_empty() || got.contains("rubric::serve::too_many_connections"), "{got:?}");
    }
    // Another address is answered.
    assert_eq!(healthz_from([127, 0, 0, 1], &server.addr), (200, "ok".to_string()));
    // Fill the server from three more addresses: 4 + 12 idle connections for 8 slots.
    for src in [3, 4, 5] {
        for _ in 0..4 {
            held.push(connect_from([127, 0, 0, src], &server.addr));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    // A new client is answered at once, from an address seen before and from a new one.
    assert_eq!(healthz_from([127, 0, 0, 6], &server.addr), (200, "ok".to_string()));
    assert_eq!(healthz_from([127, 0, 0, 1], &server.addr), (200, "ok".to_string()));
    let (s, text) = server.get("/metrics");
    assert_eq!(s, 200, "{text}");
    let c: Json = serde_json::from_str::<Json>(&text).unwrap()["connections"].clone();
    assert!(c["refused"].as_u64().unwrap() >= 2, "{c}");
    assert!(c["evicted"].as_u64().unwrap() >= 8, "{c}");
    assert!(c["open"].as_u64().unwrap() <= 8, "{c}");
    // The connections idle longest were the ones closed.
    for s in held.iter_mut().take(4) {
        assert!(read_until_closed(s, quick).is_empty());
    }
}

/// With `--max-body-bytes`, a larger `Content-Length` is 413 before any of the body is sent,
/// and a chunked body is cut where it passes the limit (413); one within it is scored.
#[test]
fn serve_refuses_oversize_bodies_before_reading_them() {
    let tiers = crate_root().join("examples/tiers/main.rubric");
    let server = Server::start(&[&tiers, &"--max-body-bytes", &"2000"], &[]);
    let quick = std::time::Duration::from_secs(10);
    // Headers only: the body is never sent.
    let mut s = connect_from([127, 0, 0, 1], &server.addr);
    s.write_all(
        format!("POST /v1/score HTTP/1.1\r\nHost: {}\r\nContent-Length: 1000000000\r\n\r\n", server.addr).as_bytes(),
    )
    .unwrap();
    let got = String::from_utf8(read_until_closed(&mut s, quick)).unwrap();
    assert!(got.starts_with("HTTP/1.1 413"), "{got:?}");
    assert!(got.contains("rubric::serve::too_large") && got.contains("1000000000"), "{got:?}");

    // A chunked body of 200 KB in 1 KB chunks, sent while the answer is read.
    let chunked = |rows: &Json| -> String {
        let body = json!({ "rows": rows }).to_string();
        let mut s = connect_from([127, 0, 0, 1], &server.addr);
        s.write_all(
            format!(
                "POST /v1/score HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                server.addr
            )
            .as_bytes(),
        )
        .unwrap();
        let mut writer = s.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            for part in body.as_bytes().chunks(1000) {
                let mut chunk = format!("{:x}\r\n", part.len()).into_bytes();
                chunk.extend_from_slice(part);
                chunk.extend_from_slice(b"\r\n");
                if writer.write_all(&chunk).is_err() {
                    return;
                }
            }
            let _ = writer.write_all(b"0\r\n\r\n");
        });
        let got = String::from_utf8(read_until_closed(&mut s, quick)).unwrap();
        let _ = sender.join();
        got
    };
    let got = chunked(&json!([{ "response": "x".repeat(200_000) }]));
    assert!(got.starts_with("HTTP/1.1 413"), "{got:?}");
    assert!(got.contains("rubric::serve::too_large"), "{got:?}");
    let got = chunked(&json!([{ "response": "Call 911 now." }]));
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(got.contains("\"results\""), "{got:?}");
    let m = metrics(&server);
    assert_eq!(m["requests_by_status"]["413"], 2, "{m}");
}

/// `rubric serve --budget USD` caps what the server's judge calls spend over its life: the
/// requests that could pass it are not sent and their criteria come back `unscored(budget)`,
/// the budget is in `/metrics`, and a later request finds it spent.
#[test]
fn serve_keeps_its_judge_calls_within_its_budget() {
    let dir = TempDir::new("serve-budget");
    let example = crate_root().join("examples/judge-cost");
    let rt = crate::judge::rt();
    let rules = std::fs::read_to_string(example.join("mock-rules.toml")).unwrap();
    let mock = rt.block_on(crate::judge::server(crate::judge::rules(&rules)));
    let judges = dir.file(
        "judges.toml",
        &format!(
            "default = \"mock\"\n[endpoints.mock]\nbase_url = \"{}\"\n[prices.\"gpt-4.1\"]\ninput = 2.0\noutput = 8.0\n",
            mock.base_url()
        ),
    );
    let rows = rows_of(&example.join("inputs.jsonl"));
    let server =
        Server::start(&[&example.join("main.rubric"), &"--judges", &judges, &"--no-cache", &"--budget", &"0.02"], &[]);
    let (s, r) = server.score(&json!({ "rows": rows }));
    let criteria: Vec<&Json> = results(s, &r).iter().flat_map(|rec| rec["criteria"].as_array().unwrap()).collect();
    let held = criteria.iter().filter(|c| c["status"] == "unscored").count();
    let spent: f64 = criteria.iter().filter_map(|c| c["cost_usd"].as_f64()).sum();
    assert!(held > 0 && held < criteria.len(), "{criteria:?}");
    assert!(criteria
        .iter()
        .filter(|c| c["status"] == "unscored")
        .all(|c| c["reason"].as_str().unwrap().starts_with("budget: ")));
    assert!(spent > 0.0 && spent <= 0.02, "{spent}");
    assert_eq!(mock.requests() as usize, criteria.len() - held);
    let budget = &metrics(&server)["judges"]["budget"];
    assert_eq!(budget["limit_usd"], json!(0.02), "{budget}");
    assert!((budget["spent_usd"].as_f64().unwrap() - spent).abs() < 1e-9, "{budget}");
    // What is left of the budget is less than any request's worst case: nothing more is sent
    // (the requests answered before come from memory).
    let before = mock.requests();
    let (s, r) = server.score(&json!({ "rows": rows }));
    let again: Vec<&Json> = results(s, &r).iter().flat_map(|rec| rec["criteria"].as_array().unwrap()).collect();
    assert_eq!(again.iter().filter(|c| c["status"] == "unscored").count(), held);
    assert_eq!(mock.requests(), before);
}
