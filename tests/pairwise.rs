//! Pairwise comparisons end to end: `examples/pairwise` asked over real HTTP of the mock judge
//! (`compares answer_a, answer_b`, `order both`), checked on the requests the mock received
//! (both orders sent, every candidate fenced and never named), on the records (the same as
//! the recorded verdicts give, on every engine) and on the run's preference figures.

use serde_json::Value as Json;

use crate::cli::{describe, rubric};
use crate::common::{crate_root, mock_get, TempDir};

fn records(path: &std::path::Path) -> Vec<Json> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| {
            let mut v: Json = serde_json::from_str(l).unwrap();
            // Neither the engine nor the model that answered is part of the comparison.
            v.as_object_mut().unwrap().remove("engine");
            for c in v["criteria"].as_array_mut().unwrap() {
                c.as_object_mut().unwrap().remove("model");
            }
            v
        })
        .collect()
}

#[test]
fn the_pairwise_example_over_http_asks_both_orders_fenced_and_reports_position_bias() {
    let dir = TempDir::new("pairwise");
    let ex = crate_root().join("examples/pairwise");
    let (_mock, base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let (live, summary) = (dir.path("live.jsonl"), dir.path("summary.json"));
    let o = rubric(&[
        &"run",
        &main,
        &"--input",
        &input,
        &"--output",
        &live,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
        &"--summary",
        &summary,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    // 8 rows × 3 criteria × 2 orders, one request each.
    let bodies = mock_get(&base, "/requests");
    let bodies = bodies.as_array().unwrap();
    assert_eq!(bodies.len(), 48);
    let rows: Vec<Json> =
        std::fs::read_to_string(&input).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut a_first = 0;
    for b in bodies {
        let user = b["messages"][1]["content"].as_str().unwrap();
        assert!(!user.contains("answer_a") && !user.contains("answer_b"), "a candidate is named: {user}");
        let schema = &b["response_format"]["json_schema"]["schema"]["properties"]["preference"]["enum"];
        assert_eq!(schema, &serde_json::json!(["first", "second", "tie"]), "{b}");
        let row = rows.iter().find(|r| user.contains(r["question"].as_str().unwrap())).unwrap();
        let (a, b) = (row["answer_a"].as_str().unwrap(), row["answer_b"].as_str().unwrap());
        let fenced = |k: u32, text: &str| {
            let begin = user.find(&format!("<<<BEGIN candidate-{k} ")).unwrap();
            let end = user.find(&format!("<<<END candidate-{k} ")).unwrap();
            user[begin..end].contains(text)
        };
        if fenced(1, a) && fenced(2, b) {
            a_first += 1;
        } else {
            assert!(fenced(1, b) && fenced(2, a), "each answer in its own fence: {user}");
        }
    }
    assert_eq!(a_first, 24, "half the requests show answer A first");
    // The live records are what the recorded verdicts give, on every engine.
    let live = records(&live);
    for engine in ["interp", "wasm", "jit"] {
        let out = dir.path(&format!("{engine}.jsonl"));
        let o = rubric(&[
            &"run",
            &main,
            &"--input",
            &input,
            &"--verdicts",
            &ex.join("verdicts.jsonl"),
            &"--output",
            &out,
            &"--engine",
            &engine,
            &"--no-progress",
        ]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
        assert_eq!(records(&out), live, "{engine}");
    }
    // Three criteria per call: one request per row and order, the same records.
    let multi = dir.file(
        "multi.rubric",
        &std::fs::read_to_string(&main).unwrap().replace("  order both\n", "  order both\n  per_call 3\n"),
    );
    let before = mock_get(&base, "/requests").as_array().unwrap().len();
    let out = dir.path("multi.jsonl");
    let o = rubric(&[
        &"run",
        &multi,
        &"--input",
        &input,
        &"--output",
        &out,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(mock_get(&base, "/requests").as_array().unwrap().len() - before, 16);
    let strip = |rs: Vec<Json>| -> Vec<Json> {
        rs.into_iter()
            .map(|mut r| {
                r.as_object_mut().unwrap().remove("ir_hash");
                r
            })
            .collect()
    };
    assert_eq!(strip(records(&out)), strip(live.clone()), "per_call 3 decides as one criterion per call does");
    let clear = &live[0]["criteria"][2];
    assert_eq!(clear["preference"], "tie", "a position-biased answer becomes a tie: {clear}");
    assert_eq!(clear["inconsistent"], 1, "{clear}");
    // The position figures, counted by hand from mock-rules.toml: accuracy and completeness are
    // fair (15 first-shown, 15 second-shown wins, the spider row's accuracy a tie both ways);
    // clarity always prefers the first-shown answer, so all 8 of its pairs flip.
    let s: Json = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let p = &s["preferences"]["position"];
    assert_eq!(
        (p["first_shown"].as_u64(), p["second_shown"].as_u64(), p["ties"].as_u64()),
        (Some(31), Some(15), Some(2))
    );
    assert_eq!((p["pairs"].as_u64(), p["flipped"].as_u64()), (Some(24), Some(8)), "{p}");
    let clear = &s["preferences"]["criteria"][2];
    assert_eq!(clear["results"], serde_json::json!({"tie": 8}), "{clear}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("flip rate 0.333"), "{}", describe(&o));
}
