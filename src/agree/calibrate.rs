//! `rubric calibrate`: fit a judge's calibration from human labels. The pairs are every
//! label of a binary item the judge decided (what the judge said before any calibration:
//! its P(yes) and its verdict) against the label; the fits are
//!
//! - `isotonic`: pool-adjacent-violators over P(yes) (ties pooled first), a monotone step map
//!   kept as each block's lowest and highest P(yes) at the block's mean label, linear between
//!   blocks;
//! - `platt`: logistic regression of the label on logit(P(yes)) with Platt's smoothed targets
//!   ((N₊ + 1) / (N₊ + 2) and 1 / (N₋ + 2)), by Newton's method;
//! - `confusion` (a judge without P(yes)): P(label met | verdict met) and P(label met |
//!   verdict unmet);
//!
//! and each map's threshold is the calibrated probability that maximises balanced accuracy
//! on the pairs (ties: the one nearest 0.5; 0.5 when the labels have one class).

use super::labels::{Label, LabelEntry};
use super::{criterion_key, judge_key, Judged, Kind, Record};
use crate::ir::calibration::{CalMap, CalibrationFile, Method, FORMAT, VERSION};
use std::collections::BTreeMap;

/// Which fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Isotonic,
    Platt,
    Confusion,
}

/// What `rubric calibrate` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// The judge; `None`: the only one whose binary items carry labels.
    pub judge: Option<String>,
    /// `None`: isotonic when every pair has P(yes), else confusion.
    pub fit: Option<Fit>,
    /// Also one map per criterion with at least this many pairs (`None`: one map, `*`).
    pub per_criterion: Option<usize>,
}

/// One pair: the judge's P(yes) (if any), its verdict, and the label.
#[derive(Debug, Clone, Copy)]
struct Pair {
    p: Option<f64>,
    met: bool,
    label: bool,
}

/// The fitted file and a summary line per map.
pub struct Fitted {
    pub file: CalibrationFile,
    pub summary: Vec<String>,
}

/// Fit a calibration of one judge from `records` and `labels`.
pub fn fit(
    records: &[Record],
    labels: &[LabelEntry],
    opts: &Options,
    provenance: serde_json::Value,
) -> Result<Fitted, String> {
    let mut by_item: BTreeMap<(usize, &str), Vec<bool>> = BTreeMap::new();
    for l in labels {
        if let Label::Bool(b) = l.label {
            by_item.entry((l.row, l.criterion.as_str())).or_default().push(b);
        }
    }
    // (judge, criterion key) → pairs.
    let mut pairs: BTreeMap<(String, String), Vec<Pair>> = BTreeMap::new();
    for r in records {
        for c in &r.criteria {
            let (Kind::Binary, Judged::Value(Label::Bool(status))) = (c.kind, &c.judged) else { continue };
            let Some(ls) = by_item.get(&(r.row, c.id.as_str())) else { continue };
            if !c.source.starts_with("judge:") {
                continue;
            }
            let met = c.raw_met.unwrap_or(*status);
            let entry = pairs.entry((judge_key(&c.source), criterion_key(&c.id))).or_default();
            entry.extend(ls.iter().map(|&label| Pair { p: c.p_yes, met, label }));
        }
    }
    let judges: Vec<&String> = {
        let mut j: Vec<&String> = pairs.keys().map(|(j, _)| j).collect();
        j.dedup();
        j
    };
    let judge = match (&opts.judge, judges.as_slice()) {
        (Some(j), _) if judges.contains(&j) => j.clone(),
        (Some(j), _) => {
            return Err(format!(
                "judge `{j}` decided no labelled binary item (judges with labelled items: {})",
                if judges.is_empty() {
                    "none".to_string()
                } else {
                    judges.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                }
            ))
        }
        (None, [one]) => (*one).clone(),
        (None, []) => return Err("no judge decided a labelled binary item: nothing to fit".into()),
        (None, many) => {
            let names: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
            return Err(format!("several judges have labelled items ({}): choose one with --judge", names.join(", ")));
        }
    };
    let mine: Vec<(&String, &Vec<Pair>)> =
        pairs.iter().filter(|((j, _), _)| *j == judge).map(|((_, k), v)| (k, v)).collect();
    let all: Vec<Pair> = mine.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let with_p = all.iter().all(|p| p.p.is_some());
    let method = match opts.fit {
        Some(f @ (Fit::Isotonic | Fit::Platt)) if !with_p => {
            let missing = all.iter().filter(|p| p.p.is_none()).count();
            return Err(format!(
                "{} maps P(yes), and {missing} of the {} pairs have none: score the judge by log-probability (`scoring logprob`), or fit `confusion`",
                if f == Fit::Isotonic { "isotonic" } else { "platt" },
                all.len()
            ));
        }
        Some(f) => f,
        None if with_p => Fit::Isotonic,
        None => Fit::Confusion,
    };
    let mut maps = vec![fit_one("*", &all, method)?];
    if let Some(min) = opts.per_criterion {
        for (key, ps) in &mine {
            if ps.len() >= min {
                maps.push(fit_one(key, ps, method)?);
            }
        }
    }
    let summary = maps
        .iter()
        .map(|m| {
            let ps: Vec<Pair> = if m.criteria == "*" {
                all.clone()
            } else {
                mine.iter().find(|(k, _)| **k == m.criteria).map(|(_, v)| (*v).clone()).unwrap_or_default()
            };
            let raw = balanced_accuracy(ps.iter().map(|p| (p.met, p.label)));
            let cal = balanced_accuracy(
                ps.iter().map(|p| (m.map.apply(p.p, p.met).is_some_and(|c| c >= m.threshold), p.label)),
            );
            let f = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.3}"));
            format!(
                "{}: {} over {} pairs, threshold {:.3}; balanced accuracy on these pairs {} raw, {} calibrated",
                m.criteria,
                method_name(&m.map),
                m.pairs,
                m.threshold,
                f(raw),
                f(cal)
            )
        })
        .collect();
    let file = CalibrationFile { format: FORMAT.into(), version: VERSION, judge, maps, fitted: Some(provenance) };
    crate::ir::calibration::check(&file.maps)?;
    Ok(Fitted { file, summary })
}

fn method_name(m: &Method) -> &'static str {
    match m {
        Method::Isotonic { .. } => "isotonic",
        Method::Platt { .. } => "platt",
        Method::Confusion { .. } => "confusion",
    }
}

fn fit_one(key: &str, pairs: &[Pair], method: Fit) -> Result<CalMap, String> {
    if pairs.is_empty() {
        return Err(format!("`{key}`: no labelled pairs"));
    }
    let map = match method {
        Fit::Isotonic => Method::Isotonic { points: isotonic(pairs) },
        Fit::Platt => {
            let (a, b) = platt(pairs);
            Method::Platt { a, b }
        }
        Fit::Confusion => {
            let rate = |said: bool, fallback: f64| {
                let side: Vec<&Pair> = pairs.iter().filter(|p| p.met == said).collect();
                if side.is_empty() {
                    fallback
                } else {
                    side.iter().filter(|p| p.label).count() as f64 / side.len() as f64
                }
            };
            // A verdict the judge never gave keeps its own meaning.
            Method::Confusion { met: rate(true, 1.0), unmet: rate(false, 0.0) }
        }
    };
    let calibrated: Vec<(f64, bool)> = pairs.iter().filter_map(|p| Some((map.apply(p.p, p.met)?, p.label))).collect();
    Ok(CalMap { criteria: key.to_string(), threshold: threshold(&calibrated), pairs: pairs.len() as u32, map })
}

/// Pool adjacent violators: the points of the monotone fit of labels over P(yes).
fn isotonic(pairs: &[Pair]) -> Vec<(f64, f64)> {
    let mut xs: Vec<(f64, f64)> = pairs.iter().filter_map(|p| Some((p.p?, if p.label { 1.0 } else { 0.0 }))).collect();
    xs.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Blocks: (lowest x, highest x, sum of labels, weight); equal x start in one block.
    let mut blocks: Vec<(f64, f64, f64, f64)> = Vec::new();
    for (x, y) in xs {
        match blocks.last_mut() {
            Some(b) if b.1 == x => {
                b.2 += y;
                b.3 += 1.0;
            }
            _ => blocks.push((x, x, y, 1.0)),
        }
        while blocks.len() >= 2 {
            let n = blocks.len();
            let (prev, last) = (blocks[n - 2], blocks[n - 1]);
            if prev.2 / prev.3 <= last.2 / last.3 {
                break;
            }
            blocks[n - 2] = (prev.0, last.1, prev.2 + last.2, prev.3 + last.3);
            blocks.pop();
        }
    }
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (lo, hi, sum, w) in blocks {
        let y = sum / w;
        points.push((lo, y));
        if hi > lo {
            points.push((hi, y));
        }
    }
    points
}

/// Platt scaling: `a`, `b` of `sigmoid(a · logit(p) + b)` by Newton's method on the log loss
/// with Platt's smoothed targets.
fn platt(pairs: &[Pair]) -> (f64, f64) {
    let pos = pairs.iter().filter(|p| p.label).count() as f64;
    let neg = pairs.len() as f64 - pos;
    let (t_pos, t_neg) = ((pos + 1.0) / (pos + 2.0), 1.0 / (neg + 2.0));
    let data: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|p| {
            let q = p.p?.clamp(1e-12, 1.0 - 1e-12);
            Some(((q / (1.0 - q)).ln(), if p.label { t_pos } else { t_neg }))
        })
        .collect();
    let (mut a, mut b) = (1.0, 0.0);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-9, 0.0, 1e-9);
        for &(x, t) in &data {
            let s = 1.0 / (1.0 + (-(a * x + b)).exp());
            let d = s - t;
            let w = s * (1.0 - s);
            ga += d * x;
            gb += d;
            haa += w * x * x;
            hab += w * x;
            hbb += w;
        }
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-18 {
            break;
        }
        let (da, db) = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det);
        a -= da;
        b -= db;
        if da.abs() < 1e-12 && db.abs() < 1e-12 {
            break;
        }
    }
    (a, b)
}

/// Balanced accuracy of (predicted, truth) pairs; `None` when a class is absent.
fn balanced_accuracy(pairs: impl Iterator<Item = (bool, bool)>) -> Option<f64> {
    let mut c = super::metrics::Confusion::default();
    for (p, t) in pairs {
        c.add(p, t);
    }
    c.metrics().balanced_accuracy
}

/// The threshold on calibrated probabilities with the best balanced accuracy.
fn threshold(calibrated: &[(f64, bool)]) -> f64 {
    let mut candidates: Vec<f64> = calibrated.iter().map(|c| c.0).collect();
    candidates.push(0.5);
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    let mut best: Option<(f64, f64)> = None;
    for t in candidates {
        let Some(score) = balanced_accuracy(calibrated.iter().map(|&(p, l)| (p >= t, l))) else { continue };
        let better = match best {
            None => true,
            Some((s, bt)) => score > s + 1e-12 || ((score - s).abs() <= 1e-12 && (t - 0.5).abs() < (bt - 0.5).abs()),
        };
        if better {
            best = Some((score, t));
        }
    }
    best.map_or(0.5, |(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(xs: &[(f64, bool)]) -> Vec<Pair> {
        xs.iter().map(|&(p, label)| Pair { p: Some(p), met: p >= 0.5, label }).collect()
    }

    #[test]
    fn isotonic_pools_violators_and_reproduces_itself_on_its_data() {
        // Labels over P(yes): 0.1 → 0, 0.2 → 1, 0.3 → 0 (pooled with 0.2 to 0.5), 0.8 → 1, 0.9 → 1.
        let ps = pairs(&[(0.1, false), (0.2, true), (0.3, false), (0.8, true), (0.9, true)]);
        let points = isotonic(&ps);
        assert_eq!(points, vec![(0.1, 0.0), (0.2, 0.5), (0.3, 0.5), (0.8, 1.0), (0.9, 1.0)]);
        let map = Method::Isotonic { points };
        let fitted: Vec<f64> = ps.iter().map(|p| map.apply(p.p, p.met).unwrap()).collect();
        assert_eq!(fitted, vec![0.0, 0.5, 0.5, 1.0, 1.0]);
        // Between blocks the map is linear: halfway from (0.3, 0.5) to (0.8, 1.0).
        assert_eq!(map.apply(Some(0.55), true), Some(0.75));
        // The mean of the fitted values is the mean label (a property of the fit).
        assert_eq!(fitted.iter().sum::<f64>(), 3.0);
    }

    #[test]
    fn platt_recovers_a_known_logistic_map_and_thresholds_balance() {
        // Labels drawn exactly at the map sigmoid(2·logit(p) - 1): many pairs per p, label
        // frequencies equal to the map's value, so the fit finds a ≈ 2, b ≈ -1 (up to Platt's
        // target smoothing, small at this size).
        let mut ps = Vec::new();
        for &p in &[0.1f64, 0.3, 0.5, 0.7, 0.9] {
            let y = 1.0 / (1.0 + (-(2.0 * (p / (1.0 - p)).ln() - 1.0)).exp());
            let k = (y * 1000.0).round() as usize;
            ps.extend(std::iter::repeat_n((p, true), k));
            ps.extend(std::iter::repeat_n((p, false), 1000 - k));
        }
        let (a, b) = platt(&pairs(&ps));
        assert!((a - 2.0).abs() < 0.02 && (b + 1.0).abs() < 0.02, "a {a}, b {b}");
        // A threshold that separates the classes perfectly gets balanced accuracy 1.
        assert_eq!(threshold(&[(0.2, false), (0.55, false), (0.6, true), (0.9, true)]), 0.6);
        assert_eq!(threshold(&[(0.2, false), (0.3, false), (0.6, true), (0.9, true)]), 0.5, "ties: nearest 0.5");
        assert_eq!(threshold(&[(0.2, true), (0.9, true)]), 0.5, "one class: 0.5");
    }
}
