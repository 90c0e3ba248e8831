//! `rubric report` in a real browser: the page of a run is opened in headless Chromium (Debian's
//! package) driven by playwright-core (`tests/browser/report.mjs`; both installed by
//! `scripts/install-browser.sh`, which this test runs when they are missing), and what the page
//! shows is checked against the records it was made from: it loads with no error and no
//! request beyond its own file, the headline card shows the mean score, the histogram's bars
//! add up to the scored rows, one bar per criterion, the failure table, filtering by text and
//! by status, a row opening to its criteria with the judges' evidence marked in its inputs, and
//! closing again. A screenshot is kept in `target/report-screenshot.png`.

use crate::common::{crate_root, json_lines, TempDir};
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Chromium and the driver's directory, installing them when missing; a clear failure when
/// they cannot be installed (never a skip).
fn browser() -> (PathBuf, PathBuf) {
    let chromium =
        std::env::var_os("RUBRIC_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    let driver = crate_root().join("target/browser");
    let ready = || chromium.exists() && driver.join("node_modules/playwright-core/package.json").is_file();
    if !ready() {
        let out =
            Command::new("bash").arg(crate_root().join("scripts/install-browser.sh")).output().expect("bash runs");
        assert!(
            out.status.success() && ready(),
            "the report's browser test needs Debian's Chromium and playwright-core: `bash scripts/install-browser.sh` \
             failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (chromium, driver)
}

fn rubric(args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubric"));
    for a in args {
        cmd.arg(a);
    }
    cmd.output().expect("rubric runs")
}

/// Run an example with its verdicts into `out.jsonl`, writing its summary to `summary.json`.
fn run_example(dir: &TempDir, ex: &Path) -> (PathBuf, PathBuf) {
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let (main, input, verdicts) = (ex.join("main.rubric"), ex.join("inputs.jsonl"), ex.join("verdicts.jsonl"));
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
        &"run",
        &main,
        &"--input",
        &input,
        &"--verdicts",
        &verdicts,
        &"--output",
        &out,
        &"--summary",
        &summary,
        &"--allow-errors",
        &"--no-progress",
    ];
    // An example that runs programs answers from its transcript.
    let replay = crate::common::exec_replay_args(ex);
    args.extend(replay.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
    let run = rubric(&args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    (out, summary)
}

/// Run an example with its verdicts, write its summary and its report; the records.
fn report_of(dir: &TempDir, example: &str) -> (PathBuf, Vec<Json>, Json) {
    let ex = crate_root().join("examples").join(example);
    let (out, summary) = run_example(dir, &ex);
    let page = dir.path("report.html");
    let made = rubric(&[&"report", &out, &"--input", &ex.join("inputs.jsonl"), &"--summary", &summary, &"-o", &page]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let records = json_lines(&std::fs::read_to_string(&out).unwrap());
    let summary: Json = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (page, records, summary)
}

/// What the browser saw of `page` after the driver's actions.
fn drive(page: &Path, screenshot: &Path, query: &str, row: usize) -> Json {
    let (chromium, driver) = browser();
    let config = json!({
        "driver": driver, "chromium": chromium, "page": page, "screenshot": screenshot, "query": query, "row": row,
    });
    let out = Command::new("node")
        .arg(crate_root().join("tests/browser/report.mjs"))
        .arg(config.to_string())
        .output()
        .expect("node runs (Node.js is needed by the browser test)");
    assert!(out.status.success(), "the browser driver failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn status(r: &Json) -> &str {
    if r.get("error").is_some() {
        "error"
    } else {
        r["status"].as_str().unwrap_or("")
    }
}

#[test]
fn the_report_page_shows_the_run_and_its_rows_in_a_real_browser() {
    let dir = TempDir::new("report");
    let (page, records, summary) = report_of(&dir, "webapp-gates");
    let shot = dir.path("report.png");
    let got = drive(&page, &shot, "evidence_not_found", 5);

    // It loads with no error, and asks for nothing but its own file.
    assert_eq!(got["console_errors"], json!([]), "{got}");
    assert_eq!(got["page_errors"], json!([]), "{got}");
    let requests: Vec<&str> = got["requests"].as_array().unwrap().iter().filter_map(Json::as_str).collect();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(requests[0].starts_with("file://"), "{requests:?}");
    assert_eq!(got["title"], "webapp.todo_gates @ 1.0.0");

    // The headline card: the summary's mean score and its interval.
    let mean = summary["stats"][0]["value"].as_f64().unwrap();
    let (lo, hi) =
        (summary["stats"][0]["interval"][0].as_f64().unwrap(), summary["stats"][0]["interval"][1].as_f64().unwrap());
    assert_eq!(got["cards"][0]["name"], "score");
    assert_eq!(got["cards"][0]["value"], format!("{mean:.4}"));
    assert_eq!(got["cards"][0]["interval"], format!("95% [{lo:.4}, {hi:.4}]"));

    // The histogram: ten bars, drawn where they count, adding up to the scored rows.
    let scored = records.iter().filter(|r| r["score"].is_number()).count() as u64;
    let bars = got["histogram"].as_array().unwrap();
    assert_eq!(bars.len(), 10);
    assert_eq!(bars.iter().map(|b| b["count"].as_u64().unwrap()).sum::<u64>(), scored);
    for b in bars {
        assert_eq!(b["count"].as_u64().unwrap() > 0, b["height"].as_f64().unwrap() > 0.0, "{b}");
    }

    // One bar per criterion, in the records' order, each drawn, each over every record that has it.
    let mut keys: Vec<String> = Vec::new();
    for r in &records {
        for c in r["criteria"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap().to_string();
            if !keys.contains(&id) {
                keys.push(id);
            }
        }
    }
    let drawn: Vec<&str> =
        got["criterion_bars"].as_array().unwrap().iter().map(|b| b["key"].as_str().unwrap()).collect();
    assert_eq!(drawn, keys);
    for b in got["criterion_bars"].as_array().unwrap() {
        let with = records
            .iter()
            .filter(|r| r["criteria"].as_array().is_some_and(|cs| cs.iter().any(|c| c["id"] == b["key"])))
            .count();
        assert_eq!(b["total"].as_u64(), Some(with as u64), "{b}");
        assert!(b["width"].as_f64().unwrap() > 100.0 && b["rects"].as_u64().unwrap() >= 1, "{b}");
    }

    // The failure table: every error record's code is there with its count.
    let failures = got["failures"].as_array().unwrap();
    for r in records.iter().filter(|r| r.get("error").is_some()) {
        let key = format!("error: {}", r["error"]["code"].as_str().unwrap());
        let n = records.iter().filter(|x| x["error"]["code"] == r["error"]["code"]).count();
        assert!(failures.contains(&json!([key, n.to_string()])), "{key} ×{n} not in {failures:?}");
    }

    // Every row, then filtering by text (a criterion's reason) and by status.
    assert_eq!(got["rows_initial"].as_u64(), Some(records.len() as u64));
    let with_reason: Vec<&str> = records
        .iter()
        .filter(|r| {
            r["criteria"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| c["reason"].as_str().is_some_and(|x| x.contains("evidence_not_found")))
            })
        })
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(!with_reason.is_empty());
    assert_eq!(got["rows_after_query_ids"], json!(with_reason));
    let by_status = &got["rows_by_status"];
    for st in ["scored", "unscored", "error"] {
        let n = records.iter().filter(|r| status(r) == st).count();
        assert_eq!(by_status[st].as_u64(), Some(n as u64), "{st}: {by_status}");
    }
    let unmet = records
        .iter()
        .filter(|r| r["criteria"].as_array().is_some_and(|cs| cs.iter().any(|c| c["status"] == "unmet")))
        .count();
    assert_eq!(by_status["unmet"].as_u64(), Some(unmet as u64));
    assert_eq!(by_status["all"].as_u64(), Some(records.len() as u64));

    // Row 5 opens to its criteria, and its evidence is marked inside its response.
    let row = &records[5];
    assert_eq!(got["detail_open"], 1);
    let shown: Vec<(String, String)> = got["detail_criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap().into(), c["status"].as_str().unwrap().into()))
        .collect();
    let want: Vec<(String, String)> = row["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap().into(), c["status"].as_str().unwrap().into()))
        .collect();
    assert_eq!(shown, want);
    let evidence: Vec<&str> =
        row["criteria"].as_array().unwrap().iter().filter_map(|c| c["evidence"].as_str()).collect();
    assert!(!evidence.is_empty(), "row 5 of the example has judge evidence");
    let marks: Vec<&str> = got["detail_marks"].as_array().unwrap().iter().filter_map(Json::as_str).collect();
    for quote in &evidence {
        assert!(marks.iter().any(|m| m.contains(quote)), "evidence `{quote}` is not marked: {marks:?}");
    }
    assert_eq!(got["detail_marks_visible"], true);
    assert_eq!(got["detail_after_second_click"], 0);

    // The screenshot, kept for people to look at.
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "{} bytes", png.len());
    let _ = std::fs::write(crate_root().join("target/report-screenshot.png"), &png);
}

#[test]
fn the_report_draws_the_rubrics_statistics_per_key() {
    let dir = TempDir::new("report-stats");
    let (page, records, summary) = report_of(&dir, "healthbench");
    let got = drive(&page, &dir.path("hb.png"), "golden", 0);
    assert_eq!(got["page_errors"], json!([]), "{got}");
    assert_eq!(got["console_errors"], json!([]), "{got}");
    // One card per statistic of the whole run (the mean score and `overall`).
    let cards: Vec<&str> = got["cards"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(cards, ["score", "overall"]);
    // `item_tags` per tag: one bar per tag with a value.
    let with_value = summary["stats"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "item_tags" && s["value"].is_number())
        .count();
    let chart =
        got["keyed_charts"].as_array().unwrap().iter().find(|c| c["name"] == "item_tags").expect("the item_tags chart");
    assert_eq!(chart["bars"].as_u64(), Some(with_value as u64));
    // The axes of the records' criteria.
    let mut axes: Vec<&str> = records
        .iter()
        .flat_map(|r| r["criteria"].as_array().into_iter().flatten().filter_map(|c| c["axis"].as_str()))
        .collect();
    axes.sort_unstable();
    axes.dedup();
    assert_eq!(got["axis_bars"], json!(axes));
    assert_eq!(got["rows_after_query_ids"], json!(["golden"]));
}

#[test]
fn the_report_shows_the_judges_agreement_with_human_labels() {
    let dir = TempDir::new("report-agree");
    let ex = crate_root().join("examples/judge-agreement");
    let (out, _) = run_example(&dir, &ex);
    let agreed = rubric(&[
        &"agree",
        &ex.join("main.rubric"),
        &"--input",
        &ex.join("inputs.jsonl"),
        &"--results",
        &out,
        &"--labels",
        &ex.join("labels.jsonl"),
        &"--format",
        &"json",
    ]);
    assert!(agreed.status.success(), "{}", String::from_utf8_lossy(&agreed.stderr));
    let agreement = dir.file("agree.json", &String::from_utf8_lossy(&agreed.stdout));
    let report: Json = serde_json::from_slice(&agreed.stdout).unwrap();
    let page = dir.path("report.html");
    let made = rubric(&[&"report", &out, &"--agreement", &agreement, &"-o", &page]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let got = drive(&page, &dir.path("agree.png"), "", 0);
    assert_eq!(got["page_errors"], json!([]), "{got}");
    assert_eq!(got["agreement_visible"], true);
    let rows = got["agreement"].as_array().unwrap();
    let groups = report["groups"].as_array().unwrap();
    assert_eq!(rows.len(), groups.len());
    // The overall group: its items, pairs and accuracy with its interval, as `rubric agree` gave them.
    let (g, row) = (&groups[0], &rows[0]);
    assert_eq!(row[0], format!("{}: {}", g["by"].as_str().unwrap(), g["key"].as_str().unwrap()));
    assert_eq!(row[2], g["items"].to_string());
    let acc = &g["metrics"]["accuracy"];
    let want = format!(
        "{:.3} [{:.3}, {:.3}]",
        acc["value"].as_f64().unwrap(),
        acc["ci"][0].as_f64().unwrap(),
        acc["ci"][1].as_f64().unwrap()
    );
    assert_eq!(row[4], want);
}
