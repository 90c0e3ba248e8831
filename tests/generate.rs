//! `rubric generate` (issue 18, generation as a frozen stage), end to end on the built binary
//! against `rubric mock-judge`, with `examples/generated-rubrics`: the generated rows equal the
//! example's committed `inputs.jsonl` (live, and from its recorded transcript with no HTTP
//! call); every request fences what the generator sees; a second run is answered by the cache
//! except the invalid reply, which is asked again; identical requests are sent once; a row that
//! has its items keeps them; an invalid reply leaves the row without items and with the reason,
//! and `rubric run` makes it an error record (`rubric::row::not_generated`), never a shorter
//! rubric; and every engine's records name the hash of the items they scored.

use crate::common::{crate_root, mock_get, mock_judge, read_lines, TempDir};
use serde_json::Value as Json;
use std::path::Path;
use std::process::Command;

fn example(file: &str) -> std::path::PathBuf {
    crate_root().join("examples/generated-rubrics").join(file)
}

/// `rubric ARGS`: exit code and standard error.
fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rubric")).args(args).output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string())
}

fn jsonl(path: &Path) -> Vec<Json> {
    read_lines(path).iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn generation_is_a_stage_of_its_own_with_provenance_cache_replay_and_error_records() {
    let dir = TempDir::new("generate");
    let (mock, base, judges) = mock_judge(&dir, &example("mock-rules.toml"), "");
    let requests = || mock_get(&base.replace("/v1", ""), "/stats")["requests"].as_u64().unwrap();
    let main = example("main.rubric");
    let prompts = example("prompts.jsonl");
    let cache = dir.path("cache.sqlite");
    let out = dir.path("rows.jsonl");
    let transcript = dir.path("generation.jsonl");

    // Live: the example's rows, byte for byte (provenance included); exit 3, one row failed.
    let (code, err) = rubric(&[
        &"generate",
        &main,
        &"--input",
        &prompts,
        &"--output",
        &out,
        &"--judges",
        &judges,
        &"--cache",
        &cache,
        &"--record",
        &transcript,
        &"--no-progress",
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("4 rows: 2 inputs generated, 1 kept (the rows had them), 1 failed"), "{err}");
    assert!(err.contains("failed by code: generator_invalid 1"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(example("inputs.jsonl")).unwrap());
    assert_eq!(requests(), 3);
    let rows = jsonl(&out);
    let g = &rows[0]["generated"]["rubrics"];
    assert_eq!((g["generator"].as_str(), g["model"].as_str()), (Some("writer"), Some("mock-model-1")), "{g}");
    assert!(
        g["request"].as_str().unwrap().starts_with("sha256:") && g["sha256"].as_str().unwrap().starts_with("sha256:")
    );
    assert_eq!(rows[0]["rubrics"].as_array().unwrap().len(), 3);
    assert!(rows[2].get("rubrics").is_none(), "no items for the invalid reply: {}", rows[2]);
    let why = rows[2]["generated"]["rubrics"]["error"].as_str().unwrap();
    assert!(why.starts_with("generator_invalid: the reply[0] has no `points`"), "{why}");
    assert_eq!(rows[3]["rubrics"], serde_json::json!([{"criterion": "Suggests rest", "points": 1}]), "kept");
    assert!(rows[3].get("generated").is_none(), "a kept row is not touched: {}", rows[3]);

    // Each request fences what the generator sees (recorded requests).
    for line in jsonl(&transcript) {
        let user = line["request"]["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains("<<<BEGIN prompt ") && user.contains("<<<BEGIN reference "), "{user}");
        assert!(!user.contains("<<<BEGIN response "), "the generator does not see the response: {user}");
    }

    // What generating again would ask, sending nothing: the cache answers the two valid replies.
    let o = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .args(["generate", "--plan", "--format", "json", "--input"])
        .arg(&prompts)
        .arg(&main)
        .arg("--judges")
        .arg(&judges)
        .arg("--cache")
        .arg(&cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let plan: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((plan["rows"].as_u64(), plan["inputs_to_generate"].as_u64()), (Some(4), Some(3)), "{plan}");
    assert_eq!((plan["plan"]["planned"].as_u64(), plan["plan"]["cached"].as_u64()), (Some(3), Some(2)), "{plan}");
    assert_eq!(plan["total"]["requests"], 1, "{plan}");
    assert_eq!(requests(), 3, "the plan sent nothing");

    // Again with the cache: the two valid replies from it, the invalid one asked again.
    let again = dir.path("again.jsonl");
    let (code, err) = rubric(&[
        &"generate",
        &main,
        &"--input",
        &prompts,
        &"--output",
        &again,
        &"--judges",
        &judges,
        &"--cache",
        &cache,
        &"--allow-errors",
        &"--no-progress",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("1 calls over HTTP") && err.contains("2 answered from the cache"), "{err}");
    assert_eq!(requests(), 4);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());

    // Offline, from the example's transcript: the same rows, no HTTP call.
    drop(mock);
    let replayed = dir.path("replayed.jsonl");
    let replay = format!("replay:{}", example("generation.jsonl").display());
    let (code, err) = rubric(&[
        &"generate",
        &main,
        &"--input",
        &prompts,
        &"--output",
        &replayed,
        &"--judge",
        &replay,
        &"--no-cache",
        &"--allow-errors",
        &"--no-progress",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("0 calls over HTTP") && err.contains("3 replayed"), "{err}");
    assert_eq!(std::fs::read(&replayed).unwrap(), std::fs::read(&out).unwrap());

    // Scored on every engine: each record names the hash of the items it used; the row without
    // items is an error record that says why.
    for engine in ["interp", "wasm", "jit"] {
        let scored = dir.path(&format!("scored-{engine}.jsonl"));
        let (code, err) = rubric(&[
            &"run",
            &main,
            &"--input",
            &out,
            &"--output",
            &scored,
            &"--verdicts",
            &example("verdicts.jsonl"),
            &"--engine",
            &engine,
            &"--allow-errors",
            &"--no-progress",
        ]);
        assert_eq!(code, Some(0), "{engine}: {err}");
        let records = jsonl(&scored);
        for (row, rec) in rows.iter().zip(&records) {
            match row["generated"]["rubrics"]["sha256"].as_str() {
                Some(h) => assert_eq!(rec["generated"]["rubrics"], h, "{engine}: {rec}"),
                None if row.get("rubrics").is_some() => {
                    // a kept row's items are hashed all the same
                    assert!(rec["generated"]["rubrics"].as_str().unwrap().starts_with("sha256:"), "{rec}")
                }
                None => {
                    assert_eq!(rec["error"]["code"], "rubric::row::not_generated", "{engine}: {rec}");
                    let m = rec["error"]["message"].as_str().unwrap();
                    assert!(m.starts_with("input `rubrics` was not generated by `writer`: generator_invalid"), "{m}");
                }
            }
        }
        assert_eq!(records[0]["score"], 1.0, "{engine}");
        assert_eq!(records[1]["score"], 0.5, "{engine}");
    }
}

/// Identical requests of a chunk are sent once (the dispatcher's deduplication), and a row
/// whose seen inputs do not bind is kept, with the reason, and asked nothing.
#[test]
fn identical_requests_are_sent_once_and_unbindable_rows_are_kept_with_the_reason() {
    let dir = TempDir::new("generate-dedup");
    let (_mock, base, judges) = mock_judge(&dir, &example("mock-rules.toml"), "");
    let row = r#"{"prompt": "What should I do about a headache?", "reference": "Rest.", "response": "Rest."}"#;
    let input = dir.file(
        "in.jsonl",
        &format!("{row}\n{row}\n{row}\n{{\"prompt\": 7, \"reference\": \"x\", \"response\": \"y\"}}\nnot json\n"),
    );
    let out = dir.path("out.jsonl");
    let (code, err) = rubric(&[
        &"generate",
        &example("main.rubric"),
        &"--input",
        &input,
        &"--output",
        &out,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert_eq!(mock_get(&base.replace("/v1", ""), "/stats")["requests"], 1, "{err}");
    let rows = jsonl(&out);
    assert_eq!(rows.len(), 5, "every line is written");
    assert!(rows[..3].iter().all(|r| r["rubrics"] == rows[0]["rubrics"] && r["rubrics"].is_array()));
    assert_eq!(rows[3]["prompt"], 7, "kept as it came: {}", rows[3]);
    assert!(rows[3]["generated"]["rubrics"]["error"].as_str().unwrap().starts_with("generator_row: rubric::row::type"));
    assert_eq!(rows[4]["line"], "not json");
    assert!(rows[4]["generated"]["error"].as_str().unwrap().starts_with("generator_row: line is not valid JSON"));
}
