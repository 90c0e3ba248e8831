//! Dataset-level statistics (`stat NAME = ...` in the rubric, `rubric run --summary`, `rubric
//! stats`): aggregates over the rows of a run, each with a seeded percentile bootstrap interval
//! over rows and the bootstrap's standard error (the standard deviation of the resampled
//! values, as simple-evals reports HealthBench's `bootstrap_std`).
//!
//! Input: the rubric's declarations (`ir::StatDecl`), the run's records (one JSON object a
//! line) and, for `per input FIELD`, the rows that were scored. A row enters a statistic when
//! its measure is defined; a row whose measure is unscored (or an error record) is left out
//! and counted as such, never folded in as a zero. The aggregate, not each row, is clipped
//! (HealthBench clips the mean of its row scores to [0, 1]); the bootstrap clips each
//! resample's aggregate the same way.
//!
//! Every summary starts with the built-in statistic `score`: the mean score, unclipped.
//!
//! Pipeline position: after `runtime`, like the rest of `agree`: it reads records, so it works
//! the same on a live run, a replay or a bundle's results.

use super::metrics::{bootstrap_draws, Rng};
use crate::ir::{InputDecl, StatAgg, StatDecl, StatMeasure, StatPer};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// How the intervals are drawn.
#[derive(Debug, Clone, Copy)]
pub struct StatsOptions {
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
}

impl Default for StatsOptions {
    fn default() -> StatsOptions {
        StatsOptions { resamples: 1000, seed: 0, confidence: 0.95 }
    }
}

/// What `--summary` writes: the run's statistics as one JSON document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub rubric: Option<String>,
    pub version: Option<String>,
    pub ir_hash: Option<String>,
    /// Records read, and how many were scored, unscored, error records.
    pub rows: usize,
    pub scored: usize,
    pub unscored: usize,
    pub errors: usize,
    pub bootstrap: Bootstrap,
    pub stats: Vec<StatValue>,
    /// The judge dispatcher's counters of the run that wrote the records (calls, cache hits,
    /// latency percentiles, tokens, cost), when `rubric run` wrote the summary and judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judges: Option<Json>,
    /// How long that run took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_seconds: Option<f64>,
    /// A rubric with a comparing judge: per-criterion preferences and the judge's position
    /// bias (`agree::prefs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferences: Option<super::prefs::Preferences>,
    /// Statistics that could not be computed from what was given, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_computed: Vec<NotComputed>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotComputed {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bootstrap {
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
    /// Resampled over rows (every record is one draw).
    pub over: String,
}

/// One value of one statistic (a statistic `per ...` has one per key).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatValue {
    pub name: String,
    /// The tag, axis or input value (`per ...`); absent for a statistic of the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The statistic as declared, in the IR's words (`mean(score) clip [0, 1]`).
    pub declared: String,
    /// `None` when no row defines it.
    pub value: Option<f64>,
    /// The bootstrap interval at `confidence`; `None` with fewer than two rows or when fewer
    /// than half of the resamples define it.
    pub interval: Option<(f64, f64)>,
    pub std_err: Option<f64>,
    /// Rows that entered the value.
    pub n: usize,
    /// Rows where the measure applied but was unscored (or the record is an error).
    pub left_out: usize,
}

/// One criterion of one record, as the statistics read it.
#[derive(Debug)]
struct Crit {
    id: String,
    status: String,
    value: Option<f64>,
    points: f64,
    axis: Option<String>,
    tags: Vec<String>,
    sets: Vec<String>,
}

/// One record, as the statistics read it.
#[derive(Debug)]
struct Row {
    row: usize,
    score: Option<f64>,
    /// The report-only scores (`scores`), by name.
    scores: serde_json::Map<String, Json>,
    error: bool,
    criteria: Option<Vec<Crit>>,
}

/// A measure's outcome on one row.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Value(f64),
    /// The measure applies but could not be computed: left out and counted.
    Unscored,
    /// The measure does not apply to the row (no criterion with the key, no positive points).
    Absent,
}

/// Parse one result record (`rubric run`'s output).
fn read_row(line: &str) -> Result<Row, String> {
    let v: Json = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let row = v.get("row").and_then(Json::as_u64).ok_or("no `row` index")? as usize;
    let error = v.get("error").is_some();
    let criteria = v.get("criteria").and_then(Json::as_array).map(|cs| {
        cs.iter()
            .map(|c| {
                let strs = |k: &str| -> Vec<String> {
                    c.get(k)
                        .and_then(Json::as_array)
                        .map(|t| t.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                        .unwrap_or_default()
                };
                Crit {
                    id: c.get("id").and_then(Json::as_str).unwrap_or_default().to_string(),
                    status: c.get("status").and_then(Json::as_str).unwrap_or_default().to_string(),
                    value: c.get("value").and_then(Json::as_f64),
                    points: c.get("points").and_then(Json::as_f64).unwrap_or(0.0),
                    axis: c.get("axis").and_then(Json::as_str).map(String::from),
                    tags: strs("tags"),
                    sets: strs("sets"),
                }
            })
            .collect()
    });
    let scores = v.get("scores").and_then(Json::as_object).cloned().unwrap_or_default();
    Ok(Row { row, score: v.get("score").and_then(Json::as_f64), scores, error, criteria })
}

fn in_set(c: &Crit, set: &str) -> bool {
    set == "all" || c.sets.iter().any(|s| s == set)
}

/// Which of a set's criteria a keyed value reads.
#[derive(Clone, Copy)]
enum Filter<'a> {
    Every,
    Tag(&'a str),
    Axis(&'a str),
}

impl Filter<'_> {
    fn keeps(self, c: &Crit) -> bool {
        match self {
            Filter::Every => true,
            Filter::Tag(t) => c.tags.iter().any(|x| x == t),
            Filter::Axis(a) => c.axis.as_deref() == Some(a),
        }
    }
}

/// The measure's number on one row (before `rate`'s test).
fn measure(m: &StatMeasure, row: &Row, filter: Filter<'_>) -> Outcome {
    if row.error {
        return Outcome::Unscored;
    }
    let crits = || row.criteria.as_deref().unwrap_or_default();
    match m {
        StatMeasure::Score => row.score.map_or(Outcome::Unscored, Outcome::Value),
        StatMeasure::NamedScore { name } => match row.scores.get(name) {
            Some(v) => v.as_f64().map_or(Outcome::Unscored, Outcome::Value),
            None => Outcome::Absent,
        },
        StatMeasure::Criterion { id } => match crits().iter().find(|c| &c.id == id) {
            None => Outcome::Absent,
            Some(c) => match c.status.as_str() {
                "unscored" => Outcome::Unscored,
                "skipped" => Outcome::Absent,
                "met" if c.value.is_none() => Outcome::Value(1.0),
                "unmet" if c.value.is_none() => Outcome::Value(0.0),
                _ => c.value.map_or(Outcome::Unscored, Outcome::Value),
            },
        },
        StatMeasure::PointsRatio { set } | StatMeasure::MetRatio { set } => {
            let members: Vec<&Crit> =
                crits().iter().filter(|c| in_set(c, set) && filter.keeps(c) && c.status != "skipped").collect();
            if members.is_empty() {
                return Outcome::Absent;
            }
            if members.iter().any(|c| c.status == "unscored") {
                return Outcome::Unscored;
            }
            let met = |c: &&&Crit| c.status == "met";
            if matches!(m, StatMeasure::MetRatio { .. }) {
                return Outcome::Value(members.iter().filter(met).count() as f64 / members.len() as f64);
            }
            let achieved: f64 = members.iter().filter(met).map(|c| c.points * c.value.unwrap_or(1.0)).sum();
            let possible: f64 = members.iter().map(|c| c.points).filter(|p| *p > 0.0).sum();
            if possible == 0.0 {
                Outcome::Absent
            } else {
                Outcome::Value(achieved / possible)
            }
        }
    }
}

/// The row's number for the statistic: the measure, or 1/0 by `rate`'s test.
fn row_value(st: &StatDecl, row: &Row, filter: Filter<'_>) -> Outcome {
    match (measure(&st.measure, row, filter), st.agg, st.test) {
        (Outcome::Value(x), StatAgg::Rate, Some(t)) => Outcome::Value(f64::from(u8::from(t.op.holds(x, t.value)))),
        (Outcome::Value(x), StatAgg::Rate, None) => Outcome::Value(f64::from(u8::from(x >= 1.0))),
        (o, _, _) => o,
    }
}

/// An input's keys on one row: the text, each text of a list, a number or boolean printed.
fn input_keys(row: Option<&Json>, input: &InputDecl) -> Vec<String> {
    let field = input.field.as_deref().unwrap_or(&input.name);
    let key = |v: &Json| match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match row.and_then(|r| r.get(field)) {
        Some(Json::Array(xs)) => xs.iter().filter_map(key).collect::<BTreeSet<_>>().into_iter().collect(),
        Some(v) => key(v).into_iter().collect(),
        None => vec![],
    }
}

/// The statistic as the IR's printer words it, without its name.
fn declared(st: &StatDecl) -> String {
    let measure = match &st.measure {
        StatMeasure::Score => "score".to_string(),
        StatMeasure::NamedScore { name } => name.clone(),
        StatMeasure::Criterion { id } => id.clone(),
        StatMeasure::PointsRatio { set } => format!("points_ratio({set})"),
        StatMeasure::MetRatio { set } => format!("met_ratio({set})"),
    };
    let agg = match st.agg {
        StatAgg::Mean => "mean",
        StatAgg::Rate => "rate",
    };
    let test = st.test.map(|t| format!(" {} {}", t.op.symbol(), t.value)).unwrap_or_default();
    let per = match &st.per {
        None => String::new(),
        Some(StatPer::Tag { prefix }) if prefix.is_empty() => " per tag".into(),
        Some(StatPer::Tag { prefix }) => format!(" per tag {prefix:?}"),
        Some(StatPer::Axis) => " per axis".into(),
        Some(StatPer::Input { name }) => format!(" per input {name}"),
    };
    let clip = st.clip.map(|(lo, hi)| format!(" clip {lo}, {hi}")).unwrap_or_default();
    format!("{agg}({measure}{test}){per}{clip}")
}

/// A series: one statistic (and key), its value on every row.
struct Series {
    name: String,
    key: Option<String>,
    declared: String,
    clip: Option<(f64, f64)>,
    /// Per record: the value, `NAN` when the row does not enter it.
    values: Vec<f64>,
    left_out: usize,
}

impl Series {
    fn new(st: &StatDecl, key: Option<String>, rows: usize) -> Series {
        Series {
            name: st.name.clone(),
            key,
            declared: declared(st),
            clip: st.clip,
            values: vec![f64::NAN; rows],
            left_out: 0,
        }
    }

    /// Record the outcome of the current (last) record.
    fn put(&mut self, o: Outcome) {
        match o {
            Outcome::Value(x) => {
                if let Some(last) = self.values.last_mut() {
                    *last = x;
                }
            }
            Outcome::Unscored => self.left_out += 1,
            Outcome::Absent => {}
        }
    }

    fn clipped(&self, x: f64) -> f64 {
        self.clip.map_or(x, |(lo, hi)| x.clamp(lo, hi))
    }

    /// The (clipped) mean over the records `idx`, `None` when none enters.
    fn mean_over(&self, idx: impl Iterator<Item = usize>) -> Option<f64> {
        let (mut sum, mut n) = (0.0, 0usize);
        for i in idx {
            let x = self.values[i];
            if !x.is_nan() {
                sum += x;
                n += 1;
            }
        }
        (n > 0).then(|| self.clipped(sum / n as f64))
    }
}

/// What one statistic produces: one series, or one per key found so far.
enum Slot {
    Whole(Series),
    Keyed(BTreeMap<String, Series>),
}

/// The keys `per input NAME` reads from each row of the rows file (by row index).
pub fn input_keys_of(
    stats: &[StatDecl],
    declared_inputs: &[InputDecl],
    rows: impl std::io::BufRead,
) -> Result<InputKeys, String> {
    let wanted: Vec<&InputDecl> = stats
        .iter()
        .filter_map(|st| match &st.per {
            Some(StatPer::Input { name }) => declared_inputs.iter().find(|d| &d.name == name),
            _ => None,
        })
        .collect();
    let mut out: InputKeys = BTreeMap::new();
    for (i, line) in rows.lines().enumerate() {
        let line = line.map_err(|e| format!("rows line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        // A row that is not JSON is an error record of the run: it has no keys.
        let v: Option<Json> = serde_json::from_str(&line).ok();
        for d in &wanted {
            out.entry(d.name.clone()).or_default().push(input_keys(v.as_ref(), d));
        }
    }
    Ok(out)
}

/// Per input name, per row index: the row's keys.
pub type InputKeys = BTreeMap<String, Vec<Vec<String>>>;

/// Compute the statistics of `stats` (after the built-in `score`) over the records read from
/// `results`, one record at a time; `inputs` are the keys of `per input` statistics
/// ([`input_keys_of`]).
pub fn summarize(
    stats: &[StatDecl],
    results: impl std::io::BufRead,
    inputs: Option<&InputKeys>,
    opts: StatsOptions,
) -> Result<Summary, String> {
    let builtin = StatDecl {
        name: "score".into(),
        agg: StatAgg::Mean,
        measure: StatMeasure::Score,
        test: None,
        per: None,
        clip: None,
    };
    let mut not_computed = Vec::new();
    let mut all: Vec<&StatDecl> = vec![&builtin];
    for st in stats {
        match (&st.per, inputs) {
            (Some(StatPer::Input { name }), None) => not_computed.push(NotComputed {
                name: st.name.clone(),
                reason: format!(
                    "it splits the rows by input `{name}`, and the rows file was not given (or was standard input)"
                ),
            }),
            _ => all.push(st),
        }
    }
    let mut slots: Vec<Slot> = all
        .iter()
        .map(|st| if st.per.is_none() { Slot::Whole(Series::new(st, None, 0)) } else { Slot::Keyed(BTreeMap::new()) })
        .collect();
    let (mut n, mut scored, mut unscored, mut errors) = (0usize, 0, 0, 0);
    let mut head: Option<Json> = None;
    for (i, line) in results.lines().enumerate() {
        let line = line.map_err(|e| format!("results line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        if head.is_none() {
            head = serde_json::from_str(&line).ok();
        }
        let r = read_row(&line).map_err(|e| format!("results line {}: {e}", i + 1))?;
        n += 1;
        match (r.error, r.score) {
            (true, _) => errors += 1,
            (false, Some(_)) => scored += 1,
            (false, None) => unscored += 1,
        }
        for (st, slot) in all.iter().zip(&mut slots) {
            let reads_criteria = !matches!(st.measure, StatMeasure::Score | StatMeasure::NamedScore { .. });
            if reads_criteria && !r.error && r.criteria.is_none() {
                return Err(format!(
                    "results line {}: statistic `{}` reads criteria, and this record is compact (run without `--compact`)",
                    i + 1,
                    st.name
                ));
            }
            match slot {
                Slot::Whole(s) => {
                    s.values.push(f64::NAN);
                    s.put(row_value(st, &r, Filter::Every));
                }
                Slot::Keyed(keyed) => {
                    for s in keyed.values_mut() {
                        s.values.push(f64::NAN);
                    }
                    let mut keyed_put = |k: String, o: Outcome| {
                        keyed.entry(k.clone()).or_insert_with(|| Series::new(st, Some(k), n)).put(o);
                    };
                    match &st.per {
                        Some(StatPer::Input { name }) => {
                            let keys = inputs.and_then(|m| m.get(name)).and_then(|rows| rows.get(r.row));
                            let o = row_value(st, &r, Filter::Every);
                            for k in keys.into_iter().flatten() {
                                keyed_put(k.clone(), o);
                            }
                        }
                        per => {
                            let set = st.measure.set().unwrap_or("all");
                            let mut keys = BTreeSet::new();
                            for c in r.criteria.as_deref().unwrap_or_default().iter().filter(|c| in_set(c, set)) {
                                match per {
                                    Some(StatPer::Tag { prefix }) => {
                                        keys.extend(c.tags.iter().filter(|t| t.starts_with(prefix.as_str())).cloned())
                                    }
                                    _ => keys.extend(c.axis.clone()),
                                }
                            }
                            for k in keys {
                                let filter =
                                    if matches!(per, Some(StatPer::Axis)) { Filter::Axis(&k) } else { Filter::Tag(&k) };
                                let o = row_value(st, &r, filter);
                                keyed_put(k.clone(), o);
                            }
                        }
                    }
                }
            }
        }
    }
    let series: Vec<Series> = slots
        .into_iter()
        .flat_map(|slot| match slot {
            Slot::Whole(s) => vec![s],
            Slot::Keyed(k) => k.into_values().collect(),
        })
        .collect();
    let indices: Vec<usize> = (0..n).collect();
    let draws = bootstrap_draws(&indices, opts.resamples, &mut Rng::new(opts.seed), |sample| {
        series.iter().map(|s| s.mean_over(sample.iter().map(|i| **i))).collect()
    });
    let tail = (1.0 - opts.confidence) / 2.0;
    let values = series
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let entered = s.values.iter().filter(|x| !x.is_nan()).count();
            let mut vs = draws.get(k).cloned().unwrap_or_default();
            let (interval, std_err) = if entered >= 2 && !vs.is_empty() && vs.len() * 2 >= opts.resamples {
                vs.sort_by(f64::total_cmp);
                let rank = |q: f64| vs[((q * vs.len() as f64).ceil() as usize).clamp(1, vs.len()) - 1];
                let m = vs.iter().sum::<f64>() / vs.len() as f64;
                let sd = (vs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / vs.len() as f64).sqrt();
                (Some((rank(tail), rank(1.0 - tail))), Some(sd))
            } else {
                (None, None)
            };
            StatValue {
                name: s.name.clone(),
                key: s.key.clone(),
                declared: s.declared.clone(),
                value: s.mean_over(0..n),
                interval,
                std_err,
                n: entered,
                left_out: s.left_out,
            }
        })
        .collect();
    let field = |k: &str| head.as_ref().and_then(|v| v.get(k)).and_then(Json::as_str).map(String::from);
    Ok(Summary {
        rubric: field("rubric"),
        version: field("version"),
        ir_hash: field("ir_hash"),
        rows: n,
        scored,
        unscored,
        errors,
        bootstrap: Bootstrap {
            resamples: opts.resamples,
            seed: opts.seed,
            confidence: opts.confidence,
            over: "rows".into(),
        },
        stats: values,
        judges: None,
        run_seconds: None,
        preferences: None,
        not_computed,
    })
}

/// The summary as the end of a run prints it: one line per value.
pub fn render(s: &Summary) -> String {
    let label = |v: &StatValue| match &v.key {
        Some(k) => format!("{}[{k}]", v.name),
        None => v.name.clone(),
    };
    let width = s.stats.iter().map(|v| label(v).chars().count()).max().unwrap_or(0).min(40);
    let mut out = format!(
        "statistics ({}% bootstrap intervals over rows, {} resamples, seed {}):",
        s.bootstrap.confidence * 100.0,
        s.bootstrap.resamples,
        s.bootstrap.seed
    );
    for v in &s.stats {
        let value = v.value.map_or("-".to_string(), |x| format!("{x:.4}"));
        let interval = v.interval.map_or(String::new(), |(lo, hi)| format!("  [{lo:.4}, {hi:.4}]"));
        let left = if v.left_out > 0 { format!(", {} left out", v.left_out) } else { String::new() };
        out.push_str(&format!("\n  {:width$}  {value}{interval}  n {}{left}", label(v), v.n));
    }
    for n in &s.not_computed {
        out.push_str(&format!("\n  {}: not computed: {}", n.name, n.reason));
    }
    if let Some(p) = &s.preferences {
        out.push('\n');
        out.push_str(&super::prefs::render(p));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(
        name: &str,
        agg: StatAgg,
        measure: StatMeasure,
        per: Option<StatPer>,
        clip: Option<(f64, f64)>,
    ) -> StatDecl {
        StatDecl { name: name.into(), agg, measure, test: None, per, clip }
    }

    /// simple-evals' HealthBench aggregation on hand-made rows: the row scores' mean clipped
    /// to [0, 1], and per tag the points ratio of the items with that tag, averaged over the
    /// rows that have one with positive points.
    #[test]
    fn the_healthbench_rule_per_run_and_per_tag() {
        let crit = |status: &str, points: i32, tag: &str| {
            format!(
                r#"{{"id":"x","status":"{status}","value":{},"points":{points},"tags":["{tag}"],"sets":["items"]}}"#,
                u8::from(status == "met")
            )
        };
        let rec = |row: usize, score: &str, cs: &[String]| {
            format!(r#"{{"row":{row},"score":{score},"criteria":[{}]}}"#, cs.join(","))
        };
        let results = [
            // 7 met (a), 5 unmet (b), 10 met (a), -6 met (c): 11/22; a = 17/17, b = 0/5, c: no positive points
            rec(0, "0.5", &[crit("met", 7, "a"), crit("unmet", 5, "b"), crit("met", 10, "a"), crit("met", -6, "c")]),
            // a row scoring below zero: -4/2
            rec(1, "-2", &[crit("unmet", 2, "a"), crit("met", -4, "b")]),
            rec(2, "null", &[crit("unscored", 3, "a")]),
        ]
        .join("\n");
        let stats = [
            decl("overall", StatAgg::Mean, StatMeasure::Score, None, Some((0.0, 1.0))),
            decl(
                "tags",
                StatAgg::Mean,
                StatMeasure::PointsRatio { set: "items".into() },
                Some(StatPer::Tag { prefix: String::new() }),
                Some((0.0, 1.0)),
            ),
        ];
        let s = summarize(&stats, results.as_bytes(), None, StatsOptions::default()).expect("a summary");
        let get = |name: &str, key: Option<&str>| {
            s.stats
                .iter()
                .find(|v| v.name == name && v.key.as_deref() == key)
                .unwrap_or_else(|| panic!("{name} {key:?}"))
        };
        // The built-in mean score is not clipped: (0.5 - 2) / 2.
        assert_eq!(get("score", None).value, Some(-0.75));
        assert_eq!(get("score", None).left_out, 1);
        // Clipped to [0, 1] after the mean, not per row.
        assert_eq!(get("overall", None).value, Some(0.0));
        // Tag a: row 0 gives 1, row 1 gives 0 (2 possible, none met), row 2 is unscored.
        let a = get("tags", Some("a"));
        assert_eq!((a.value, a.n, a.left_out), (Some(0.5), 2, 1));
        // Tag b: row 0 gives 0/5; row 1 has no positive points in b, so it does not enter.
        let b = get("tags", Some("b"));
        assert_eq!((b.value, b.n), (Some(0.0), 1));
        // Tag c has no positive points anywhere: no value.
        assert_eq!(get("tags", Some("c")).value, None);
        assert_eq!((s.rows, s.scored, s.unscored, s.errors), (3, 2, 1, 0));
    }

    #[test]
    fn the_bootstrap_is_seeded_and_brackets_the_value() {
        let results: String = (0..200)
            .map(|i| format!("{{\"row\":{i},\"score\":{},\"criteria\":[]}}\n", (i % 10) as f64 / 10.0))
            .collect();
        let a = summarize(&[], results.as_bytes(), None, StatsOptions::default()).expect("a summary");
        let b = summarize(&[], results.as_bytes(), None, StatsOptions::default()).expect("a summary");
        let c = summarize(&[], results.as_bytes(), None, StatsOptions { seed: 7, ..StatsOptions::default() })
            .expect("a summary");
        let (v, (lo, hi)) = (a.stats[0].value.expect("a mean"), a.stats[0].interval.expect("an interval"));
        assert!((v - 0.45).abs() < 1e-12);
        assert!(lo < v && v < hi, "{lo} < {v} < {hi}");
        assert_eq!(a.stats[0].interval, b.stats[0].interval);
        assert_ne!(a.stats[0].interval, c.stats[0].interval);
        // The standard error of a mean of 200 draws of this spread: sd / sqrt(n) ≈ 0.0203.
        let se = a.stats[0].std_err.expect("a standard error");
        assert!((se - 0.2872 / 200f64.sqrt()).abs() < 0.004, "{se}");
    }
}
