//! Conformance against published rubric data (`../shared/conformance/`) and the example
//! directories of `examples/`:
//! - HealthBench: every `example_*.json` row, with deterministic pseudo-random verdicts, scored
//!   through `examples/healthbench/main.rubric` must equal the simple-evals rule computed here
//!   independently (Σ points of met items / Σ positive points), exactly;
//! - HealthBench's run-level numbers: the same rows through `rubric run --summary` must give
//!   simple-evals' aggregation computed here (the clipped mean, per item tag and per example
//!   tag), exactly;
//! - PaperBench: every graded tree, imported with `rubric import paperbench` and scored from its
//!   leaf grades, must reproduce every published internal node score exactly; every rubric tree
//!   and fixture must import and compile;
//! - every directory under `examples/` must pass `rubric test`.
//!
//! Missing shared data is a failure with a clear message, never a skip.

use rubric::engine::{Engine, RowResult, Status};
use rubric::interp::Interpreter;
use rubric::ir::Program;
use rubric::runtime::bind_row;
use rubric::types::compile_path;
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::crate_root;

/// A directory of the shared conformance data; panics (fails the test) when it is missing.
fn shared_dir(rel: &str) -> PathBuf {
    let dir = crate_root().join("../shared/conformance").join(rel);
    assert!(
        dir.is_dir(),
        "conformance data `{}` is missing: these tests need the shared corpora checked out next to the \
         crate (see ../shared/conformance/README.md); they never skip",
        dir.display()
    );
    dir
}

/// The files of `dir` whose names start with `prefix` and end with `suffix`, sorted; at least one.
fn files_in(dir: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list `{}`: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no `{prefix}*{suffix}` files in `{}`: the conformance data is incomplete", dir.display());
    out
}

/// Read a JSON file with every number parsed exactly (correctly rounded by `str::parse`).
///
/// serde_json as this crate configures it (without its `float_roundtrip` feature) may parse a
/// decimal one ulp away from the nearest double: `0.9099999999999999`, a published PaperBench
/// root score, reads as `0.91`. So number tokens are first turned into marked strings, the text is
/// parsed, and the marked strings are converted back with `str::parse::<f64>`.
fn read_json(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read `{}`: {e}", path.display()));
    let json: Json =
        serde_json::from_str(&quote_numbers(&text)).unwrap_or_else(|e| panic!("`{}` is not JSON: {e}", path.display()));
    unquote_numbers(json)
}

const NUMBER_MARK: char = '\u{1}';

/// Wrap every number token outside strings in a string that starts with `NUMBER_MARK`.
fn quote_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '-' || c.is_ascii_digit() {
            out.push_str("\"\\u0001");
            out.push(c);
            while let Some(&d) = chars.peek() {
                if d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-') {
                    out.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push('"');
        } else {
            out.push(c);
        }
    }
    out
}

fn unquote_numbers(j: Json) -> Json {
    match j {
        Json::String(s) if s.starts_with(NUMBER_MARK) => {
            let token = &s[NUMBER_MARK.len_utf8()..];
            let x: f64 = token.parse().unwrap_or_else(|e| panic!("bad JSON number `{token}`: {e}"));
            Json::Number(serde_json::Number::from_f64(x).unwrap_or_else(|| panic!("non-finite JSON number `{token}`")))
        }
        Json::Array(items) => Json::Array(items.into_iter().map(unquote_numbers).collect()),
        Json::Object(m) => Json::Object(m.into_iter().map(|(k, v)| (k, unquote_numbers(v))).collect()),
        other => other,
    }
}

/// Compile a rubric file, failing with its diagnostics when it does not compile.
fn compile(path: &Path) -> Program {
    let c = compile_path(path);
    if c.has_errors() {
        let msgs: Vec<String> =
            c.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.render(&c.sources, false)).collect();
        panic!("`{}` does not compile:\n{}", path.display(), msgs.join("\n"));
    }
    c.program.expect("a program without errors")
}

fn evaluate(program: &Program, row: &Json, verdicts: &Map<String, Json>) -> RowResult {
    let inputs = bind_row(program, row).unwrap_or_else(|e| panic!("row does not bind: {e}"));
    Interpreter.evaluate(program, &inputs, verdicts)
}

/// FNV-1a, 64 bits: a stable hash for deterministic pseudo-random verdicts.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn rubric_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rubric"));
    c.current_dir(crate_root());
    c
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance_data").join(name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create `{}`: {e}", dir.display()));
    dir
}

// ---------------------------------------------------------------- HealthBench

/// The simple-evals rule, written independently of the interpreter: the sum of the points of
/// the met items (negative items count when met) over the sum of the positive points.
fn simple_evals_score(points: &[f64], met: &[bool]) -> Option<f64> {
    let achieved: f64 = points.iter().zip(met).filter(|(_, m)| **m).map(|(p, _)| *p).sum();
    let possible: f64 = points.iter().filter(|p| **p > 0.0).sum();
    (possible > 0.0).then(|| achieved / possible)
}

fn healthbench_program() -> Program {
    compile(&crate_root().join("examples/healthbench/main.rubric"))
}

fn items_verdicts(met: &[bool]) -> Map<String, Json> {
    met.iter().enumerate().map(|(i, m)| (format!("items[{i}]"), json!(if *m { "met" } else { "unmet" }))).collect()
}

const SYNTHETIC_RESPONSE: &str = "I am not a doctor, but here is some general information. \
     If your symptoms are severe or getting worse, please contact a medical professional or \
     emergency services right away.";

#[test]
fn healthbench_rows_match_simple_evals() {
    let dir = shared_dir("healthbench");
    let program = healthbench_program();
    let (mut met_total, mut unmet_total, mut rows) = (0, 0, 0);
    for path in files_in(&dir, "example_", ".json") {
        let example = read_json(&path);
        let rubrics = example
            .get("rubrics")
            .and_then(Json::as_array)
            .unwrap_or_else(|| panic!("`{}` has no `rubrics` list", path.display()));
        let prompt = example.get("prompt").unwrap_or_else(|| panic!("`{}` has no `prompt`", path.display()));
        let mut points = Vec::new();
        let mut met = Vec::new();
        for item in rubrics {
            let text = item["criterion"]
                .as_str()
                .unwrap_or_else(|| panic!("`{}`: an item without `criterion` text", path.display()));
            let p = item["points"]
                .as_f64()
                .unwrap_or_else(|| panic!("`{}`: an item without numeric `points`", path.display()));
            points.push(p);
            met.push(!fnv1a(text.as_bytes()).is_multiple_of(3));
        }
        met_total += met.iter().filter(|m| **m).count();
        unmet_total += met.iter().filter(|m| !**m).count();
        let row = json!({ "prompt": prompt, "response": SYNTHETIC_RESPONSE, "rubrics": rubrics });
        let result = evaluate(&program, &row, &items_verdicts(&met));
        let want = simple_evals_score(&points, &met);
        assert!(want.is_some(), "`{}` has no positive points", path.display());
        assert_eq!(
            result.score,
            want,
            "`{}`: rubric score differs from simple-evals (points {points:?}, met {met:?}; unscored: {:?})",
            path.display(),
            result.unscored_reason
        );
        assert_eq!(result.criteria.len(), rubrics.len(), "`{}`", path.display());
        for (i, (c, m)) in result.criteria.iter().zip(&met).enumerate() {
            assert_eq!(&*c.id, format!("items[{i}]"));
            assert_eq!(c.status, if *m { Status::Met } else { Status::Unmet }, "`{}` items[{i}]", path.display());
            assert_eq!(c.points, Some(points[i]), "`{}` items[{i}]", path.display());
        }
        rows += 1;
    }
    assert!(rows >= 10, "expected the 10 HealthBench rows, found {rows}");
    assert!(
        met_total > 0 && unmet_total > 0,
        "the pseudo-random verdicts should mix met ({met_total}) and unmet ({unmet_total})"
    );
}

#[test]
fn healthbench_simple_evals_golden() {
    let program = healthbench_program();
    let points = [7.0, 5.0, 10.0, -6.0];
    let met = [true, false, true, true];
    let row = json!({
        "prompt": [{"role": "user", "content": "I have had a headache since this morning."}],
        "response": "Rest in a dark room and drink some water.",
        "rubrics": [
            {"criterion": "a", "points": 7, "tags": []},
            {"criterion": "b", "points": 5, "tags": []},
            {"criterion": "c", "points": 10, "tags": []},
            {"criterion": "d", "points": -6, "tags": []},
        ],
    });
    let result = evaluate(&program, &row, &items_verdicts(&met));
    assert_eq!(simple_evals_score(&points, &met), Some(11.0 / 22.0));
    assert_eq!(result.score, Some(11.0 / 22.0));
    assert_eq!(result.score, Some(0.5));
}

/// simple-evals' `_aggregate_get_clipped_mean`: the mean of the values, clipped to [0, 1].
fn clipped_mean(values: &[f64]) -> f64 {
    (values.iter().sum::<f64>() / values.len() as f64).clamp(0.0, 1.0)
}

#[test]
fn healthbench_run_statistics_match_simple_evals() {
    let dir = shared_dir("healthbench");
    let tmp = crate::common::TempDir::new("hb-stats");
    let (mut rows, mut verdicts) = (String::new(), String::new());
    // simple-evals' metrics, computed here: per example its score, per item tag the score over
    // the items with that tag (when they have positive points), per example tag the score.
    let mut overall = Vec::new();
    let mut by_item_tag: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut by_example_tag: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for (n, path) in files_in(&dir, "example_", ".json").iter().enumerate() {
        let example = read_json(path);
        let rubrics = example["rubrics"].as_array().unwrap_or_else(|| panic!("`{}`: no rubrics", path.display()));
        let met: Vec<bool> = rubrics
            .iter()
            .map(|i| !fnv1a(i["criterion"].as_str().unwrap_or_default().as_bytes()).is_multiple_of(3))
            .collect();
        let points: Vec<f64> = rubrics.iter().map(|i| i["points"].as_f64().unwrap_or(f64::NAN)).collect();
        let score =
            simple_evals_score(&points, &met).unwrap_or_else(|| panic!("`{}`: no positive points", path.display()));
        overall.push(score);
        let mut tags: std::collections::BTreeSet<&str> = Default::default();
        for i in rubrics {
            tags.extend(i["tags"].as_array().into_iter().flatten().filter_map(Json::as_str));
        }
        for tag in tags {
            let keep: Vec<bool> =
                rubrics.iter().map(|i| i["tags"].as_array().into_iter().flatten().any(|t| t == tag)).collect();
            let pts: Vec<f64> = points.iter().zip(&keep).filter(|(_, k)| **k).map(|(p, _)| *p).collect();
            let mt: Vec<bool> = met.iter().zip(&keep).filter(|(_, k)| **k).map(|(m, _)| *m).collect();
            if let Some(s) = simple_evals_score(&pts, &mt) {
                by_item_tag.entry(tag.to_string()).or_default().push(s);
            }
        }
        for tag in example["example_tags"].as_array().into_iter().flatten().filter_map(Json::as_str) {
            by_example_tag.entry(tag.to_string()).or_default().push(score);
        }
        let id = format!("example_{n}");
        let row = json!({
            "id": id, "prompt": example["prompt"], "response": SYNTHETIC_RESPONSE,
            "rubrics": rubrics, "example_tags": example["example_tags"],
        });
        rows.push_str(&format!("{row}\n"));
        verdicts.push_str(&format!("{}\n", json!({"row": id, "verdicts": items_verdicts(&met)})));
    }
    let input = tmp.file("rows.jsonl", &rows);
    let vfile = tmp.file("verdicts.jsonl", &verdicts);
    let (out, summary) = (tmp.path("out.jsonl"), tmp.path("summary.json"));
    let run = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .arg("run")
        .arg(crate_root().join("examples/healthbench/main.rubric"))
        .arg("--input")
        .arg(&input)
        .arg("--verdicts")
        .arg(&vfile)
        .arg("--output")
        .arg(&out)
        .arg("--summary")
        .arg(&summary)
        .arg("--no-progress")
        .output()
        .expect("rubric runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("statistics (95% bootstrap intervals"), "the run prints its statistics: {stderr}");
    let got = read_json(&summary);
    let stats = got["stats"].as_array().expect("a list of statistics");
    let value = |name: &str, key: Option<&str>| -> f64 {
        stats
            .iter()
            .find(|s| s["name"] == name && s.get("key").and_then(Json::as_str) == key)
            .and_then(|s| s["value"].as_f64())
            .unwrap_or_else(|| panic!("no value for `{name}` {key:?} in {got}"))
    };
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-12, "{what}: rubric {a}, simple-evals {b}");
    close(value("overall", None), clipped_mean(&overall), "overall");
    for (tag, values) in &by_item_tag {
        close(value("item_tags", Some(tag)), clipped_mean(values), tag);
    }
    for (tag, values) in &by_example_tag {
        close(value("example_tags", Some(tag)), clipped_mean(values), tag);
    }
    // No key the rule does not have (an item tag with no positive points anywhere has no value).
    let keys = |name: &str| -> Vec<String> {
        stats
            .iter()
            .filter(|s| s["name"] == name && !s["value"].is_null())
            .filter_map(|s| s["key"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(keys("item_tags"), by_item_tag.keys().cloned().collect::<Vec<_>>());
    assert_eq!(keys("example_tags"), by_example_tag.keys().cloned().collect::<Vec<_>>());
    assert!(by_item_tag.len() >= 5 && by_example_tag.len() >= 3, "{by_item_tag:?} {by_example_tag:?}");
    // Every value has a bootstrap interval around it and the run's row counts.
    for s in stats.iter().filter(|s| s["n"].as_f64().unwrap_or(0.0) >= 3.0) {
        let (v, lo, hi) = (s["value"].as_f64(), s["interval"][0].as_f64(), s["interval"][1].as_f64());
        let (Some(v), Some(lo), Some(hi)) = (v, lo, hi) else { panic!("no interval: {s}") };
        assert!(lo <= v && v <= hi, "{s}");
    }
    let rows = overall.len() as f64;
    assert_eq!((got["rows"].as_f64(), got["scored"].as_f64()), (Some(rows), Some(rows)));
}

// ---------------------------------------------------------------- PaperBench

/// The rubric identifier of a PaperBench node, written independently of the importer.
fn pb_name(id: &str) -> String {
    let mut s = String::from("n_");
    s.extend(id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }));
    s
}

fn sub_tasks(node: &Json) -> &[Json] {
    node.get("sub_tasks").and_then(Json::as_array).map_or(&[], Vec::as_slice)
}

fn node_id(node: &Json) -> &str {
    node.get("id").and_then(Json::as_str).expect("every PaperBench node has an `id`")
}

/// Leaves and internal nodes of a tree, in document order.
fn count_nodes(node: &Json, leaves: &mut usize, internal: &mut usize) {
    let subs = sub_tasks(node);
    if subs.is_empty() {
        *leaves += 1;
    } else {
        *internal += 1;
        for s in subs {
            count_nodes(s, leaves, internal);
        }
    }
}

/// Convert a PaperBench tree with the CLI (the importer lives in the private `cli::import`
/// module, so the library API cannot call it) and return the written `.rubric` file.
fn import_paperbench_file(tree: &Path, scratch: &Path) -> PathBuf {
    let stem = tree.file_stem().unwrap().to_string_lossy().to_string();
    let out = scratch.join(format!("{stem}.rubric"));
    let run = rubric_bin()
        .arg("import")
        .arg("paperbench")
        .arg(tree)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run the rubric binary");
    assert!(
        run.status.success(),
        "`rubric import paperbench {}` failed: {}",
        tree.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    out
}

/// Import a PaperBench tree and compile the result.
fn import_paperbench(tree: &Path, scratch: &Path) -> (PathBuf, Program) {
    let out = import_paperbench_file(tree, scratch);
    let program = compile(&out);
    (out, program)
}

/// Check that an imported program has one criterion per leaf and one group per internal node.
fn assert_tree_shape(tree_path: &Path, tree: &Json, program: &Program) {
    let (mut leaves, mut internal) = (0, 0);
    count_nodes(tree, &mut leaves, &mut internal);
    let groups = program.sets.iter().filter(|s| s.kind == rubric::ir::SetKind::Group).count();
    assert_eq!(program.criteria.len(), leaves, "`{}`: criteria vs leaves", tree_path.display());
    // A single-leaf tree is wrapped in one `root` group.
    assert_eq!(groups, internal.max(1), "`{}`: groups vs internal nodes", tree_path.display());
}

/// Leaf grades as verdicts: a graded leaf's `score` 1 is met, 0 is unmet.
fn leaf_verdicts(node: &Json, out: &mut Map<String, Json>) {
    let subs = sub_tasks(node);
    if subs.is_empty() {
        let id = node_id(node);
        let score = node["score"].as_f64().unwrap_or_else(|| panic!("leaf `{id}` has no numeric `score`"));
        assert_eq!(node.get("valid_score").and_then(Json::as_bool), Some(true), "leaf `{id}` is not validly graded");
        let verdict = if score == 1.0 {
            "met"
        } else if score == 0.0 {
            "unmet"
        } else {
            panic!("leaf `{id}` has score {score}, expected 0 or 1")
        };
        out.insert(pb_name(id), json!(verdict));
    } else {
        for s in subs {
            leaf_verdicts(s, out);
        }
    }
}

/// Every internal node's published `score` must equal the computed group value exactly.
fn assert_groups(node: &Json, groups: &HashMap<&str, Option<f64>>, checked: &mut usize) {
    let subs = sub_tasks(node);
    if subs.is_empty() {
        return;
    }
    let id = node_id(node);
    let name = pb_name(id);
    let published = node["score"].as_f64().unwrap_or_else(|| panic!("node `{id}` has no numeric `score`"));
    match groups.get(name.as_str()) {
        Some(Some(got)) => assert!(*got == published, "node `{id}`: computed {got:?}, published {published:?}"),
        Some(None) => panic!("node `{id}`: the group is unscored, published {published}"),
        None => panic!("node `{id}`: no group `{name}` in the result"),
    }
    *checked += 1;
    for s in subs {
        assert_groups(s, groups, checked);
    }
}

#[test]
fn paperbench_graded_trees_reproduce_published_scores() {
    let dir = shared_dir("paperbench/graded");
    let scratch = scratch_dir("paperbench_graded");
    for path in files_in(&dir, "", ".json") {
        let tree = read_json(&path);
        let (_, program) = import_paperbench(&path, &scratch);
        assert_tree_shape(&path, &tree, &program);
        let mut verdicts = Map::new();
        leaf_verdicts(&tree, &mut verdicts);
        let result = evaluate(&program, &json!({ "submission": "" }), &verdicts);
        for c in &result.criteria {
            let want = if verdicts[&*c.id] == "met" { Status::Met } else { Status::Unmet };
            assert_eq!(c.status, want, "`{}`: leaf `{}`", path.display(), c.id);
        }
        let groups: HashMap<&str, Option<f64>> = result.groups.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let mut checked = 0;
        assert_groups(&tree, &groups, &mut checked);
        let (mut leaves, mut internal) = (0, 0);
        count_nodes(&tree, &mut leaves, &mut internal);
        assert_eq!(checked, internal, "`{}`", path.display());
        let root_score = tree["score"].as_f64().expect("the root has a score");
        assert!(
            result.score == Some(root_score),
            "`{}`: score {:?}, published root score {root_score:?}",
            path.display(),
            result.score
        );
    }
}

/// The weighted-tree rule, written independently: Σ(child × weight) / Σ weight, left to right.
fn tree_value(node: &Json, met: &dyn Fn(&str) -> bool) -> f64 {
    let subs = sub_tasks(node);
    if subs.is_empty() {
        return if met(node_id(node)) { 1.0 } else { 0.0 };
    }
    let (mut num, mut den) = (0.0, 0.0);
    for s in subs {
        let w = s["weight"].as_f64().expect("numeric weight");
        num += tree_value(s, met) * w;
        den += w;
    }
    num / den
}

#[test]
fn paperbench_rubric_trees_import_compile_and_score() {
    let dir = shared_dir("paperbench/rubrics");
    let scratch = scratch_dir("paperbench_rubrics");
    let trees = files_in(&dir, "", ".json");
    assert!(trees.len() >= 4, "expected the 4 PaperBench rubric trees, found {}", trees.len());
    for path in trees {
        let tree = read_json(&path);
        let (_, program) = import_paperbench(&path, &scratch);
        assert_tree_shape(&path, &tree, &program);
        // Pseudo-random leaf grades; the score must equal the tree rule computed here.
        let met = |id: &str| fnv1a(id.as_bytes()).is_multiple_of(2);
        let mut verdicts = Map::new();
        let mut stack = vec![&tree];
        while let Some(n) = stack.pop() {
            let subs = sub_tasks(n);
            if subs.is_empty() {
                let id = node_id(n);
                verdicts.insert(pb_name(id), json!(if met(id) { "met" } else { "unmet" }));
            }
            stack.extend(subs);
        }
        let result = evaluate(&program, &json!({ "submission": "" }), &verdicts);
        let want = tree_value(&tree, &met);
        assert!(result.score == Some(want), "`{}`: score {:?}, tree rule {want:?}", path.display(), result.score);
    }
}

/// Fixtures the importer cannot convert yet, with the diagnostic code they fail with. A
/// fixture that starts to compile fails the test until it is removed from this list. Empty:
/// `hex_flag_context.json` (a node and its child share an `id`) imports since repeated ids
/// get distinct names.
const KNOWN_FIXTURE_FAILURES: &[(&str, &str)] = &[];

#[test]
fn paperbench_fixtures_import_and_check() {
    let dir = shared_dir("paperbench/fixtures/rubrics");
    let scratch = scratch_dir("paperbench_fixtures");
    let mut compiled = 0;
    for path in files_in(&dir, "", ".json") {
        let tree = read_json(&path);
        let file_name = path.file_name().unwrap().to_string_lossy().to_string();
        let out = import_paperbench_file(&path, &scratch);
        let check = rubric_bin().arg("check").arg("--quiet").arg(&out).output().expect("run the rubric binary");
        if let Some((_, code)) = KNOWN_FIXTURE_FAILURES.iter().find(|(f, _)| *f == file_name) {
            let c = compile_path(&out);
            assert!(
                c.has_errors() && !check.status.success(),
                "`{file_name}` now imports and compiles: remove it from KNOWN_FIXTURE_FAILURES"
            );
            assert!(
                c.diagnostics.iter().any(|d| d.is_error() && d.code == *code),
                "`{file_name}` fails differently than recorded (expected `{code}`)"
            );
            continue;
        }
        assert!(
            check.status.success(),
            "`rubric check {}` failed: {}",
            out.display(),
            String::from_utf8_lossy(&check.stderr)
        );
        let program = compile(&out);
        assert_tree_shape(&path, &tree, &program);
        compiled += 1;
    }
    assert!(compiled >= 7, "expected at least 7 fixtures to import and compile, got {compiled}");
}

// ---------------------------------------------------------------- examples/

#[test]
fn every_example_directory_passes_rubric_test() {
    let examples = crate_root().join("examples");
    let mut dirs: Vec<String> = std::fs::read_dir(&examples)
        .unwrap_or_else(|e| panic!("cannot list `{}`: {e}", examples.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    dirs.sort();
    for want in ["healthbench", "paperbench", "webapp-gates", "tiers", "ifeval-shape"] {
        assert!(dirs.iter().any(|d| d == want), "examples/{want} is missing (found {dirs:?})");
    }
    for d in &dirs {
        let out = rubric_bin().arg("test").arg(format!("examples/{d}")).output().expect("run the rubric binary");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "`rubric test examples/{d}` failed ({}):\n{stdout}\n{stderr}", out.status);
        assert!(!stdout.contains("FAIL"), "examples/{d}: a failure was reported:\n{stdout}");
        assert!(stdout.contains(" 0 failed (examples: "), "examples/{d}: unexpected summary:\n{stdout}");
        // Every row of inputs.jsonl matched its expected line.
        let rows = std::fs::read_to_string(examples.join(d).join("inputs.jsonl"))
            .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
            .unwrap_or(0);
        if rows > 0 {
            let line = format!("ok   examples/{d}: {rows}/{rows} rows match expected.jsonl");
            assert!(stdout.contains(&line), "examples/{d}: expected `{line}` in:\n{stdout}");
        }
    }
}

/// HealthBench end to end through a real judge endpoint: the 10 published rows, each answered
/// by its physician-written ideal completion where it has one (else a fixed reply), scored by
/// `rubric run --judges` against `rubric mock-judge` over HTTP, whose rules judge an item met
/// when its text asks for advice or a recommendation. Every row must score what simple-evals
/// computes from the same decisions, each item must record the model that answered it, and
/// the run's mean score must follow.
#[cfg(feature = "judges")]
#[test]
fn healthbench_rows_through_the_mock_judge_match_simple_evals() {
    use crate::common::TempDir;
    let dir = shared_dir("healthbench");
    let tmp = TempDir::new("healthbench-judged");
    let rt = crate::judge::rt();
    let met_pattern = "(?i)(advis|recommend|suggest)";
    let mock = rt.block_on(crate::judge::server(crate::judge::rules(&format!(
        "model = \"mock-grader-1\"\n[default]\nverdict = \"unmet\"\n[[rule]]\ncriterion = \"{met_pattern}\"\nverdict = \"met\"\n"
    ))));
    let met_re = regex::Regex::new(met_pattern).unwrap();
    let mut rows = String::new();
    let mut expected = Vec::new();
    for path in files_in(&dir, "example_", ".json") {
        let example = read_json(&path);
        let response = example["ideal_completions_data"]["ideal_completion"].as_str().unwrap_or(SYNTHETIC_RESPONSE);
        let items = example["rubrics"].as_array().unwrap_or_else(|| panic!("`{}` has no rubrics", path.display()));
        let points: Vec<f64> = items.iter().map(|i| i["points"].as_f64().unwrap()).collect();
        let met: Vec<bool> = items.iter().map(|i| met_re.is_match(i["criterion"].as_str().unwrap())).collect();
        expected.push((path.clone(), simple_evals_score(&points, &met), met));
        let row = json!({
            "id": example["prompt_id"], "prompt": example["prompt"], "response": response,
            "rubrics": items, "canary": example["canary"],
        });
        rows.push_str(&format!("{row}\n"));
    }
    let input = tmp.file("rows.jsonl", &rows);
    let judges = tmp.file(
        "judges.toml",
        &format!("default = \"mock\"\n[endpoints.mock]\nbase_url = \"{}\"\nconcurrency = 16\n", mock.base_url()),
    );
    let out = tmp.path("scores.jsonl");
    let run = Command::new(env!("CARGO_BIN_EXE_rubric"))
        .arg("run")
        .arg(crate_root().join("examples/healthbench/main.rubric"))
        .arg("--input")
        .arg(&input)
        .arg("--judges")
        .arg(&judges)
        .arg("--cache")
        .arg(tmp.path("cache.sqlite"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "rubric run failed: {stderr}");
    let items_total: usize = expected.iter().map(|(_, _, m)| m.len()).sum();
    assert_eq!(mock.stats().requests as usize, items_total, "one call per rubric item: {stderr}");
    let lines = crate::common::json_lines(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(lines.len(), expected.len());
    let mut sum = 0.0;
    for (line, (path, want, met)) in lines.iter().zip(&expected) {
        assert_eq!(line["score"].as_f64(), *want, "`{}`: {line}", path.display());
        let criteria = line["criteria"].as_array().unwrap();
        assert_eq!(criteria.len(), met.len());
        for (c, m) in criteria.iter().zip(met) {
            assert_eq!(c["status"], if *m { "met" } else { "unmet" }, "`{}`: {c}", path.display());
            assert_eq!(c["model"], "mock-grader-1", "`{}`: {c}", path.display());
        }
        sum += want.unwrap();
    }
    assert!(
        expected.iter().any(|(_, _, m)| m.iter().any(|x| *x)) && expected.iter().any(|(_, _, m)| m.iter().any(|x| !x))
    );
    assert!(stderr.contains(&format!("mean score {:.6}", sum / expected.len() as f64)), "{stderr}");
}
