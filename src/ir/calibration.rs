//! Judge calibrations: maps, fitted from human labels (`rubric calibrate`), from what a binary
//! judge said (its P(yes), or its verdict) to the probability that a human says met, with the
//! threshold that decides met. A rubric names the file (`calibration "FILE"` in a judge); the
//! checker reads it, checks it and freezes its maps into the judge's IR, so a calibration is
//! part of the rubric's identity (its `ir_hash`, its bundle's hash).
//!
//! The file (JSON):
//!
//! ```json
//! {"format": "rubric-calibration", "version": 1, "judge": "grader",
//!  "maps": [{"criteria": "*", "threshold": 0.5, "pairs": 69,
//!            "map": {"method": "isotonic", "points": [[0.1, 0.05], [0.62, 0.7], [0.97, 0.96]]}}],
//!  "fitted": {"labels": "labels.jsonl", "...": "..."}}
//! ```
//!
//! `criteria` is `*` (every criterion of the judge) or a criterion id (a per-instance block
//! as `NAME[]`); a criterion takes its own map, else `*`. `fitted` is provenance, not read.

use serde::{Deserialize, Serialize};

/// The `format` of a calibration file.
pub const FORMAT: &str = "rubric-calibration";
/// The `version` this reader reads.
pub const VERSION: u32 = 1;

/// A judge's calibration as the IR holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// The file as the rubric names it.
    pub file: String,
    pub maps: Vec<CalMap>,
}

/// One fitted map and the threshold that decides met.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalMap {
    /// `*`, or a criterion id (`NAME[]` for a per-instance block).
    pub criteria: String,
    /// A calibrated probability at or above it is met.
    pub threshold: f64,
    /// The labelled pairs the map was fitted on.
    pub pairs: u32,
    pub map: Method,
}

/// How a judge's answer becomes a calibrated probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case", deny_unknown_fields)]
pub enum Method {
    /// A monotone map of P(yes): the points of an isotonic fit, linear between them and flat
    /// beyond the first and the last.
    Isotonic { points: Vec<(f64, f64)> },
    /// Platt scaling of P(yes): `1 / (1 + exp(-(a · logit(p) + b)))`.
    Platt { a: f64, b: f64 },
    /// For a judge without P(yes): the probability of met given the verdict met or unmet.
    Confusion { met: f64, unmet: f64 },
}

/// The calibration file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationFile {
    pub format: String,
    pub version: u32,
    pub judge: String,
    pub maps: Vec<CalMap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted: Option<serde_json::Value>,
}

impl Method {
    /// Whether the map reads P(yes) (else the verdict).
    pub fn reads_p_yes(&self) -> bool {
        !matches!(self, Method::Confusion { .. })
    }

    /// The calibrated probability of met: from `p_yes` for a map of P(yes) (`None` without
    /// one), from the verdict `met` for a confusion map.
    pub fn apply(&self, p_yes: Option<f64>, met: bool) -> Option<f64> {
        match self {
            Method::Isotonic { points } => {
                let p = p_yes?;
                let (first, last) = (points.first()?, points.last()?);
                if p <= first.0 {
                    return Some(first.1);
                }
                if p >= last.0 {
                    return Some(last.1);
                }
                let i = points.partition_point(|q| q.0 <= p);
                let ((x0, y0), (x1, y1)) = (points[i - 1], points[i]);
                Some(if x1 > x0 { y0 + (y1 - y0) * (p - x0) / (x1 - x0) } else { y1 })
            }
            Method::Platt { a, b } => {
                let p = p_yes?.clamp(1e-12, 1.0 - 1e-12);
                let z = a * (p / (1.0 - p)).ln() + b;
                Some(1.0 / (1.0 + (-z).exp()))
            }
            Method::Confusion { met: m, unmet: u } => Some(if met { *m } else { *u }),
        }
    }
}

impl Calibration {
    /// The map of a criterion (its id, or its block's `NAME[]`), else the judge-wide one.
    pub fn map_for(&self, criterion_key: &str) -> Option<&CalMap> {
        self.maps.iter().find(|m| m.criteria == criterion_key).or_else(|| self.maps.iter().find(|m| m.criteria == "*"))
    }
}

/// What is wrong with `maps`, if anything: every probability and threshold in [0, 1], points
/// sorted and monotone, finite Platt coefficients, each `criteria` key once.
pub fn check(maps: &[CalMap]) -> Result<(), String> {
    if maps.is_empty() {
        return Err("a calibration needs at least one map".into());
    }
    let unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    for (i, m) in maps.iter().enumerate() {
        let at = |why: String| format!("map {} (`{}`): {why}", i + 1, m.criteria);
        if m.criteria.is_empty() {
            return Err(at("`criteria` is empty (use `*` for every criterion of the judge)".into()));
        }
        if maps[..i].iter().any(|o| o.criteria == m.criteria) {
            return Err(at("a second map for the same criteria".into()));
        }
        if !unit(m.threshold) {
            return Err(at(format!("the threshold {} is not in [0, 1]", m.threshold)));
        }
        match &m.map {
            Method::Isotonic { points } => {
                if points.is_empty() {
                    return Err(at("an isotonic map needs at least one point".into()));
                }
                if let Some((x, y)) = points.iter().find(|(x, y)| !unit(*x) || !unit(*y)) {
                    return Err(at(format!("the point ({x}, {y}) is not in [0, 1] × [0, 1]")));
                }
                if points.windows(2).any(|w| w[1].0 < w[0].0 || w[1].1 < w[0].1) {
                    return Err(at("the points must rise: sorted by P(yes), never decreasing".into()));
                }
            }
            Method::Platt { a, b } => {
                if !a.is_finite() || !b.is_finite() {
                    return Err(at(format!("Platt coefficients must be finite, found a = {a}, b = {b}")));
                }
            }
            Method::Confusion { met, unmet } => {
                if !unit(*met) || !unit(*unmet) {
                    return Err(at(format!("probabilities must be in [0, 1], found met {met}, unmet {unmet}")));
                }
            }
        }
    }
    Ok(())
}

/// Read a calibration file's text.
pub fn parse(text: &str) -> Result<CalibrationFile, String> {
    let f: CalibrationFile = serde_json::from_str(text).map_err(|e| format!("not a calibration file: {e}"))?;
    if f.format != FORMAT {
        return Err(format!("`format` is {:?}, not {FORMAT:?}", f.format));
    }
    if f.version != VERSION {
        return Err(format!("version {} is not the version this rubric reads ({VERSION})", f.version));
    }
    check(&f.maps)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_apply_as_documented() {
        let iso = Method::Isotonic { points: vec![(0.2, 0.1), (0.4, 0.1), (0.6, 0.5), (0.9, 0.9)] };
        assert_eq!(iso.apply(Some(0.0), true), Some(0.1));
        assert_eq!(iso.apply(Some(0.3), true), Some(0.1));
        assert!((iso.apply(Some(0.5), true).unwrap() - 0.3).abs() < 1e-12, "halfway between 0.1 and 0.5");
        assert_eq!(iso.apply(Some(0.95), false), Some(0.9));
        assert_eq!(iso.apply(None, true), None);
        let platt = Method::Platt { a: 1.0, b: 0.0 };
        assert!((platt.apply(Some(0.7), true).unwrap() - 0.7).abs() < 1e-12, "a = 1, b = 0 is the identity");
        let conf = Method::Confusion { met: 0.8, unmet: 0.3 };
        assert_eq!((conf.apply(None, true), conf.apply(Some(0.9), false)), (Some(0.8), Some(0.3)));
        let map = |criteria: &str, threshold: f64, map: Method| CalMap {
            criteria: criteria.into(),
            threshold,
            pairs: 1,
            map,
        };
        assert!(check(&[map("*", 0.5, iso.clone())]).is_ok());
        assert!(check(&[map("*", 1.5, iso.clone())]).unwrap_err().contains("threshold 1.5"));
        let falling = Method::Isotonic { points: vec![(0.2, 0.6), (0.4, 0.1)] };
        assert!(check(&[map("*", 0.5, falling)]).unwrap_err().contains("must rise"));
        assert!(check(&[map("*", 0.5, conf.clone()), map("*", 0.5, conf)]).unwrap_err().contains("second map"));
        let c = Calibration { file: "f".into(), maps: vec![map("*", 0.5, iso), map("items[]", 0.4, platt)] };
        assert_eq!(c.map_for("items[]").unwrap().threshold, 0.4);
        assert_eq!(c.map_for("other").unwrap().criteria, "*");
    }
}
