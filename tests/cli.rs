//! The command line on the built binary (`CARGO_BIN_EXE_rubric`), stage 7: exit codes,
//! human and JSON diagnostics, per-row error records, resuming an interrupted run, `test`,
//! `explain`, `ir` hash stability, `fmt` round trips and output to a closed stdout. Every test
//! works in its own fresh directory under the system temp dir.

use serde_json::Value as Json;
use std::process::{Command, Output};

use crate::common::{crate_root, json_lines, TempDir};

pub(crate) fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
    for a in args {
        cmd.arg(a);
    }
    cmd.env_remove("RUST_BACKTRACE").env("NO_COLOR", "1");
    cmd.output().expect("the rubric binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn describe(o: &Output) -> String {
    format!("exit {:?}\n--- stdout\n{}\n--- stderr\n{}", o.status.code(), stdout(o), stderr(o))
}

const BROKEN: &str = r#"rubric cli.broken @ 1.0.0

input response: Text
criterion short "is short" check word_count(respons) < 10
"#;

/// A rubric with a gate, a criterion of each verifier kind it can decide without a judge, and
/// a judge criterion fed from a verdict file.
const GOOD: &str = r#"rubric cli.good @ 1.0.0 "A rubric for CLI tests"

input response: Text
input n: Number = 0

judge grader {
  model "m"
  sees response
}

gate nonempty: word_count(response) >= 1 else score 0 reason "empty"
criterion polite "Says please" check contains_ci(response, "please")
criterion short "At most eight words" check word_count(response) <= 8
criterion helpful "Is helpful" by grader

score = weighted_mean(all, unscored: skip)
"#;

#[test]
fn check_reports_an_error_with_its_code_and_exit_code_1() {
    let dir = TempDir::new("check");
    let bad = dir.file("broken.rubric", BROKEN);
    let o = rubric(&[&"check", &bad]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let err = stderr(&o);
    assert!(err.contains("rubric::resolve::unknown_name"), "{}", describe(&o));
    assert!(err.contains("did you mean `response`?"), "{}", describe(&o));
    assert!(err.contains("1 error"), "{}", describe(&o));
    // No colour codes when stderr is not a terminal.
    assert!(!err.contains('\u{1b}'), "escape codes in piped output: {err:?}");

    let good = dir.file("good.rubric", GOOD);
    let o = rubric(&[&"check", &good]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert!(stderr(&o).contains("ok: 1 file checked"), "{}", describe(&o));

    let o = rubric(&[&"check", &dir.path("missing.rubric")]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("rubric::io::read"), "{}", describe(&o));
}

#[test]
fn check_with_json_error_format_prints_one_json_object_per_diagnostic() {
    let dir = TempDir::new("check-json");
    let bad = dir.file(
        "broken.rubric",
        "rubric cli.json @ 1.0.0\n\ninput response: Text\ncriterion a \"a\" check word_count(respons) < 10\ncriterion b \"b\" check len(response)\n",
    );
    let o = rubric(&[&"check", &"--error-format", &"json", &bad]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines.len(), 2, "{}", describe(&o));
    let codes: Vec<&str> = lines.iter().map(|l| l["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["rubric::resolve::unknown_name", "rubric::type::mismatch"]);
    for l in &lines {
        assert_eq!(l["severity"], "error");
        assert!(l["message"].as_str().is_some_and(|m| !m.is_empty()));
        let labels = l["labels"].as_array().expect("labels");
        assert!(!labels.is_empty(), "a diagnostic without a label: {l}");
        for lab in labels {
            assert!(lab["file"].as_str().unwrap().ends_with("broken.rubric"), "{lab}");
            assert_eq!(lab["line"].as_u64().map(|x| x >= 4), Some(true), "{lab}");
            assert!(lab["column"].as_u64().unwrap() >= 1);
            assert!(lab["start"].as_u64().unwrap() <= lab["end"].as_u64().unwrap());
        }
    }
    let first = &lines[0]["labels"][0];
    assert_eq!(first["line"], 4);
    assert_eq!(first["column"], 34);
    let text = std::fs::read_to_string(&bad).unwrap();
    let (s, e) = (first["start"].as_u64().unwrap() as usize, first["end"].as_u64().unwrap() as usize);
    assert_eq!(&text[s..e], "respons");
    assert_eq!(lines[0]["help"], "did you mean `response`?");
}

#[test]
fn run_writes_error_records_for_bad_rows_and_scores_the_rest() {
    let dir = TempDir::new("run-bad-rows");
    let file = dir.file("good.rubric", GOOD);
    let input = dir.file(
        "rows.jsonl",
        concat!(
            "{\"id\": \"a\", \"response\": \"please help\"}\n",
            "{\"response\": \"please\n",
            "{\"response\": 42}\n",
            "\n",
            "{\"id\": \"d\", \"n\": 1}\n",
            "[1, 2]\n",
            "{\"id\": \"f\", \"response\": \"a much longer answer that goes on and on and on\", \"n\": null}\n",
        ),
    );
    let out = dir.path("out.jsonl");
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--no-progress"]);
    // Rows failed: exit status 3 (the records are all written all the same).
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    assert!(stderr(&o).contains("6 rows scored"), "{}", describe(&o));
    assert!(stderr(&o).contains("4 errors"), "{}", describe(&o));
    let rows = json_lines(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(rows.len(), 6, "one result per non-blank line");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["row"], i, "rows stay in input order: {r}");
        assert_eq!(r["rubric"], "cli.good");
        assert_eq!(r["version"], "1.0.0");
        assert!(r["ir_hash"].as_str().is_some_and(|h| h.starts_with("sha256:")), "{r}");
    }
    let error_code = |r: &Json| r["error"]["code"].as_str().map(str::to_string);
    assert_eq!(rows[0]["id"], "a");
    assert_eq!(rows[0]["status"], "scored");
    assert!(rows[0].get("error").is_none());
    assert_eq!(error_code(&rows[1]).as_deref(), Some("rubric::row::malformed_json"));
    assert_eq!(error_code(&rows[2]).as_deref(), Some("rubric::row::type"));
    assert!(rows[2]["error"]["message"].as_str().unwrap().contains("response"), "{}", rows[2]);
    assert_eq!(error_code(&rows[3]).as_deref(), Some("rubric::row::missing_input"));
    assert_eq!(rows[3]["id"], "d", "an error record keeps the row id");
    assert_eq!(error_code(&rows[4]).as_deref(), Some("rubric::row::not_an_object"));
    assert_eq!(rows[5]["id"], "f");
    assert_eq!(rows[5]["status"], "scored");
    for r in [&rows[1], &rows[2], &rows[3], &rows[4]] {
        assert!(r.get("score").is_none() && r.get("criteria").is_none(), "an error record has no score: {r}");
    }
}

/// Enough rows to span several of the runtime's chunks (512 rows each).
fn many_rows(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let response = match i % 4 {
            0 => format!("please answer number {i}"),
            1 => String::new(),
            2 => format!("row {i} is a rather long response with quite a few words in it"),
            _ => format!("please, row {i}"),
        };
        s.push_str(&serde_json::json!({ "id": format!("r{i}"), "response": response, "n": i }).to_string());
        s.push('\n');
    }
    s
}

fn verdicts_for(n: usize) -> String {
    let mut s = String::new();
    for i in (0..n).step_by(3) {
        let v = if i % 2 == 0 { "met" } else { "unmet" };
        s.push_str(&serde_json::json!({ "row": i, "criterion": "helpful", "verdict": v }).to_string());
        s.push('\n');
    }
    s
}

#[test]
fn run_resume_finishes_an_interrupted_output_byte_for_byte() {
    const ROWS: usize = 1100;
    let dir = TempDir::new("resume");
    let file = dir.file("good.rubric", GOOD);
    let input = dir.file("rows.jsonl", &many_rows(ROWS));
    let verdicts = dir.file("verdicts.jsonl", &verdicts_for(ROWS));
    let out = dir.path("out.jsonl");
    let run = |resume: bool| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &file, &"--input", &input, &"--output", &out, &"--verdicts", &verdicts, &"--no-progress"];
        // Two rows in three have no verdict for `helpful`: accepted here.
        args.push(&"--allow-errors");
        if resume {
            args.push(&"--resume");
        }
        let o = rubric(&args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        o
    };
    run(false);
    let full = std::fs::read(&out).unwrap();
    let full_text = String::from_utf8(full.clone()).unwrap();
    let line_ends: Vec<usize> = full_text.match_indices('\n').map(|(i, _)| i + 1).collect();
    assert_eq!(line_ends.len(), ROWS);
    for (i, r) in json_lines(&full_text).iter().enumerate() {
        assert_eq!(r["row"], i);
        assert_eq!(r["id"], format!("r{i}"));
    }

    // Torn in the middle of a line (as when the process is killed mid-write), at a line
    // boundary, inside the first line, in a later chunk, and already complete.
    let cuts = [
        ("mid-line", line_ends[200] + 17),
        ("line boundary", line_ends[99]),
        ("inside the first line", 5),
        ("later chunk, mid-line", line_ends[700] - 3),
        ("empty file", 0),
        ("complete", full.len()),
    ];
    for (what, cut) in cuts {
        std::fs::write(&out, &full[..cut]).unwrap();
        let o = run(true);
        let resumed = std::fs::read(&out).unwrap();
        assert!(
            resumed == full,
            "resume after truncation ({what}, {cut} bytes) differs from the full run\n{}",
            describe(&o)
        );
        let kept = line_ends.iter().filter(|&&e| e <= cut).count();
        if kept > 0 {
            assert!(stderr(&o).contains(&format!("{kept} already done")), "{what}: {}", describe(&o));
        }
    }
}

#[test]
fn run_resume_refuses_an_output_written_by_another_rubric() {
    let dir = TempDir::new("resume-other");
    let file = dir.file("good.rubric", GOOD);
    let other = dir.file("other.rubric", &GOOD.replace("At most eight words", "At most eight words!"));
    let input = dir.file("rows.jsonl", &many_rows(20));
    let out = dir.path("out.jsonl");
    let o = rubric(&[&"run", &other, &"--input", &input, &"--output", &out, &"--no-progress", &"--allow-errors"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let before = std::fs::read(&out).unwrap();
    let half = before.len() / 2;
    std::fs::write(&out, &before[..half]).unwrap();
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--resume", &"--no-progress"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("cannot resume"), "{}", describe(&o));
    assert!(stderr(&o).contains("another rubric"), "{}", describe(&o));
    assert_eq!(std::fs::read(&out).unwrap(), &before[..half], "a refused resume leaves the output alone");
}

#[test]
fn test_command_fails_on_a_failing_example_and_passes_on_a_good_one() {
    let dir = TempDir::new("test");
    let passing = format!(
        "{GOOD}\nexample \"polite and short\" {{\n  response \"please help me\"\n  judge grader says helpful = met\n  expect score 1\n  expect polite = met\n}}\n"
    );
    let good = dir.file("good.rubric", &passing);
    let o = rubric(&[&"test", &good]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert!(stdout(&o).contains("1 passed, 0 failed"), "{}", describe(&o));

    let failing = format!(
        "{GOOD}\nexample \"wrong expectation\" {{\n  response \"please help me\"\n  judge grader says helpful = unmet\n  expect score 1\n}}\n"
    );
    let bad = dir.file("bad.rubric", &failing);
    let o = rubric(&[&"test", &bad]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stdout(&o).contains("FAIL"), "{}", describe(&o));
    assert!(stdout(&o).contains("0 passed, 1 failed"), "{}", describe(&o));
    let err = stderr(&o);
    assert!(err.contains("rubric::example::failed"), "{}", describe(&o));
    assert!(err.contains("expected score 1, got 0.6666666666666666"), "{}", describe(&o));

    // A file that does not compile counts as a failure too.
    let broken = dir.file("broken.rubric", BROKEN);
    let o = rubric(&[&"test", &broken]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stdout(&o).contains("does not compile"), "{}", describe(&o));
}

#[test]
fn explain_prints_gates_checks_and_the_score() {
    let dir = TempDir::new("explain");
    let file = dir.file("good.rubric", GOOD);
    let input = dir.file("rows.jsonl", "{\"response\": \"please help me now\"}\n{\"response\": \"\"}\n");
    let verdicts = dir.file("verdicts.jsonl", "{\"row\": 0, \"criterion\": \"helpful\", \"verdict\": \"unmet\"}\n");
    let o = rubric(&[&"explain", &file, &"--input", &input, &"--row", &"0", &"--verdicts", &verdicts]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let out = stdout(&o);
    assert!(out.contains("rubric cli.good @ 1.0.0"), "{out}");
    assert!(out.contains("gate nonempty: passed"), "{out}");
    assert!(out.contains("word_count(response) = 4"), "the checks' values are shown: {out}");
    assert!(out.contains("criterion polite: met"), "{out}");
    assert!(out.contains("criterion short: met"), "{out}");
    assert!(out.contains("criterion helpful: unmet"), "{out}");
    assert!(out.contains("score = 0.6666666666666666"), "{out}");

    let o = rubric(&[&"explain", &file, &"--input", &input, &"--row", &"1"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let out = stdout(&o);
    assert!(out.contains("gate nonempty: FIRED (score 0)"), "{out}");
    assert!(
        out.contains("criterion polite: unscored (gated: gate `nonempty` stopped evaluation before this criterion)"),
        "{out}"
    );
    assert!(out.contains("score = 0"), "{out}");
    assert!(out.contains("failure class: empty"), "{out}");

    let o = rubric(&[&"explain", &file, &"--input", &input, &"--row", &"7"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    assert!(stderr(&o).contains("no row 7"), "{}", describe(&o));
}

#[test]
fn test_command_marks_a_directory_with_failing_rows_fail() {
    let dir = TempDir::new("test-dir");
    let suite = dir.path("suite");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("main.rubric"), GOOD).unwrap();
    std::fs::write(suite.join("inputs.jsonl"), "{\"response\": \"please help\"}\n{\"response\": \"\"}\n").unwrap();
    std::fs::write(suite.join("verdicts.jsonl"), "{\"row\": 0, \"criterion\": \"helpful\", \"verdict\": \"met\"}\n")
        .unwrap();
    std::fs::write(
        suite.join("expected.jsonl"),
        "{\"row\": 0, \"score\": 1}\n{\"row\": 1, \"score\": 0, \"failure_class\": \"empty\"}\n",
    )
    .unwrap();
    let o = rubric(&[&"test", &suite]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let out = stdout(&o);
    assert!(out.contains("ok   ") && out.contains("2/2 rows match expected.jsonl"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");

    // One wrong expectation: the row and the directory's summary line both say FAIL.
    std::fs::write(suite.join("expected.jsonl"), "{\"row\": 0, \"score\": 0.5}\n{\"row\": 1, \"score\": 0}\n").unwrap();
    let o = rubric(&[&"test", &suite]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let out = stdout(&o);
    assert!(out.contains("row 0: `.score` is 1, expected 0.5"), "{out}");
    let summary = out
        .lines()
        .find(|l| l.contains("rows match expected.jsonl"))
        .unwrap_or_else(|| panic!("no summary line: {out}"));
    assert!(summary.starts_with("FAIL ") && summary.contains("1/2 rows match"), "the directory line says FAIL: {out}");
    assert!(out.contains("1 passed, 1 failed"), "{out}");
}

/// A reader that goes away (`rubric ir x.rubric | head -1`, `rubric bench ... | head`) does not
/// make a command panic:
/// output to a closed stdout is dropped and the command ends as it would have.
#[test]
fn output_to_a_closed_stdout_is_not_a_panic() {
    let dir = TempDir::new("broken-pipe");
    let passing = format!(
        "{GOOD}\nexample \"polite\" {{\n  response \"please help me\"\n  judge grader says helpful = met\n  expect score 1\n}}\n"
    );
    let file = dir.file("good.rubric", &passing);
    let input = dir.file("rows.jsonl", "{\"response\": \"please help me now\"}\n");
    let commands: Vec<Vec<&dyn AsRef<std::ffi::OsStr>>> = vec![
        vec![&"ir", &file],
        vec![&"ir", &"--json", &file],
        vec![&"fmt", &"--stdout", &file],
        vec![&"test", &file],
        vec![&"explain", &file, &"--input", &input, &"--row", &"0"],
        vec![&"bench", &file, &"--input", &input, &"--rows", &"4", &"--runs", &"1"],
        vec![&"lint", &file],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
        for a in &args {
            cmd.arg(a);
        }
        let o = cmd
            .env_remove("RUST_BACKTRACE")
            .env("NO_COLOR", "1")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("the rubric binary runs");
        let what = args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
        assert_eq!(o.status.code(), Some(0), "`rubric {what}` with a closed stdout: {}", describe(&o));
        assert!(!stderr(&o).contains("panicked"), "`rubric {what}` with a closed stdout: {}", describe(&o));
    }
}

fn ir_hash(o: &Output) -> String {
    stderr(o)
        .lines()
        .find_map(|l| l.strip_prefix("ir_hash: "))
        .unwrap_or_else(|| panic!("no ir_hash line\n{}", describe(o)))
        .to_string()
}

#[test]
fn ir_hash_is_stable_across_runs_and_changes_with_the_rubric() {
    let dir = TempDir::new("ir");
    let file = dir.file("good.rubric", GOOD);
    let a = rubric(&[&"ir", &file]);
    let b = rubric(&[&"ir", &file]);
    assert_eq!(a.status.code(), Some(0), "{}", describe(&a));
    let hash = ir_hash(&a);
    assert!(hash.starts_with("sha256:") && hash.len() == "sha256:".len() + 64, "{hash}");
    assert_eq!(hash, ir_hash(&b));
    assert_eq!(stdout(&a), stdout(&b), "the IR text form is deterministic");

    let ja = rubric(&[&"ir", &"--json", &file]);
    let jb = rubric(&[&"ir", &"--json", &file]);
    assert_eq!(ja.status.code(), Some(0), "{}", describe(&ja));
    assert_eq!(ja.stdout, jb.stdout, "canonical JSON is byte-identical");
    assert_eq!(ir_hash(&ja), hash);
    serde_json::from_slice::<Json>(&ja.stdout).expect("`ir --json` prints JSON");

    // The path the file is named by does not matter, nor does its layout; a changed weight does.
    let absolute = std::fs::canonicalize(&file).unwrap();
    assert_eq!(ir_hash(&rubric(&[&"ir", &absolute])), hash);
    let copy = dir.file("copy.rubric", GOOD);
    assert_eq!(ir_hash(&rubric(&[&"ir", &copy])), hash);
    let laid_out = GOOD
        .replace("input n: Number = 0\n", "input n: Number = 0 // a default\n\n\n")
        .replace("  sees response", "\t\tsees /* what it may read */ response")
        .replace("word_count(response) <= 8", "word_count( response )<=8");
    let moved = dir.file("laid-out.rubric", &laid_out);
    assert_eq!(ir_hash(&rubric(&[&"ir", &moved])), hash, "layout is not identity");
    let moved_json = rubric(&[&"ir", &"--json", &moved]);
    assert_eq!(moved_json.stdout, ja.stdout, "the canonical IR holds no source positions");
    let changed = dir.file("changed.rubric", &GOOD.replace("\"Says please\"", "\"Says please\" weight 2"));
    assert_ne!(ir_hash(&rubric(&[&"ir", &changed])), hash);
    let renamed = dir.file("renamed.rubric", &GOOD.replace("criterion short", "criterion brief"));
    assert_ne!(ir_hash(&rubric(&[&"ir", &renamed])), hash);

    // The hash in `run` results is the same.
    let input = dir.file("rows.jsonl", "{\"response\": \"please\"}\n");
    let out = dir.path("out.jsonl");
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--no-progress", &"--allow-errors"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(json_lines(&std::fs::read_to_string(&out).unwrap())[0]["ir_hash"], hash.as_str());
}

/// The tiers example with one comment line added keeps its `ir_hash` and its canonical IR; only
/// the site table that `rubric ir` prints beside the program moves.
#[test]
fn ir_hash_of_the_tiers_example_survives_a_comment() {
    let dir = TempDir::new("ir-comment");
    let original = crate_root().join("examples/tiers/main.rubric");
    let text = std::fs::read_to_string(&original).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let commented = dir.file("main.rubric", &format!("{header}\n// reviewed: no change in meaning\n{rest}"));
    let (a, b) = (rubric(&[&"ir", &original]), rubric(&[&"ir", &commented]));
    assert_eq!(a.status.code(), Some(0), "{}", describe(&a));
    assert_eq!(ir_hash(&b), ir_hash(&a));
    let (ja, jb) = (rubric(&[&"ir", &"--json", &original]), rubric(&[&"ir", &"--json", &commented]));
    assert_eq!(ja.stdout, jb.stdout, "the canonical IR is byte-identical");
    let sites =
        |o: &Output| stdout(o).lines().filter(|l| l.starts_with("site @s")).map(String::from).collect::<Vec<_>>();
    let (sa, sb) = (sites(&a), sites(&b));
    assert!(!sa.is_empty() && sa.len() == sb.len(), "{}", stdout(&a));
    assert_ne!(sa, sb, "the sites moved by the comment's length");
    // Its examples still run from the moved file.
    let t = rubric(&[&"test", &commented]);
    assert_eq!(t.status.code(), Some(0), "{}", describe(&t));
}

/// A failing example in a re-laid-out file points at the expectation where it now is.
#[test]
fn example_failures_point_at_their_source_after_a_layout_change() {
    let dir = TempDir::new("ir-example-site");
    let src = GOOD.to_string() + "example \"fails\" {\n  response \"please\"\n  expect score 0.123\n}\n";
    let moved = src.replacen("\n", "\n// one\n// two\n", 1);
    let file = dir.file("main.rubric", &moved);
    let o = rubric(&[&"test", &file]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let out = format!("{}{}", stdout(&o), stderr(&o));
    let line = moved.lines().position(|l| l.contains("expect score 0.123")).unwrap() + 1;
    assert!(out.contains(&format!("main.rubric:{line}:3")), "the failure names line {line}:\n{out}");
}

const MESSY: &str = r#"rubric   cli.messy@1.0.0 "Badly laid out"
import std.text
input response:Text
input reference : Text?
judge grader{model "m" temperature 0 sees response}
gate   nonempty : word_count( response )>=1 else score 0 reason "empty"
criteria style by grader {
criterion clear "Is clear"
criterion kind "Is kind" weight 2
}
criterion short "Short" points 2 check text.at_most_words(response,50)
criterion matches "Matches the reference" check contains(lower(response), lower(reference ?? ""))
group g weight 1 { criterion inner "Inner" check true }
score=0.5*weighted_mean(style,unscored:skip)+0.5*fraction(all, unscored: unmet)
example "e" { response "hi" reference null judge grader says clear=met, kind=unmet expect score 0.5667 within 0.001 }
"#;

/// `rubric fmt` on every shipped rubric and module (examples, stdlib, the conformance corpus):
/// it keeps every comment, the formatted text is a fixed point, and a rubric's IR hash does not
/// change.
#[test]
fn fmt_keeps_the_comments_of_every_shipped_file_and_changes_no_hash() {
    use rubric::syntax::{comment_spans, parse_file, printer::print_file_with_comments};
    let dir = TempDir::new("fmt-all");
    let mut files = Vec::new();
    let mut stack =
        vec![crate_root().join("examples"), crate_root().join("stdlib"), crate_root().join("tests/conformance")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rubric") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 40, "{files:?}");
    let texts = |t: &str| -> Vec<String> {
        let mut v: Vec<String> = comment_spans(t).into_iter().map(|(a, b)| t[a..b].trim_end().to_string()).collect();
        v.sort();
        v
    };
    let mut hashed = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let parsed = parse_file(rubric::source::FileId(0), &text);
        assert!(parsed.diagnostics.is_empty(), "{}", f.display());
        let out = print_file_with_comments(&parsed.file, &text);
        assert_eq!(texts(&out), texts(&text), "{}: a comment was lost or changed:\n{out}", f.display());
        let again = parse_file(rubric::source::FileId(0), &out);
        assert_eq!(print_file_with_comments(&again.file, &out), out, "{}: not a fixed point", f.display());
        if text.starts_with("rubric ") || text.lines().any(|l| l.starts_with("rubric ")) {
            // Compiled in a copy of its directory, so that the files it names resolve.
            let into = dir.path(&format!("d{hashed}"));
            std::fs::create_dir_all(&into).unwrap();
            for e in std::fs::read_dir(f.parent().unwrap()).unwrap().flatten() {
                if e.path().is_file() {
                    std::fs::copy(e.path(), into.join(e.file_name())).unwrap();
                }
            }
            let copy = into.join(f.file_name().unwrap());
            std::fs::write(&copy, &out).unwrap();
            let (a, b) = (rubric(&[&"ir", f]), rubric(&[&"ir", &copy]));
            assert!(a.status.success(), "{}", describe(&a));
            assert_eq!(ir_hash(&a), ir_hash(&b), "{}: formatting changed the IR hash:\n{out}", f.display());
            hashed += 1;
        }
    }
    assert!(hashed >= 37, "{hashed}");
}

#[test]
fn fmt_output_checks_clean_and_is_a_fixed_point() {
    let dir = TempDir::new("fmt");
    let messy = dir.file("messy.rubric", MESSY);
    let before = rubric(&[&"check", &messy]);
    assert_eq!(before.status.code(), Some(0), "the messy file compiles: {}", describe(&before));
    let o = rubric(&[&"fmt", &"--stdout", &messy]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let formatted = stdout(&o);
    assert_ne!(formatted, MESSY, "fmt changes a badly laid out file");
    let out = dir.file("formatted.rubric", &formatted);
    let check = rubric(&[&"check", &out]);
    assert_eq!(check.status.code(), Some(0), "formatted output re-checks clean:\n{formatted}\n{}", describe(&check));
    assert!(!stderr(&check).contains("error"), "{}", describe(&check));
    let (fa, fb) = (rubric(&[&"ir", &"--json", &out]), rubric(&[&"ir", &"--json", &messy]));
    assert_eq!(fa.stdout, fb.stdout, "formatting does not change the canonical IR:\n{formatted}");
    assert_eq!(ir_hash(&fa), ir_hash(&fb), "nor its hash");
    let again = rubric(&[&"fmt", &"--stdout", &out]);
    assert_eq!(stdout(&again), formatted, "fmt is idempotent");
    assert_eq!(rubric(&[&"fmt", &"--check", &out]).status.code(), Some(0));
    // --check prints what would change, as a unified diff, and changes nothing.
    let c = rubric(&[&"fmt", &"--check", &messy]);
    assert_eq!(c.status.code(), Some(1), "{}", describe(&c));
    let diff = stdout(&c);
    assert!(diff.starts_with(&format!("--- {}\n+++ {} (formatted)\n@@ ", messy.display(), messy.display())), "{diff}");
    assert!(diff.lines().any(|l| l.starts_with('-')) && diff.lines().any(|l| l.starts_with('+')), "{diff}");
    assert_eq!(std::fs::read_to_string(&messy).unwrap(), MESSY, "--check writes nothing");
    // Without flags, in place: the file becomes the formatted text, and again changes nothing.
    let copy = dir.file("copy.rubric", MESSY);
    let o = rubric(&[&"fmt", &copy, &out]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), formatted);
    assert!(stderr(&o).contains("formatted") && !stderr(&o).contains(&out.display().to_string()), "{}", describe(&o));
    let o = rubric(&[&"fmt", &copy]);
    assert_eq!((o.status.code(), stderr(&o)), (Some(0), String::new()), "{}", describe(&o));
    let t = rubric(&[&"test", &out]);
    assert_eq!(t.status.code(), Some(0), "the formatted example still passes: {}", describe(&t));

    // Comments are kept: a trailing one stays on its line, a leading one above its node.
    let commented = dir.file(
        "commented.rubric",
        &MESSY
            .replace("input reference : Text?", "input reference : Text? // may be missing")
            .replace("score=", "/* the score */\nscore="),
    );
    let o = rubric(&[&"fmt", &commented]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let text = std::fs::read_to_string(&commented).unwrap();
    assert!(text.contains("input reference: Text?  // may be missing\n"), "{text}");
    assert!(text.contains("/* the score */\nscore = "), "{text}");
    assert_eq!(text.replace("  // may be missing", "").replace("/* the score */\n", ""), formatted);

    let broken = dir.file("broken.rubric", "rubric x @ 1.0.0\ncriterion a \"a\" check (\n");
    let o = rubric(&[&"fmt", &broken]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("rubric::parse::syntax"), "{}", describe(&o));
    assert!(stdout(&o).is_empty(), "fmt prints nothing for a file that does not parse");
}

#[test]
fn usage_errors_exit_with_code_2() {
    let o = rubric(&[&"check"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let o = rubric(&[&"frobnicate"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
}

/// `rubric bench` runs every engine on the same rows, reports each one's figures against the
/// first, and checks that they agree on every row (it fails when they do not).
#[test]
fn bench_compares_every_engine_on_the_same_rows() {
    let root = crate_root();
    let file = root.join("examples/tiers/main.rubric");
    let input = root.join("examples/tiers/inputs.jsonl");
    let o = rubric(&[&"bench", &file, &"--input", &input, &"--rows", &"40", &"--runs", &"1"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let out = stdout(&o);
    assert!(out.contains("40 rows from"), "{out}");
    let engine_lines: Vec<&str> = out.lines().filter(|l| l.starts_with("interp ") || l.starts_with("wasm ")).collect();
    assert_eq!(engine_lines.len(), 2, "{out}");
    for l in engine_lines {
        assert_eq!(l.split_whitespace().last(), Some("0"), "no disagreement: {l}");
    }
    let only = rubric(&[&"bench", &file, &"--input", &input, &"--rows", &"5", &"--runs", &"1", &"--engines", &"wasm"]);
    let only = stdout(&only);
    assert!(only.lines().any(|l| l.starts_with("wasm ")) && !only.lines().any(|l| l.starts_with("interp ")), "{only}");
    // The engine `rubric run` would pick for this source, and why.
    assert!(out.contains("default engine: interp (0 checks in plain runs, 7 other criteria"), "{out}");
}

/// `--compact` writes each criterion's value in criteria order instead of the criteria list:
/// the same values, `null` where the full record says unscored.
#[test]
fn run_compact_writes_the_values_of_the_full_record() {
    let dir = TempDir::new("compact");
    let file = dir.file("good.rubric", GOOD);
    let input = dir.file("rows.jsonl", &many_rows(30));
    let verdicts = dir.file("verdicts.jsonl", &verdicts_for(20));
    let (full, short) = (dir.path("full.jsonl"), dir.path("short.jsonl"));
    for (out, extra) in [(&full, None), (&short, Some("--compact"))] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &file, &"--input", &input, &"--output", out, &"--verdicts", &verdicts, &"--no-progress"];
        if let Some(x) = &extra {
            args.push(x);
        }
        let o = rubric(&args);
        // Rows without their verdict fail; compact records are counted before compacting.
        assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
        assert!(stderr(&o).contains("16 failed rows by code: no_verdict 16"), "{}", describe(&o));
    }
    let full = json_lines(&std::fs::read_to_string(&full).unwrap());
    let short = json_lines(&std::fs::read_to_string(&short).unwrap());
    assert_eq!(full.len(), short.len());
    let mut nulls = 0;
    for (f, s) in full.iter().zip(&short) {
        assert_eq!(f["score"], s["score"]);
        assert!(s.get("criteria").is_none() && s.get("gates").is_none(), "{s}");
        let criteria = f["criteria"].as_array().unwrap();
        let values = s["values"].as_array().unwrap();
        assert_eq!(criteria.len(), values.len());
        for (c, v) in criteria.iter().zip(values) {
            if c["status"] == "unscored" {
                assert!(v.is_null());
                nulls += 1;
            } else {
                assert_eq!(&c["value"], v);
            }
        }
    }
    assert!(nulls > 0, "rows without verdicts have unscored criteria");
}

const RL: &str = r#"rubric cli.rl @ 1.0.0
input response: Text
criterion short "Short" check word_count(response) <= 20
criterion polite "Says please" check contains_ci(response, "please")
score = fraction(all)
reward {
  advantage mean
  penalty 0.01 * max(0, word_count(response) - 10)
  unscored zero
}
"#;

/// `--id-field`: rows named by another field (records carry it as `id`, verdict files name rows
/// by it); a verdict file's rows and criteria that match nothing are reported after the run,
/// with counts, never dropped in silence.
#[test]
fn run_reports_verdicts_that_match_nothing_and_names_rows_by_id_field() {
    let dir = TempDir::new("unmatched");
    let file = dir.file(
        "j.rubric",
        "rubric cli.j @ 1.0.0\ninput response: Text\njudge grader { model \"m\" sees response }\ncriterion tone \"Friendly\" by grader\n",
    );
    let input = dir.file(
        "rows.jsonl",
        "{\"prompt_id\": \"p1\", \"response\": \"a\"}\n{\"prompt_id\": \"p2\", \"response\": \"b\"}\n",
    );
    let verdicts = dir.file(
        "v.jsonl",
        concat!(
            "{\"row\": 0, \"verdicts\": {\"tone\": \"met\", \"tonee\": \"met\"}}\n",
            "{\"row\": 17, \"verdicts\": {\"tone\": \"met\"}}\n",
            "{\"row\": \"nobody\", \"verdicts\": {\"tone\": \"met\"}}\n",
            "{\"row\": \"p2\", \"verdicts\": {\"tone\": \"unmet\"}}\n",
        ),
    );
    let out = dir.path("out.jsonl");
    let o =
        rubric(&[&"run", &file, &"--input", &input, &"--verdicts", &verdicts, &"--output", &out, &"--allow-errors"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "names rows no input row has, their verdicts unused: 1 by index (17), 2 by id (\"nobody\", \"p2\")"
        ),
        "{err}"
    );
    assert!(err.contains("has verdicts for criteria the rows do not have, unused: `tonee` in 1 row"), "{err}");
    // By `prompt_id`: row p2 is found, its verdict used; the record's id is the field's value.
    let o = rubric(&[
        &"run",
        &file,
        &"--input",
        &input,
        &"--verdicts",
        &verdicts,
        &"--output",
        &out,
        &"--id-field",
        &"prompt_id",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 by index (17), 1 by id (\"nobody\")"), "{err}");
    let lines = json_lines(&std::fs::read_to_string(&out).unwrap());
    assert_eq!((lines[0]["id"].clone(), lines[1]["id"].clone()), (serde_json::json!("p1"), serde_json::json!("p2")));
    assert_eq!(lines[1]["criteria"][0]["status"], "unmet");
    // A verdict file whose every row and criterion matches says nothing.
    let clean = dir.file(
        "clean.jsonl",
        "{\"row\": \"p1\", \"verdicts\": {\"tone\": \"met\"}}\n{\"row\": 1, \"verdicts\": {\"tone\": \"met\"}}\n",
    );
    let o = rubric(&[
        &"run",
        &file,
        &"--input",
        &input,
        &"--verdicts",
        &clean,
        &"--output",
        &out,
        &"--id-field",
        &"prompt_id",
    ]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning:"), "{}", describe(&o));
}

/// `std population` in the reward block: `zscore` divides by numpy.std's (ddof = 0) figure, not
/// torch.std's (ddof = 1); the group statistics report the one used; the IR hash changes only
/// for the rubric that chose it.
#[test]
fn run_groups_zscore_with_the_declared_standard_deviation() {
    let dir = TempDir::new("groups-std");
    let rows: String = ["please", "no", "please please", "nope"]
        .iter()
        .map(|r| format!("{}\n", serde_json::json!({"group": "g", "response": r})))
        .collect();
    let input = dir.file("rows.jsonl", &rows);
    let base = "rubric cli.std @ 1.0.0\ninput response: Text\ncriterion polite \"Says please\" check contains_ci(response, \"please\")\n\
                criterion short \"One word\" check word_count(response) <= 1\nscore = fraction(all)\n";
    let mut got = Vec::new();
    for std in ["", "std sample", "std population"] {
        let file =
            dir.file(&format!("r{}.rubric", got.len()), &format!("{base}reward {{\n  advantage zscore\n  {std}\n}}\n"));
        let out = dir.path(&format!("out{}.jsonl", got.len()));
        let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--groups", &"--no-progress"]);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        let ir = rubric(&[&"ir", &file]);
        let hash =
            String::from_utf8_lossy(&ir.stderr).lines().find_map(|l| l.strip_prefix("ir_hash: ").map(String::from));
        got.push((json_lines(&std::fs::read_to_string(&out).unwrap()), hash));
    }
    // Rewards 1, 0.5, 0.5, 0.5: mean 0.625, Σ(r − mean)² = 0.1875.
    let rewards = [1.0, 0.5, 0.5, 0.5];
    let (mean, ss) = (0.625, 0.1875f64);
    for (k, sd) in [(0, (ss / 3.0).sqrt()), (1, (ss / 3.0).sqrt()), (2, (ss / 4.0).sqrt())] {
        let lines = &got[k].0;
        for (i, r) in rewards.iter().enumerate() {
            assert_eq!(lines[i]["reward"].as_f64(), Some(*r), "{}", lines[i]);
            let want = (r - mean) / (sd + 1e-6);
            assert!((lines[i]["advantage"].as_f64().unwrap() - want).abs() < 1e-12, "{k}: {}", lines[i]);
        }
        assert!((lines[0]["group_stats"]["std"].as_f64().unwrap() - sd).abs() < 1e-15, "{}", lines[0]);
    }
    // Saying the default changes nothing, not even the hash; choosing population does.
    assert_eq!(got[0].1, got[1].1);
    assert_ne!(got[0].1, got[2].1);
    assert!(got[0].1.is_some());
}

/// `--groups`: consecutive rows with the same `group` form a group; every record gets its
/// reward (score less the declared penalty), its advantage against the group mean (as the
/// rubric declares), its verdicts and the group's statistics — figures checked by hand. An
/// interrupted grouped run resumes at the start of its last group and ends byte-identical.
#[test]
fn run_groups_adds_rewards_and_advantages_and_resumes_by_group() {
    let dir = TempDir::new("groups");
    let file = dir.file("rl.rubric", RL);
    let mut rows = String::new();
    let please13 = vec!["please"; 13].join(" ");
    for (g, r) in
        [("p1", "Please wait."), ("p1", "No."), ("p1", please13.as_str()), ("p2", "Sure, please."), ("p2", "ok")]
    {
        rows.push_str(&format!("{}\n", serde_json::json!({"group": g, "response": r})));
    }
    // 400 more groups of three, so that an interruption can fall mid-group across chunks.
    for i in 0..1200 {
        rows.push_str(&format!(
            "{}\n",
            serde_json::json!({"group": format!("q{}", i / 3), "response": if i % 2 == 0 { "please" } else { "no" }})
        ));
    }
    let input = dir.file("rows.jsonl", &rows);
    let out = dir.path("out.jsonl");
    let run = |resume: bool| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &file, &"--input", &input, &"--output", &out, &"--groups", &"--no-progress"];
        if resume {
            args.push(&"--resume");
        }
        let o = rubric(&args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    };
    run(false);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 1205);
    // p1: rewards 1, 0.5, 1 - 0.03 = 0.97; mean 0.8233..; advantages r - mean.
    let mean = (1.0 + 0.5 + 0.97) / 3.0;
    for (i, r) in [1.0, 0.5, 0.97].iter().enumerate() {
        assert!((lines[i]["reward"].as_f64().unwrap() - r).abs() < 1e-12, "{}", lines[i]);
        assert!((lines[i]["advantage"].as_f64().unwrap() - (r - mean)).abs() < 1e-12, "{}", lines[i]);
        assert_eq!(lines[i]["group"], "p1");
        assert_eq!(lines[i]["group_stats"]["size"], 3);
    }
    assert_eq!(lines[1]["verdicts"], serde_json::json!([1, 0]));
    assert_eq!(
        (lines[0]["strict"].clone(), lines[1]["strict"].clone()),
        (serde_json::json!(true), serde_json::json!(false))
    );
    assert_eq!(lines[0]["group_stats"]["saturated_met"], serde_json::json!(["short"]));
    assert_eq!(lines[3]["advantage"], 0.25);
    assert_eq!(lines[4]["advantage"], -0.25);
    // Torn mid-group, past the first chunk (line 702 is the first of group q232 and line 703
    // is cut): the resumed run redoes that whole group and matches.
    let cut = text.match_indices('\n').nth(701).unwrap().0 + 40;
    std::fs::write(&out, &text[..cut]).unwrap();
    run(true);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

/// The library facade behind the CLI, `serve` and the Python bindings: a source, a source text
/// and a bundle load; a broken source comes back as its diagnostics, with their rendering; a
/// bundle runs on the Wasm engine unless another is named.
#[test]
fn library_facade_loads_sources_texts_and_bundles() {
    use rubric::api::{EngineChoice, EngineKind, Error, Rubric};
    let dir = TempDir::new("loader");
    let good = dir.file("good.rubric", GOOD);
    let r = Rubric::load(&good).unwrap();
    assert_eq!(r.program().rubric.name, "cli.good");
    let bundle = dir.path("good.rbk");
    let o = rubric(&[&"build", &good, &"-o", &bundle]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let b = Rubric::load(&bundle).unwrap();
    assert_eq!(b.program().hash(), r.program().hash());
    assert!(b.identity().bundle.is_some());
    let default = EngineChoice::default();
    assert_eq!((default.kind_for(&r), default.kind_for(&b)), (EngineKind::Interp, EngineKind::Wasm));
    assert!(!default.leaves_sandbox(&b));
    let trusted = EngineChoice { engine: Some(EngineKind::Jit), ..default };
    assert!(trusted.leaves_sandbox(&b) && !trusted.leaves_sandbox(&r));
    match Rubric::from_source("broken.rubric", BROKEN) {
        Err(Error::Compile { diagnostics, rendered }) => {
            assert!(diagnostics.iter().any(|d| d.code == "rubric::resolve::unknown_name"), "{diagnostics:?}");
            assert!(rendered.contains("rubric::resolve::unknown_name") && rendered.contains("respons"), "{rendered}");
        }
        other => panic!("expected compile errors, got {:?}", other.err()),
    }
    match Rubric::load(&dir.path("missing.rbk")) {
        Err(e @ Error::Bundle { .. }) => assert!(e.to_string().contains("missing.rbk"), "{e}"),
        other => panic!("expected a bundle error, got {:?}", other.err()),
    }
}

const CREDIT: &str = r#"rubric cli.credit @ 1.0.0
input response: Text
judge g {
  model "m"
  sees response
  returns verdict(met: Bool, evidence: Quote)
  evidence must quote response
}
criterion cite "Cites a source" check matches(response, "\\[\\d+\\]")
criterion er "Advises the emergency room" by g
score = fraction(all)
reward {
  advantage mean
  uncovered row
}
"#;

/// Token credit on a hand-computed group: each criterion's advantage (value − group mean, times
/// its weight share) goes to the tokens its regex matched or its judge quoted; other tokens get
/// the row's advantage (`uncovered row`).
#[test]
fn run_groups_gives_token_credit_to_matched_and_quoted_spans() {
    let dir = TempDir::new("credit");
    let file = dir.file("credit.rubric", CREDIT);
    let offsets = |text: &str| -> Vec<[usize; 2]> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, ch) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
            match (ch.is_whitespace(), start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    out.push([s, i]);
                    start = None;
                }
                _ => {}
            }
        }
        out
    };
    let (a, b) = ("Go to the ER now [1].", "Rest at home.");
    let rows = format!(
        "{}\n{}\n",
        serde_json::json!({"group": "p", "response": a, "token_offsets": offsets(a)}),
        serde_json::json!({"group": "p", "response": b, "token_offsets": offsets(b)}),
    );
    let input = dir.file("rows.jsonl", &rows);
    let verdicts = dir.file(
        "verdicts.jsonl",
        "{\"row\": 0, \"criterion\": \"er\", \"verdict\": \"met\", \"evidence\": \"the ER   now\"}\n{\"row\": 1, \"criterion\": \"er\", \"verdict\": \"unmet\"}\n",
    );
    let out = dir.path("out.jsonl");
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--verdicts", &verdicts, &"--groups"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let lines = json_lines(&std::fs::read_to_string(&out).unwrap());
    // Scores 1 and 0; advantages ±0.5; each criterion's advantage in row 0: (1 − 0.5) × 1/2.
    assert_eq!(lines[0]["advantage"], 0.5);
    assert_eq!(lines[0]["token_credit"], serde_json::json!([0.5, 0.5, 0.25, 0.25, 0.25, 0.25]), "{}", lines[0]);
    assert_eq!(lines[0]["criterion_spans"], serde_json::json!({"cite": [[17, 20]], "er": [[6, 16]]}));
    assert_eq!(lines[1]["token_credit"], serde_json::json!([-0.5, -0.5, -0.5]), "{}", lines[1]);
}

/// `GOOD`'s rows, each with a recorded verdict for its judge criterion: a run that fails nowhere.
fn clean_rows(dir: &TempDir, n: usize) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut rows = String::new();
    let mut verdicts = String::new();
    for i in 0..n {
        rows.push_str(
            &serde_json::json!({ "id": format!("r{i}"), "response": format!("please answer {i}") }).to_string(),
        );
        rows.push('\n');
        verdicts.push_str(&serde_json::json!({ "row": i, "criterion": "helpful", "verdict": "met" }).to_string());
        verdicts.push('\n');
    }
    (dir.file("rows.jsonl", &rows), dir.file("verdicts.jsonl", &verdicts))
}

#[test]
fn run_exit_status_says_whether_rows_failed_and_names_the_codes() {
    let dir = TempDir::new("run-exit");
    let file = dir.file("good.rubric", GOOD);
    let (input, verdicts) = clean_rows(&dir, 5);
    let out = dir.path("out.jsonl");
    let run = |input: &std::path::Path, extra: &[&str]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &file, &"--input", &input, &"--output", &out, &"--verdicts", &verdicts, &"--no-progress"];
        for a in extra {
            args.push(a);
        }
        rubric(&args)
    };
    let o = run(&input, &[]);
    assert_eq!(o.status.code(), Some(0), "every row scored: {}", describe(&o));
    assert!(!stderr(&o).contains("failed"), "{}", describe(&o));

    // One malformed row of five and one row without its verdict.
    let mut text = std::fs::read_to_string(&input).unwrap();
    text.push_str("{\"response\": \n");
    text.push_str("{\"id\": \"r6\", \"response\": \"please\"}\n");
    let input = dir.file("failing.jsonl", &text);
    let o = run(&input, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let err = stderr(&o);
    assert!(err.contains("2 failed rows by code: no_verdict 1, rubric::row::malformed_json 1"), "{err}");
    assert!(err.contains("2 of 7 rows failed, more than none allowed"), "{err}");
    assert_eq!(json_lines(&std::fs::read_to_string(&out).unwrap()).len(), 7, "every record is written");
    for (extra, want) in [
        (&["--allow-errors"][..], 0),
        (&["--max-failures", "2"][..], 0),
        (&["--max-failures", "1"][..], 3),
        (&["--max-failures", "30%"][..], 0),
        (&["--max-failures", "20%"][..], 3),
    ] {
        let o = run(&input, extra);
        assert_eq!(o.status.code(), Some(want), "{extra:?}: {}", describe(&o));
        assert!(stderr(&o).contains("2 failed rows by code"), "{extra:?}: {}", describe(&o));
    }
    for bad in ["many", "150%", "-1"] {
        let o = run(&input, &["--max-failures", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", describe(&o));
    }
}

#[test]
fn run_exits_3_when_every_judge_call_fails_and_names_the_judge_error() {
    let dir = TempDir::new("run-judge-fails");
    let file = dir.file("good.rubric", GOOD);
    let (input, _) = clean_rows(&dir, 9);
    // Nothing listens on port 9 of loopback (discard, never served here): every call is refused.
    let judges = dir.file(
        "judges.toml",
        "default = \"dead\"\n[endpoints.dead]\nbase_url = \"http://127.0.0.1:9/v1\"\nattempts = 1\ntimeout_s = 2\n",
    );
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &file,
        &"--input",
        &input,
        &"--output",
        &out,
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    // The circuit breaker trips after 5 failed attempts in a row: the attempts still in flight
    // then (how many depends on how fast the refusals come back) end `endpoint_down`.
    let err = stderr(&o);
    let line = err.lines().find(|l| l.starts_with("9 failed rows by code: ")).unwrap_or_else(|| panic!("{err}"));
    let count = |code: &str| -> usize {
        line.split(", ").find_map(|p| p.split_once(&format!("{code} "))).map_or(0, |(_, n)| n.trim().parse().unwrap())
    };
    let (unreachable, down) = (count("judge_unreachable"), count("endpoint_down"));
    assert!(unreachable >= 5 && unreachable + down == 9, "{line}");
    assert!(err.contains("endpoint `dead` was considered down 1 time"), "{}", describe(&o));
}

#[test]
fn run_reads_standard_input_and_writes_standard_output() {
    let dir = TempDir::new("run-pipes");
    let file = dir.file("good.rubric", GOOD);
    let (input, verdicts) = clean_rows(&dir, 700);
    let want_path = dir.path("want.jsonl");
    let o = rubric(&[
        &"run",
        &file,
        &"--input",
        &input,
        &"--output",
        &want_path,
        &"--verdicts",
        &verdicts,
        &"--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let want = std::fs::read_to_string(&want_path).unwrap();
    assert_eq!(json_lines(&want).len(), 700);
    // `-` both ways, `/dev/stdin`, and a process substitution (a pipe that must be read once:
    // the progress bar may not count its rows ahead). The progress bar is asked for (no
    // `--no-progress`), as a user at a terminal would run it.
    let bin = env!("CARGO_BIN_EXE_rubric");
    let (f, i, v) = (file.display(), input.display(), verdicts.display());
    for (how, script) in [
        ("- and -", format!("cat {i} | {bin} run {f} --input - --output - --verdicts {v}")),
        ("/dev/stdin", format!("{bin} run {f} --input /dev/stdin --output - --verdicts {v} < {i}")),
        ("process substitution", format!("{bin} run {f} --input <(cat {i}) --output - --verdicts {v}")),
    ] {
        let o = Command::new("bash").arg("-c").arg(&script).current_dir(&dir.0).env("NO_COLOR", "1").output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{how}: {}", describe(&o));
        assert_eq!(stdout(&o), want, "{how}: the records on stdout are the file's");
        assert!(stderr(&o).contains("700 rows scored"), "{how}: {}", describe(&o));
        assert!(!stderr(&o).contains("results:"), "{how}: {}", describe(&o));
    }
    assert!(!dir.path("-").exists(), "no file named `-`");
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &"-", &"--resume"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("resume needs a file"), "{}", describe(&o));
}

/// The README's judge commands: `--record` a transcript against the mock judge (which warms
/// the cache), then `--judge replay:` reads the transcript, not the warm cache, and says so; a
/// transcript without the replies makes the criteria `judge_not_recorded`, cache or not.
#[test]
fn replay_answers_from_the_transcript_even_with_a_warm_cache() {
    let dir = TempDir::new("replay-warm");
    let ex = crate_root().join("examples/healthbench");
    let (mock, _base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let (cache, transcript) = (dir.path("cache.sqlite"), dir.path("transcript.jsonl"));
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let run = |out: &str, extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let out = dir.path(out);
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &main, &"--input", &input, &"--output", &out, &"--cache", &cache, &"--no-progress"];
        args.extend_from_slice(extra);
        let o = rubric(&args);
        (o, std::fs::read_to_string(&out).unwrap_or_default())
    };
    let (first, recorded) = run("scores.jsonl", &[&"--judges", &judges, &"--record", &transcript]);
    drop(mock);
    assert!(stderr(&first).contains(&format!("judge cache: {}", cache.display())), "{}", describe(&first));
    let calls = recorded.matches("\"source\":\"judge:grader\"").count();
    assert!(calls > 0, "{recorded}");
    let spec = format!("replay:{}", transcript.display());
    let (again, replayed) = run("again.jsonl", &[&"--judge", &spec]);
    assert_eq!(again.status.code(), first.status.code(), "{}", describe(&again));
    assert_eq!(replayed, recorded, "the replay gives the recorded results");
    let err = stderr(&again);
    assert!(err.contains("0 answered from the cache") && !err.contains(" 0 replayed"), "{err}");
    assert!(err.contains(&format!("judge replies from `{spec}` only (no cache)")), "{err}");
    // An empty transcript: nothing is recorded, and the warm cache does not stand in for it.
    std::fs::write(&transcript, "").unwrap();
    let (empty, records) = run("empty.jsonl", &[&"--judge", &spec]);
    assert_eq!(empty.status.code(), Some(3), "{}", describe(&empty));
    assert!(records.contains("judge_not_recorded"), "{records}");
    assert!(stderr(&empty).contains("judge_not_recorded"), "{}", describe(&empty));
}

/// `rubric test --bless` writes an example directory's `expected.jsonl` from its current
/// results; the directory then passes on every engine, and a change to the score fails it.
#[test]
fn test_bless_writes_expected_rows_that_then_pass_and_catch_a_change() {
    let dir = TempDir::new("bless");
    let ex = crate_root().join("examples/tiers");
    for f in ["main.rubric", "inputs.jsonl", "verdicts.jsonl"] {
        std::fs::copy(ex.join(f), dir.path(f)).unwrap();
    }
    let o = rubric(&[&"test", &dir.0]);
    assert_eq!(o.status.code(), Some(1), "no expected.jsonl yet: {}", describe(&o));
    let o = rubric(&[&"test", &"--bless", &dir.0]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let rows =
        std::fs::read_to_string(ex.join("inputs.jsonl")).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
    assert!(stdout(&o).contains(&format!("wrote {rows} rows")), "{}", describe(&o));
    let blessed = json_lines(&std::fs::read_to_string(dir.path("expected.jsonl")).unwrap());
    let shipped = json_lines(&std::fs::read_to_string(ex.join("expected.jsonl")).unwrap());
    assert_eq!(blessed.len(), rows);
    for (b, s) in blessed.iter().zip(&shipped) {
        assert_eq!((&b["row"], &b["status"]), (&s["row"], &s["status"]), "{b}");
        assert_eq!(b["score"].as_f64(), s["score"].as_f64(), "{b}");
        assert!(b.get("engine").is_none() && b.get("ir_hash").is_none(), "{b}");
    }
    for engine in ["interp", "wasm", "jit"] {
        let o = rubric(&[&"test", &"--engine", &engine, &dir.0]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
    }
    let main = std::fs::read_to_string(dir.path("main.rubric")).unwrap();
    let changed = main.replace("then 0.5 + 0.5 * fraction", "then 0.25 + 0.75 * fraction");
    assert_ne!(main, changed);
    std::fs::write(dir.path("main.rubric"), changed).unwrap();
    let o = rubric(&[&"test", &dir.0]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stdout(&o).contains(".score` is"), "{}", describe(&o));
}

/// `OUTPUT.run.json` records what made the output (the rubric, the inputs' hashes, verdicts,
/// judges, options); a resume that differs is refused with what differs, and a resume prints
/// the mean of the whole output, not only of the rows it scored.
#[test]
fn resume_refuses_other_settings_and_reports_the_mean_of_the_whole_file() {
    let dir = TempDir::new("resume-provenance");
    let file = dir.file("good.rubric", GOOD);
    let (input, verdicts) = clean_rows(&dir, 40);
    let out = dir.path("out.jsonl");
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &file, &"--input", &input, &"--output", &out, &"--no-progress"];
        args.extend_from_slice(extra);
        rubric(&args)
    };
    let o = run(&[&"--verdicts", &verdicts]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let record: Json = serde_json::from_str(&std::fs::read_to_string(dir.path("out.jsonl.run.json")).unwrap()).unwrap();
    for key in ["ir_hash", "input", "verdicts", "judges", "engine", "groups", "compact", "numeric"] {
        assert!(record.get(key).is_some(), "{key}: {record}");
    }
    assert!(record["input"].as_str().unwrap().starts_with("sha256:") && record["verdicts"].is_string(), "{record}");
    // The input's hash (read on a thread of its own while the rubric compiles) is the file's.
    let digest = <sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&input).unwrap());
    let want: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(record["input"], format!("sha256:{want}"), "{record}");
    let full = std::fs::read_to_string(&out).unwrap();
    let scores: Vec<f64> = json_lines(&full).iter().filter_map(|r| r["score"].as_f64()).collect();
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    let torn = &full[..full.match_indices('\n').nth(24).unwrap().0 + 1];

    // Without the verdict file it was written with: refused, the output left alone.
    std::fs::write(&out, torn).unwrap();
    let o = run(&[&"--resume"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("other settings") && stderr(&o).contains("verdicts: \"sha256:"), "{}", describe(&o));
    assert!(stderr(&o).contains("null now"), "{}", describe(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), torn);
    // With other options, or on another engine: refused.
    for (extra, what) in [(&"--compact", "compact: false then, true now"), (&"--engine=jit", "engine: \"interp\" then")]
    {
        let o = run(&[&"--resume", &"--verdicts", &verdicts, extra]);
        assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
        assert!(stderr(&o).contains(what), "{what}: {}", describe(&o));
    }
    // Another input: refused.
    let other = dir.file("other.jsonl", &std::fs::read_to_string(&input).unwrap().replace("answer 3", "answer three"));
    let o = rubric(&[
        &"run",
        &file,
        &"--input",
        &other,
        &"--output",
        &out,
        &"--verdicts",
        &verdicts,
        &"--resume",
        &"--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("input: \"sha256:"), "{}", describe(&o));
    // The same settings: finished byte for byte, with the whole file's mean.
    let o = run(&[&"--resume", &"--verdicts", &verdicts]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), full);
    let want = format!("mean score {mean:.6} over all 40 scored rows of the output");
    assert!(stderr(&o).contains(&want), "{want}: {}", describe(&o));
    assert!(stderr(&o).contains("25 already done"), "{}", describe(&o));
    // An output with no record beside it is not resumed.
    std::fs::remove_file(dir.path("out.jsonl.run.json")).unwrap();
    std::fs::write(&out, torn).unwrap();
    let o = run(&[&"--resume", &"--verdicts", &verdicts]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("has no record of the run"), "{}", describe(&o));
}

/// The README's "Using it" commands, as written (`cargo run --` as the built binary), in a
/// fresh directory that has the repository's `examples/`: each exits 0. The last, `fmt
/// my.rubric`, names the reader's own file and is left out.
#[test]
fn the_readme_commands_run_as_written() {
    let readme = std::fs::read_to_string(crate_root().join("README.md")).unwrap();
    let start =
        readme.find("## Using it\n\n```\n").expect("README has a \"Using it\" block") + "## Using it\n\n```\n".len();
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let commands: Vec<Vec<&str>> = block
        .lines()
        .filter_map(|l| l.strip_prefix("cargo run -- "))
        .map(|l| l.split("  #").next().unwrap().split_whitespace().collect())
        .collect();
    assert!(commands.len() >= 14, "{block}");
    assert_eq!(commands.last().unwrap(), &["fmt", "my.rubric"]);
    let dir = TempDir::new("readme");
    std::os::unix::fs::symlink(crate_root().join("examples"), dir.path("examples")).unwrap();
    for args in &commands[..commands.len() - 1] {
        let o = Command::new(env!("CARGO_BIN_EXE_rubric")).args(args).current_dir(&dir.0).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "`rubric {}`: {}", args.join(" "), describe(&o));
    }
    assert!(
        dir.path("tree.rubric").is_file()
            && dir.path("ifeval.rbk").is_file()
            && dir.path("scores.jsonl.run.json").is_file()
    );
}

/// A test directory's numbers match within a tolerance: floating-point noise by default
/// (`1` against an expected `0.9999999999999998` passed only by luck before), `--tolerance`
/// for the run, `"within"` for one expected row; exact with `--tolerance 0`.
#[test]
fn test_directories_compare_numbers_within_a_tolerance() {
    let dir = TempDir::new("tolerance");
    let ex = crate_root().join("examples/tiers");
    for f in ["main.rubric", "inputs.jsonl", "verdicts.jsonl", "expected.jsonl"] {
        std::fs::copy(ex.join(f), dir.path(f)).unwrap();
    }
    let mut rows = json_lines(&std::fs::read_to_string(ex.join("expected.jsonl")).unwrap());
    let score = rows[0]["score"].as_f64().unwrap();
    let write = |rows: &[Json]| {
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(dir.path("expected.jsonl"), text).unwrap();
    };
    rows[0]["score"] = (score - 2e-16 * score.max(1.0)).into();
    write(&rows);
    let o = rubric(&[&"test", &dir.0]);
    assert_eq!(o.status.code(), Some(0), "noise passes by default: {}", describe(&o));
    rows[0]["score"] = (score - 0.01).into();
    write(&rows);
    let o = rubric(&[&"test", &dir.0]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stdout(&o).contains("(within 0.000000001)"), "the failure says the tolerance: {}", describe(&o));
    let o = rubric(&[&"test", &"--tolerance", &"0.05", &dir.0]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    rows[0]["within"] = 0.02.into();
    write(&rows);
    let o = rubric(&[&"test", &dir.0]);
    assert_eq!(o.status.code(), Some(0), "a row's own tolerance: {}", describe(&o));
    let o = rubric(&[&"test", &"--tolerance", &"0", &dir.0]);
    assert_eq!(o.status.code(), Some(0), "the row's own tolerance wins over the run's: {}", describe(&o));
    rows[0].as_object_mut().unwrap().remove("within");
    rows[0]["score"] = (score - 2e-16 * score.max(1.0)).into();
    write(&rows);
    let o = rubric(&[&"test", &"--tolerance", &"0", &dir.0]);
    assert_eq!(o.status.code(), Some(1), "exact: {}", describe(&o));
    let o = rubric(&[&"test", &"--tolerance", &"-1", &dir.0]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
}

/// `rubric run` does not repeat the checker's warnings on every run: it counts them in one
/// line, and `--warnings` prints them (`rubric check` always does).
#[test]
fn run_counts_the_checkers_warnings_and_prints_them_when_asked() {
    let dir = TempDir::new("run-warnings");
    let file = dir.file(
        "w.rubric",
        "rubric cli.warned @ 1.0.0\ninput response: Text\ncriterion a \"A\" points 0 check true\n\
         criterion b \"B\" points 1 check true\nscore = points_ratio(all)\n",
    );
    let input = dir.file("rows.jsonl", "{\"response\": \"x\"}\n");
    let out = dir.path("out.jsonl");
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--no-progress"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert!(stderr(&o).contains("1 warning not shown (`rubric check"), "{}", describe(&o));
    assert!(!stderr(&o).contains("rubric::facts::zero_points"), "{}", describe(&o));
    let o = rubric(&[&"run", &file, &"--input", &input, &"--output", &out, &"--no-progress", &"--warnings"]);
    assert!(stderr(&o).contains("rubric::facts::zero_points"), "{}", describe(&o));
    let o = rubric(&[&"check", &file]);
    assert!(stderr(&o).contains("rubric::facts::zero_points"), "{}", describe(&o));
}
