//! `exec` end to end on the built binary: a rubric that runs programs is refused without
//! `--allow-exec` and says so in `inspect` and in its bundle's manifest (verified, so it cannot be
//! edited away); `examples/code-tests` scored by running its programs in the sandbox (each row's
//! stage and score), the same records again from the execution cache on the Wasm engine and the
//! JIT with nothing executed, from the recorded transcript with no sandbox at all, and the
//! example's shipped transcript reproducing a live run.

use serde_json::Value as Json;

use crate::cli::{describe, rubric};
use crate::common::{crate_root, read_lines, TempDir};

/// `rubric run MAIN --input INPUT --output OUT --no-progress` with `extra` options.
fn run_rubric(
    main: &std::path::Path,
    input: &std::path::Path,
    out: &std::path::Path,
    extra: &[&dyn AsRef<std::ffi::OsStr>],
) -> std::process::Output {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"run", &main, &"--input", &input, &"--output", &out, &"--no-progress"];
    args.extend_from_slice(extra);
    rubric(&args)
}

const RUNS: &str = r#"rubric t.exec @ 1.0.0
input response: Text
let run = exec("python3", response)
criterion runs "Runs" check run.ok
criterion says "Prints 42" check run.stdout == "42\n"
score = fraction(all)
"#;

#[test]
fn a_rubric_that_executes_is_refused_without_permission_and_says_so() {
    let dir = TempDir::new("exec-refused");
    let main = dir.file("main.rubric", RUNS);
    let input = dir.file("in.jsonl", "{\"response\": \"print(42)\"}\n");
    let out = dir.path("out.jsonl");
    let o = run_rubric(&main, &input, &out, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("runs programs (`exec`)") && err.contains("--allow-exec"), "{err}");
    assert!(!out.exists(), "nothing was scored");

    let o = rubric(&[&"inspect", &main]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("executes  programs in the sandbox"), "{}", describe(&o));
    let o = rubric(&[&"inspect", &"--json", &main]);
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["executes"], true);

    // The bundle's manifest lists the capability; a manifest edited to hide it is refused.
    let bundle = dir.path("t.rbk");
    let o = rubric(&[&"build", &main, &"-o", &bundle]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let o = rubric(&[&"inspect", &"--json", &bundle]);
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["manifest"]["capabilities"], serde_json::json!(["exec"]), "{j}");
    // A forger drops the capability and makes every hash right again: the reader still refuses
    // the bundle, since the manifest no longer says what the IR does.
    let mut es = rubric::bundle::container::read(&std::fs::read(&bundle).unwrap(), 100).unwrap();
    let mut manifest: Json = serde_json::from_slice(&es[0].data).unwrap();
    manifest.as_object_mut().unwrap().remove("capabilities");
    let mut mbytes = serde_json::to_vec_pretty(&manifest).unwrap();
    mbytes.push(b'\n');
    let last = es.len() - 1;
    es[last].data = format!("{}\n", rubric::bundle::sha256(&mbytes)).into_bytes();
    es[0].data = mbytes;
    let forged_path = dir.path("forged.rbk");
    std::fs::write(&forged_path, rubric::bundle::container::write(&es)).unwrap();
    let o = rubric(&[&"inspect", &forged_path]);
    assert_eq!(o.status.code(), Some(1), "a bundle whose manifest hides `exec` is refused: {}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("capabilities"), "{}", describe(&o));

    // A rubric without `exec` has no capabilities in its manifest.
    let plain = dir.file("plain.rubric", "rubric t.plain @ 1.0.0\ninput response: Text\ncriterion a \"A\" check response == \"x\"\nscore = fraction(all)\n");
    let plain_bundle = dir.path("plain.rbk");
    let o = rubric(&[&"build", &plain, &"-o", &plain_bundle]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let o = rubric(&[&"inspect", &"--json", &plain_bundle]);
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["manifest"].get("capabilities").is_none(), "{j}");
    assert_eq!(j["executes"], false);
}

/// The records of a run, without what differs between engines.
fn records(path: &std::path::Path) -> Vec<Json> {
    read_lines(path)
        .iter()
        .map(|l| {
            let mut v: Json = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("engine");
            v
        })
        .collect()
}

/// What a row's record says of its stage: the score, the failure class, and the runtime checks
/// of its smoke run (in time, in memory, offline).
fn outcome(r: &Json) -> (String, f64, Json, Vec<String>) {
    let status = |id: &str| {
        r["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    (
        r["id"].as_str().unwrap().to_string(),
        r["score"].as_f64().unwrap_or(f64::NAN),
        r["failure_class"].clone(),
        ["in_time", "in_memory", "offline"].iter().map(|id| status(id)).collect(),
    )
}

#[test]
fn the_code_tests_example_runs_in_the_sandbox_then_from_cache_and_transcript() {
    crate::common::sandbox_ready();
    let dir = TempDir::new("exec-code-tests");
    let ex = crate_root().join("examples/code-tests");
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let (cache, transcript) = (dir.path("cache"), dir.path("transcript.jsonl"));
    let run = |out: &std::path::Path, extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"--allow-errors"];
        args.extend_from_slice(extra);
        let o = run_rubric(&main, &input, out, &args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let live = dir.path("live.jsonl");
    let report = run(&live, &[&"--allow-exec", &"--exec-cache", &cache, &"--exec-record", &transcript]);
    let live = records(&live);
    let got: Vec<(String, f64, Json, Vec<String>)> = live.iter().map(outcome).collect();
    let (ok, no, gated) = (["met"; 3], ["unscored"; 3], Json::from("format"));
    let want: Vec<(&str, f64, Json, [&str; 3])> = vec![
        ("good", 1.0, Json::Null, ok),
        ("wrong", 0.3 + 0.7 * 2.0 / 3.0, Json::Null, ok),
        ("off-by-one", 0.3, Json::Null, ok),
        ("crashing", 0.2, Json::from("runtime"), ok),
        ("syntax-error", 0.1, Json::from("compile"), no),
        ("looping", 0.2, Json::from("runtime"), ["unmet", "met", "met"]),
        ("memory-hungry", 0.2, Json::from("runtime"), ["met", "unmet", "met"]),
        ("network", 0.2, Json::from("runtime"), ["met", "met", "unmet"]),
        ("no-code", 0.0, gated.clone(), no),
        ("two-blocks", 0.0, gated, no),
        ("file-writer", 1.0, Json::Null, ok),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.0, w.0);
        assert!((g.1 - w.1).abs() < 1e-12, "{}: score {} want {}", g.0, g.1, w.1);
        assert_eq!(g.2, w.2, "{}: failure class", g.0);
        assert_eq!(g.3, w.3, "{}: in time, in memory, offline", g.0);
    }
    // Every execution was made once: the compile run, the smoke run and the three tests of each
    // program that reached them, no more (identical runs share one result).
    assert!(report.contains("executions: "), "{report}");
    let executed: u64 = report
        .split("executions: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{report}"));
    let recorded = read_lines(&transcript).len() as u64;
    assert_eq!(executed, recorded, "{report}");

    // Again on the Wasm engine and the JIT, from the cache: the same records, nothing executed.
    for engine in ["wasm", "jit"] {
        let out = dir.path(&format!("{engine}.jsonl"));
        let report = run(&out, &[&"--allow-exec", &"--exec-cache", &cache, &"--engine", &engine]);
        assert!(report.contains("executions: 0 run in the sandbox"), "{engine}: {report}");
        assert_eq!(records(&out), live, "{engine}");
    }
    // From the transcript alone: no sandbox, no cache.
    let out = dir.path("replayed.jsonl");
    let report = run(&out, &[&"--exec-replay", &transcript, &"--no-exec-cache"]);
    assert!(report.contains("executions: 0 run in the sandbox"), "{report}");
    assert_eq!(records(&out), live);

    // The transcript shipped with the example is this run's: `rubric test` replays it.
    let shipped = ex.join("executions.jsonl");
    let out = dir.path("shipped.jsonl");
    run(&out, &[&"--exec-replay", &shipped, &"--no-exec-cache"]);
    assert_eq!(records(&out), live, "examples/code-tests/executions.jsonl is out of date");
}

/// `--exec-runtime NAME:FILE:COMMAND` adds a runtime; a malformed one is refused before anything
/// runs.
#[test]
fn a_configured_runtime_runs_in_the_sandbox_too() {
    crate::common::sandbox_ready();
    let dir = TempDir::new("exec-runtime");
    let main = dir.file(
        "main.rubric",
        "rubric t.perl @ 1.0.0\ninput response: Text\nlet run = exec(\"perl\", response)\n\
         criterion says \"Prints 42\" check run.stdout == \"42\"\nscore = fraction(all)\n",
    );
    let input = dir.file("in.jsonl", "{\"response\": \"print 6 * 7\"}\n");
    let out = dir.path("out.jsonl");
    let o = run_rubric(
        &main,
        &input,
        &out,
        &[&"--allow-exec", &"--no-exec-cache", &"--exec-runtime", &"perl:main.pl:/usr/bin/perl"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(records(&out)[0]["score"], 1.0);
    let o = run_rubric(&main, &input, &out, &[&"--allow-exec", &"--exec-runtime", &"perl:main.pl:perl"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an absolute path"), "{}", describe(&o));
}

/// A row's time limit does not count the time it waits for its executions (each has its own):
/// two executions of 600 ms in a row limited to 500 ms, on the Wasm engine (whose epoch
/// deadline follows) and the interpreter under the same limits.
#[test]
fn executions_do_not_count_against_the_rows_time_limit() {
    crate::common::sandbox_ready();
    let dir = TempDir::new("exec-row-time");
    let main = dir.file(
        "main.rubric",
        "rubric t.slow @ 1.0.0\ninput response: Text\n\
         criterion a \"First\" check exec(\"python3\", \"import time; time.sleep(0.6); print(1)\").ok\n\
         criterion b \"Second\" check exec(\"python3\", \"import time; time.sleep(0.6); print(2)\").ok\n\
         score = fraction(all)\n",
    );
    let input = dir.file("in.jsonl", "{\"response\": \"x\"}\n");
    let out = dir.path("out.jsonl");
    let o = run_rubric(
        &main,
        &input,
        &out,
        &[&"--allow-exec", &"--no-exec-cache", &"--engine", &"wasm", &"--row-timeout-ms", &"500"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let r = &records(&out)[0];
    assert_eq!(r["score"], 1.0, "{r}");
}

/// A row deadline (`--row-deadline-ms`) stops waiting for a program that outlives it: that
/// row is unscored with reason `timeout` (its criterion `exec_deadline`), the row beside it
/// (a quick program) is scored, and the run ends long before the slow program would have.
#[test]
fn a_row_deadline_stops_waiting_for_a_slow_program() {
    crate::common::sandbox_ready();
    let dir = TempDir::new("exec-deadline");
    let main = dir.file(
        "main.rubric",
        "rubric t.deadline @ 1.0.0\ninput response: Text\n\
         criterion runs \"Runs\" check exec(\"python3\", response, timeout_ms: 30000).ok\n\
         score = fraction(all)\n",
    );
    let input = dir.file(
        "in.jsonl",
        "{\"id\": \"quick\", \"response\": \"print(1)\"}\n\
         {\"id\": \"slow\", \"response\": \"import time; time.sleep(20)\"}\n",
    );
    let out = dir.path("out.jsonl");
    let start = std::time::Instant::now();
    let o = run_rubric(
        &main,
        &input,
        &out,
        &[&"--allow-exec", &"--no-exec-cache", &"--row-deadline-ms", &"3000", &"--allow-errors", &"--slow-rows", &"1"],
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(15), "took {:?}", start.elapsed());
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let rs = records(&out);
    assert_eq!(rs[0]["score"], 1.0, "{}", rs[0]);
    assert_eq!(rs[1]["score"], Json::Null, "{}", rs[1]);
    assert!(rs[1]["unscored_reason"].as_str().unwrap().starts_with("timeout: "), "{}", rs[1]);
    let reason = rs[1]["criteria"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("exec_deadline: the row's deadline passed"), "{}", rs[1]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("slowest rows:\n  row 1 (id \"slow\"): "), "{err}");
}

/// Descriptors that whoever started `rubric` left open without close-on-exec (here a shell's
/// fds 7 and 9) never reach the program: it sees only 0, 1, 2 and the one it lists with. And
/// many runs in a row of one slot all start (no zombie of an earlier run's namespace is left to
/// count against the next run's process limit: `rubric` reaps them).
#[test]
fn inherited_descriptors_never_reach_the_program() {
    crate::common::sandbox_ready();
    let dir = TempDir::new("exec-fds");
    let main = dir.file(
        "main.rubric",
        "rubric t.fds @ 1.0.0\ninput response: Text\nlet run = exec(\"python3\", response)\n\
         criterion fds \"Only 0, 1 and 2\" check run.stdout == \"[0, 1, 2, 3]\\n\"\nscore = fraction(all)\n",
    );
    let rows: String = (0..40)
        .map(|i| format!("{{\"id\": \"r{i}\", \"response\": \"import os  # {i}\\nprint(sorted(int(n) for n in os.listdir('/proc/self/fd')))\"}}\n"))
        .collect();
    let input = dir.file("in.jsonl", &rows);
    let out = dir.path("out.jsonl");
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg("exec 7</dev/null 9>/dev/null; exec \"$@\"")
        .arg("rubric")
        .arg(env!("CARGO_BIN_EXE_rubric"))
        .args(["run"])
        .arg(&main)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .args(["--no-progress", "--allow-exec", "--no-exec-cache", "--exec-concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let records = records(&out);
    assert_eq!(records.len(), 40);
    for r in &records {
        assert_eq!(r["score"], 1.0, "{r}");
    }
}

/// A submission directory on disk (`exec(..., dir: PATH)`): its files, bytes and all, are
/// written beside the program; rows name it relative to `--exec-dir-root`, and a path that
/// climbs out, goes through a symbolic link or names nothing is unscored with the reason, as is
/// any `dir` in a run that names no root. The rest of the batch is scored.
#[test]
fn a_submission_directory_is_run_from_inside_the_execution_root_only() {
    crate::common::sandbox_ready();
    let dir = TempDir::new("exec-dir");
    let root = dir.path("submissions");
    std::fs::create_dir_all(root.join("alice/data")).unwrap();
    std::fs::write(root.join("alice/solution.py"), "answer = 42\n").unwrap();
    std::fs::write(root.join("alice/data/blob.bin"), [0u8, 0x9f, 0x92, 0xff]).unwrap();
    std::fs::create_dir_all(root.join("bob")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("bob/solution.py")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("mallory")).unwrap();
    let main = dir.file(
        "main.rubric",
        "rubric t.dir @ 1.0.0\ninput sub: Text\n\
         let run = exec(\"python3\", \"import pathlib\\nprint(open('solution.py').read().strip())\\n\
         print(pathlib.Path('data/blob.bin').read_bytes().hex())\", dir: sub)\n\
         criterion ran \"Ran\" check run.ok\n\
         criterion says \"Prints\" check run.stdout == \"answer = 42\\n009f92ff\\n\"\nscore = fraction(all)\n",
    );
    let input = dir.file(
        "in.jsonl",
        "{\"id\": \"alice\", \"sub\": \"alice\"}\n{\"id\": \"climbs\", \"sub\": \"../submissions/alice\"}\n\
         {\"id\": \"absolute\", \"sub\": \"/etc\"}\n{\"id\": \"bob\", \"sub\": \"bob\"}\n\
         {\"id\": \"mallory\", \"sub\": \"mallory\"}\n{\"id\": \"nobody\", \"sub\": \"nobody\"}\n",
    );
    let out = dir.path("out.jsonl");
    let o = run_rubric(&main, &input, &out, &[&"--allow-exec", &"--no-exec-cache", &"--exec-dir-root", &root]);
    // the unscored rows fail the run (exit 3) after every row is written
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 scored, 5 unscored"), "{}", describe(&o));
    let scored = records(&out);
    let by_id = |id: &str| scored.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no record {id}"));
    assert_eq!(by_id("alice")["score"], 1.0, "{}", by_id("alice"));
    for (id, says) in [
        ("climbs", "not a relative path"),
        ("absolute", "not a relative path"),
        ("bob", "symbolic link"),
        ("mallory", "symbolic link"),
        ("nobody", "No such file"),
    ] {
        let r = by_id(id);
        assert_eq!(r["status"], "unscored", "{r}");
        let text = r.to_string();
        assert!(text.contains("exec_dir") && text.contains(says), "{id}: {text}");
    }

    // No root named: nothing is read from disk.
    let o = run_rubric(&main, &input, &out, &[&"--allow-exec", &"--no-exec-cache"]);
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let r = &records(&out)[0];
    assert_eq!(r["status"], "unscored", "{r}");
    assert!(r.to_string().contains("--exec-dir-root"), "{r}");
}
