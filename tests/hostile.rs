//! Hostile input at the edges (issue 25): every reproducer of the fault-injection run as a test.
//! Rows that are bytes and not text, sources nested past any sane depth or with lines past
//! column 65,535, a judge cache with flipped bytes, an endpoint that never answers, votes with
//! failed samples. Each ends in a diagnostic or an error record, never a panic, an abort or a
//! lost batch.

use serde_json::Value as Json;
use std::process::{Command, Output};

use crate::common::{json_lines, TempDir};

fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
    for a in args {
        cmd.arg(a);
    }
    cmd.env_remove("RUST_BACKTRACE").env("NO_COLOR", "1");
    cmd.output().expect("the rubric binary runs")
}

fn describe(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

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
