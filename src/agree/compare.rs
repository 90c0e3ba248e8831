//! Two runs of the same rows compared (`rubric compare BASE NEW`): rows paired by id (else by
//! row number), per-row score differences with a seeded paired bootstrap interval for the mean
//! difference, pass/fail flips with McNemar's test (exact two-sided binomial p, and the
//! continuity-corrected chi-square statistic), per-criterion met/unmet flips, and the rows
//! that are in one file only (reported, never dropped). Conditions for CI (`--fail-if`) are
//! decided here too.

use super::metrics::bootstrap;
use super::{Judged, Label, Record};
use serde::Serialize;
use std::collections::BTreeMap;

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// A row passes when its score is at least this.
    pub pass_at: f64,
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
}

/// The comparison, as `--format json` prints it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    pub rows: RowCounts,
    /// Mean score of the paired rows scored in both, in each run.
    pub mean_base: Option<f64>,
    pub mean_new: Option<f64>,
    pub difference: Difference,
    pub pass: PassFlips,
    pub criteria: CriterionFlips,
    /// The rows whose score changed most, worst first: (row key, base, new).
    pub largest_drops: Vec<(String, f64, f64)>,
    /// Every paired row's scores, in key order.
    pub by_row: Vec<RowDifference>,
}

/// One paired row: its key, its score in each run, and new − base.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RowDifference {
    pub row: String,
    pub base: f64,
    pub new: f64,
    pub difference: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RowCounts {
    pub base: usize,
    pub new: usize,
    /// In both files, scored in both.
    pub paired: usize,
    /// In both files, unscored or an error in one or both.
    pub unscored: usize,
    pub only_base: Vec<String>,
    pub only_new: Vec<String>,
}

/// The mean of new − base over the paired rows, with its paired bootstrap interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Difference {
    pub mean: Option<f64>,
    pub interval: Option<(f64, f64)>,
    pub confidence: f64,
    pub resamples: usize,
}

/// Rows that passed in one run and failed in the other.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PassFlips {
    pub threshold: f64,
    pub base_rate: Option<f64>,
    pub new_rate: Option<f64>,
    /// Passed in BASE, failed in NEW.
    pub regressed: u64,
    /// Failed in BASE, passed in NEW.
    pub fixed: u64,
    pub mcnemar: Mcnemar,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Mcnemar {
    /// (|b − c| − 1)² / (b + c); `None` when no row flipped.
    pub chi2_corrected: Option<f64>,
    /// The exact two-sided p: 2 · P(X ≤ min(b, c)) for X ~ Binomial(b + c, 1/2), at most 1.
    pub p_exact: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CriterionFlips {
    /// Met in BASE, unmet in NEW; unmet in BASE, met in NEW (binary criteria in both).
    pub to_unmet: u64,
    pub to_met: u64,
    /// Per criterion (a block's instances as `NAME[]`), those with a flip, most regressions first.
    pub by_criterion: Vec<CriterionFlip>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CriterionFlip {
    pub criterion: String,
    pub to_unmet: u64,
    pub to_met: u64,
}

/// A row's key: its id, else `#ROW`.
fn key(r: &Record) -> String {
    r.id.clone().unwrap_or_else(|| format!("#{}", r.row))
}

/// `items[3]` → `items[]`.
fn block(id: &str) -> String {
    match id.split_once('[') {
        Some((name, _)) => format!("{name}[]"),
        None => id.to_string(),
    }
}

/// ln C(n, k).
fn ln_choose(n: u64, k: u64) -> f64 {
    let k = k.min(n - k);
    (1..=k).map(|i| ((n - k + i) as f64).ln() - (i as f64).ln()).sum()
}

/// A p-value as text: four decimals, or scientific notation below 0.0001.
pub fn p_text(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.2e}")
    } else {
        format!("{p:.4}")
    }
}

/// McNemar's test on `b` and `c`, the discordant pairs.
pub fn mcnemar(b: u64, c: u64) -> Mcnemar {
    let n = b + c;
    if n == 0 {
        return Mcnemar { chi2_corrected: None, p_exact: 1.0 };
    }
    let d = (b as f64 - c as f64).abs() - 1.0;
    let chi2 = d.max(0.0).powi(2) / n as f64;
    // P(X <= m), summed in log space.
    let m = b.min(c);
    let half = n as f64 * 0.5f64.ln();
    let terms: Vec<f64> = (0..=m).map(|k| ln_choose(n, k) + half).collect();
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tail = top.exp() * terms.iter().map(|t| (t - top).exp()).sum::<f64>();
    Mcnemar { chi2_corrected: Some(chi2), p_exact: (2.0 * tail).min(1.0) }
}

/// Compare `base` with `new`.
pub fn compare(base: &[Record], new: &[Record], opts: &CompareOptions) -> Comparison {
    let index =
        |rs: &[Record]| -> BTreeMap<String, usize> { rs.iter().enumerate().map(|(i, r)| (key(r), i)).collect() };
    let (bi, ni) = (index(base), index(new));
    let mut out = Comparison {
        rows: RowCounts { base: base.len(), new: new.len(), ..RowCounts::default() },
        ..Comparison::default()
    };
    out.rows.only_base = bi.keys().filter(|k| !ni.contains_key(*k)).cloned().collect();
    out.rows.only_new = ni.keys().filter(|k| !bi.contains_key(*k)).cloned().collect();
    let mut pairs: Vec<(String, f64, f64)> = Vec::new();
    let mut flips: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (k, &b) in &bi {
        let Some(&n) = ni.get(k) else { continue };
        let (rb, rn) = (&base[b], &new[n]);
        match (rb.score, rn.score) {
            (Some(x), Some(y)) => pairs.push((k.clone(), x, y)),
            _ => out.rows.unscored += 1,
        }
        for cb in &rb.criteria {
            let Some(cn) = rn.criteria.iter().find(|c| c.id == cb.id) else { continue };
            if let (Judged::Value(Label::Bool(x)), Judged::Value(Label::Bool(y))) = (&cb.judged, &cn.judged) {
                if x != y {
                    let e = flips.entry(block(&cb.id)).or_default();
                    if *x {
                        e.0 += 1;
                    } else {
                        e.1 += 1;
                    }
                }
            }
        }
    }
    out.rows.paired = pairs.len();
    let mean = |xs: &mut dyn Iterator<Item = f64>| {
        let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        (n > 0).then(|| s / n as f64)
    };
    out.mean_base = mean(&mut pairs.iter().map(|p| p.1));
    out.mean_new = mean(&mut pairs.iter().map(|p| p.2));
    out.difference = Difference {
        mean: mean(&mut pairs.iter().map(|p| p.2 - p.1)),
        interval: bootstrap(&pairs, opts.resamples, opts.seed, opts.confidence, |s| {
            vec![mean(&mut s.iter().map(|p| p.2 - p.1))]
        })
        .into_iter()
        .next()
        .flatten(),
        confidence: opts.confidence,
        resamples: opts.resamples,
    };
    let passes = |x: f64| x >= opts.pass_at;
    let (regressed, fixed) = pairs.iter().fold((0, 0), |(r, f), p| match (passes(p.1), passes(p.2)) {
        (true, false) => (r + 1, f),
        (false, true) => (r, f + 1),
        _ => (r, f),
    });
    out.pass = PassFlips {
        threshold: opts.pass_at,
        base_rate: mean(&mut pairs.iter().map(|p| f64::from(u8::from(passes(p.1))))),
        new_rate: mean(&mut pairs.iter().map(|p| f64::from(u8::from(passes(p.2))))),
        regressed,
        fixed,
        mcnemar: mcnemar(regressed, fixed),
    };
    let mut by: Vec<CriterionFlip> = flips
        .into_iter()
        .map(|(criterion, (to_unmet, to_met))| CriterionFlip { criterion, to_unmet, to_met })
        .collect();
    by.sort_by(|a, b| b.to_unmet.cmp(&a.to_unmet).then_with(|| a.criterion.cmp(&b.criterion)));
    out.criteria = CriterionFlips {
        to_unmet: by.iter().map(|c| c.to_unmet).sum(),
        to_met: by.iter().map(|c| c.to_met).sum(),
        by_criterion: by,
    };
    out.by_row = pairs
        .iter()
        .map(|(row, b, n)| RowDifference { row: row.clone(), base: *b, new: *n, difference: n - b })
        .collect();
    let mut drops: Vec<(String, f64, f64)> = pairs.into_iter().filter(|p| p.2 < p.1).collect();
    drops.sort_by(|a, b| (a.2 - a.1).total_cmp(&(b.2 - b.1)).then_with(|| a.0.cmp(&b.0)));
    drops.truncate(10);
    out.largest_drops = drops;
    out
}

/// A `--fail-if` condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `drop>X`: the mean score fell by more than X; `drop>X@C`: with confidence C (the C-level
    /// paired bootstrap interval of new − base lies below −X).
    Drop { by: f64, confidence: Option<f64> },
    /// `regressions>N`: more than N rows went from pass to fail.
    Regressions(u64),
    /// `mcnemar<P`: McNemar's exact p is below P and more rows regressed than were fixed.
    Mcnemar(f64),
    /// `flips>N`: more than N binary criteria went from met to unmet.
    Flips(u64),
}

impl Condition {
    pub fn parse(text: &str) -> Result<Condition, String> {
        let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let bad = || {
            format!(
                "`{text}` is not a condition: write `drop>0.02`, `drop>0.02@0.95`, `regressions>5`, `mcnemar<0.05` or `flips>10`"
            )
        };
        let num = |s: &str| s.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
        if let Some(rest) = t.strip_prefix("drop>") {
            let (by, confidence) = match rest.split_once('@') {
                Some((x, c)) => {
                    (num(x).ok_or_else(bad)?, Some(num(c).filter(|c| *c > 0.0 && *c < 1.0).ok_or_else(bad)?))
                }
                None => (num(rest).ok_or_else(bad)?, None),
            };
            return Ok(Condition::Drop { by, confidence });
        }
        let count = |s: &str| s.parse::<u64>().map_err(|_| bad());
        if let Some(rest) = t.strip_prefix("regressions>") {
            return Ok(Condition::Regressions(count(rest)?));
        }
        if let Some(rest) = t.strip_prefix("flips>") {
            return Ok(Condition::Flips(count(rest)?));
        }
        if let Some(rest) = t.strip_prefix("mcnemar<") {
            return Ok(Condition::Mcnemar(num(rest).filter(|p| *p <= 1.0).ok_or_else(bad)?));
        }
        Err(bad())
    }

    /// The confidence a `drop>X@C` condition needs an interval at.
    pub fn confidence(&self) -> Option<f64> {
        match self {
            Condition::Drop { confidence, .. } => *confidence,
            _ => None,
        }
    }

    /// Whether it holds of `c` (computed with this condition's confidence, for `drop>X@C`),
    /// and why, in words.
    pub fn check(&self, c: &Comparison) -> (bool, String) {
        match self {
            Condition::Drop { by, confidence: None } => match c.difference.mean {
                Some(d) => (d < -by, format!("the mean score changed by {d:+.4} (new − base)")),
                None => (false, "no row was scored in both runs".into()),
            },
            Condition::Drop { by, confidence: Some(conf) } => match c.difference.interval {
                Some((lo, hi)) => {
                    (hi < -by, format!("the {:.0}% interval of new − base is [{lo:+.4}, {hi:+.4}]", conf * 100.0))
                }
                None => (false, "too few paired rows for an interval".into()),
            },
            Condition::Regressions(n) => (
                c.pass.regressed > *n,
                format!("{} rows went from pass to fail, {} from fail to pass", c.pass.regressed, c.pass.fixed),
            ),
            Condition::Mcnemar(p) => (
                c.pass.mcnemar.p_exact < *p && c.pass.regressed > c.pass.fixed,
                format!(
                    "McNemar's exact p = {} ({} regressed, {} fixed)",
                    p_text(c.pass.mcnemar.p_exact),
                    c.pass.regressed,
                    c.pass.fixed
                ),
            ),
            Condition::Flips(n) => (
                c.criteria.to_unmet > *n,
                format!(
                    "{} criteria went from met to unmet, {} from unmet to met",
                    c.criteria.to_unmet, c.criteria.to_met
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_reproduces_published_and_exact_values() {
        // Wikipedia's McNemar example (a = 101, b = 121, c = 59, d = 33): chi-square 21.35
        // without the continuity correction, (|121 − 59| − 1)² / 180 = 20.672 with it.
        let m = mcnemar(121, 59);
        assert!((m.chi2_corrected.unwrap() - 3721.0 / 180.0).abs() < 1e-12);
        assert!((((121.0f64 - 59.0).powi(2)) / 180.0 - 21.355).abs() < 0.001);
        // The exact p by its definition: 2 · Σ_{k ≤ 59} C(180, k) / 2^180 (Python's
        // math.comb gives 4.43445e-06).
        assert!((m.p_exact / 4.434449263755176e-6 - 1.0).abs() < 1e-9, "{}", m.p_exact);
        // Small cases by hand: b = 0, c = 5 → 2 / 32; b = c → 1; nothing flipped → 1.
        assert!((mcnemar(0, 5).p_exact - 0.0625).abs() < 1e-15);
        assert_eq!(mcnemar(3, 3).p_exact, 1.0);
        assert_eq!(mcnemar(0, 0), Mcnemar { chi2_corrected: None, p_exact: 1.0 });
    }

    #[test]
    fn conditions_parse_and_refuse_what_they_cannot_read() {
        assert_eq!(Condition::parse("drop > 0.02").unwrap(), Condition::Drop { by: 0.02, confidence: None });
        assert_eq!(Condition::parse("drop>0.02@0.95").unwrap(), Condition::Drop { by: 0.02, confidence: Some(0.95) });
        assert_eq!(Condition::parse("regressions>5").unwrap(), Condition::Regressions(5));
        assert_eq!(Condition::parse("mcnemar<0.05").unwrap(), Condition::Mcnemar(0.05));
        assert_eq!(Condition::parse("flips>10").unwrap(), Condition::Flips(10));
        for bad in ["drop<0.1", "drop>x", "drop>0.1@2", "mcnemar<3", "regressions>1.5", "speed>1"] {
            assert!(Condition::parse(bad).is_err(), "{bad}");
        }
    }
}
