//! The tensor numeric stage (`rubric::numeric`, the `models` feature) against the scalar path
//! on the CPU, end to end: every conformance case and example whose score has a plan gets, row
//! for row, exactly the scalar `RowResult`s and records from the stage; and `rubric run
//! --numeric tensor` writes byte-identical output to `--numeric scalar` on every example, with
//! and without `--groups` (token credit included), and falls back to the scalar path with one
//! notice for a rubric without a plan.

use crate::common::{crate_root, example_dirs, read_lines, TempDir};
use rubric::engine::{Engine, RowResult};
use rubric::interp::Interpreter;
use rubric::ir::{Program, SiteTable};
use rubric::numeric::TensorStage;
use rubric::runtime::{finish_record, prepare_line, ChunkNumeric, Identity, VerdictFile};
use rubric::types::compile_path;
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every conformance case and example directory.
fn corpus() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crate_root().join("tests/conformance"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("main.rubric").is_file())
        .collect();
    dirs.sort();
    dirs.extend(example_dirs());
    dirs
}

/// Every row of a case directory as the scalar path leaves it: the prepared record and the
/// interpreter's result (rows that do not bind are left out: they never reach the stage).
fn scalar_rows(dir: &Path, p: &Program, sites: &SiteTable) -> Vec<(serde_json::Map<String, Json>, RowResult)> {
    let ident = Identity::of(p, sites);
    let verdicts = dir.join("verdicts.jsonl");
    let verdicts = verdicts.is_file().then(|| VerdictFile::load(&verdicts).unwrap());
    read_lines(&dir.join("inputs.jsonl"))
        .iter()
        .enumerate()
        .filter_map(|(i, line)| prepare_line(p, &ident, i, line, verdicts.as_ref()).ok())
        .map(|row| {
            let r = Interpreter.evaluate(p, &row.inputs, &row.verdicts);
            (row.out, r)
        })
        .collect()
}

/// Every case whose score has a plan: the stage recomputes the scores, reasons, traps, rewards
/// and group trees (from results whose numbers were blanked first) and gives exactly the
/// scalar results and records.
#[test]
fn numeric_stage_equals_the_scalar_path_on_the_corpus() {
    let mut planned = Vec::new();
    let mut unplanned = Vec::new();
    let mut recomputed = 0;
    for dir in corpus() {
        let name = dir.strip_prefix(crate_root()).unwrap().display().to_string();
        let compiled = compile_path(&dir.join("main.rubric"));
        let p = compiled.program.as_ref().unwrap_or_else(|| panic!("{name} does not compile"));
        let stage = match TensorStage::new(p, candle_core::Device::Cpu) {
            Ok(s) => s,
            Err(why) => {
                unplanned.push(format!("{name}: {why}"));
                continue;
            }
        };
        planned.push(name.clone());
        let rows = scalar_rows(&dir, p, &compiled.sites);
        let scalar: Vec<RowResult> = rows.iter().map(|(_, r)| r.clone()).collect();
        // Blank every number the stage must compute, so that a stage that did nothing fails.
        let mut tensor = scalar.clone();
        for r in &mut tensor {
            if r.score_evaluated {
                recomputed += 1;
                r.score = Some(-123.0);
                r.unscored_reason = Some("blanked".into());
                r.trap = None;
                if let Some(Some(x)) = r.reward.as_mut() {
                    if p.reward.as_ref().is_some_and(|rw| rw.penalty.is_none()) {
                        *x = -123.0;
                    }
                }
            }
            for g in &mut r.groups {
                g.1 = Some(-7.0);
            }
        }
        stage.finish_chunk(p, &mut tensor).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ident = Identity::of(p, &compiled.sites);
        for (i, (((out, _), a), b)) in rows.iter().zip(&scalar).zip(&tensor).enumerate() {
            assert_eq!(a, b, "{name} row {i}");
            let ra = finish_record(out.clone(), &ident, "interp", a).to_string();
            let rb = finish_record(out.clone(), &ident, "interp", b).to_string();
            assert_eq!(ra, rb, "{name} row {i}");
        }
    }
    assert!(
        planned.len() >= 20 && recomputed >= 100,
        "only {} cases with a plan ({planned:?}), {recomputed} scores recomputed; without a plan:\n{}",
        planned.len(),
        unplanned.join("\n")
    );
}

fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
    for a in args {
        cmd.arg(a);
    }
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUBRIC_DEVICE").env("NO_COLOR", "1");
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

/// `rubric run` on `input` with `extra` arguments, once per numeric path; returns both outputs
/// and the tensor run's stderr.
fn run_both(dir: &Path, input: &Path, extra: &[&str], scratch: &TempDir, tag: &str) -> (String, String, String) {
    let mut outs = Vec::new();
    let mut tensor_stderr = String::new();
    for mode in ["scalar", "tensor"] {
        let output = scratch.path(&format!("{tag}-{mode}.jsonl"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"run"];
        let rubric_file = dir.join("main.rubric");
        args.push(&rubric_file);
        args.extend([&"--input" as &dyn AsRef<std::ffi::OsStr>, &input, &"--output", &output, &"--numeric", &mode]);
        let verdicts = dir.join("verdicts.jsonl");
        if verdicts.is_file() {
            args.push(&"--verdicts");
            args.push(&verdicts);
        }
        for e in extra {
            args.push(e);
        }
        // Examples that run programs answer from their transcripts.
        let replay = crate::common::exec_replay_args(dir);
        for a in &replay {
            args.push(a);
        }
        // Rows may fail by design here (examples with bad rows): the records are compared.
        args.push(&"--allow-errors");
        let o = rubric(&args);
        assert!(o.status.success(), "{tag} --numeric {mode}: {}", describe(&o));
        if mode == "tensor" {
            tensor_stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        }
        outs.push(std::fs::read_to_string(&output).unwrap());
    }
    (outs.remove(0), outs.remove(0), tensor_stderr)
}

/// The rows of an input file with a group id (three rows a group) and, where the row has a
/// `response`, the character offsets of its whitespace-separated tokens.
fn grouped_input(dir: &Path, scratch: &TempDir, tag: &str) -> PathBuf {
    let mut text = String::new();
    for (i, line) in read_lines(&dir.join("inputs.jsonl")).iter().enumerate() {
        // Lines that are not objects stay as they are: they are error records on both paths.
        let mut row: Json = match serde_json::from_str(line) {
            Ok(r @ Json::Object(_)) => r,
            _ => {
                text.push_str(line);
                text.push('\n');
                continue;
            }
        };
        let Some(o) = row.as_object_mut() else { continue };
        o.insert("group".into(), json!(format!("g{}", i / 3)));
        if let Some(response) = o.get("response").and_then(Json::as_str).map(str::to_string) {
            let mut offsets = Vec::new();
            let mut start = None;
            for (k, ch) in response.chars().chain(std::iter::once(' ')).enumerate() {
                match (ch.is_whitespace(), start) {
                    (false, None) => start = Some(k),
                    (true, Some(s)) => {
                        offsets.push(json!([s, k]));
                        start = None;
                    }
                    _ => {}
                }
            }
            o.insert("token_offsets".into(), Json::Array(offsets));
        }
        text.push_str(&row.to_string());
        text.push('\n');
    }
    // Rows name files relative to their directory (`Image` paths): the grouped rows go in a
    // directory of their own with the example's `images/` beside them.
    let images = dir.join("images");
    if images.is_dir() {
        let to = scratch.path(&format!("{tag}-grouped/images"));
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&images).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
        return scratch.file(&format!("{tag}-grouped/rows.jsonl"), &text);
    }
    scratch.file(&format!("{tag}-grouped.jsonl"), &text)
}

/// `--numeric tensor` writes the scalar path's bytes for every example, with and without
/// `--groups` (and so token credit, where the rows have responses), compact or not.
#[test]
fn run_numeric_tensor_writes_the_scalar_bytes_for_every_example() {
    let scratch = TempDir::new("numeric-run");
    let mut credited = 0;
    for dir in example_dirs() {
        let tag = dir.file_name().unwrap().to_string_lossy().into_owned();
        let input = dir.join("inputs.jsonl");
        let (scalar, tensor, _) = run_both(&dir, &input, &[], &scratch, &tag);
        assert_eq!(scalar, tensor, "{tag}: records differ");
        let grouped = grouped_input(&dir, &scratch, &tag);
        let (scalar, tensor, _) = run_both(&dir, &grouped, &["--groups"], &scratch, &format!("{tag}-groups"));
        assert_eq!(scalar, tensor, "{tag} --groups: records differ");
        assert!(scalar.contains("\"advantage\""), "{tag}: no advantages were written");
        credited += scalar.matches("\"token_credit\"").count();
        let (scalar, tensor, _) =
            run_both(&dir, &grouped, &["--groups", "--compact"], &scratch, &format!("{tag}-compact"));
        assert_eq!(scalar, tensor, "{tag} --groups --compact: records differ");
    }
    assert!(credited >= 10, "only {credited} records got token credit");
}

/// A rubric whose score calls a text intrinsic has no plan: one notice, then the scalar path (with
/// `--groups`, too); the records are the scalar ones.
#[test]
fn run_numeric_tensor_without_a_plan_falls_back_with_one_notice() {
    let scratch = TempDir::new("numeric-fallback");
    let dir = scratch.0.clone();
    scratch.file(
        "main.rubric",
        "rubric t @ 1.0.0\ninput response: Text\ncriterion short \"Short\" check word_count(response) < 4\nscore = if short.met then 1 else word_count(response) / 100\n",
    );
    let rows: String =
        (0..700).map(|i| format!("{{\"group\": {}, \"response\": \"{}\"}}\n", i / 4, "word ".repeat(i % 7))).collect();
    let input = scratch.file("rows.jsonl", &rows);
    let (scalar, tensor, stderr) = run_both(&dir, &input, &["--groups"], &scratch, "fallback");
    assert_eq!(scalar, tensor);
    assert_eq!(stderr.matches("note: `--numeric tensor`").count(), 1, "{stderr}");
    assert!(stderr.contains("the intrinsic `word_count`"), "{stderr}");
}

/// Groups that span chunks (512 rows), error rows inside groups, a reward penalty, token
/// credit from checks and `uncovered row`: the tensor run writes the scalar bytes.
#[test]
fn run_numeric_tensor_over_many_chunks_with_groups_and_token_credit() {
    let scratch = TempDir::new("numeric-chunks");
    let dir = scratch.0.clone();
    scratch.file(
        "main.rubric",
        r#"rubric t @ 1.0.0
input response: Text
tier core {
  criterion cites "Cites" points 2 check matches(response, "\\[\\d+\\]")
  criterion calm "Calm" check contains(response, "calm")
  criterion rude "Rude" points -3 check contains(response, "idiot")
}
group extra {
  criterion long "Long" weight 2 check word_count(response) > 6
  criterion polite "Polite" check contains_ci(response, "please")
}
score = if all(core, unscored: skip) then 0.5 + 0.5 * tree(extra) else 0.5 * points_ratio(all)
reward { advantage rank  clip -0.9, 0.9  penalty 0.01 * word_count(response)  uncovered row }
"#,
    );
    let phrases = ["stay calm [1]", "please rest", "you idiot", "calm down please [2] [3]", "", "ok"];
    let mut rows = String::new();
    for i in 0..1300usize {
        if i % 97 == 5 {
            rows.push_str("{\"group\": 1, \"response\": 7}\n");
            continue;
        }
        let text: Vec<&str> = (0..1 + i % 4).map(|k| phrases[(i * 7 + k) % phrases.len()]).collect();
        let response = text.join(" ");
        let mut offsets = Vec::new();
        let mut at = 0;
        for w in response.split(' ') {
            offsets.push(json!([at, at + w.chars().count()]));
            at += w.chars().count() + 1;
        }
        rows.push_str(
            &json!({"group": format!("g{}", i / 6), "response": response, "token_offsets": offsets}).to_string(),
        );
        rows.push('\n');
    }
    let input = scratch.file("rows.jsonl", &rows);
    let (scalar, tensor, stderr) = run_both(&dir, &input, &["--groups"], &scratch, "chunks");
    assert_eq!(scalar, tensor);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(scalar.lines().count(), 1300);
    assert!(scalar.matches("\"token_credit\"").count() > 1000);
}

/// A bad `--numeric` value is a usage error.
#[test]
fn run_numeric_rejects_an_unknown_path() {
    let dir = crate_root().join("examples/tiers");
    let o = rubric(&[
        &"run",
        &dir.join("main.rubric"),
        &"--input",
        &dir.join("inputs.jsonl"),
        &"--output",
        &std::env::temp_dir().join("never-written.jsonl"),
        &"--numeric",
        &"gpu",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
}
