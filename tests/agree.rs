//! `rubric agree` on the built binary: the judge's verdicts against human labels. The
//! statistics themselves are checked against published values in `src/agree/metrics.rs`
//! (scikit-learn's κ cases, the `krippendorff` package's α cases, Krippendorff's worked
//! examples); here the whole command: the HealthBench meta-evaluation's pairwise case end to
//! end, labels that name nothing, unscored verdicts kept apart, reproducible intervals, the
//! example directory re-derived from its files, and ordinal and nominal criteria.

use serde_json::Value as Json;
use std::collections::HashMap;

use crate::cli::{describe, rubric};
use crate::common::{crate_root, mock_get, TempDir};

const TWO: &str = r#"rubric agree.two @ 1.0.0

input response: Text

judge grader {
  model "m"
  sees response
}

criterion a "A" by grader
criterion b "B" by grader
"#;

/// `rubric agree` with `--format json`, returning the report.
fn agree(dir: &TempDir, rubric_file: &str, extra: &[&str]) -> Json {
    let main = dir.path(rubric_file);
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"agree", &main, &"--format", &"json", &"--no-progress"];
    for e in extra {
        args.push(e);
    }
    let o = rubric(&args);
    assert!(o.status.success(), "{}", describe(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&o)))
}

fn group<'a>(report: &'a Json, by: &str, key: &str) -> &'a Json {
    report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["by"] == by && g["key"] == key)
        .unwrap_or_else(|| panic!("no group {by} {key} in {report:#}"))
}

fn metric(g: &Json, name: &str) -> Json {
    g["metrics"][name]["value"].clone()
}

/// The simple-evals case: the judge's met, unmet, met against [met, met, unmet], [met,
/// unmet] and [unmet] (criterion `a` on rows 0 and 1, `b` on row 2).
fn healthbench_case(dir: &TempDir) {
    dir.file("main.rubric", TWO);
    dir.file("rows.jsonl", "{\"id\": \"r0\", \"response\": \"x\"}\n{\"id\": \"r1\", \"response\": \"y\"}\n{\"id\": \"r2\", \"response\": \"z\"}\n");
    dir.file(
        "verdicts.jsonl",
        concat!(
            "{\"row\": 0, \"verdicts\": {\"a\": \"met\", \"b\": \"unmet\"}}\n",
            "{\"row\": 1, \"verdicts\": {\"a\": \"unmet\", \"b\": \"unmet\"}}\n",
            "{\"row\": 2, \"verdicts\": {\"a\": \"met\", \"b\": \"met\"}}\n",
        ),
    );
    dir.file(
        "labels.jsonl",
        concat!(
            "{\"row\": 0, \"annotator\": \"x\", \"labels\": {\"a\": \"met\"}}\n",
            "{\"row\": \"r0\", \"annotator\": \"y\", \"criterion\": \"a\", \"label\": true}\n",
            "{\"row\": 0, \"annotator\": \"z\", \"criterion\": \"a\", \"label\": 0}\n",
            "{\"row\": 1, \"annotator\": \"x\", \"criterion\": \"a\", \"label\": \"met\"}\n",
            "{\"row\": 1, \"annotator\": \"y\", \"criterion\": \"a\", \"label\": \"unmet\"}\n",
            "{\"row\": \"r2\", \"annotator\": \"x\", \"criterion\": \"b\", \"label\": \"unmet\"}\n",
        ),
    );
}

fn scored_args(dir: &TempDir) -> Vec<String> {
    ["--input", "rows.jsonl", "--verdicts", "verdicts.jsonl", "--labels", "labels.jsonl"]
        .iter()
        .map(|s| if s.ends_with(".jsonl") { dir.path(s).display().to_string() } else { s.to_string() })
        .collect()
}

#[test]
fn agree_reproduces_the_healthbench_meta_evaluation_case_end_to_end() {
    let dir = TempDir::new("agree-hb");
    healthbench_case(&dir);
    let args = scored_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = agree(&dir, "main.rubric", &args);
    assert_eq!((r["rows"].as_u64(), r["labels"].as_u64(), r["labelled_rows"].as_u64()), (Some(3), Some(6), Some(3)));
    // Overall: precision (2 + 0 + 0) / (3 + 0 + 1), (0 + 1 + 0) / (0 + 2 + 0); recall
    // (2 + 0 + 0) / (2 + 1 + 0), (0 + 1 + 0) / (1 + 1 + 1): simple-evals' expected values.
    let all = group(&r, "overall", "all");
    assert_eq!((all["items"].as_u64(), all["pairs"].as_u64()), (Some(3), Some(6)));
    assert_eq!(metric(all, "precision_met"), 2.0 / 4.0);
    assert_eq!(metric(all, "precision_unmet"), 1.0 / 2.0);
    assert_eq!(metric(all, "tpr"), 2.0 / 3.0);
    assert_eq!(metric(all, "tnr"), 1.0 / 3.0);
    let (p, rc) = (2.0 / 4.0, 2.0 / 3.0);
    let f1_pos = 2.0 * p * rc / (p + rc);
    let (p, rc) = (1.0 / 2.0, 1.0 / 3.0);
    let f1_neg = 2.0 * p * rc / (p + rc);
    assert_eq!(metric(all, "f1_met"), f1_pos);
    assert_eq!(metric(all, "f1_unmet"), f1_neg);
    assert_eq!(metric(all, "macro_f1"), (f1_pos + f1_neg) / 2.0);
    // The cluster `a` (examples 1 and 2) and `b` (example 3 only), as in the test.
    let a = group(&r, "criterion", "a");
    assert_eq!(metric(a, "precision_met"), 2.0 / 3.0);
    assert_eq!(metric(a, "precision_unmet"), 1.0 / 2.0);
    assert_eq!(metric(a, "tpr"), 2.0 / 3.0);
    assert_eq!(metric(a, "tnr"), 1.0 / 2.0);
    let b = group(&r, "criterion", "b");
    assert_eq!(metric(b, "precision_met"), 0.0);
    assert_eq!(metric(b, "tnr"), 0.0);
    for undefined in ["precision_unmet", "tpr", "f1_met", "f1_unmet", "macro_f1"] {
        assert_eq!(metric(b, undefined), Json::Null, "{undefined} has no denominator in cluster b");
    }
    // Row 0 has three annotators, row 1 two: the human ceiling is over those two items.
    assert_eq!(a["human"]["items"].as_u64(), Some(2));
    assert_eq!(a["human"]["pairs"].as_u64(), Some(6 + 2));
}

#[test]
fn labels_that_name_nothing_are_errors_with_their_lines() {
    let dir = TempDir::new("agree-bad");
    healthbench_case(&dir);
    dir.file(
        "labels.jsonl",
        concat!(
            "{\"row\": 0, \"criterion\": \"a\", \"label\": \"met\", \"annotator\": \"x\"}\n",
            "{\"row\": 7, \"criterion\": \"a\", \"label\": \"met\"}\n",
            "{\"row\": \"nobody\", \"criterion\": \"a\", \"label\": \"met\"}\n",
            "{\"row\": 1, \"criterion\": \"c\", \"label\": \"met\"}\n",
            "{\"row\": 1, \"criterion\": \"a\", \"label\": \"maybe\"}\n",
            "{\"row\": 0, \"criterion\": \"a\", \"label\": \"unmet\", \"annotator\": \"x\"}\n",
            "not json\n",
        ),
    );
    let main = dir.path("main.rubric");
    let args = scored_args(&dir);
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"agree", &main, &"--no-progress"];
    for a in &args {
        all.push(a);
    }
    let o = rubric(&all);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "labels line 2: row 7 is not a row of the results (3 rows)",
        "labels line 3: no row has the id \"nobody\"",
        "labels line 4: row 1 has no criterion `c` (its criteria: a, b)",
        "labels line 5: criterion `a` is binary: a label is \"met\", \"unmet\", true, false, 1 or 0, found \"maybe\"",
        "labels line 6: a second label from annotator \"x\" for row 0 criterion `a` (the first is on line 1)",
        "labels line 7: not JSON",
        "6 labels could not be used: nothing was compared",
    ] {
        assert!(err.contains(want), "missing {want:?} in\n{err}");
    }
    assert!(o.stdout.is_empty(), "no report on bad labels: {}", describe(&o));
}

#[test]
fn unscored_verdicts_are_counted_apart_and_intervals_are_reproducible() {
    let dir = TempDir::new("agree-unscored");
    healthbench_case(&dir);
    dir.file(
        "verdicts.jsonl",
        concat!(
            "{\"row\": 0, \"verdicts\": {\"a\": {\"unscored\": \"judge_timeout\"}, \"b\": \"unmet\"}}\n",
            "{\"row\": 1, \"verdicts\": {\"a\": \"unmet\", \"b\": \"unmet\"}}\n",
            "{\"row\": 2, \"verdicts\": {\"a\": \"met\", \"b\": \"met\"}}\n",
        ),
    );
    let args = scored_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = agree(&dir, "main.rubric", &args);
    let a = group(&r, "criterion", "a");
    assert_eq!(a["unscored"], serde_json::json!({"judge_timeout": 1}));
    // Only row 1's item is compared: the judge's unmet against met and unmet.
    assert_eq!((a["items"].as_u64(), a["pairs"].as_u64()), (Some(1), Some(2)));
    assert_eq!(metric(a, "accuracy"), 0.5);
    // The same seed gives the same report; the records of a run give the same report as
    // scoring again; another seed moves the intervals.
    let again = agree(&dir, "main.rubric", &args);
    assert_eq!(r, again);
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &dir.path("main.rubric"),
        &"--input",
        &dir.path("rows.jsonl"),
        &"--verdicts",
        &dir.path("verdicts.jsonl"),
        &"--output",
        &out,
        &"--no-progress",
        &"--allow-errors",
    ]);
    assert!(o.status.success(), "{}", describe(&o));
    let labels = dir.path("labels.jsonl").display().to_string();
    let results = out.display().to_string();
    let rows = dir.path("rows.jsonl").display().to_string();
    let from_results = agree(&dir, "main.rubric", &["--input", &rows, "--labels", &labels, "--results", &results]);
    assert_eq!(r, from_results);
}

/// The example directory, re-derived from its files: every label against the judge's
/// verdict for its item, counted here independently of `src/agree`.
#[test]
fn the_example_directory_agrees_with_a_count_from_its_files() {
    let ex = crate_root().join("examples/judge-agreement");
    let main = ex.join("main.rubric");
    let o = rubric(&[
        &"agree",
        &main,
        &"--input",
        &ex.join("inputs.jsonl"),
        &"--verdicts",
        &ex.join("verdicts.jsonl"),
        &"--labels",
        &ex.join("labels.jsonl"),
        &"--format",
        &"json",
        &"--no-progress",
    ]);
    assert!(o.status.success(), "{}", describe(&o));
    let r: Json = serde_json::from_slice(&o.stdout).unwrap();
    let read = |name: &str| -> Vec<Json> {
        std::fs::read_to_string(ex.join(name))
            .unwrap_or_else(|e| panic!("examples/judge-agreement/{name} is needed: {e}"))
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let mut verdict: HashMap<(String, String), Json> = HashMap::new();
    for v in read("verdicts.jsonl") {
        for (c, x) in v["verdicts"].as_object().unwrap() {
            verdict.insert((v["row"].as_str().unwrap().to_string(), c.clone()), x.clone());
        }
    }
    let (mut pairs, mut agree_pairs, mut unscored_items) = (0, 0, std::collections::HashSet::new());
    let labels = read("labels.jsonl");
    for l in &labels {
        let key = (l["row"].as_str().unwrap().to_string(), l["criterion"].as_str().unwrap().to_string());
        match &verdict[&key] {
            Json::String(v) => {
                pairs += 1;
                agree_pairs += usize::from(*v == l["label"]);
            }
            _ => {
                unscored_items.insert(key);
            }
        }
    }
    let all = group(&r, "overall", "all");
    assert_eq!(r["labels"].as_u64(), Some(labels.len() as u64));
    assert_eq!(r["annotators"], serde_json::json!(["physician-a", "physician-b"]));
    assert_eq!(all["pairs"].as_u64(), Some(pairs));
    assert_eq!(metric(all, "accuracy"), agree_pairs as f64 / pairs as f64);
    assert_eq!(all["unscored"]["judge_timeout"].as_u64(), Some(unscored_items.len() as u64));
    for axis in ["accuracy", "completeness", "context_seeking"] {
        assert!(group(&r, "axis", axis)["metrics"]["kappa"]["value"].is_number());
    }
    assert!(all["human"]["metrics"]["alpha"]["value"].is_number());
    assert!(all["corrected"]["rogan_gladen"]["value"].is_number());
    // Another seed draws other resamples: the same figures, other intervals.
    let o = rubric(&[
        &"agree",
        &main,
        &"--input",
        &ex.join("inputs.jsonl"),
        &"--verdicts",
        &ex.join("verdicts.jsonl"),
        &"--labels",
        &ex.join("labels.jsonl"),
        &"--format",
        &"json",
        &"--no-progress",
        &"--seed",
        &"9",
    ]);
    let seeded: Json = serde_json::from_slice(&o.stdout).unwrap();
    let ci = |rep: &Json| group(rep, "overall", "all")["metrics"]["accuracy"]["ci"].clone();
    assert!(ci(&r).is_array(), "{r:#}");
    assert_eq!(metric(group(&seeded, "overall", "all"), "accuracy"), metric(all, "accuracy"));
    assert_ne!(ci(&seeded), ci(&r), "another seed, other resamples");
    // The text report says the same.
    let o = rubric(&[
        &"agree",
        &main,
        &"--input",
        &ex.join("inputs.jsonl"),
        &"--verdicts",
        &ex.join("verdicts.jsonl"),
        &"--labels",
        &ex.join("labels.jsonl"),
        &"--no-progress",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    let acc = format!("{:.3}", agree_pairs as f64 / pairs as f64);
    assert!(text.lines().any(|l| l.contains("overall all") && l.contains(&acc)), "{text}");
    assert!(text.contains("unscored (not compared): 1 × judge_timeout"), "{text}");
    // The example's README quotes the figures.
    let readme = std::fs::read_to_string(ex.join("README.md")).unwrap();
    assert!(readme.contains(&format!("accuracy {acc} [")), "examples/judge-agreement/README.md quotes accuracy {acc}");
}

#[test]
fn ordinal_and_nominal_criteria_use_their_own_statistics() {
    let dir = TempDir::new("agree-kinds");
    dir.file(
        "main.rubric",
        r#"rubric agree.kinds @ 1.0.0

input response: Text

judge leveller {
  model "m"
  sees response
  returns level
}

judge labeller {
  model "m"
  sees response
  returns label
}

criterion clarity "How clear" ordinal [1 "unclear", 2 "somewhat", 3 "clear"] by leveller
criterion tone "Tone" nominal {warm: 1, neutral: 0.5, curt: 0} by labeller
"#,
    );
    dir.file("rows.jsonl", &(0..4).map(|i| format!("{{\"response\": \"r{i}\"}}\n")).collect::<String>());
    let judged = [(1, "warm"), (2, "neutral"), (3, "curt"), (3, "warm")];
    let labelled = [(1, "warm"), (3, "curt"), (3, "curt"), (2, "neutral")];
    let mut verdicts = String::new();
    let mut labels = String::new();
    for (i, ((jl, jt), (ll, lt))) in judged.iter().zip(&labelled).enumerate() {
        verdicts += &format!("{{\"row\": {i}, \"verdicts\": {{\"clarity\": {jl}, \"tone\": \"{jt}\"}}}}\n");
        labels += &format!("{{\"row\": {i}, \"labels\": {{\"clarity\": {ll}, \"tone\": \"{lt}\"}}}}\n");
    }
    dir.file("verdicts.jsonl", &verdicts);
    dir.file("labels.jsonl", &labels);
    let args = scored_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = agree(&dir, "main.rubric", &[&args[..], &["--bootstrap", "0"]].concat());
    let clarity = group(&r, "criterion", "clarity");
    assert_eq!(clarity["kind"], "ordinal");
    // Levels judged 1, 2, 3, 3 against 1, 3, 3, 2: two exact, absolute errors 0, 1, 0, 1.
    assert_eq!(metric(clarity, "accuracy"), 0.5);
    assert_eq!(metric(clarity, "mae"), 0.5);
    assert!(metric(clarity, "kappa_quadratic").as_f64().unwrap() > metric(clarity, "kappa").as_f64().unwrap());
    let tone = group(&r, "criterion", "tone");
    assert_eq!(tone["kind"], "nominal");
    assert_eq!(metric(tone, "accuracy"), 0.5);
    // Cohen's κ by hand: p_o = 2/4; the judge said warm 2, neutral 1, curt 1, the labels warm
    // 1, neutral 1, curt 2; p_e = (2·1 + 1·1 + 1·2) / 16 = 5/16; κ = (8/16 - 5/16) / (11/16).
    let k = metric(tone, "kappa").as_f64().unwrap();
    assert!((k - 3.0 / 11.0).abs() < 1e-12, "{k}");
    assert!(tone["metrics"]["accuracy"]["ci"].is_null(), "no intervals with --bootstrap 0");
    assert!(tone.get("corrected").is_none(), "corrected rates are for binary criteria");
}

/// The mock judge as a noisy grader over HTTP: its rules say the truth, it answers with the
/// TPR and TNR they give, the same answers on every run (seeded), and `rubric agree` measures
/// about those rates against labels that are the truth.
#[test]
fn a_noisy_mock_grader_over_http_has_the_rates_its_rules_give() {
    let dir = TempDir::new("agree-noisy");
    dir.file(
        "main.rubric",
        r#"rubric agree.noisy @ 1.0.0

input response: Text
input rubrics: List[{criterion: Text, points: Number}]

judge grader {
  model "m"
  sees response
}

criteria items each item in rubrics by grader {
  criterion item.criterion points item.points
}
"#,
    );
    let (mut rows, mut labels) = (String::new(), String::new());
    for r in 0..20 {
        let items: Vec<String> = (0..10)
            .map(|i| {
                let truth = if (r + i) % 2 == 0 { "does" } else { "misses" };
                format!("{{\"criterion\": \"item {r}-{i}: the reply {truth} it\", \"points\": 1}}")
            })
            .collect();
        rows += &format!("{{\"id\": \"r{r}\", \"response\": \"reply {r}\", \"rubrics\": [{}]}}\n", items.join(", "));
        for i in 0..10 {
            let label = if (r + i) % 2 == 0 { "met" } else { "unmet" };
            labels += &format!("{{\"row\": \"r{r}\", \"criterion\": \"items[{i}]\", \"label\": \"{label}\", \"annotator\": \"truth\"}}\n");
        }
    }
    dir.file("rows.jsonl", &rows);
    dir.file("labels.jsonl", &labels);
    let rules = dir.file(
        "rules.toml",
        "[default]\nverdict = \"unmet\"\ntpr = 0.8\ntnr = 0.6\nseed = 3\n\n[[rule]]\ncriterion = \"the reply does it\"\nverdict = \"met\"\ntpr = 0.8\ntnr = 0.6\nseed = 3\n",
    );
    let (_mock, _, _) = mock_judge(&dir, &rules);
    let args: Vec<String> = ["--input", "rows.jsonl", "--labels", "labels.jsonl", "--judges", "judges.toml"]
        .iter()
        .map(|s| if s.contains('.') { dir.path(s).display().to_string() } else { s.to_string() })
        .collect();
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.push("--no-cache");
    let first = agree(&dir, "main.rubric", &args);
    let again = agree(&dir, "main.rubric", &args);
    assert_eq!(first, again, "the noisy grader answers the same requests alike");
    let all = group(&first, "overall", "all");
    assert_eq!(all["pairs"].as_u64(), Some(200));
    let (tpr, tnr) = (metric(all, "tpr").as_f64().unwrap(), metric(all, "tnr").as_f64().unwrap());
    assert!((tpr - 0.8).abs() < 0.1 && (tnr - 0.6).abs() < 0.1, "TPR {tpr}, TNR {tnr}");
    // The truth's met rate is 0.5; the judge's is about 0.5·0.8 + 0.5·0.4 = 0.6, and the
    // corrections bring it back to the labels' rate.
    let c = &all["corrected"];
    assert_eq!(c["label_rate"]["value"], 0.5);
    let judge = c["judge_rate"]["value"].as_f64().unwrap();
    let rg = c["rogan_gladen"]["value"].as_f64().unwrap();
    assert!((judge - 0.6).abs() < 0.1, "judge rate {judge}");
    assert!((rg - 0.5).abs() < 1e-9, "Rogan–Gladen with the measured TPR/TNR recovers the labelled rate exactly: {rg}");
}

/// `rubric calibrate` over HTTP against a logprob-scoring noisy grader: an isotonic map of
/// P(yes) that the rubric then names (`calibration "FILE"`); applied to its own training rows
/// it gives every item its fitted value (the mean of the fitted values is the mean label, a
/// property of the isotonic fit), the status is the calibrated decision, records keep the raw
/// verdict; a bundle's hash changes with the calibration, `inspect` and `diff` show it.
#[test]
fn a_fitted_calibration_is_named_by_the_rubric_applied_and_frozen_into_bundles() {
    let dir = TempDir::new("agree-calibrate");
    let rubric_text = |calibration: &str| {
        format!(
            r#"rubric agree.calibrated @ 1.0.0

input response: Text
input rubrics: List[{{criterion: Text, points: Number}}]

judge grader {{
  model "m"
  sees response
  scoring logprob
{calibration}}}

criteria items each item in rubrics by grader {{
  criterion item.criterion points item.points
}}
"#
        )
    };
    dir.file("main.rubric", &rubric_text(""));
    let (mut rows, mut labels) = (String::new(), String::new());
    for r in 0..12 {
        let items: Vec<String> = (0..10)
            .map(|i| {
                let truth = if (r * 3 + i) % 5 < 2 { "does" } else { "misses" };
                format!("{{\"criterion\": \"item {r}-{i}: the reply {truth} it\", \"points\": 1}}")
            })
            .collect();
        rows += &format!("{{\"id\": \"r{r}\", \"response\": \"reply {r}\", \"rubrics\": [{}]}}\n", items.join(", "));
        for i in 0..10 {
            let label = if (r * 3 + i) % 5 < 2 { "met" } else { "unmet" };
            labels += &format!("{{\"row\": {r}, \"criterion\": \"items[{i}]\", \"label\": \"{label}\"}}\n");
        }
    }
    dir.file("rows.jsonl", &rows);
    dir.file("labels.jsonl", &labels);
    let rules = dir.file(
        "rules.toml",
        "[default]\nverdict = \"unmet\"\ntpr = 0.85\ntnr = 0.7\nseed = 5\n\n[[rule]]\ncriterion = \"the reply does it\"\nverdict = \"met\"\ntpr = 0.85\ntnr = 0.7\nseed = 5\n",
    );
    let (_mock, _, judges) = mock_judge(&dir, &rules);
    let (main, input, label_file) = (dir.path("main.rubric"), dir.path("rows.jsonl"), dir.path("labels.jsonl"));
    let cal = dir.path("grader.cal.json");
    let o = rubric(&[
        &"calibrate",
        &main,
        &"--input",
        &input,
        &"--labels",
        &label_file,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
        &"-o",
        &cal,
    ]);
    assert!(o.status.success(), "{}", describe(&o));
    let file: Json = serde_json::from_str(&std::fs::read_to_string(&cal).unwrap()).unwrap();
    assert_eq!(file["judge"], "grader");
    let map = &file["maps"][0];
    assert_eq!((map["criteria"].as_str(), map["map"]["method"].as_str()), (Some("*"), Some("isotonic")));
    assert_eq!(map["pairs"].as_u64(), Some(120));
    let threshold = map["threshold"].as_f64().unwrap();
    // The rubric names it; its records carry the calibrated probability and the raw verdict.
    dir.file("main.rubric", &rubric_text("  calibration \"grader.cal.json\"\n"));
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &main,
        &"--input",
        &input,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
        &"--output",
        &out,
    ]);
    assert!(o.status.success(), "{}", describe(&o));
    let records = crate::common::json_lines(&std::fs::read_to_string(&out).unwrap());
    let (mut sum, mut n, mut flipped) = (0.0, 0, 0);
    for r in &records {
        for c in r["criteria"].as_array().unwrap() {
            let p = c["calibrated"].as_f64().unwrap_or_else(|| panic!("no calibrated value: {c}"));
            assert!(c["p_yes"].is_number() && c["raw"].is_string(), "{c}");
            let met = p >= threshold;
            assert_eq!(c["status"], if met { "met" } else { "unmet" }, "{c}");
            flipped += usize::from(c["status"] != c["raw"]);
            sum += p;
            n += 1;
        }
    }
    assert_eq!(n, 120);
    let mean_label = 48.0 / 120.0;
    assert!((sum / n as f64 - mean_label).abs() < 1e-9, "mean fitted {} vs mean label {mean_label}", sum / n as f64);
    // The calibrated judge measured against the same labels: never worse balanced accuracy on
    // its own training pairs than the raw judge.
    let (i, l, r) = (input.display().to_string(), label_file.display().to_string(), out.display().to_string());
    let calibrated = agree(&dir, "main.rubric", &["--input", &i, "--labels", &l, "--results", &r, "--bootstrap", "0"]);
    let all = group(&calibrated, "overall", "all");
    assert_eq!(all["pairs"].as_u64(), Some(120));
    assert!(metric(all, "balanced_accuracy").is_number());
    eprintln!("calibration flipped {flipped} of {n} verdicts");
    // Frozen into the bundle: another threshold, another hash; inspect and diff show it.
    let b1 = dir.path("one.rbk");
    let o = rubric(&[&"build", &main, &"-o", &b1]);
    assert!(o.status.success(), "{}", describe(&o));
    let inspect = rubric(&[&"inspect", &b1]);
    let shown = String::from_utf8_lossy(&inspect.stdout).to_string();
    assert!(shown.contains("calibrated grader.cal.json: * isotonic ("), "{shown}");
    let mut changed = file.clone();
    changed["maps"][0]["threshold"] = serde_json::json!(if threshold > 0.5 { 0.25 } else { 0.75 });
    std::fs::write(&cal, serde_json::to_string(&changed).unwrap()).unwrap();
    let b2 = dir.path("two.rbk");
    let o = rubric(&[&"build", &main, &"-o", &b2]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_ne!(std::fs::read(&b1).unwrap(), std::fs::read(&b2).unwrap());
    let d = rubric(&[&"diff", &b1, &b2]);
    let diff = String::from_utf8_lossy(&d.stdout).to_string();
    assert!(diff.contains("calibration"), "{diff}");
}

/// `order shuffled`: a nominal judge is shown its labels in a per-request order (the same
/// order for the same request), its records say at which position the answer was shown, and
/// `rubric agree` exposes a mock grader's position bias: answers at the first position are
/// over-represented and less accurate.
#[test]
fn shuffled_options_record_positions_and_expose_a_position_bias() {
    let dir = TempDir::new("agree-order");
    dir.file(
        "main.rubric",
        r#"rubric agree.order @ 1.0.0

input response: Text

judge toner {
  model "m"
  sees response
  returns label
  order shuffled
}

criterion tone "Tone" nominal {warm: 1, neutral: 0.5, curt: 0} by toner
"#,
    );
    let tones = ["warm", "neutral", "curt"];
    let (mut rows, mut labels) = (String::new(), String::new());
    for r in 0..60 {
        let t = tones[r % 3];
        rows += &format!("{{\"response\": \"reply {r}, tone: {t}\"}}\n");
        labels += &format!("{{\"row\": {r}, \"criterion\": \"tone\", \"label\": \"{t}\"}}\n");
    }
    dir.file("rows.jsonl", &rows);
    dir.file("labels.jsonl", &labels);
    let mut rules = String::from("[default]\nlabel = \"warm\"\n");
    for t in tones {
        rules += &format!("\n[[rule]]\nprompt = \"tone: {t}\"\nlabel = \"{t}\"\nfirst_bias = 0.4\nseed = 2\n");
    }
    let rules = dir.file("rules.toml", &rules);
    let (_mock, base, _) = mock_judge(&dir, &rules);
    let args: Vec<String> = ["--input", "rows.jsonl", "--labels", "labels.jsonl", "--judges", "judges.toml"]
        .iter()
        .map(|s| if s.contains('.') { dir.path(s).display().to_string() } else { s.to_string() })
        .collect();
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--no-cache", "--bootstrap", "0"]);
    let r = agree(&dir, "main.rubric", &args);
    assert_eq!(r, agree(&dir, "main.rubric", &args), "the same requests, the same orders and answers");
    let tone = group(&r, "criterion", "tone");
    let at: Vec<&Json> = tone["by_position"].as_array().unwrap().iter().collect();
    assert_eq!(at.iter().map(|p| p["position"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2, 3], "{tone:#}");
    let items = |k: usize| at[k]["items"].as_u64().unwrap();
    let accuracy = |k: usize| at[k]["accuracy"].as_f64().unwrap();
    assert_eq!(items(0) + items(1) + items(2), 60);
    assert!(items(0) > items(1) && items(0) > items(2), "the first position is over-represented: {tone:#}");
    // An answer not at the first position is the rule's own: always right; the first
    // position holds the biased answers too.
    assert_eq!((accuracy(1), accuracy(2)), (1.0, 1.0));
    assert!(accuracy(0) < 1.0, "{tone:#}");
    // The judge saw the labels in more than one order (the mock keeps every body it received).
    let bodies = mock_get(&base, "/requests");
    let orders: std::collections::BTreeSet<String> = bodies
        .as_array()
        .unwrap_or_else(|| panic!("GET /requests: {bodies}"))
        .iter()
        .map(|b| b["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"].to_string())
        .collect();
    assert!(orders.len() > 1, "one order only: {orders:?}");
}

/// `rubric mock-judge` with `rules`, and a `judges.toml` in `dir` that points at it.
fn mock_judge(dir: &TempDir, rules: &std::path::Path) -> (crate::common::Spawned, String, std::path::PathBuf) {
    crate::common::mock_judge(dir, rules, "")
}

/// A jury over HTTP: three mock judges with their own personalities (by model), asked for every
/// criterion; their verdicts vote as the jury's samples (majority, or weighted), each record
/// says how many members agreed, a rubric acts on the split through `.agreement`, and the run
/// report counts where the members were unanimous.
#[test]
fn a_jury_asks_its_members_and_exposes_their_disagreement() {
    let dir = TempDir::new("agree-jury");
    let rubric_text = |vote: &str| {
        format!(
            r#"rubric agree.jury @ 1.0.0

input response: Text

judge a {{
  model "m-a"
  sees response
}}

judge b {{
  model "m-b"
  sees response
}}

judge c {{
  model "m-c"
  sees response
}}

judge panel {{
  jury a, b, c
{vote}}}

criterion good "The reply is good" by panel
criterion contested "The members split on it" check good.agreement < 1
"#
        )
    };
    let mut rows = String::new();
    for r in 0..12 {
        let q = if r % 3 == 0 { "bad" } else { "good" };
        rows += &format!("{{\"response\": \"reply {r}: quality={q}\"}}\n");
    }
    let input = dir.file("rows.jsonl", &rows);
    // m-a and m-b say met for a good reply; m-c always says unmet.
    let rules = dir.file(
        "rules.toml",
        "[default]\nverdict = \"unmet\"\n\n[[rule]]\nmodel = \"m-[ab]\"\nprompt = \"quality=good\"\nverdict = \"met\"\n",
    );
    let (_mock, _, judges) = mock_judge(&dir, &rules);
    let run = |vote: &str| {
        let main = dir.file("main.rubric", &rubric_text(vote));
        let out = dir.path("out.jsonl");
        let o = rubric(&[
            &"run",
            &main,
            &"--input",
            &input,
            &"--judges",
            &judges,
            &"--no-cache",
            &"--no-progress",
            &"--output",
            &out,
        ]);
        assert!(o.status.success(), "{}", describe(&o));
        (
            crate::common::json_lines(&std::fs::read_to_string(&out).unwrap()),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (records, report) = run("");
    for (r, rec) in records.iter().enumerate() {
        let good = &rec["criteria"][0];
        let contested = &rec["criteria"][1];
        let is_good = r % 3 != 0;
        assert_eq!(good["source"], "judge:panel");
        assert_eq!(good["status"], if is_good { "met" } else { "unmet" }, "majority: {good}");
        assert_eq!(good["votes"]["samples"], 3);
        // A good reply: two of three said met; a bad one: all three said unmet.
        assert_eq!(good["votes"]["agreed"], if is_good { 2 } else { 3 }, "{good}");
        assert_eq!(contested["status"], if is_good { "met" } else { "unmet" }, "{contested}");
        assert_eq!(good["model"], "m-a,m-b,m-c", "the members' models: {good}");
    }
    assert!(report.contains("jury `panel`: members unanimous on 4 of 12 criteria (least: `good` 4/12)"), "{report}");
    // Weighted: m-c weighs more than the other two together, so its unmet wins.
    let (records, _) = run("  vote weighted\n  weights 1, 1, 3\n");
    for rec in &records {
        assert_eq!(rec["criteria"][0]["status"], "unmet", "{rec}");
    }
    // Unanimous: a split is unmet.
    let (records, _) = run("  vote unanimous\n");
    assert!(records.iter().all(|rec| rec["criteria"][0]["status"] == "unmet"));
}

/// The benchmark score corrected for the judge: rows whose every judged criterion an annotator
/// labelled are scored again with the labels as verdicts (annotators averaged); PPI combines
/// the judge's mean over all rows with its error on those. Checked against a count by hand.
#[test]
fn the_mean_score_is_corrected_from_rows_scored_with_the_labels() {
    let dir = TempDir::new("agree-score");
    healthbench_case(&dir);
    dir.file(
        "verdicts.jsonl",
        concat!(
            "{\"row\": 0, \"verdicts\": {\"a\": \"met\", \"b\": \"met\"}}\n",
            "{\"row\": 1, \"verdicts\": {\"a\": \"unmet\", \"b\": \"met\"}}\n",
            "{\"row\": 2, \"verdicts\": {\"a\": \"met\", \"b\": \"unmet\"}}\n",
        ),
    );
    dir.file(
        "labels.jsonl",
        concat!(
            "{\"row\": 0, \"annotator\": \"x\", \"labels\": {\"a\": \"met\", \"b\": \"unmet\"}}\n",
            "{\"row\": 1, \"annotator\": \"x\", \"labels\": {\"a\": \"met\", \"b\": \"met\"}}\n",
            "{\"row\": 1, \"annotator\": \"y\", \"labels\": {\"a\": \"unmet\", \"b\": \"unmet\"}}\n",
            "{\"row\": 2, \"annotator\": \"x\", \"labels\": {\"a\": \"met\"}}\n",
        ),
    );
    let args = scored_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = agree(&dir, "main.rubric", &args);
    let sc = &r["score"];
    // Judge scores 1, 0.5, 0.5; human scores 0.5 (row 0) and (1 + 0)/2 (row 1); row 2 has no
    // label for `b`, so no human score.
    assert_eq!((sc["rows"].as_u64(), sc["labelled_rows"].as_u64()), (Some(3), Some(2)));
    let v = |k: &str| sc[k]["value"].as_f64().unwrap();
    assert!((v("judge_mean") - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(v("label_mean"), 0.5);
    assert_eq!(v("judge_mean_labelled"), 0.75);
    assert!((v("ppi") - (2.0 / 3.0 - 0.25)).abs() < 1e-12, "{sc}");
}

/// With `samples 3` and `order shuffled`, each sample of a request is shown its own order, so a
/// grader that always answers the first option it sees gives different answers across the
/// samples, and the vote averages that position bias out instead of repeating it three times.
#[test]
fn shuffled_samples_see_their_own_orders() {
    let dir = TempDir::new("agree-order-samples");
    dir.file(
        "main.rubric",
        r#"rubric agree.order_samples @ 1.0.0

input response: Text

judge toner {
  model "m"
  sees response
  returns label
  order shuffled
  samples 3
  vote majority
}

criterion tone "Tone" nominal {warm: 1, neutral: 0.5, curt: 0} by toner
"#,
    );
    let rows: String = (0..30).map(|r| format!("{{\"response\": \"reply {r}\"}}\n")).collect();
    let input = dir.file("rows.jsonl", &rows);
    let rules = dir.file("rules.toml", "[default]\nlabel = \"warm\"\nfirst_bias = 1.0\n");
    let (_mock, base, judges) = mock_judge(&dir, &rules);
    let out = dir.path("out.jsonl");
    let run = || {
        let o = rubric(&[
            &"run",
            &dir.path("main.rubric"),
            &"--input",
            &input,
            &"--judges",
            &judges,
            &"--no-cache",
            &"--no-progress",
            &"--allow-errors",
            &"--output",
            &out,
        ]);
        assert!(o.status.success(), "{}", describe(&o));
        std::fs::read_to_string(&out).unwrap()
    };
    let first = run();
    assert_eq!(first, run(), "the same requests, the same orders");
    let records = crate::common::json_lines(&first);
    let split = records.iter().filter(|r| r["criteria"][0]["votes"]["agreed"].as_u64() != Some(3)).count();
    // Three independent orders of three labels agree on the first one with probability 1/9.
    assert!(split >= 15, "only {split} of 30 rows saw their samples disagree: {first}");
    // 90 requests (30 rows × 3 samples), and the samples of a row are shown different orders.
    let bodies = mock_get(&base, "/requests");
    let bodies = bodies.as_array().unwrap();
    assert_eq!(bodies.len(), 180, "two runs of 30 rows × 3 samples");
    let order = |b: &Json| b["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"].to_string();
    let prompt = |b: &Json| b["messages"].to_string().replace(&order(b), "");
    let mut by_row: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for b in &bodies[..90] {
        let p = prompt(b);
        let row = p
            .split("reply ")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .unwrap_or("")
            .to_string();
        by_row.entry(row).or_default().insert(order(b));
    }
    assert_eq!(by_row.len(), 30, "{:?}", by_row.keys().collect::<Vec<_>>());
    assert!(by_row.values().filter(|orders| orders.len() > 1).count() >= 25, "{by_row:?}");
}
