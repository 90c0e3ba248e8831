//! `rubric compare BASE NEW` on the built binary: two runs of a rubric, the second with a
//! stricter criterion, over rows that differ by one on each side. The statistics are checked
//! against published values in `src/agree/compare.rs` (McNemar); here the whole command:
//! pairing, rows in one file only, the mean difference recomputed from the records, flips,
//! reproducible intervals, `--fail-if` exit statuses and the JUnit file.

use crate::cli::{describe, rubric};
use crate::common::{json_lines, TempDir};
use serde_json::Value as Json;

const BASE: &str = r#"rubric compare.demo @ 1.0.0
input response: Text
criterion polite "Says please" check contains(lower(response), "please")
criterion short "Is short" check word_count(response) <= 12
score = fraction(all)
"#;

fn run(dir: &TempDir, rubric_text: &str, rows: &str, out: &str) -> std::path::PathBuf {
    let main = dir.file(&format!("{out}.rubric"), rubric_text);
    let input = dir.file(&format!("{out}-rows.jsonl"), rows);
    let output = dir.path(&format!("{out}.jsonl"));
    let o = rubric(&[&"run", &main, &"--input", &input, &"--output", &output, &"--no-progress", &"--allow-errors"]);
    assert!(o.status.success(), "{}", describe(&o));
    output
}

#[test]
fn compare_pairs_rows_counts_flips_and_gates_a_regression() {
    let dir = TempDir::new("compare");
    let mut rows = String::new();
    for i in 0..40 {
        let words = if i % 3 == 0 {
            "please help me with this short thing"
        } else {
            "help me with a somewhat longer request than before please now"
        };
        rows.push_str(&format!("{{\"id\": \"r{i}\", \"response\": \"{words} {i}\"}}\n"));
    }
    // NEW lacks r0 and has an extra row; its `short` criterion is stricter.
    let new_rows: String = rows.lines().skip(1).map(|l| format!("{l}\n")).collect::<String>()
        + "{\"id\": \"extra\", \"response\": \"please\"}\n";
    let base = run(&dir, BASE, &rows, "base");
    let new = run(&dir, &BASE.replace("<= 12", "<= 8"), &new_rows, "new");
    let compare = |extra: &[&str]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"compare", &base, &new];
        for e in extra {
            args.push(e);
        }
        rubric(&args)
    };
    let o = compare(&["--format", "json"]);
    assert!(o.status.success(), "{}", describe(&o));
    let doc: Json = serde_json::from_slice(&o.stdout).unwrap();
    let c = &doc["comparison"];
    assert_eq!(
        (c["rows"]["base"].as_u64(), c["rows"]["new"].as_u64(), c["rows"]["paired"].as_u64()),
        (Some(40), Some(40), Some(39))
    );
    assert_eq!(c["rows"]["only_base"], serde_json::json!(["r0"]));
    assert_eq!(c["rows"]["only_new"], serde_json::json!(["extra"]));
    // The mean difference, from the records themselves.
    let scores = |p: &std::path::Path| -> std::collections::HashMap<String, f64> {
        json_lines(&std::fs::read_to_string(p).unwrap())
            .iter()
            .map(|r| (r["id"].as_str().unwrap().to_string(), r["score"].as_f64().unwrap()))
            .collect()
    };
    let (sb, sn) = (scores(&base), scores(&new));
    let diffs: Vec<f64> = sb.iter().filter_map(|(k, b)| sn.get(k).map(|n| n - b)).collect();
    let want = diffs.iter().sum::<f64>() / diffs.len() as f64;
    // Every paired row's difference is listed.
    let by_row = c["by_row"].as_array().unwrap();
    assert_eq!(by_row.len(), 39);
    for r in by_row {
        let k = r["row"].as_str().unwrap();
        assert_eq!(r["difference"].as_f64(), Some(sn[k] - sb[k]), "{r}");
    }
    assert!((c["difference"]["mean"].as_f64().unwrap() - want).abs() < 1e-12, "{c}");
    assert!(want < 0.0);
    let (lo, hi) = (c["difference"]["interval"][0].as_f64().unwrap(), c["difference"]["interval"][1].as_f64().unwrap());
    assert!(lo <= want && want <= hi && hi < 0.0, "{lo} {want} {hi}");
    // Every paired row whose `short` went from met to unmet is a flip of that criterion only.
    let flipped = diffs.iter().filter(|d| **d < 0.0).count() as u64;
    assert_eq!(c["criteria"]["to_unmet"].as_u64(), Some(flipped));
    assert_eq!(c["criteria"]["by_criterion"][0]["criterion"], "short");
    // Pass at 1: every flipped row regressed.
    let o = compare(&["--format", "json", "--pass-at", "1"]);
    let doc: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["comparison"]["pass"]["regressed"].as_u64(), Some(flipped));
    assert_eq!(doc["comparison"]["pass"]["fixed"].as_u64(), Some(0));
    // The same seed, the same interval.
    let again: Json = serde_json::from_slice(&compare(&["--format", "json"]).stdout).unwrap();
    assert_eq!(again["comparison"]["difference"], c["difference"]);

    // Gates: a drop beyond 0.05 with 95% confidence holds; beyond 0.9 does not.
    let junit = dir.path("junit.xml");
    let o = compare(&["--fail-if", "drop>0.05@0.95", "--fail-if", "drop>0.9", "--junit", junit.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("fail-if drop>0.05@0.95: HELD") && stdout.contains("fail-if drop>0.9: not held"),
        "{stdout}"
    );
    assert!(stdout.contains("only in BASE (1): r0") && stdout.contains("only in NEW (1): extra"), "{stdout}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"rubric compare\" tests=\"2\" failures=\"1\""), "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    let o = compare(&["--fail-if", "drop>0.9", "--fail-if", "mcnemar<0.000001"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let o = compare(&["--fail-if", "speed>1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a condition"), "{}", describe(&o));
}

/// `rubric init DIR` writes a rubric directory that passes `rubric test` on every engine as it
/// is, whose mock judge (its own rules) gives the recorded verdicts' scores, and refuses a
/// directory that is not empty.
#[test]
fn init_scaffolds_a_directory_that_passes_its_tests() {
    let dir = TempDir::new("init");
    let target = dir.path("support-eval");
    let o = rubric(&[&"init", &target]);
    assert!(o.status.success(), "{}", describe(&o));
    for engine in ["interp", "wasm", "jit"] {
        let o = rubric(&[&"test", &"--engine", &engine, &target]);
        assert!(o.status.success(), "{engine}: {}", describe(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("5 passed, 0 failed (examples: 2 ok, 0 failed; rows: 3 ok"), "{out}");
    }
    // The mock judge, on a free port, answers as the recorded verdicts do.
    let (_mock, base, _) = crate::common::mock_judge(&dir, &target.join("mock-rules.toml"), "");
    let judges =
        std::fs::read_to_string(target.join("judges.toml")).unwrap().replace("http://127.0.0.1:8765/v1", &base);
    std::fs::write(target.join("judges.toml"), judges).unwrap();
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &target.join("main.rubric"),
        &"--input",
        &target.join("inputs.jsonl"),
        &"--judges",
        &target.join("judges.toml"),
        &"--no-cache",
        &"--no-progress",
        &"--output",
        &out,
    ]);
    assert!(o.status.success(), "{}", describe(&o));
    let scores: Vec<Json> =
        json_lines(&std::fs::read_to_string(&out).unwrap()).iter().map(|r| r["score"].clone()).collect();
    let want: Vec<Json> = json_lines(&std::fs::read_to_string(target.join("expected.jsonl")).unwrap())
        .iter()
        .map(|r| r["score"].clone())
        .collect();
    assert_eq!(scores, want);
    let o = rubric(&[&"init", &target]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not empty"), "{}", describe(&o));
}
