//! `rubric report RESULTS [--input ROWS] [--summary S] -o report.html`: one self-contained HTML
//! file (no network, no external script, style or font) that shows what a run did and why: the
//! headline statistics with their intervals, per-criterion and per-axis met/unmet/unscored
//! bars, a score histogram, failure classes, judge statistics, and a filterable table of rows,
//! each of which opens to its criteria (status, reason, evidence) and its inputs with the
//! judges' evidence highlighted.
//!
//! The figures are computed here ([`ReportData`], unit-tested); the page's script
//! (`report/report.js`, inlined) only draws them and the table. The data travels in a
//! `<script type="application/json">` element, escaped so that no value can close it.

use crate::agree::stats::{summarize, StatsOptions, Summary};
use serde::Serialize;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `rubric report` was asked.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The records of a run (`rubric run --output`).
    pub results: PathBuf,
    /// The rows that were scored: the table shows their text, with the judges' evidence marked.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// The run's summary (`rubric run --summary`): its statistics and judge counters; without
    /// it, the mean score's interval is computed here.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// The judges' agreement with human labels (`rubric agree --format json`): shown per group
    /// with its intervals and the annotators' own agreement.
    #[arg(long, value_name = "FILE")]
    pub agreement: Option<PathBuf>,
    /// Where the page goes.
    #[arg(short, long, default_value = "report.html")]
    pub output: PathBuf,
    /// The page's title (default: the rubric's name and version).
    #[arg(long)]
    pub title: Option<String>,
}

/// The longest text of an input shown per row (longer ones are cut, and say so).
const MAX_TEXT: usize = 20_000;

/// Every figure the page shows.
#[derive(Debug, Serialize)]
pub struct ReportData {
    pub title: String,
    pub rubric: Option<String>,
    pub version: Option<String>,
    pub ir_hash: Option<String>,
    pub sources: Map<String, Json>,
    pub summary: Json,
    pub criteria: Vec<CriterionBar>,
    pub axes: Vec<CriterionBar>,
    pub histogram: Histogram,
    pub failures: Vec<Count>,
    pub unscored_reasons: Vec<Count>,
    pub judges: Vec<JudgeLine>,
    /// Per group of `rubric agree`'s report: what the page shows of it.
    pub agreement: Vec<Json>,
    pub rows: Vec<Json>,
}

/// Met, unmet, unscored and skipped counts of one criterion (a per-instance block as
/// `NAME[]`) or axis.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct CriterionBar {
    pub key: String,
    pub text: Option<String>,
    pub met: u64,
    pub unmet: u64,
    pub unscored: u64,
    pub skipped: u64,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Histogram {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Count {
    pub key: String,
    pub n: u64,
}

/// What the records say of one judge (`source: judge:NAME`).
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct JudgeLine {
    pub judge: String,
    pub criteria: u64,
    pub met: u64,
    pub unmet: u64,
    pub unscored: u64,
    /// Σ `cost_usd` of the criteria that have one (`priced` of them).
    pub cost_usd: f64,
    pub priced: u64,
    /// Criteria whose cost is unknown (`cost_usd: null`: no usage, no price).
    pub cost_unknown: u64,
}

/// `items[3]` → `items[]`: per-instance criteria are reported by their block.
fn criterion_key(id: &str) -> String {
    match id.rfind('[') {
        Some(i) if id.ends_with(']') && id[i + 1..id.len() - 1].chars().all(|c| c.is_ascii_digit()) => {
            format!("{}[]", &id[..i])
        }
        _ => id.to_string(),
    }
}

fn bump(bar: &mut CriterionBar, status: &str) {
    match status {
        "met" => bar.met += 1,
        "unmet" => bar.unmet += 1,
        "skipped" => bar.skipped += 1,
        _ => bar.unscored += 1,
    }
}

/// A row input as text to show: strings as they are, a conversation as `role: content` lines,
/// anything else as JSON; cut at [`MAX_TEXT`].
fn show(v: &Json) -> String {
    let text = match v {
        Json::String(s) => s.clone(),
        Json::Array(xs) if xs.iter().all(|m| m.get("role").is_some()) => xs
            .iter()
            .map(|m| {
                let content = match m.get("content") {
                    Some(Json::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                format!("{}: {content}", m.get("role").and_then(Json::as_str).unwrap_or("?"))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    if text.len() <= MAX_TEXT {
        return text;
    }
    let mut cut = MAX_TEXT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}\n[... {} more bytes not shown]", &text[..cut], text.len() - cut)
}

/// The figures of the page from the records (one JSON object a line), the rows by index, and
/// the summary.
pub fn build(
    results: impl BufRead,
    inputs: &[Option<Json>],
    summary: Summary,
    title: Option<String>,
) -> Result<ReportData, String> {
    let mut criteria: BTreeMap<String, CriterionBar> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut axes: BTreeMap<String, CriterionBar> = BTreeMap::new();
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    let mut judges: BTreeMap<String, JudgeLine> = BTreeMap::new();
    let mut scores = Vec::new();
    let mut rows = Vec::new();
    for (i, line) in results.lines().enumerate() {
        let line = line.map_err(|e| format!("results line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let mut rec: Json =
            serde_json::from_str(&line).map_err(|e| format!("results line {}: not JSON: {e}", i + 1))?;
        let Some(obj) = rec.as_object_mut() else {
            return Err(format!("results line {}: not a JSON object", i + 1));
        };
        if let Some(code) = obj.get("error").and_then(|e| e.get("code")).and_then(Json::as_str) {
            *failures.entry(format!("error: {code}")).or_default() += 1;
        }
        if let Some(f) = obj.get("failure_class").and_then(Json::as_str) {
            *failures.entry(f.to_string()).or_default() += 1;
        } else if obj.get("status").and_then(Json::as_str) == Some("unscored") {
            *failures.entry("unscored".into()).or_default() += 1;
        }
        if let Some(s) = obj.get("score").and_then(Json::as_f64) {
            scores.push(s);
        }
        for c in obj.get("criteria").and_then(Json::as_array).into_iter().flatten() {
            let id = c.get("id").and_then(Json::as_str).unwrap_or_default();
            let status = c.get("status").and_then(Json::as_str).unwrap_or_default();
            let key = criterion_key(id);
            let bar = criteria.entry(key.clone()).or_insert_with(|| {
                order.push(key.clone());
                CriterionBar { key: key.clone(), ..CriterionBar::default() }
            });
            let text = c.get("text").and_then(Json::as_str);
            if key == id {
                bar.text = text.map(String::from);
            } else if bar.text.is_none() {
                bar.text = Some("one criterion per item of the row".into());
            }
            bump(bar, status);
            if let Some(a) = c.get("axis").and_then(Json::as_str) {
                bump(
                    axes.entry(a.to_string()).or_insert_with(|| CriterionBar { key: a.into(), ..Default::default() }),
                    status,
                );
            }
            if status == "unscored" {
                let r = c.get("reason").and_then(Json::as_str).unwrap_or("unscored");
                *reasons.entry(r.to_string()).or_default() += 1;
            }
            if let Some(j) = c.get("source").and_then(Json::as_str).and_then(|s| s.strip_prefix("judge:")) {
                let line =
                    judges.entry(j.to_string()).or_insert_with(|| JudgeLine { judge: j.into(), ..Default::default() });
                line.criteria += 1;
                match status {
                    "met" => line.met += 1,
                    "unmet" => line.unmet += 1,
                    "unscored" => line.unscored += 1,
                    _ => {}
                }
                match c.get("cost_usd") {
                    Some(Json::Number(n)) => {
                        line.cost_usd += n.as_f64().unwrap_or(0.0);
                        line.priced += 1;
                    }
                    Some(Json::Null) => line.cost_unknown += 1,
                    _ => {}
                }
            }
        }
        // What the table needs of the record, and the row's inputs.
        for k in ["rubric", "version", "ir_hash", "engine", "axes", "sets", "bundle"] {
            obj.remove(k);
        }
        for c in obj.get_mut("criteria").and_then(Json::as_array_mut).into_iter().flatten() {
            if let Some(c) = c.as_object_mut() {
                c.remove("sets");
            }
        }
        let row = obj.get("row").and_then(Json::as_u64).map(|r| r as usize);
        if let Some(Some(Json::Object(input))) = row.and_then(|r| inputs.get(r)) {
            let shown: Map<String, Json> = input.iter().map(|(k, v)| (k.clone(), Json::String(show(v)))).collect();
            obj.insert("inputs".into(), Json::Object(shown));
        }
        rows.push(rec);
    }
    let (lo, hi) = scores.iter().fold((0.0f64, 1.0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    let bins = 10;
    let mut counts = vec![0u64; bins];
    for s in &scores {
        let b = (((s - lo) / (hi - lo)) * bins as f64).floor() as usize;
        counts[b.min(bins - 1)] += 1;
    }
    let mut failures: Vec<Count> = failures.into_iter().map(|(key, n)| Count { key, n }).collect();
    failures.sort_by(|a, b| b.n.cmp(&a.n).then(a.key.cmp(&b.key)));
    let mut unscored_reasons: Vec<Count> = reasons.into_iter().map(|(key, n)| Count { key, n }).collect();
    unscored_reasons.sort_by(|a, b| b.n.cmp(&a.n).then(a.key.cmp(&b.key)));
    let title = title.unwrap_or_else(|| match (&summary.rubric, &summary.version) {
        (Some(r), Some(v)) => format!("{r} @ {v}"),
        (Some(r), None) => r.clone(),
        _ => "rubric report".into(),
    });
    Ok(ReportData {
        title,
        rubric: summary.rubric.clone(),
        version: summary.version.clone(),
        ir_hash: summary.ir_hash.clone(),
        sources: Map::new(),
        summary: serde_json::to_value(&summary).map_err(|e| e.to_string())?,
        criteria: order.into_iter().filter_map(|k| criteria.remove(&k)).collect(),
        axes: axes.into_values().collect(),
        histogram: Histogram { lo, hi, counts },
        failures,
        unscored_reasons,
        judges: judges.into_values().collect(),
        agreement: vec![],
        rows,
    })
}

/// The page: the template with its style, script and data inlined.
pub fn render(data: &ReportData) -> Result<String, String> {
    let json = serde_json::to_string(data).map_err(|e| e.to_string())?;
    // Inside <script>, `</` could end the element and `<!--` open a comment: JSON may write
    // `<` as `\u003c` anywhere in a string, and nowhere else does `<` occur in JSON.
    let json = json.replace('<', "\\u003c");
    // The static parts first; then the title, escaped (`{` too, so that it cannot spell a
    // placeholder); the data last.
    Ok(include_str!("report/report.html")
        .replace("/*{{style}}*/", include_str!("report/report.css"))
        .replace("/*{{script}}*/", include_str!("report/report.js"))
        .replace("{{title}}", &html_escape(&data.title))
        .replace("{{data}}", &json))
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('{', "&#123;")
}

/// The groups of `rubric agree --format json` as the page shows them: group, kind, items, pairs,
/// accuracy, balanced accuracy, κ and α with their intervals, and the annotators' α.
fn agreement_rows(report: &Json) -> Result<Vec<Json>, String> {
    let groups = report
        .get("groups")
        .and_then(Json::as_array)
        .ok_or("not a `rubric agree --format json` report (no `groups`)")?;
    let metric = |g: &Json, m: &str| g["metrics"].get(m).cloned().unwrap_or(Json::Null);
    Ok(groups
        .iter()
        .map(|g| {
            serde_json::json!({
                "by": g["by"], "key": g["key"], "kind": g["kind"], "items": g["items"], "pairs": g["pairs"],
                "accuracy": metric(g, "accuracy"), "balanced_accuracy": metric(g, "balanced_accuracy"),
                "kappa": metric(g, "kappa"), "alpha": metric(g, "alpha"),
                "human_alpha": g["human"]["metrics"].get("alpha").cloned().unwrap_or(Json::Null),
            })
        })
        .collect())
}

fn read_inputs(path: &Path) -> Result<Vec<Option<Json>>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        // A row that is not JSON is an error record in the results; it shows no inputs.
        out.push(serde_json::from_str(&line).ok());
    }
    Ok(out)
}

pub fn run(a: ReportArgs) -> ExitCode {
    let open =
        |p: &Path| std::fs::File::open(p).map(std::io::BufReader::new).map_err(|e| format!("{}: {e}", p.display()));
    let go = || -> Result<(String, usize), String> {
        let summary: Summary = match &a.summary {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let v: Json = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", p.display()))?;
                serde_json::from_value::<Summary>(v)
                    .map_err(|e| format!("{}: not a summary (`rubric run --summary`): {e}", p.display()))?
            }
            None => summarize(&[], open(&a.results)?, None, StatsOptions::default())?,
        };
        let inputs = match &a.input {
            Some(p) => read_inputs(p)?,
            None => vec![],
        };
        let mut data = build(open(&a.results)?, &inputs, summary, a.title.clone())?;
        if let Some(p) = &a.agreement {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let v: Json = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", p.display()))?;
            data.agreement = agreement_rows(&v).map_err(|e| format!("{}: {e}", p.display()))?;
            data.sources.insert("agreement".into(), Json::String(p.display().to_string()));
        }
        data.sources.insert("results".into(), Json::String(a.results.display().to_string()));
        if let Some(p) = &a.input {
            data.sources.insert("input".into(), Json::String(p.display().to_string()));
        }
        if let Some(p) = &a.summary {
            data.sources.insert("summary".into(), Json::String(p.display().to_string()));
        }
        Ok((render(&data)?, data.rows.len()))
    };
    match go() {
        Ok((page, rows)) => match std::fs::write(&a.output, page) {
            Ok(()) => {
                eprintln!("report: {} ({rows} rows)", a.output.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}: {e}", a.output.display());
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(results: &str) -> Summary {
        summarize(&[], results.as_bytes(), None, StatsOptions::default()).expect("a summary")
    }

    const RESULTS: &str = concat!(
        r#"{"row":0,"id":"a","rubric":"r","version":"1.0.0","score":0.5,"status":"scored","failure_class":null,"criteria":["#,
        r#"{"id":"items[0]","text":"Says hello","status":"met","axis":"tone","source":"judge:g","cost_usd":0.25},"#,
        r#"{"id":"items[1]","text":"Says bye","status":"unmet","axis":"tone","source":"judge:g","cost_usd":null},"#,
        r#"{"id":"short","text":"Short","status":"met","source":"check"}]}"#,
        "\n",
        r#"{"row":1,"id":"b","score":null,"status":"unscored","failure_class":null,"criteria":["#,
        r#"{"id":"items[0]","text":"Greets","status":"unscored","reason":"judge_timeout","axis":"tone","source":"judge:g"},"#,
        r#"{"id":"short","text":"Short","status":"unmet","source":"check"}]}"#,
        "\n",
        r#"{"row":2,"id":"c","error":{"code":"rubric::row::type","message":"bad"}}"#,
        "\n",
        r#"{"row":3,"id":"d","score":1,"status":"scored","failure_class":"gate:format","criteria":[]}"#,
        "\n"
    );

    #[test]
    fn the_figures_come_from_the_records() {
        let inputs = vec![Some(
            serde_json::json!({"response": "hello </script> there", "turns": [{"role": "user", "content": "hi"}]}),
        )];
        let d = build(RESULTS.as_bytes(), &inputs, summary(RESULTS), None).expect("a report");
        assert_eq!(d.title, "r @ 1.0.0");
        let bars: Vec<(&str, u64, u64, u64)> =
            d.criteria.iter().map(|b| (b.key.as_str(), b.met, b.unmet, b.unscored)).collect();
        assert_eq!(bars, [("items[]", 1, 1, 1), ("short", 1, 1, 0)]);
        assert_eq!(d.criteria[1].text.as_deref(), Some("Short"));
        assert_eq!(
            d.axes,
            [CriterionBar { key: "tone".into(), text: None, met: 1, unmet: 1, unscored: 1, skipped: 0 }]
        );
        // Scores 0.5 and 1 over [0, 1] in ten bins.
        assert_eq!(d.histogram.counts.iter().sum::<u64>(), 2);
        assert_eq!((d.histogram.counts[5], d.histogram.counts[9]), (1, 1));
        let f: Vec<(&str, u64)> = d.failures.iter().map(|c| (c.key.as_str(), c.n)).collect();
        assert_eq!(f, [("error: rubric::row::type", 1), ("gate:format", 1), ("unscored", 1)]);
        assert_eq!(d.unscored_reasons, [Count { key: "judge_timeout".into(), n: 1 }]);
        assert_eq!(
            d.judges,
            [JudgeLine {
                judge: "g".into(),
                criteria: 3,
                met: 1,
                unmet: 1,
                unscored: 1,
                cost_usd: 0.25,
                priced: 1,
                cost_unknown: 1
            }]
        );
        assert_eq!(d.rows.len(), 4);
        assert_eq!(d.rows[0]["inputs"]["turns"], "user: hi");
        // No value can close the data's script element.
        let page = render(&d).expect("a page");
        let data = page.split("id=\"data\"").nth(1).expect("the data element");
        let data = &data[..data.find("</script>").expect("its end")];
        assert!(data.contains("hello \\u003c/script> there"), "{data}");
        // Nothing to fetch: no external script, style sheet, font or image (the browser test
        // checks that the page makes no request at all).
        for fetches in ["<link", " src=", "@import", "url(", "fetch(", "XMLHttpRequest"] {
            assert!(!page.contains(fetches), "the page contains `{fetches}`");
        }
    }

    #[test]
    fn long_inputs_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_TEXT);
        let shown = show(&Json::String(long));
        assert!(shown.ends_with("more bytes not shown]"));
        assert!(shown.len() < MAX_TEXT + 100);
    }
}
