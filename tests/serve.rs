//! `rubric serve` on the built binary, over real HTTP on loopback: results equal to `rubric run`
//! on the same rows (with and without groups, a source on the interpreter and a bundle on
//! Wasm), concurrent clients, size limits, malformed requests, the bearer token, metrics.

use crate::common::{crate_root, read_lines, TempDir};
use serde_json::{json, Value as Json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `rubric serve` process, killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, &str)]) -> Server {
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

    fn get(&self, path: &str) -> (u16, String) {
        http(&self.addr, "GET", path, &[], b"")
    }

    fn score(&self, body: &Json) -> (u16, Json) {
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
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
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
    let out = dir.path(&format!("run-{}.jsonl", extra.join("-")));
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"run", &rubric_file, &"--input", &input, &"--output", &out, &"--no-progress"];
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
