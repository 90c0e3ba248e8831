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
//! `bradley_terry(MEASURE) per input FIRST, SECOND` is the one statistic that is not a mean
//! of rows: each row compares the system its input `FIRST` names with the one `SECOND` names,
//! the measure being the first's share of the win, and the value per system is its rating in
//! the Bradley–Terry model fitted to all the rows ([`super::bradley_terry`]); each bootstrap
//! resample is fitted again, and one where the ratings do not exist is left out and counted.
//!
//! Pipeline position: after `runtime`, like the rest of `agree`: it reads records, so it works
//! the same on a live run, a replay or a bundle's results.

use super::bradley_terry::{self as bt, Wins};
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
    /// A system of a `bradley_terry` ranking (the key): its rating's other figures.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<Rating>,
}

/// One system of a `bradley_terry` ranking (`value` is its Elo-scale rating,
/// `1000 + 400 · log10(π)`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rating {
    /// 1 for the highest rating; absent for a system none of whose comparisons entered.
    pub rank: Option<usize>,
    /// `ln π`, the strengths normalised to geometric mean 1 (they sum to 0).
    pub strength: Option<f64>,
    /// Its shares of the wins and of the losses over the comparisons that entered.
    pub wins: f64,
    pub losses: f64,
    pub comparisons: usize,
    /// The fit's MM iterations, and whether they reached the tolerance (1e-12) before the
    /// cap (10,000).
    pub iterations: usize,
    pub converged: bool,
    /// Bootstrap resamples where the ratings do not exist (a system that never wins or never
    /// loses in the resample, or is not drawn at all): left out of the interval.
    pub resamples_skipped: usize,
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
        StatAgg::BradleyTerry => "bradley_terry",
    };
    let test = st.test.map(|t| format!(" {} {}", t.op.symbol(), t.value)).unwrap_or_default();
    let per = match &st.per {
        None => String::new(),
        Some(StatPer::Tag { prefix }) if prefix.is_empty() => " per tag".into(),
        Some(StatPer::Tag { prefix }) => format!(" per tag {prefix:?}"),
        Some(StatPer::Axis) => " per axis".into(),
        Some(StatPer::Input { name }) => format!(" per input {name}"),
        Some(StatPer::Pair { first, second }) => format!(" per input {first}, {second}"),
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

/// What one statistic produces: one series, one per key found so far, or a ranking.
enum Slot {
    Whole(Series),
    Keyed(BTreeMap<String, Series>),
    Ranked(Ranking),
}

/// A `bradley_terry` statistic while the records are read: the comparison each one entered.
struct Ranking {
    name: String,
    declared: String,
    /// The systems of the comparisons that entered, each with its index.
    systems: BTreeMap<String, usize>,
    /// Per record: the comparison it entered (first, second, the first's share of the win).
    comparisons: Vec<Option<(usize, usize, f64)>>,
    /// Per system: its rows whose measure was unscored.
    left_out: BTreeMap<String, usize>,
    /// The first record whose measure is no share of a win: its row and the measure.
    outside: Option<(usize, f64)>,
}

impl Ranking {
    fn new(st: &StatDecl) -> Ranking {
        Ranking {
            name: st.name.clone(),
            declared: declared(st),
            systems: BTreeMap::new(),
            comparisons: Vec::new(),
            left_out: BTreeMap::new(),
            outside: None,
        }
    }

    /// The next record: the systems it compares (when its row names both, and they differ)
    /// and its measure.
    fn put(&mut self, row: usize, pair: (Option<&String>, Option<&String>), o: Outcome) {
        self.comparisons.push(None);
        let (Some(first), Some(second)) = pair else { return };
        if first == second {
            return;
        }
        match o {
            Outcome::Value(x) if (0.0..=1.0).contains(&x) => {
                let mut index = |name: &String| {
                    let next = self.systems.len();
                    *self.systems.entry(name.clone()).or_insert(next)
                };
                let entered = Some((index(first), index(second), x));
                if let Some(last) = self.comparisons.last_mut() {
                    *last = entered;
                }
            }
            Outcome::Value(x) => {
                self.outside.get_or_insert((row, x));
            }
            Outcome::Unscored => {
                for name in [first, second] {
                    *self.left_out.entry(name.clone()).or_default() += 1;
                }
            }
            Outcome::Absent => {}
        }
    }

    /// The fit over every comparison, or why there is none.
    fn finish(self) -> Result<Ranked, String> {
        if let Some((row, x)) = self.outside {
            return Err(format!(
                "the measure of row {row} is {x}, and `bradley_terry` reads it as a share of a win, in [0, 1]"
            ));
        }
        let mut names = vec![String::new(); self.systems.len()];
        for (name, &i) in &self.systems {
            names[i].clone_from(name);
        }
        let mut wins = Wins::new(names.len());
        let mut counted = vec![0usize; names.len()];
        for &(a, b, x) in self.comparisons.iter().flatten() {
            wins.add(a, b, x);
            counted[a] += 1;
            counted[b] += 1;
        }
        let fit = bt::fit(&wins, None).map_err(|e| e.reason(&names))?;
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.sort_by(|&a, &b| fit.strengths[b].total_cmp(&fit.strengths[a]).then_with(|| names[a].cmp(&names[b])));
        let left_out = |name: &str| self.left_out.get(name).copied().unwrap_or(0);
        let mut entries: Vec<Entry> = order
            .iter()
            .map(|&i| Entry {
                name: names[i].clone(),
                index: Some(i),
                wins: wins.won(i),
                losses: wins.lost(i),
                comparisons: counted[i],
                left_out: left_out(&names[i]),
            })
            .collect();
        // A system whose every row was unscored has no rating, and is still listed.
        for (name, &n) in self.left_out.iter().filter(|(name, _)| !self.systems.contains_key(*name)) {
            entries.push(Entry {
                name: name.clone(),
                index: None,
                wins: 0.0,
                losses: 0.0,
                comparisons: 0,
                left_out: n,
            });
        }
        Ok(Ranked {
            name: self.name,
            declared: self.declared,
            systems: names.len(),
            comparisons: self.comparisons,
            fit,
            entries,
            skipped: std::cell::Cell::new(0),
        })
    }
}

/// One system of a fitted ranking.
struct Entry {
    name: String,
    /// Its index in the fit; `None` when none of its comparisons entered.
    index: Option<usize>,
    wins: f64,
    losses: f64,
    comparisons: usize,
    left_out: usize,
}

/// A `bradley_terry` statistic fitted on every row: its systems in rank order, and what a
/// resample needs to fit it again.
struct Ranked {
    name: String,
    declared: String,
    systems: usize,
    comparisons: Vec<Option<(usize, usize, f64)>>,
    fit: bt::Fit,
    entries: Vec<Entry>,
    /// Resamples where the ratings do not exist.
    skipped: std::cell::Cell<usize>,
}

impl Ranked {
    /// Each entry's rating in the fit over the records `sample` (started from the fit over
    /// every record, which MM leaves as soon as the data differ); every one `None` when the
    /// ratings do not exist there.
    fn resample(&self, sample: &[&usize]) -> Vec<Option<f64>> {
        let mut wins = Wins::new(self.systems);
        for &&i in sample {
            if let Some((a, b, x)) = self.comparisons[i] {
                wins.add(a, b, x);
            }
        }
        match bt::fit(&wins, Some(&self.fit.strengths)) {
            Ok(f) => self.entries.iter().map(|e| e.index.map(|i| bt::rating(f.strengths[i]))).collect(),
            Err(_) => {
                self.skipped.set(self.skipped.get() + 1);
                vec![None; self.entries.len()]
            }
        }
    }
}

/// A statistic's outputs once every record is read.
enum Part {
    Series(Series),
    Ranked(Ranked),
}

/// The percentile interval and standard error of the resampled values `vs` of a value that
/// `entered` rows gave; none with fewer than two rows or values on fewer than half the
/// resamples.
fn interval(mut vs: Vec<f64>, entered: usize, opts: StatsOptions) -> (Option<(f64, f64)>, Option<f64>) {
    if entered < 2 || vs.is_empty() || vs.len() * 2 < opts.resamples {
        return (None, None);
    }
    let tail = (1.0 - opts.confidence) / 2.0;
    vs.sort_by(f64::total_cmp);
    let rank = |q: f64| vs[((q * vs.len() as f64).ceil() as usize).clamp(1, vs.len()) - 1];
    let m = vs.iter().sum::<f64>() / vs.len() as f64;
    let sd = (vs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / vs.len() as f64).sqrt();
    (Some((rank(tail), rank(1.0 - tail))), Some(sd))
}

/// The keys `per input NAME` reads from each row of the rows file (by row index).
pub fn input_keys_of(
    stats: &[StatDecl],
    declared_inputs: &[InputDecl],
    rows: impl std::io::BufRead,
) -> Result<InputKeys, String> {
    let wanted: Vec<&InputDecl> = stats
        .iter()
        .flat_map(|st| match &st.per {
            Some(StatPer::Input { name }) => vec![name],
            Some(StatPer::Pair { first, second }) => vec![first, second],
            _ => vec![],
        })
        .filter_map(|name| declared_inputs.iter().find(|d| &d.name == name))
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
            (Some(StatPer::Pair { first, second }), None) => not_computed.push(NotComputed {
                name: st.name.clone(),
                reason: format!(
                    "it reads the systems from inputs `{first}` and `{second}`, and the rows file was not given (or was standard input)"
                ),
            }),
            _ => all.push(st),
        }
    }
    let mut slots: Vec<Slot> = all
        .iter()
        .map(|st| match st.per {
            None => Slot::Whole(Series::new(st, None, 0)),
            Some(StatPer::Pair { .. }) => Slot::Ranked(Ranking::new(st)),
            Some(_) => Slot::Keyed(BTreeMap::new()),
        })
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
                Slot::Ranked(ranking) => {
                    let system = |name: &str| {
                        inputs.and_then(|m| m.get(name)).and_then(|rows| rows.get(r.row)).and_then(|keys| keys.first())
                    };
                    let pair = match &st.per {
                        Some(StatPer::Pair { first, second }) => (system(first), system(second)),
                        _ => (None, None),
                    };
                    ranking.put(r.row, pair, row_value(st, &r, Filter::Every));
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
    let mut parts: Vec<Part> = Vec::new();
    for slot in slots {
        match slot {
            Slot::Whole(s) => parts.push(Part::Series(s)),
            Slot::Keyed(k) => parts.extend(k.into_values().map(Part::Series)),
            Slot::Ranked(r) => {
                let name = r.name.clone();
                match r.finish() {
                    Ok(ranked) => parts.push(Part::Ranked(ranked)),
                    Err(reason) => not_computed.push(NotComputed { name, reason }),
                }
            }
        }
    }
    let indices: Vec<usize> = (0..n).collect();
    // One draw of rows for every statistic: each resample's values, in the order of `parts`.
    let draws = bootstrap_draws(&indices, opts.resamples, &mut Rng::new(opts.seed), |sample| {
        let mut out = Vec::new();
        for part in &parts {
            match part {
                Part::Series(s) => out.push(s.mean_over(sample.iter().map(|i| **i))),
                Part::Ranked(r) => out.extend(r.resample(sample)),
            }
        }
        out
    });
    let mut drawn = draws.into_iter();
    let mut next_draws = || drawn.next().unwrap_or_default();
    let mut values = Vec::new();
    for part in &parts {
        match part {
            Part::Series(s) => {
                let entered = s.values.iter().filter(|x| !x.is_nan()).count();
                let (interval, std_err) = interval(next_draws(), entered, opts);
                values.push(StatValue {
                    name: s.name.clone(),
                    key: s.key.clone(),
                    declared: s.declared.clone(),
                    value: s.mean_over(0..n),
                    interval,
                    std_err,
                    n: entered,
                    left_out: s.left_out,
                    rating: None,
                });
            }
            Part::Ranked(r) => {
                let mut rank = 0;
                for e in &r.entries {
                    let (interval, std_err) = interval(next_draws(), e.comparisons, opts);
                    let strength = e.index.map(|i| r.fit.strengths[i]);
                    values.push(StatValue {
                        name: r.name.clone(),
                        key: Some(e.name.clone()),
                        declared: r.declared.clone(),
                        value: strength.map(bt::rating),
                        interval,
                        std_err,
                        n: e.comparisons,
                        left_out: e.left_out,
                        rating: Some(Rating {
                            rank: e.index.map(|_| {
                                rank += 1;
                                rank
                            }),
                            strength,
                            wins: e.wins,
                            losses: e.losses,
                            comparisons: e.comparisons,
                            iterations: r.fit.iterations,
                            converged: r.fit.converged,
                            resamples_skipped: r.skipped.get(),
                        }),
                    });
                }
            }
        }
    }
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
    for (i, v) in s.stats.iter().enumerate() {
        let value = v.value.map_or("-".to_string(), |x| format!("{x:.4}"));
        let interval = v.interval.map_or(String::new(), |(lo, hi)| format!("  [{lo:.4}, {hi:.4}]"));
        let left = if v.left_out > 0 { format!(", {} left out", v.left_out) } else { String::new() };
        let rated = v.rating.as_ref().map_or(String::new(), |r| {
            let rank = r.rank.map_or(String::new(), |k| format!(", rank {k}"));
            format!("{rank}, wins {:.2}, losses {:.2}", r.wins, r.losses)
        });
        out.push_str(&format!("\n  {:width$}  {value}{interval}  n {}{left}{rated}", label(v), v.n));
        // After a ranking's last system: how its fit and its resamples went, when not plainly.
        let last = s.stats.get(i + 1).is_none_or(|next| next.name != v.name);
        if let (true, Some(r)) = (last, &v.rating) {
            if !r.converged {
                out.push_str(&format!(
                    "\n  {}: the fit stopped after {} iterations, short of its tolerance",
                    v.name, r.iterations
                ));
            }
            if r.resamples_skipped > 0 {
                out.push_str(&format!(
                    "\n  {}: {} of {} resamples left out of the intervals (the ratings do not exist in them)",
                    v.name, r.resamples_skipped, s.bootstrap.resamples
                ));
            }
        }
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

    /// The rows of a ranking: `(first, second, score)`, the score `None` when unscored.
    fn ranking_rows(rows: &[(&str, &str, Option<f64>)]) -> (String, InputKeys) {
        let results: String = rows
            .iter()
            .enumerate()
            .map(|(i, (_, _, s))| {
                let score = s.map_or("null".to_string(), |x| x.to_string());
                format!("{{\"row\":{i},\"score\":{score},\"criteria\":[]}}\n")
            })
            .collect();
        let firsts = rows.iter().map(|r| vec![r.0.to_string()]).collect();
        let seconds = rows.iter().map(|r| vec![r.1.to_string()]).collect();
        let keys = BTreeMap::from([("a".to_string(), firsts), ("b".to_string(), seconds)]);
        (results, keys)
    }

    fn ranking_decl() -> StatDecl {
        decl(
            "ranking",
            StatAgg::BradleyTerry,
            StatMeasure::Score,
            Some(StatPer::Pair { first: "a".into(), second: "b".into() }),
            None,
        )
    }

    /// The (winner, loser) pairs of `bradley_terry::tests::whole_wins_match_choix` as rows
    /// (score 1: the first system won), with an unscored row and a row comparing a system with
    /// itself, neither of which enters: the same ratings as choix 0.4.1 gives (Elo 1061.8468,
    /// 894.6902, 1043.4630), in rank order.
    #[test]
    fn a_ranking_per_pair_of_inputs_rates_each_system() {
        let data = [(0, 1), (0, 1), (1, 0), (0, 2), (2, 0), (2, 0), (1, 2), (2, 1), (2, 1), (0, 2), (0, 1)];
        let names = ["x", "y", "z"];
        let mut rows: Vec<(&str, &str, Option<f64>)> =
            data.iter().map(|&(w, l)| (names[w], names[l], Some(1.0))).collect();
        // Written the other way round: the loser first, with score 0.
        rows[3] = ("z", "x", Some(0.0));
        rows.push(("x", "z", None));
        rows.push(("y", "y", Some(1.0)));
        let (results, keys) = ranking_rows(&rows);
        let s =
            summarize(&[ranking_decl()], results.as_bytes(), Some(&keys), StatsOptions::default()).expect("a summary");
        assert!(s.not_computed.is_empty(), "{:?}", s.not_computed);
        let ranked: Vec<&StatValue> = s.stats.iter().filter(|v| v.name == "ranking").collect();
        let keys: Vec<&str> = ranked.iter().map(|v| v.key.as_deref().unwrap_or_default()).collect();
        assert_eq!(keys, ["x", "z", "y"], "by rating");
        let want = [1061.8468088972998, 1043.4629961516146, 894.6901949510859];
        for (v, w) in ranked.iter().zip(want) {
            let value = v.value.expect("a rating");
            assert!((value - w).abs() < 1e-6, "{}: {value} is not {w}", v.key.as_deref().unwrap_or_default());
            let (lo, hi) = v.interval.expect("an interval");
            assert!(lo <= value && value <= hi, "{lo} <= {value} <= {hi}");
        }
        let x = ranked[0].rating.as_ref().expect("figures");
        // x: beat y three times and z twice, lost to y once and to z twice; the unscored row
        // against z is left out of both.
        assert_eq!((x.rank, x.wins, x.losses, x.comparisons), (Some(1), 5.0, 3.0, 8));
        assert_eq!((ranked[0].n, ranked[0].left_out, ranked[1].left_out, ranked[2].left_out), (8, 1, 1, 0));
        assert!(x.converged && x.iterations > 1, "{x:?}");
        assert!((x.strength.expect("a strength") - 0.3560188505404343).abs() < 1e-6);
        // 11 rows among three systems: some resamples leave one out, or leave it no win.
        assert!(x.resamples_skipped > 0 && x.resamples_skipped < 500, "{x:?}");
        assert!(render(&s).contains("ranking[x]"), "{}", render(&s));
    }

    /// A summary read back (`rubric report --summary`) keeps a system's figures, and a value
    /// of any other statistic (or an older summary) reads back without them.
    #[test]
    fn a_rankings_figures_read_back_from_the_summary() {
        let (results, keys) = ranking_rows(&[("x", "y", Some(1.0)), ("y", "x", Some(0.5)), ("x", "y", Some(0.0))]);
        let s =
            summarize(&[ranking_decl()], results.as_bytes(), Some(&keys), StatsOptions::default()).expect("a summary");
        let text = serde_json::to_string(&s).expect("JSON");
        let back: Summary = serde_json::from_str(&text).expect("read back");
        let x = back.stats.iter().find(|v| v.key.as_deref() == Some("x")).expect("x");
        let r = x.rating.as_ref().expect("x's figures");
        // x won 1 + 0.5 of 3; π_x / π_y = 1.5 / 1.5: both rated 1000.
        assert_eq!((r.rank, r.wins, r.losses, r.comparisons), (Some(1), 1.5, 1.5, 3));
        assert!((x.value.expect("a rating") - 1000.0).abs() < 1e-9);
        assert!(back.stats[0].rating.is_none(), "the mean score has no figures");
        assert!(!serde_json::to_string(&back.stats[0]).expect("JSON").contains("rank"));
    }

    #[test]
    fn a_ranking_is_not_computed_where_the_ratings_do_not_exist() {
        let decls = [ranking_decl()];
        let summary = |rows: &[(&str, &str, Option<f64>)]| {
            let (results, keys) = ranking_rows(rows);
            summarize(&decls, results.as_bytes(), Some(&keys), StatsOptions::default()).expect("a summary")
        };
        // `z` never wins: no rating is made up for anyone.
        let s = summary(&[("x", "y", Some(1.0)), ("y", "x", Some(0.5)), ("x", "z", Some(1.0)), ("z", "y", Some(0.0))]);
        assert!(s.stats.iter().all(|v| v.name != "ranking"), "{:?}", s.stats);
        assert_eq!(s.not_computed[0].reason, "`z` never wins, so the Bradley–Terry ratings do not exist");
        // A measure that is no share of a win.
        let s = summary(&[("x", "y", Some(1.0)), ("y", "x", Some(1.5))]);
        assert_eq!(
            s.not_computed[0].reason,
            "the measure of row 1 is 1.5, and `bradley_terry` reads it as a share of a win, in [0, 1]"
        );
        // A system whose only row is unscored is listed without a rating.
        let s = summary(&[("x", "y", Some(1.0)), ("y", "x", Some(1.0)), ("w", "x", None)]);
        let w = s.stats.iter().find(|v| v.key.as_deref() == Some("w")).expect("w listed");
        assert_eq!((w.value, w.n, w.left_out), (None, 0, 1));
        assert_eq!(w.rating.as_ref().and_then(|r| r.rank), None);
        // Without the rows file the systems are unknown.
        let (results, _) = ranking_rows(&[("x", "y", Some(1.0))]);
        let s = summarize(&decls, results.as_bytes(), None, StatsOptions::default()).expect("a summary");
        assert!(s.not_computed[0].reason.contains("inputs `a` and `b`"), "{:?}", s.not_computed);
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
