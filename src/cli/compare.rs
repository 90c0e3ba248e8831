//! `rubric compare BASE NEW`: two result files of the same rows (`crate::agree::compare`), with
//! `--fail-if` conditions that make the exit status 1 for a CI gate and `--junit FILE` for CI
//! systems that read JUnit XML (one test case per condition).

use super::ReportFormat;
use crate::agree::compare::{compare, CompareOptions, Comparison, Condition};
use crate::agree::read_records;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `rubric compare` was asked.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The records of the baseline run (`rubric run --output`).
    pub base: PathBuf,
    /// The records of the new run, of the same rows.
    pub new: PathBuf,
    /// A row passes when its score is at least this (for pass/fail flips and McNemar's test).
    #[arg(long, default_value_t = 0.5)]
    pub pass_at: f64,
    /// Paired bootstrap resamples (of rows) for the interval of the mean difference.
    #[arg(long, default_value_t = 2000)]
    pub bootstrap: usize,
    /// The bootstrap's seed: the same seed, the same interval.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The interval's confidence.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Exit with status 1 when this holds: `drop>X` (the mean score fell by more than X),
    /// `drop>X@C` (it did with confidence C: the C-level interval of new − base lies below −X),
    /// `regressions>N` (rows from pass to fail), `mcnemar<P` (McNemar's exact p below P with
    /// more regressions than fixes), `flips>N` (criteria from met to unmet). Repeatable.
    #[arg(long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// Write a JUnit XML report (one test case per `--fail-if` condition) to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// `json`: the comparison and the conditions as one JSON document on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

fn load(path: &Path) -> Result<Vec<crate::agree::Record>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read_records(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(a: CompareArgs) -> ExitCode {
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        return fail("`--confidence` is a number between 0 and 1");
    }
    if !a.pass_at.is_finite() {
        return fail("`--pass-at` is a number");
    }
    let conditions: Vec<(String, Condition)> =
        match a.fail_if.iter().map(|t| Condition::parse(t).map(|c| (t.clone(), c))).collect() {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
    let (base, new) = match (load(&a.base), load(&a.new)) {
        (Ok(b), Ok(n)) => (b, n),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let opts = CompareOptions { pass_at: a.pass_at, resamples: a.bootstrap, seed: a.seed, confidence: a.confidence };
    let main = compare(&base, &new, &opts);
    // A condition with a confidence of its own is checked on an interval at that confidence.
    let checked: Vec<(String, bool, String)> = conditions
        .iter()
        .map(|(text, c)| {
            let (held, why) = match c.confidence().filter(|&conf| conf != a.confidence) {
                Some(conf) => c.check(&compare(&base, &new, &CompareOptions { confidence: conf, ..opts.clone() })),
                None => c.check(&main),
            };
            (text.clone(), held, why)
        })
        .collect();
    if let Some(path) = &a.junit {
        if let Err(e) = std::fs::write(path, junit(&main, &checked)) {
            return fail(&format!("{}: {e}", path.display()));
        }
    }
    if a.format == ReportFormat::Json {
        let doc = serde_json::json!({
            "comparison": main,
            "conditions": checked.iter().map(|(c, held, why)| serde_json::json!({"condition": c, "held": held, "why": why})).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        out!("{}", text(&main, &checked));
    }
    if checked.iter().any(|c| c.1) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{:.1}%", 100.0 * x))
}

fn num(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.4}"))
}

fn list(keys: &[String]) -> String {
    let shown: Vec<&str> = keys.iter().take(10).map(String::as_str).collect();
    let more = keys.len().saturating_sub(shown.len());
    format!("{}{}", shown.join(", "), if more > 0 { format!(" and {more} more") } else { String::new() })
}

fn text(c: &Comparison, checked: &[(String, bool, String)]) -> String {
    let mut out = format!(
        "compare: {} rows in BASE, {} in NEW: {} scored in both, {} unscored or an error in one or both\n",
        c.rows.base, c.rows.new, c.rows.paired, c.rows.unscored
    );
    if !c.rows.only_base.is_empty() {
        out.push_str(&format!("only in BASE ({}): {}\n", c.rows.only_base.len(), list(&c.rows.only_base)));
    }
    if !c.rows.only_new.is_empty() {
        out.push_str(&format!("only in NEW ({}): {}\n", c.rows.only_new.len(), list(&c.rows.only_new)));
    }
    let interval = c.difference.interval.map_or_else(
        || "no interval".to_string(),
        |(lo, hi)| {
            format!(
                "{:.0}% paired bootstrap interval [{lo:+.4}, {hi:+.4}], {} resamples",
                c.difference.confidence * 100.0,
                c.difference.resamples
            )
        },
    );
    out.push_str(&format!(
        "mean score: {} -> {} (new - base {}, {interval})\n",
        num(c.mean_base),
        num(c.mean_new),
        c.difference.mean.map_or_else(|| "-".into(), |d| format!("{d:+.4}"))
    ));
    let m = &c.pass.mcnemar;
    out.push_str(&format!(
        "pass (score >= {}): {} -> {}: {} rows regressed, {} fixed; McNemar exact p = {}{}\n",
        c.pass.threshold,
        pct(c.pass.base_rate),
        pct(c.pass.new_rate),
        c.pass.regressed,
        c.pass.fixed,
        crate::agree::compare::p_text(m.p_exact),
        m.chi2_corrected.map_or_else(String::new, |x| format!(" (chi-square corrected {x:.3})"))
    ));
    let worst: Vec<String> = c
        .criteria
        .by_criterion
        .iter()
        .filter(|f| f.to_unmet > 0)
        .take(5)
        .map(|f| format!("`{}` {} met -> unmet, {} unmet -> met", f.criterion, f.to_unmet, f.to_met))
        .collect();
    out.push_str(&format!(
        "criteria: {} went from met to unmet, {} from unmet to met{}\n",
        c.criteria.to_unmet,
        c.criteria.to_met,
        if worst.is_empty() { String::new() } else { format!("; most: {}", worst.join("; ")) }
    ));
    if !c.largest_drops.is_empty() {
        let drops: Vec<String> =
            c.largest_drops.iter().take(5).map(|(k, b, n)| format!("{k} {b:.4} -> {n:.4}")).collect();
        out.push_str(&format!("largest drops: {}\n", drops.join(", ")));
    }
    for (cond, held, why) in checked {
        out.push_str(&format!("fail-if {cond}: {}: {why}\n", if *held { "HELD" } else { "not held" }));
    }
    out
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A JUnit XML report: one test case per condition, failed where it held.
fn junit(c: &Comparison, checked: &[(String, bool, String)]) -> String {
    let failures = checked.iter().filter(|x| x.1).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites tests=\"{}\" failures=\"{failures}\">\n  <testsuite name=\"rubric compare\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">\n",
        checked.len(),
        checked.len()
    ));
    out.push_str("    <properties>\n");
    for (name, value) in [
        ("paired_rows", c.rows.paired.to_string()),
        ("mean_base", num(c.mean_base)),
        ("mean_new", num(c.mean_new)),
        ("difference", num(c.difference.mean)),
        ("regressed", c.pass.regressed.to_string()),
        ("fixed", c.pass.fixed.to_string()),
        ("mcnemar_p", format!("{:.6}", c.pass.mcnemar.p_exact)),
    ] {
        out.push_str(&format!("      <property name=\"{name}\" value=\"{}\"/>\n", xml(&value)));
    }
    out.push_str("    </properties>\n");
    for (cond, held, why) in checked {
        out.push_str(&format!("    <testcase classname=\"rubric.compare\" name=\"fail-if {}\">", xml(cond)));
        if *held {
            out.push_str(&format!("\n      <failure message=\"{}\">{}</failure>\n    ", xml(why), xml(why)));
        } else {
            out.push_str(&format!("<system-out>{}</system-out>", xml(why)));
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
