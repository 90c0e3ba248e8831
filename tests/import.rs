//! `rubric import` reproduces each peer tool's scores, on the built binary. Every directory
//! `tests/fixtures/import/KIND/CASE/` holds a file of that tool's format (`input.*`), built from
//! the tool's own documented examples or published test cases (each names its source), with
//! the scores the tool gives (`expected.jsonl`: per row its `id`, `score` and report-only scores
//! such as `pass`). The test imports it (`--rows-out` for the formats whose criteria are per row,
//! `--responses` when the case has `responses.jsonl`; a case with `rows.jsonl` scores those rows
//! instead), runs the rubric on every engine with the case's `verdicts.jsonl`, and compares.
//! `KIND/refused.tsv` lists inputs (`KIND/refused/FILE`) the importer must refuse, each with
//! text its `rubric::import::unsupported` error must contain.

use crate::common::{crate_root, json_lines, TempDir};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rubric(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rubric")).args(args).output().unwrap()
}

fn os(p: &Path) -> &std::ffi::OsStr {
    p.as_os_str()
}

fn fixtures(kind: &str) -> PathBuf {
    crate_root().join("tests/fixtures/import").join(kind)
}

fn input_file(case: &Path) -> PathBuf {
    std::fs::read_dir(case)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_stem().is_some_and(|s| s == "input"))
        .unwrap_or_else(|| panic!("`{}` has no input file", case.display()))
}

/// `rubric import KIND INPUT -o RUBRIC`, with `--rows-out ROWS` unless `rows_given`, and
/// `--responses` when there are any; the import must succeed.
fn import(kind: &str, input: &Path, rubric_path: &Path, rows: &Path, rows_given: bool, responses: Option<&Path>) {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["import".as_ref(), kind.as_ref(), os(input), "-o".as_ref(), os(rubric_path)];
    if !rows_given {
        args.extend(["--rows-out".as_ref(), os(rows)]);
    }
    if let Some(r) = responses {
        args.extend(["--responses".as_ref(), os(r)]);
    }
    let out = rubric(&args);
    assert!(out.status.success(), "import of `{}` failed: {}", input.display(), String::from_utf8_lossy(&out.stderr));
}

/// `rubric run RUBRIC` on the rows with an engine (and recorded verdicts): the records.
fn run(rubric_path: &Path, rows: &Path, engine: &str, verdicts: Option<&Path>, results: &Path) -> Vec<Json> {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "run".as_ref(),
        os(rubric_path),
        "--input".as_ref(),
        os(rows),
        "--output".as_ref(),
        os(results),
        "--engine".as_ref(),
        engine.as_ref(),
        "--allow-errors".as_ref(),
        "--no-progress".as_ref(),
    ];
    if let Some(v) = verdicts {
        args.extend(["--verdicts".as_ref(), os(v)]);
    }
    let out = rubric(&args);
    assert!(
        out.status.success(),
        "run of `{}` on {engine} failed: {}",
        rows.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&std::fs::read_to_string(results).unwrap())
}

/// Import a promptfoo configuration (`config`, YAML) with its outputs (`outputs`, the
/// `--responses` file) and score it on the interpreter: the scores.
fn promptfoo_scores(name: &str, config: &str, outputs: &str) -> Vec<f64> {
    let dir = TempDir::new(name);
    let (config, outputs) = (dir.file("c.yaml", config), dir.file("outputs", outputs));
    let (rubric_path, rows) = (dir.path("m.rubric"), dir.path("rows.jsonl"));
    import("promptfoo", &config, &rubric_path, &rows, false, Some(&outputs));
    let records = run(&rubric_path, &rows, "interp", None, &dir.path("out.jsonl"));
    records.iter().map(|r| r["score"].as_f64().unwrap()).collect()
}

/// Import every case of `kind` and check that every row scores as the tool does, on every
/// engine; returns the number of rows that reproduce.
fn reproduce(kind: &str) -> usize {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && p.join("expected.jsonl").exists())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases for `{kind}`");
    let mut reproduced = 0;
    for case in cases {
        let dir = TempDir::new(&format!("import-{kind}"));
        let rubric_path = dir.path("main.rubric");
        let given = case.join("rows.jsonl");
        let rows = if given.exists() { given.clone() } else { dir.path("rows.jsonl") };
        let responses = Some(case.join("responses.jsonl")).filter(|p| p.exists());
        import(kind, &input_file(&case), &rubric_path, &rows, given.exists(), responses.as_deref());
        let expected = json_lines(&std::fs::read_to_string(case.join("expected.jsonl")).unwrap());
        let verdicts = Some(case.join("verdicts.jsonl")).filter(|p| p.exists());
        for engine in ["interp", "wasm", "jit"] {
            let got = run(&rubric_path, &rows, engine, verdicts.as_deref(), &dir.path(&format!("{engine}.jsonl")));
            assert_eq!(got.len(), expected.len(), "`{}`: rows", case.display());
            for (i, (want, row)) in expected.iter().zip(&got).enumerate() {
                let what = format!("`{}` row {i} ({}) on {engine}", case.display(), want["id"]);
                if let Some(id) = want.get("id") {
                    assert_eq!(row.get("id"), Some(id), "{what}: id");
                }
                close(&row["score"], &want["score"], &format!("{what}: score; record {row}"));
                for (k, v) in want.as_object().unwrap() {
                    if k != "id" && k != "score" {
                        close(&row["scores"][k], v, &format!("{what}: `{k}`; record {row}"));
                    }
                }
            }
        }
        reproduced += expected.len();
    }
    reproduced
}

fn close(got: &Json, want: &Json, what: &str) {
    match (got.as_f64(), want.as_f64()) {
        (Some(g), Some(w)) => assert!((g - w).abs() <= 1e-9, "{what}: got {g}, want {w}"),
        _ => assert_eq!(got, want, "{what}"),
    }
}

/// Every input listed in `KIND/refused.tsv` is refused with its text.
fn refuses(kind: &str) {
    let list = std::fs::read_to_string(fixtures(kind).join("refused.tsv")).unwrap();
    let dir = TempDir::new(&format!("import-refused-{kind}"));
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let (file, text) = line.split_once('\t').unwrap();
        let input = fixtures(kind).join("refused").join(file);
        let out = rubric(&[
            "import".as_ref(),
            kind.as_ref(),
            os(&input),
            "-o".as_ref(),
            os(&dir.path("x.rubric")),
            "--rows-out".as_ref(),
            os(&dir.path("rows.jsonl")),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "`{file}` was not refused: {stderr}");
        assert!(stderr.contains("rubric::import::unsupported"), "`{file}`: {stderr}");
        assert!(stderr.contains(text), "`{file}`: wanted `{text}` in {stderr}");
    }
}

#[test]
fn import_promptfoo_reproduces_its_own_test_cases() {
    assert_eq!(reproduce("promptfoo"), 48);
}

#[test]
fn import_promptfoo_refuses_what_it_cannot_reproduce() {
    refuses("promptfoo");
}

#[test]
fn import_promptfoo_needs_rows_out() {
    let input = fixtures("promptfoo").join("judged/input.yaml");
    let out = rubric(&["import".as_ref(), "promptfoo".as_ref(), os(&input)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rows-out"));
}

#[test]
fn import_promptfoo_regexes_keep_javascript_meaning() {
    // JavaScript's `\d`, `\w`, `\b` are ASCII; `.` stops at \r and U+2028 too.
    let scores = promptfoo_scores(
        "import-regex",
        "tests:\n  - assert: [{type: regex, value: '^\\d+$'}]\n  - assert: [{type: regex, value: 'a.b'}]\n  - assert: [{type: regex, value: '\\bcafé\\b'}]\n",
        "\"١٢٣\"\n\"a\\rb\"\n\"café!\"\n",
    );
    // Arabic-Indic digits are not `\d`; `.` does not take `\r`; `é` is not a word character, so
    // there is no `\b` between `é` and `!` (Rust's Unicode `\b` would match all three).
    assert_eq!(scores, vec![0.0, 0.0, 0.0]);
}

#[test]
fn import_openai_grader_reproduces_its_documented_graders() {
    assert_eq!(reproduce("openai-grader"), 18);
}

#[test]
fn import_openai_grader_refuses_what_it_cannot_reproduce() {
    refuses("openai-grader");
}

#[test]
fn import_healthbench_reproduces_the_simple_evals_golden() {
    assert_eq!(reproduce("healthbench"), 2);
}

/// The published HealthBench rows of `../shared/conformance/healthbench/`, written as the JSONL
/// simple-evals reads (each with a reply), imported, and scored with pseudo-random verdicts:
/// every row's score is simple-evals' rule computed here (Σ points of met items / Σ positive
/// points), and the row id is the `prompt_id`.
#[test]
fn import_healthbench_published_rows_score_as_simple_evals() {
    let shared = crate_root().join("../shared/conformance/healthbench");
    assert!(shared.is_dir(), "the HealthBench conformance data is missing: expected {}", shared.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let dir = TempDir::new("import-healthbench");
    let (mut input, mut verdicts, mut want) = (String::new(), String::new(), Vec::new());
    for (n, f) in files.iter().filter(|f| f.extension().is_some_and(|e| e == "json")).enumerate() {
        let mut row: Json = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        row["completion"] = Json::String(format!("reply {n}"));
        input.push_str(&format!("{row}\n"));
        let (mut met_points, mut positive) = (0.0, 0.0);
        let mut v = serde_json::Map::new();
        for (k, item) in row["rubrics"].as_array().unwrap().iter().enumerate() {
            let points = item["points"].as_f64().unwrap();
            let met = (n * 7 + k * 3) % 5 < 3;
            if met {
                met_points += points;
            }
            if points > 0.0 {
                positive += points;
            }
            v.insert(format!("items[{k}]"), Json::String(if met { "met" } else { "unmet" }.into()));
        }
        verdicts.push_str(&format!("{}\n", serde_json::json!({"row": row["prompt_id"], "verdicts": v})));
        want.push((row["prompt_id"].clone(), met_points / positive));
    }
    assert_eq!(want.len(), 10);
    let input = dir.file("healthbench.jsonl", &input);
    let verdicts = dir.file("verdicts.jsonl", &verdicts);
    let (rubric_path, rows) = (dir.path("main.rubric"), dir.path("rows.jsonl"));
    import("healthbench", &input, &rubric_path, &rows, false, None);
    let records = run(&rubric_path, &rows, "interp", Some(&verdicts), &dir.path("out.jsonl"));
    for ((id, score), r) in want.iter().zip(&records) {
        assert_eq!(&r["id"], id);
        close(&r["score"], &Json::from(*score), &format!("row {id}"));
    }
}

/// IFEval's published inputs joined with the authors' GPT-4 responses: every row's score (all
/// instructions followed, strict) equals the reference implementation's `follow_all_instructions`.
#[test]
fn import_ifeval_reproduces_the_reference_strict_verdicts() {
    let shared = crate_root().join("../shared/conformance/ifeval");
    assert!(shared.is_dir(), "the IFEval conformance data is missing: expected {}", shared.display());
    let dir = TempDir::new("import-ifeval");
    let (rubric_path, rows) = (dir.path("main.rubric"), dir.path("rows.jsonl"));
    let responses = shared.join("responses_gpt4.jsonl");
    import("ifeval", &shared.join("input_data.jsonl"), &rubric_path, &rows, false, Some(&responses));
    let records = run(&rubric_path, &rows, "interp", None, &dir.path("out.jsonl"));
    let expected = json_lines(&std::fs::read_to_string(shared.join("expected_strict_gpt4.jsonl")).unwrap());
    let by_prompt: std::collections::HashMap<&str, bool> = expected
        .iter()
        .map(|e| (e["prompt"].as_str().unwrap(), e["follow_all_instructions"].as_bool().unwrap()))
        .collect();
    let given = json_lines(&std::fs::read_to_string(&rows).unwrap());
    assert_eq!(records.len(), 540);
    let mut reproduced = 0;
    for (row, r) in given.iter().zip(&records) {
        let want = by_prompt[row["prompt"].as_str().unwrap()];
        assert_eq!(r["score"].as_f64(), Some(if want { 1.0 } else { 0.0 }), "IFEval row {}", row["id"]);
        reproduced += 1;
    }
    assert_eq!(reproduced, 540);
}

#[test]
fn import_autorubric_reproduces_its_scoring_tests() {
    assert_eq!(reproduce("autorubric"), 22);
}

#[test]
fn import_autorubric_refuses_what_it_cannot_reproduce() {
    refuses("autorubric");
}

/// `--responses` may be one JSON list of outputs (promptfoo's `--llm-outputs` file).
#[test]
fn import_promptfoo_takes_a_json_list_of_outputs() {
    let config = "tests:\n  - assert: [{type: equals, value: '[1, 2]'}]\n  - assert: [{type: contains, value: b}]\n";
    assert_eq!(promptfoo_scores("import-outputs-list", config, "[\"[1, 2]\", \"abc\"]"), vec![1.0, 1.0]);
}
