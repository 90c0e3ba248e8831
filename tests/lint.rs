//! `rubric lint` and `rubric check --lint` on the built binary: the rules' warnings with their
//! codes (human and JSON), `--deny-warnings` as a CI gate, a clean rubric passing it, and over
//! rows (`--input`): per-instance criteria from HealthBench's published rows linted, and a
//! criterion quoting the row's reference answer found as a leak (and one that does not, not).

use crate::common::{crate_root, json_lines, TempDir};
use serde_json::{json, Value as Json};
use std::process::{Command, Output};

fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
    for a in args {
        cmd.arg(a);
    }
    cmd.output().expect("rubric runs")
}

fn codes_of(out: &Output) -> Vec<String> {
    json_lines(&String::from_utf8_lossy(&out.stdout))
        .iter()
        .filter_map(|d| d["code"].as_str().map(String::from))
        .collect()
}

#[test]
fn lint_warns_with_codes_and_deny_warnings_gates() {
    let file = crate_root().join("tests/ui/lint/rules.rubric");
    let out = rubric(&[&"lint", &file, &"--error-format", &"json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut codes = codes_of(&out);
    codes.sort();
    codes.dedup();
    assert_eq!(
        codes,
        [
            "rubric::lint::check_mismatch",
            "rubric::lint::compound",
            "rubric::lint::duplicate",
            "rubric::lint::imbalance",
            "rubric::lint::sign",
            "rubric::lint::vague"
        ]
    );
    let human = rubric(&[&"lint", &file]);
    let err = String::from_utf8_lossy(&human.stderr);
    assert!(err.contains("rubric::lint::vague") && err.contains("Uses an appropriate tone"), "{err}");
    assert!(err.contains("lint: 6 findings in the rubric's static criteria"), "{err}");
    let denied = rubric(&[&"lint", &file, &"--deny-warnings"]);
    assert_eq!(denied.status.code(), Some(1));
    // A clean rubric passes the gate.
    let clean = rubric(&[&"lint", &crate_root().join("examples/tiers/main.rubric"), &"--deny-warnings"]);
    assert!(clean.status.success(), "{}", String::from_utf8_lossy(&clean.stderr));
    // `check --lint` adds the warnings; `check` alone does not.
    let checked = rubric(&[&"check", &file, &"--lint", &"--error-format", &"json"]);
    assert!(codes_of(&checked).contains(&"rubric::lint::sign".to_string()));
    let plain = rubric(&[&"check", &file, &"--error-format", &"json"]);
    assert!(!codes_of(&plain).iter().any(|c| c.starts_with("rubric::lint::")));
}

#[test]
fn lint_over_rows_reads_per_instance_criteria_and_finds_leaks() {
    let dir = TempDir::new("lint-rows");
    let reference = "Take paracetamol 500 mg to 1 g every four to six hours, and no more than 4 g in 24 hours.";
    let rows = [
        json!({"id": "leaky", "response": "x", "ideal": reference, "rubrics": [
            {"criterion": "Says to take paracetamol 500 mg to 1 g every four to six hours", "points": 5},
            {"criterion": "Gives the maximum daily dose", "points": 3},
        ]}),
        json!({"id": "clean", "response": "x", "ideal": reference, "rubrics": [
            {"criterion": "Gives a dose range and an interval between doses", "points": 5},
            {"criterion": "Correctly states the daily maximum", "points": -2},
        ]}),
    ];
    let input = dir.file("rows.jsonl", &rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    let main = dir.file(
        "main.rubric",
        "rubric demo.rows @ 1.0.0\ninput response: Text\ninput rubrics: List[{criterion: Text, points: Number}]\n\
         judge grader { model \"gpt-4.1-mini\" sees response }\n\
         criteria items each item in rubrics by grader {\n  criterion item.criterion points item.points\n}\n",
    );
    let out = rubric(&[&"lint", &main, &"--input", &input, &"--error-format", &"json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let found: Vec<(String, String, String)> = json_lines(&String::from_utf8_lossy(&out.stdout))
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().into(),
                f["criterion"].as_str().unwrap().into(),
                f["code"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("leaky".into(), "items[0]".into(), "rubric::lint::leak".into()),
            ("clean".into(), "items[1]".into(), "rubric::lint::sign".into()),
        ]
    );
    // Another reference field by path: nothing matches there, so no leak.
    let other = rubric(&[&"lint", &main, &"--input", &input, &"--reference", &"response", &"--error-format", &"json"]);
    assert!(!codes_of(&other).contains(&"rubric::lint::leak".to_string()));
}

#[test]
fn lint_reads_healthbench_published_rubrics() {
    // The ten HealthBench rows of the shared conformance data, with their physician-written
    // ideal completions as the reference: every finding names a real item of its row.
    let shared = crate_root().join("../shared/conformance/healthbench");
    assert!(shared.is_dir(), "conformance data missing: {} (see ../shared/conformance/README.md)", shared.display());
    let dir = TempDir::new("lint-hb");
    let mut rows = String::new();
    let mut items = 0;
    for n in 1..=10 {
        let path = shared.join(format!("example_{n}.json"));
        let e: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        items += e["rubrics"].as_array().unwrap().len();
        let row = json!({"id": format!("example_{n}"), "prompt": e["prompt"], "response": "x", "rubrics": e["rubrics"],
                         "ideal_completions_data": e["ideal_completions_data"]});
        rows.push_str(&format!("{row}\n"));
    }
    let input = dir.file("rows.jsonl", &rows);
    let out = rubric(&[
        &"lint",
        &crate_root().join("examples/healthbench/main.rubric"),
        &"--input",
        &input,
        &"--reference",
        &"ideal_completions_data.ideal_completion",
        &"--error-format",
        &"json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let found = json_lines(&String::from_utf8_lossy(&out.stdout));
    let rows: Vec<Json> = json_lines(&rows);
    for f in &found {
        let row = &rows[f["row"].as_u64().unwrap() as usize];
        let k: usize =
            f["criterion"].as_str().unwrap().trim_start_matches("items[").trim_end_matches(']').parse().unwrap();
        assert!(k < row["rubrics"].as_array().unwrap().len(), "{f}");
    }
    let compound = found.iter().filter(|f| f["code"] == "rubric::lint::compound").count();
    let vague = found.iter().filter(|f| f["code"] == "rubric::lint::vague").count();
    // Some published items are compound or vague by these rules, most are not.
    assert!(compound >= 5 && vague >= 5, "compound {compound}, vague {vague}");
    assert!(found.len() * 3 < items, "{} findings over {items} items", found.len());
}
