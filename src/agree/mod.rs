//! Judge agreement with human labels (`rubric agree`): how far a judged score can be trusted.
//!
//! Input: the result records of a run (`rubric run`'s output: each criterion's verdict, kind,
//! axis, tags and source) and a labels file (human labels keyed like verdict files: row index
//! or id, criterion id, label, optional annotator). Every label must name a row and a
//! criterion of that row's result: one that does not is an error with its line, never a
//! silent drop ([`labels`]). Output: a [`Report`], per group (overall, criterion, axis, tag,
//! judge) and per criterion kind, of the judge's agreement with the labels (pairs of the
//! judge's verdict with each annotator's label, HealthBench's pairwise definition: with one
//! annotator per item, the usual counts), the human–human ceiling where items have two or
//! more annotators, and for binary criteria the judge's met rate corrected for its errors
//! (Rogan–Gladen, prediction-powered inference); seeded bootstrap intervals over rows.
//! Unscored and skipped verdicts are counted on their own, never folded into agreement.
//!
//! Pipeline position: after `runtime` (it reads records, so it works the same on a bundle, a
//! replayed transcript or a live judge); the statistics are [`metrics`].

pub mod bradley_terry;
pub mod calibrate;
pub mod compare;
pub mod labels;
pub mod metrics;
pub mod prefs;
pub mod stats;

use labels::{Label, LabelEntry};
use metrics::{Confusion, Level, Weights};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// A criterion's kind, as records name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Binary,
    Ordinal,
    Nominal,
    Continuous,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "binary" => Kind::Binary,
            "ordinal" => Kind::Ordinal,
            "nominal" => Kind::Nominal,
            "continuous" => Kind::Continuous,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Binary => "binary",
            Kind::Ordinal => "ordinal",
            Kind::Nominal => "nominal",
            Kind::Continuous => "continuous",
        }
    }
}

/// What the judge (or check) decided for one criterion of one row.
#[derive(Debug, Clone, PartialEq)]
pub enum Judged {
    Value(Label),
    Unscored(String),
    /// Not asked (judge planning): nothing the row's score depended on needed it.
    Skipped,
}

/// One criterion of one result record.
#[derive(Debug, Clone)]
pub struct Criterion {
    pub id: String,
    pub kind: Kind,
    pub judged: Judged,
    pub axis: Option<String>,
    pub tags: Vec<String>,
    /// `judge:NAME`, `check`, `value`, `extract:NAME`.
    pub source: String,
    /// P(yes) the judge reported (a binary criterion scored by log-probability).
    pub p_yes: Option<f64>,
    /// What the judge said before its calibration (`raw`), when it is calibrated.
    pub raw_met: Option<bool>,
    /// The answer's position among the options as shown (`order shuffled`).
    pub position: Option<u32>,
}

/// One result record: its row, and its criteria (none for an error record).
#[derive(Debug, Clone)]
pub struct Record {
    pub row: usize,
    pub id: Option<String>,
    /// The row's score (`None` when unscored or an error).
    pub score: Option<f64>,
    pub criteria: Vec<Criterion>,
    pub error: Option<String>,
}

/// Read result records (one JSON object per line, as `rubric run` writes them; compact
/// records have no criteria and are refused).
pub fn read_records(text: &str) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = |m: String| format!("results line {}: {m}", i + 1);
        let v: Json = serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        let row = v.get("row").and_then(Json::as_u64).ok_or_else(|| at("no `row` index".into()))? as usize;
        let id = match v.get("id") {
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        if let Some(e) = v.get("error") {
            let code = e.get("code").and_then(Json::as_str).unwrap_or("error").to_string();
            out.push(Record { row, id, score: None, criteria: vec![], error: Some(code) });
            continue;
        }
        let Some(crits) = v.get("criteria").and_then(Json::as_array) else {
            let why =
                if v.get("values").is_some() { "a compact record (run without `--compact`)" } else { "no `criteria`" };
            return Err(at(why.into()));
        };
        let mut criteria = Vec::new();
        for c in crits {
            let cid = c.get("id").and_then(Json::as_str).ok_or_else(|| at("a criterion without `id`".into()))?;
            let kind = c.get("kind").and_then(Json::as_str).and_then(Kind::parse).unwrap_or(Kind::Binary);
            let status = c.get("status").and_then(Json::as_str).unwrap_or("");
            let judged = match status {
                "unscored" => Judged::Unscored(c.get("reason").and_then(Json::as_str).unwrap_or("unscored").into()),
                "skipped" => Judged::Skipped,
                _ => match kind {
                    Kind::Binary => Judged::Value(Label::Bool(status == "met")),
                    Kind::Ordinal => match c.get("level").and_then(Json::as_f64) {
                        Some(l) => Judged::Value(Label::Number(l)),
                        None => Judged::Unscored("no level in the record".into()),
                    },
                    Kind::Nominal => match c.get("label").and_then(Json::as_str) {
                        Some(l) => Judged::Value(Label::Name(l.into())),
                        None => Judged::Unscored("no label in the record".into()),
                    },
                    Kind::Continuous => match c.get("value").and_then(Json::as_f64) {
                        Some(x) => Judged::Value(Label::Number(x)),
                        None => Judged::Unscored("no value in the record".into()),
                    },
                },
            };
            let tags = c
                .get("tags")
                .and_then(Json::as_array)
                .map(|t| t.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                .unwrap_or_default();
            criteria.push(Criterion {
                id: cid.into(),
                kind,
                judged,
                axis: c.get("axis").and_then(Json::as_str).map(String::from),
                tags,
                source: c.get("source").and_then(Json::as_str).unwrap_or("check").into(),
                p_yes: c.get("p_yes").and_then(Json::as_f64),
                raw_met: c.get("raw").and_then(Json::as_str).map(|s| s == "met"),
                position: c.get("position").and_then(Json::as_u64).and_then(|p| u32::try_from(p).ok()),
            });
        }
        let score = v.get("score").and_then(Json::as_f64);
        out.push(Record { row, id, score, criteria, error: None });
    }
    Ok(out)
}

/// How the report groups items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Overall,
    Criterion,
    Axis,
    Tag,
    Judge,
}

impl By {
    pub const ALL: [(&'static str, By); 5] = [
        ("overall", By::Overall),
        ("criterion", By::Criterion),
        ("axis", By::Axis),
        ("tag", By::Tag),
        ("judge", By::Judge),
    ];
}

/// What the report computes, and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub by: Vec<By>,
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            by: vec![By::Overall, By::Criterion, By::Axis, By::Judge],
            resamples: 1000,
            seed: 0,
            confidence: 0.95,
        }
    }
}

/// One criterion of one row, with what the judge said and every label given to it.
#[derive(Debug, Clone)]
struct Item<'a> {
    row: usize,
    criterion: &'a Criterion,
    labels: Vec<(&'a str, &'a Label)>,
}

/// A statistic with its bootstrap interval.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stat {
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<[f64; 2]>,
}

/// The judge's answers at one position among the options as shown (`order shuffled`): a judge
/// without position bias answers each position about equally often, and as accurately.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AtPosition {
    /// 1 = the option shown first.
    pub position: u32,
    /// Labelled items whose answer was shown there.
    pub items: usize,
    pub pairs: usize,
    pub accuracy: Option<f64>,
}

/// Agreement among the annotators themselves: the ceiling a judge is measured against.
#[derive(Debug, Clone, Serialize)]
pub struct Human {
    /// Items with two or more labels.
    pub items: usize,
    /// Ordered pairs of different annotators' labels on the same item.
    pub pairs: usize,
    pub metrics: BTreeMap<&'static str, Stat>,
}

/// A binary group's met rate: the judge's, the labels', and the judge's corrected.
#[derive(Debug, Clone, Serialize)]
pub struct Corrected {
    /// Scored items of the group (labelled or not).
    pub judged: usize,
    pub judge_rate: Stat,
    /// The mean label over labelled items (each item the fraction of its annotators who said met).
    pub label_rate: Stat,
    pub rogan_gladen: Stat,
    pub ppi: Stat,
    /// PPI's normal-approximation standard error.
    pub ppi_se: Option<f64>,
}

/// The agreement of one group of items of one kind.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub by: By,
    pub key: String,
    pub kind: Kind,
    /// Labelled items whose verdict is a value.
    pub items: usize,
    /// Judge × label pairs over those items.
    pub pairs: usize,
    /// Labelled items the judge left unscored, by reason; not part of any metric.
    pub unscored: BTreeMap<String, usize>,
    /// Labelled items judge planning did not ask (`skipped`); not part of any metric.
    pub skipped: usize,
    pub metrics: BTreeMap<&'static str, Stat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub human: Option<Human>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Corrected>,
    /// Ordinal and nominal verdicts of a judge with shuffled options, by the position their
    /// answer was shown at.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_position: Vec<AtPosition>,
}

/// The benchmark's score (the mean row score) corrected for the judge's errors: the judge's
/// mean over every scored row, the labels' mean over the rows whose every judged criterion an
/// annotator labelled (each such row scored with that annotator's labels as its verdicts, and
/// the annotators' scores averaged), and the prediction-powered estimate from both.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreCorrection {
    /// Rows with a judge score.
    pub rows: usize,
    /// Of those, rows with a human score.
    pub labelled_rows: usize,
    pub judge_mean: Stat,
    /// The human scores' mean, over labelled rows.
    pub label_mean: Stat,
    /// The judge's mean on the labelled rows alone.
    pub judge_mean_labelled: Stat,
    pub ppi: Stat,
    pub ppi_se: Option<f64>,
}

/// The score correction of rows given as (judge score, human score if the row has one).
pub fn score_correction(rows: &[(f64, Option<f64>)], opts: &Options) -> ScoreCorrection {
    fn figures(rows: &[&(f64, Option<f64>)]) -> (Vec<Option<f64>>, Option<f64>) {
        let all: Vec<f64> = rows.iter().map(|r| r.0).collect();
        let labelled: Vec<(f64, f64)> = rows.iter().filter_map(|r| Some((r.0, r.1?))).collect();
        let mean = |xs: &[f64]| metrics::ratio(xs.iter().sum(), xs.len() as f64);
        let ppi = metrics::ppi_mean(&all, &labelled);
        let label: Vec<f64> = labelled.iter().map(|p| p.1).collect();
        let judged: Vec<f64> = labelled.iter().map(|p| p.0).collect();
        (vec![mean(&all), mean(&label), mean(&judged), ppi.map(|p| p.0)], ppi.map(|p| p.1))
    }
    let refs: Vec<&(f64, Option<f64>)> = rows.iter().collect();
    let (values, se) = figures(&refs);
    let intervals = metrics::bootstrap(rows, opts.resamples, opts.seed, opts.confidence, |s| figures(s).0);
    let stat = |i: usize| Stat {
        value: values[i],
        ci: intervals.get(i).copied().flatten().filter(|_| values[i].is_some()).map(|(a, b)| [a, b]),
    };
    ScoreCorrection {
        rows: rows.len(),
        labelled_rows: rows.iter().filter(|r| r.1.is_some()).count(),
        judge_mean: stat(0),
        label_mean: stat(1),
        judge_mean_labelled: stat(2),
        ppi: stat(3),
        ppi_se: se,
    }
}

/// Everything `rubric agree` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: usize,
    pub labelled_rows: usize,
    pub labels: usize,
    pub annotators: Vec<String>,
    /// Labels on rows whose result is an error record: counted, not compared.
    pub labels_on_error_rows: usize,
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
    pub groups: Vec<Group>,
    /// The mean score corrected for the judge's errors (`rubric agree` computes it when rows
    /// have human scores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<ScoreCorrection>,
}

/// The criterion key of an id: a per-instance criterion (`items[3]`) by its block (`items[]`).
fn criterion_key(id: &str) -> String {
    match id.find('[') {
        Some(i) if id.ends_with(']') => format!("{}[]", &id[..i]),
        _ => id.to_string(),
    }
}

fn judge_key(source: &str) -> String {
    source.strip_prefix("judge:").map_or_else(|| source.to_string(), |j| j.to_string())
}

/// The report of `records` against `labels` (already checked against the records).
pub fn report(records: &[Record], labels: &[LabelEntry], opts: &Options) -> Report {
    let mut by_item: BTreeMap<(usize, &str), Vec<(&str, &Label)>> = BTreeMap::new();
    let mut labels_on_error_rows = 0;
    let errored: BTreeSet<usize> = records.iter().filter(|r| r.error.is_some()).map(|r| r.row).collect();
    for l in labels {
        if errored.contains(&l.row) {
            labels_on_error_rows += 1;
            continue;
        }
        by_item.entry((l.row, l.criterion.as_str())).or_default().push((l.annotator.as_str(), &l.label));
    }
    let items: Vec<Item> = records
        .iter()
        .flat_map(|r| {
            let by_item = &by_item;
            r.criteria.iter().map(move |c| Item {
                row: r.row,
                criterion: c,
                labels: by_item.get(&(r.row, c.id.as_str())).cloned().unwrap_or_default(),
            })
        })
        .collect();
    let mut keyed: BTreeMap<(By, String, Kind), Vec<&Item>> = BTreeMap::new();
    for it in &items {
        let c = it.criterion;
        for &by in &opts.by {
            let keys: Vec<String> = match by {
                By::Overall => vec!["all".into()],
                By::Criterion => vec![criterion_key(&c.id)],
                By::Axis => c.axis.iter().cloned().collect(),
                By::Tag => c.tags.clone(),
                By::Judge => vec![judge_key(&c.source)],
            };
            for k in keys {
                keyed.entry((by, k, c.kind)).or_default().push(it);
            }
        }
    }
    let groups = keyed
        .into_iter()
        .filter(|(_, its)| its.iter().any(|i| !i.labels.is_empty()))
        .map(|((by, key, kind), its)| group(by, key, kind, &its, opts))
        .collect();
    let annotators: BTreeSet<String> = labels.iter().map(|l| l.annotator.clone()).collect();
    Report {
        rows: records.len(),
        labelled_rows: labels.iter().map(|l| l.row).collect::<BTreeSet<_>>().len(),
        labels: labels.len(),
        annotators: annotators.into_iter().collect(),
        labels_on_error_rows,
        resamples: opts.resamples,
        seed: opts.seed,
        confidence: opts.confidence,
        groups,
        score: None,
    }
}

/// The metric names of a kind, in report order.
fn metric_names(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Binary => &[
            "accuracy",
            "balanced_accuracy",
            "macro_f1",
            "tpr",
            "tnr",
            "precision_met",
            "precision_unmet",
            "f1_met",
            "f1_unmet",
            "kappa",
            "alpha",
        ],
        Kind::Nominal => &["accuracy", "macro_f1", "kappa", "alpha"],
        Kind::Ordinal => &["accuracy", "macro_f1", "kappa", "kappa_linear", "kappa_quadratic", "mae", "alpha"],
        Kind::Continuous => &["mae", "rmse", "pearson", "alpha"],
    }
}

/// A label as a number for α and the numeric errors (met 1, unmet 0); categories are coded
/// by [`codes`].
fn as_number(l: &Label) -> Option<f64> {
    match l {
        Label::Bool(b) => Some(f64::from(u8::from(*b))),
        Label::Number(x) => Some(*x),
        Label::Name(_) => None,
    }
}

/// Category codes of every value in `values`, in order (numbers by value, names by name).
fn codes<'a>(values: impl Iterator<Item = &'a Label>) -> BTreeMap<String, usize> {
    let mut keys: Vec<(Option<f64>, String)> = values.map(|l| (as_number(l), category(l))).collect();
    keys.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => a.1.cmp(&b.1),
    });
    keys.dedup_by(|a, b| a.1 == b.1);
    keys.into_iter().enumerate().map(|(i, (_, k))| (k, i)).collect()
}

fn category(l: &Label) -> String {
    match l {
        Label::Bool(b) => b.to_string(),
        Label::Number(x) => format!("{x}"),
        Label::Name(s) => s.clone(),
    }
}

/// A label coded once per group: its category (the group's categories in order) and its
/// number (met 1, unmet 0, a level, a value; NaN for a name).
#[derive(Debug, Clone, Copy)]
struct Code {
    cat: usize,
    num: f64,
}

/// An item with its judge's answer (if a value) and its labels, coded.
struct Coded {
    row: usize,
    judge: Option<Code>,
    labels: Vec<(usize, Code)>,
}

/// The labelled `items` coded with one category map over every value they hold, and the
/// number of categories.
fn coded(items: &[&Item]) -> (Vec<Coded>, usize) {
    let judged = items.iter().filter_map(|i| match &i.criterion.judged {
        Judged::Value(j) => Some(j),
        _ => None,
    });
    let code = codes(judged.chain(items.iter().flat_map(|i| i.labels.iter().map(|(_, l)| *l))));
    let one = |l: &Label| Code { cat: code[&category(l)], num: as_number(l).unwrap_or(f64::NAN) };
    let annotator: BTreeMap<&str, usize> = {
        let mut names: Vec<&str> = items.iter().flat_map(|i| i.labels.iter().map(|(a, _)| *a)).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().enumerate().map(|(i, a)| (a, i)).collect()
    };
    let out = items
        .iter()
        .map(|i| Coded {
            row: i.row,
            judge: match &i.criterion.judged {
                Judged::Value(j) => Some(one(j)),
                _ => None,
            },
            labels: i.labels.iter().map(|(a, l)| (annotator[a], one(l))).collect(),
        })
        .collect();
    (out, code.len())
}

/// Every metric of `kind` over pairs of (predicted, truth) codes and α units, by name; `k`
/// categories.
fn compute(kind: Kind, pairs: &[(Code, Code)], units: &[Vec<Code>], k: usize) -> Vec<Option<f64>> {
    let level = match kind {
        Kind::Binary | Kind::Nominal => Level::Nominal,
        Kind::Ordinal => Level::Ordinal,
        Kind::Continuous => Level::Interval,
    };
    let alpha_units: Vec<Vec<f64>> = units
        .iter()
        .map(|u| u.iter().map(|c| if level == Level::Nominal { c.cat as f64 } else { c.num }).collect())
        .collect();
    let alpha = metrics::krippendorff_alpha(&alpha_units, level);
    let nums = || -> Vec<(f64, f64)> { pairs.iter().map(|(a, b)| (a.num, b.num)).collect() };
    match kind {
        Kind::Binary => {
            let mut c = Confusion::default();
            for (a, b) in pairs {
                c.add(a.num == 1.0, b.num == 1.0);
            }
            let m = c.metrics();
            vec![
                m.accuracy,
                m.balanced_accuracy,
                m.macro_f1,
                m.tpr,
                m.tnr,
                m.precision_pos,
                m.precision_neg,
                m.f1_pos,
                m.f1_neg,
                m.kappa,
                alpha,
            ]
        }
        Kind::Nominal | Kind::Ordinal => {
            let cats: Vec<(usize, usize)> = pairs.iter().map(|(a, b)| (a.cat, b.cat)).collect();
            let (accuracy, macro_f1) = metrics::multiclass(&cats, k);
            let t = metrics::table(&cats, k);
            let kappa = metrics::cohen_kappa(&t, Weights::None);
            if kind == Kind::Nominal {
                return vec![accuracy, macro_f1, kappa, alpha];
            }
            let (mae, _, _) = metrics::numeric_errors(&nums());
            vec![
                accuracy,
                macro_f1,
                kappa,
                metrics::cohen_kappa(&t, Weights::Linear),
                metrics::cohen_kappa(&t, Weights::Quadratic),
                mae,
                alpha,
            ]
        }
        Kind::Continuous => {
            let (mae, rmse, r) = metrics::numeric_errors(&nums());
            vec![mae, rmse, r, alpha]
        }
    }
}

/// The judge's pairs and α units of `items` (scored and labelled only).
fn judge_pairs(items: &[&Coded]) -> (Vec<(Code, Code)>, Vec<Vec<Code>>) {
    let mut pairs = Vec::new();
    let mut units = Vec::new();
    for it in items {
        let Some(j) = it.judge else { continue };
        if it.labels.is_empty() {
            continue;
        }
        let mut unit = vec![j];
        for (_, l) in &it.labels {
            pairs.push((j, *l));
            unit.push(*l);
        }
        units.push(unit);
    }
    (pairs, units)
}

/// The annotators' pairs among themselves (ordered, different annotators) and their units.
fn human_pairs(items: &[&Coded]) -> (Vec<(Code, Code)>, Vec<Vec<Code>>) {
    let mut pairs = Vec::new();
    let mut units = Vec::new();
    for it in items.iter().filter(|i| i.labels.len() >= 2) {
        for (a, la) in &it.labels {
            for (b, lb) in &it.labels {
                if a != b {
                    pairs.push((*la, *lb));
                }
            }
        }
        units.push(it.labels.iter().map(|(_, l)| *l).collect());
    }
    (pairs, units)
}

/// A bootstrap resample of coded rows, as items.
fn flat_coded<'a>(sample: &[&Vec<&'a Coded>]) -> Vec<&'a Coded> {
    sample.iter().flat_map(|c| c.iter().copied()).collect()
}

/// Coded items by row, as bootstrap clusters.
fn coded_clusters(items: &[Coded]) -> Vec<Vec<&Coded>> {
    let mut by_row: BTreeMap<usize, Vec<&Coded>> = BTreeMap::new();
    for it in items {
        by_row.entry(it.row).or_default().push(it);
    }
    by_row.into_values().collect()
}

/// `values` with `intervals` as named stats.
fn stats(kind: Kind, values: Vec<Option<f64>>, intervals: &[Option<(f64, f64)>]) -> BTreeMap<&'static str, Stat> {
    metric_names(kind)
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (name, value))| {
            let ci = intervals.get(i).copied().flatten().filter(|_| value.is_some()).map(|(a, b)| [a, b]);
            (*name, Stat { value, ci })
        })
        .collect()
}

/// Rows of `items` as bootstrap clusters.
fn clusters<'a>(items: &[&'a Item<'a>]) -> Vec<Vec<&'a Item<'a>>> {
    let mut by_row: BTreeMap<usize, Vec<&Item>> = BTreeMap::new();
    for it in items {
        by_row.entry(it.row).or_default().push(it);
    }
    by_row.into_values().collect()
}

fn flatten<'a>(sample: &[&Vec<&'a Item<'a>>]) -> Vec<&'a Item<'a>> {
    sample.iter().flat_map(|c| c.iter().copied()).collect()
}

fn group(by: By, key: String, kind: Kind, items: &[&Item], opts: &Options) -> Group {
    let labelled: Vec<&Item> = items.iter().copied().filter(|i| !i.labels.is_empty()).collect();
    let mut unscored = BTreeMap::new();
    let mut skipped = 0;
    for it in &labelled {
        match &it.criterion.judged {
            Judged::Unscored(r) => *unscored.entry(r.clone()).or_insert(0) += 1,
            Judged::Skipped => skipped += 1,
            Judged::Value(_) => {}
        }
    }
    let (coded, k) = coded(&labelled);
    let all: Vec<&Coded> = coded.iter().collect();
    let (pairs, units) = judge_pairs(&all);
    let values = compute(kind, &pairs, &units, k);
    let rows = coded_clusters(&coded);
    let (resamples, seed, conf) = (opts.resamples, opts.seed, opts.confidence);
    let intervals = metrics::bootstrap(&rows, resamples, seed, conf, |s| {
        let (p, u) = judge_pairs(&flat_coded(s));
        compute(kind, &p, &u, k)
    });
    let metrics = stats(kind, values, &intervals);
    let (hp, hu) = human_pairs(&all);
    let human = (!hu.is_empty()).then(|| {
        let values = compute(kind, &hp, &hu, k);
        let intervals = metrics::bootstrap(&rows, resamples, seed, conf, |s| {
            let (p, u) = human_pairs(&flat_coded(s));
            compute(kind, &p, &u, k)
        });
        Human { items: hu.len(), pairs: hp.len(), metrics: stats(kind, values, &intervals) }
    });
    let corrected = (kind == Kind::Binary).then(|| corrected(items, opts));
    let mut at: BTreeMap<u32, (usize, usize, usize)> = BTreeMap::new();
    for (it, c) in labelled.iter().zip(&coded) {
        let (Some(p), Some(j)) = (it.criterion.position, c.judge) else { continue };
        let e = at.entry(p).or_default();
        e.0 += 1;
        for (_, l) in &c.labels {
            e.1 += 1;
            e.2 += usize::from(j.cat == l.cat);
        }
    }
    let by_position = at
        .into_iter()
        .map(|(position, (items, pairs, agree))| AtPosition {
            position,
            items,
            pairs,
            accuracy: metrics::ratio(agree as f64, pairs as f64),
        })
        .collect();
    Group {
        by,
        key,
        kind,
        items: units.len(),
        pairs: pairs.len(),
        unscored,
        skipped,
        metrics,
        human,
        corrected,
        by_position,
    }
}

/// The judge's met rate over every scored item, the labels' over labelled ones, Rogan–Gladen
/// and PPI: `[judge rate, label rate, Rogan–Gladen, PPI]` and PPI's standard error.
fn rates(items: &[&Item]) -> (Vec<Option<f64>>, Option<f64>) {
    let mut all = Vec::new();
    let mut labelled = Vec::new();
    let mut c = Confusion::default();
    for it in items {
        let Judged::Value(Label::Bool(j)) = &it.criterion.judged else { continue };
        let f = f64::from(u8::from(*j));
        all.push(f);
        let ls: Vec<bool> =
            it.labels.iter().filter_map(|(_, l)| if let Label::Bool(b) = l { Some(*b) } else { None }).collect();
        if ls.is_empty() {
            continue;
        }
        for &t in &ls {
            c.add(*j, t);
        }
        labelled.push((f, ls.iter().filter(|b| **b).count() as f64 / ls.len() as f64));
    }
    let mean = |xs: &[f64]| metrics::ratio(xs.iter().sum(), xs.len() as f64);
    let judge_rate = mean(&all);
    let label_rate = mean(&labelled.iter().map(|p| p.1).collect::<Vec<_>>());
    let m = c.metrics();
    let rg = match (judge_rate, m.tpr, m.tnr) {
        (Some(p), Some(se), Some(sp)) => metrics::rogan_gladen(p, se, sp),
        _ => None,
    };
    // PPI's estimate of a rate may leave [0, 1] by its correction; a rate is reported clipped.
    let ppi = metrics::ppi_mean(&all, &labelled);
    (vec![judge_rate, label_rate, rg, ppi.map(|p| p.0.clamp(0.0, 1.0))], ppi.map(|p| p.1))
}

fn corrected(items: &[&Item], opts: &Options) -> Corrected {
    let (values, se) = rates(items);
    let rows = clusters(items);
    let intervals = metrics::bootstrap(&rows, opts.resamples, opts.seed, opts.confidence, |s| rates(&flatten(s)).0);
    let stat = |i: usize| Stat {
        value: values[i],
        ci: intervals.get(i).copied().flatten().filter(|_| values[i].is_some()).map(|(a, b)| [a, b]),
    };
    Corrected {
        judged: items.iter().filter(|i| matches!(i.criterion.judged, Judged::Value(_))).count(),
        judge_rate: stat(0),
        label_rate: stat(1),
        rogan_gladen: stat(2),
        ppi: stat(3),
        ppi_se: se,
    }
}

/// The report as text: one table per kind, then the human ceiling and the corrected rates.
pub fn render(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let pct = (r.confidence * 100.0).round();
    let _ = writeln!(
        s,
        "{} labels from {} annotator{} on {} of {} rows; intervals: {pct}% percentile bootstrap over rows ({} resamples, seed {})",
        r.labels,
        r.annotators.len(),
        if r.annotators.len() == 1 { "" } else { "s" },
        r.labelled_rows,
        r.rows,
        r.resamples,
        r.seed
    );
    if r.labels_on_error_rows > 0 {
        let _ =
            writeln!(s, "{} labels are on rows whose result is an error record: not compared", r.labels_on_error_rows);
    }
    let num = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
    if let Some(sc) = &r.score {
        let ci = |st: &Stat| match st {
            Stat { value: Some(v), ci: Some([a, b]) } => format!("{v:.3} [{a:.3}, {b:.3}]"),
            st => num(st.value),
        };
        let _ = writeln!(
            s,
            "\nscore (mean over rows): judge {} over {} rows; on the {} rows with human scores: labels {}, judge {}; corrected (PPI) {}",
            ci(&sc.judge_mean),
            sc.rows,
            sc.labelled_rows,
            ci(&sc.label_mean),
            ci(&sc.judge_mean_labelled),
            ci(&sc.ppi)
        );
    }
    let with_ci = |st: Option<&Stat>| match st {
        Some(Stat { value: Some(v), ci: Some([a, b]) }) => format!("{v:.3} [{a:.3}, {b:.3}]"),
        Some(st) => num(st.value),
        None => "-".into(),
    };
    for kind in [Kind::Binary, Kind::Ordinal, Kind::Nominal, Kind::Continuous] {
        let gs: Vec<&Group> = r.groups.iter().filter(|g| g.kind == kind).collect();
        if gs.is_empty() {
            continue;
        }
        let names = metric_names(kind);
        let (lead, rest): (&[&str], &[&str]) = match kind {
            Kind::Binary => (&["accuracy"], &["balanced_accuracy", "macro_f1", "tpr", "tnr", "kappa", "alpha"]),
            Kind::Nominal => (&["accuracy"], &["macro_f1", "kappa", "alpha"]),
            Kind::Ordinal => (&["accuracy"], &["macro_f1", "kappa_quadratic", "mae", "alpha"]),
            Kind::Continuous => (&["mae"], &["rmse", "pearson", "alpha"]),
        };
        debug_assert!(lead.iter().chain(rest).all(|n| names.contains(n)));
        let _ = writeln!(s, "\n{} criteria: the judge against the labels", kind.name());
        let mut header =
            format!("  {:<28} {:>5} {:>6} {:>8}  {:<22}", "group", "items", "pairs", "unscored", short(lead[0]));
        for n in rest {
            let _ = write!(header, " {:>8}", short(n));
        }
        let _ = writeln!(s, "{header}  human α (items)");
        for g in &gs {
            let unscored: usize = g.unscored.values().sum::<usize>() + g.skipped;
            let name = format!("{} {}", by_name(g.by), g.key);
            let mut line = format!(
                "  {:<28} {:>5} {:>6} {:>8}  {:<22}",
                name,
                g.items,
                g.pairs,
                unscored,
                with_ci(g.metrics.get(lead[0]))
            );
            for n in rest {
                let _ = write!(line, " {:>8}", num(g.metrics.get(n).and_then(|st| st.value)));
            }
            let human = g.human.as_ref().map_or_else(
                || "-".to_string(),
                |h| format!("{} ({})", num(h.metrics.get("alpha").and_then(|st| st.value)), h.items),
            );
            let _ = writeln!(s, "{line}  {human}");
        }
        let reasons: BTreeMap<&str, usize> = gs
            .iter()
            .filter(|g| g.by == By::Overall)
            .flat_map(|g| g.unscored.iter().map(|(k, v)| (k.as_str(), *v)))
            .collect();
        for (why, n) in reasons {
            let _ = writeln!(s, "  unscored (not compared): {n} × {why}");
        }
        for g in gs.iter().filter(|g| !g.by_position.is_empty()) {
            let at: Vec<String> = g
                .by_position
                .iter()
                .map(|p| format!("{}: {} items, accuracy {}", p.position, p.items, num(p.accuracy)))
                .collect();
            let _ = writeln!(s, "  {} {}: answers by the position shown: {}", by_name(g.by), g.key, at.join("; "));
        }
        if kind == Kind::Binary {
            let _ = writeln!(s, "\nbinary criteria: met rates, the judge's corrected for its errors");
            let _ = writeln!(
                s,
                "  {:<28} {:>6}  {:<22} {:<22} {:<22} PPI",
                "group", "judged", "judge", "labels (labelled)", "Rogan–Gladen"
            );
            for g in &gs {
                let Some(c) = &g.corrected else { continue };
                let name = format!("{} {}", by_name(g.by), g.key);
                let _ = writeln!(
                    s,
                    "  {:<28} {:>6}  {:<22} {:<22} {:<22} {}",
                    name,
                    c.judged,
                    with_ci(Some(&c.judge_rate)),
                    with_ci(Some(&c.label_rate)),
                    with_ci(Some(&c.rogan_gladen)),
                    with_ci(Some(&c.ppi))
                );
            }
        }
    }
    s
}

/// A metric's column heading.
fn short(name: &str) -> &str {
    match name {
        "balanced_accuracy" => "bal.acc",
        "macro_f1" => "macro F1",
        "tpr" => "TPR",
        "tnr" => "TNR",
        "kappa" => "κ",
        "kappa_quadratic" => "κ quad.",
        "alpha" => "α",
        "pearson" => "r",
        other => other,
    }
}

fn by_name(b: By) -> &'static str {
    By::ALL.iter().find(|(_, x)| *x == b).map_or("", |(n, _)| n)
}
