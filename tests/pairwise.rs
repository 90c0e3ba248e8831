//! Pairwise comparisons end to end: `examples/pairwise` asked over real HTTP of the mock judge
//! (`compares answer_a, answer_b`, `order both`), checked on the requests the mock received
//! (both orders sent, every candidate fenced and never named), on the records (the same as
//! the recorded verdicts give, on every engine) and on the run's preference figures.

use serde_json::Value as Json;

use crate::cli::{describe, rubric};
use crate::common::{crate_root, mock_get, TempDir};

/// The records of a run, each as [`comparable`] makes it.
pub(crate) fn records(path: &std::path::Path) -> Vec<Json> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| comparable(serde_json::from_str(l).unwrap())).collect()
}

/// A record without what may differ between runs of the same verdicts: neither the engine nor
/// the model that answered is part of the comparison.
pub(crate) fn comparable(mut v: Json) -> Json {
    v.as_object_mut().unwrap().remove("engine");
    for c in v["criteria"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("model");
    }
    v
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

/// `stat ranking = bradley_terry(score) per input model_a, model_b` over the recorded verdicts:
/// the three systems' ratings in `--summary` and from `rubric stats`, against numbers computed
/// independently with the Python package choix 0.4.1: every row's score s is a multiple of
/// 1/12, so it was given to `choix.mm_pairwise(3, data, alpha=0, tol=1e-12)` as 12·s wins of
/// A over B and 12·(1 − s) of B over A (scaling every win count by 12 leaves the maximum-
/// likelihood strengths as they are). choix's log-strengths: atlas 0.9180717224998334, birch
/// -1.1027254407869458, cedar 0.18465371828711258; Elo 1000 + 400·log10(π): 1159.4853932292,
/// 808.4369704048, 1032.0776363660.
#[test]
fn the_pairwise_example_ranks_its_systems_as_choix_does() {
    let dir = TempDir::new("pairwise-ranking");
    let ex = crate_root().join("examples/pairwise");
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let o = rubric(&[
        &"run",
        &main,
        &"--input",
        &input,
        &"--verdicts",
        &ex.join("verdicts.jsonl"),
        &"--output",
        &out,
        &"--no-progress",
        &"--summary",
        &summary,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    // (system, rating, strength, wins, losses, comparisons), counted by hand from the scores
    // of expected.jsonl: atlas wins 11/12 four times and 4/12 once.
    let want = [
        ("atlas", 1159.4853932292, 0.9180717224998334, 4.0, 1.0, 5),
        ("cedar", 1032.0776363660, 0.18465371828711258, 3.0, 2.0, 5),
        ("birch", 808.4369704048, -1.1027254407869458, 1.0, 5.0, 6),
    ];
    let check = |s: &Json| {
        let ranked: Vec<&Json> = s["stats"].as_array().unwrap().iter().filter(|v| v["name"] == "ranking").collect();
        assert_eq!(ranked.len(), 3, "{s}");
        for (rank, (v, w)) in ranked.iter().zip(want).enumerate() {
            assert_eq!(v["key"], w.0, "rank order: {v}");
            assert_eq!(v["rank"].as_u64(), Some(rank as u64 + 1), "{v}");
            assert_eq!(v["declared"], "bradley_terry(score) per input model_a, model_b");
            let value = v["value"].as_f64().unwrap();
            assert!((value - w.1).abs() < 1e-6, "{}: {value} is not {}", w.0, w.1);
            assert!((v["strength"].as_f64().unwrap() - w.2).abs() < 1e-6, "{v}");
            assert!((v["wins"].as_f64().unwrap() - w.3).abs() < 1e-12, "{v}");
            assert!((v["losses"].as_f64().unwrap() - w.4).abs() < 1e-12, "{v}");
            assert_eq!(
                (v["comparisons"].as_u64(), v["n"].as_u64(), v["left_out"].as_u64()),
                (Some(w.5), Some(w.5), Some(0))
            );
            assert_eq!(v["converged"], true, "{v}");
            let (lo, hi) = (v["interval"][0].as_f64().unwrap(), v["interval"][1].as_f64().unwrap());
            assert!(lo <= value && value <= hi, "{lo} <= {value} <= {hi}");
            // Every score lies strictly between 0 and 1, so a resample has no ratings only when
            // it draws the rows of a single pair of systems: (3/8)^8 + (3/8)^8 + (2/8)^8 ≈ 0.08%.
            let skipped = v["resamples_skipped"].as_u64().unwrap();
            assert!(skipped < 10, "{v}");
        }
    };
    let s: Json = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    check(&s);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("rank 1, wins 4.00, losses 1.00"), "{stderr}");
    // `rubric stats` recomputes the same from the records and the rows.
    let o = rubric(&[&"stats", &main, &"--results", &out, &"--input", &input, &"--format", &"json"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let again: Json = serde_json::from_slice(&o.stdout).unwrap();
    check(&again);
    assert_eq!(again["stats"], s["stats"]);
    // Without the rows the systems are unknown: not computed, and said so.
    let o = rubric(&[&"stats", &main, &"--results", &out, &"--format", &"json"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let bare: Json = serde_json::from_slice(&o.stdout).unwrap();
    let not = bare["not_computed"].as_array().unwrap();
    assert!(
        not.iter().any(|n| n["name"] == "ranking" && n["reason"].as_str().unwrap().contains("`model_a`")),
        "{bare}"
    );
}
