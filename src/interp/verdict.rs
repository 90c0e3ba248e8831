//! Recorded judge verdicts → criterion results: parsing the JSON forms of a verdict, voting
//! over samples, and the evidence rule. Shared by every engine through `interp`.

use crate::engine::{CriterionResult, Status};
use crate::ir::{CriterionKind, JudgeDecl, Type, Vote};
use crate::value::Value;
use serde_json::json;
use serde_json::Value as Json;

/// One decided sample: value in [0, 1], and the level or label it came from.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    value: f64,
    level: Option<f64>,
    label: Option<String>,
    evidence: Option<String>,
    /// P(yes) at the answer token, for a binary sample scored by log-probability.
    p_yes: Option<f64>,
    /// The answer's position among shuffled options (`order shuffled`).
    position: Option<u32>,
    /// Its weight in a weighted vote (1 otherwise).
    weight: f64,
}

/// Fill `r` from a recorded verdict. `key` is the criterion's calibration key: its id, or
/// `NAME[]` for an instance of block `NAME`; `candidates`, the input names a comparing judge
/// compares (first, second).
#[expect(clippy::too_many_arguments, reason = "one call site, in the step driver")]
pub fn apply(
    r: &mut CriterionResult,
    kind: &CriterionKind,
    pass: Option<f64>,
    judge: &JudgeDecl,
    key: &str,
    verdict: Option<&Json>,
    evidence_text: Option<&str>,
    candidates: Option<[&str; 2]>,
) {
    match (kind, candidates) {
        (CriterionKind::Preference, Some(names)) => prefer(r, pass, judge, verdict, names),
        (CriterionKind::Preference, None) => {
            r.reason = Some(format!("invalid program: judge `{}` compares no inputs", judge.name));
        }
        _ => decide(r, kind, pass, judge, verdict, evidence_text, None),
    }
    if let (CriterionKind::Binary, Some(cal), Status::Met | Status::Unmet) = (kind, &judge.calibration, r.status) {
        calibrate(r, cal, key);
    }
}

/// A binary verdict through its judge's calibration: the calibrated probability decides met
/// at the map's threshold; the record keeps the probability and what the judge said. A map of
/// P(yes) leaves a verdict without P(yes) (a recorded one) as the judge gave it.
fn calibrate(r: &mut CriterionResult, cal: &crate::ir::calibration::Calibration, key: &str) {
    let Some(m) = cal.map_for(key) else { return };
    let raw = r.status;
    let Some(p) = m.map.apply(r.judged().p_yes, raw == Status::Met) else { return };
    r.status = if p >= m.threshold { Status::Met } else { Status::Unmet };
    r.value = Some(if r.status == Status::Met { 1.0 } else { 0.0 });
    if r.status != Status::Met {
        // Evidence is shown for a met result only.
        if let Some(j) = r.judged.as_deref_mut() {
            j.evidence = None;
        }
    }
    r.judged_mut().calibrated = Some(crate::engine::Calibrated { p, raw });
}

/// The recorded samples of `v`: its `samples` list (of `expected` entries), or `v` itself as
/// an already-voted verdict.
fn recorded_samples<'v>(judge: &JudgeDecl, v: &'v Json, expected: u32) -> Result<Vec<&'v Json>, String> {
    match v.get("samples").and_then(Json::as_array) {
        Some(s) if !s.is_empty() && s.len() != expected as usize => {
            let what = if judge.orders() > 1 { "answers (samples × orders)" } else { "samples" };
            Err(format!("sample_count: judge `{}` takes {expected} {what}, {} were recorded", judge.name, s.len()))
        }
        Some(s) if !s.is_empty() => Ok(s.iter().collect()),
        Some(_) => Err("invalid_verdict: `samples` is empty".into()),
        None => Ok(vec![v]),
    }
}

/// A preference decided by a comparing judge whose candidates are `names` (first, second).
/// Each recorded answer names the candidate preferred (or `tie`); under `order both` the
/// answers come in pairs (the first candidate shown first, then the second), and a pair that
/// disagrees is one sample: a tie, or failed with `position_inconsistent` (`inconsistent
/// unscored`). The samples then vote like any others.
fn prefer(r: &mut CriterionResult, pass: Option<f64>, judge: &JudgeDecl, verdict: Option<&Json>, names: [&str; 2]) {
    let Some(v) = verdict else {
        r.reason = Some(format!("no_verdict: judge `{}` has no recorded verdict for `{}`", judge.name, r.id));
        return;
    };
    let listed = v.get("samples").is_some();
    let answers = match recorded_samples(judge, v, judge.asks()) {
        Ok(a) => a,
        Err(reason) => {
            r.reason = Some(reason);
            return;
        }
    };
    let mut pref = crate::engine::Preference::default();
    let mut parsed: Vec<Result<String, String>> = Vec::with_capacity(answers.len());
    for (k, a) in answers.iter().enumerate() {
        let said = preference_of(a, names);
        if let Err(reason) = &said {
            if a.get("unscored").is_none() {
                // A malformed answer, not a failed request, decides the criterion.
                r.reason = Some(reason.clone());
                return;
            }
        }
        // Who was shown first: as recorded, else by the order the answer was asked in.
        let first = a.get("first").and_then(Json::as_str).map(str::to_string).or_else(|| match judge.order {
            crate::ir::Order::Both if listed => Some(names[k % 2].to_string()),
            crate::ir::Order::Fixed => Some(names[0].to_string()),
            _ => None,
        });
        pref.asks.push(crate::engine::PreferenceAsk { first, preferred: said.as_ref().ok().cloned() });
        parsed.push(said);
    }
    let resolved: Vec<Json> = if judge.orders() == 2 && listed {
        let mut inconsistent = 0;
        let pairs = parsed
            .chunks(2)
            .map(|pair| match pair {
                [Ok(x), Ok(y)] if x == y => json!(x),
                [Ok(x), Ok(y)] => {
                    inconsistent += 1;
                    match judge.compares.as_ref().map(|c| c.inconsistent) {
                        Some(crate::ir::Inconsistent::Unscored) => json!({"unscored": format!(
                            "position_inconsistent: judge `{}` preferred `{x}` with `{}` shown first and `{y}` with `{}` shown first",
                            judge.name, names[0], names[1]
                        )}),
                        _ => json!("tie"),
                    }
                }
                [Err(why), _] | [_, Err(why)] => json!({ "unscored": why }),
                _ => json!({"unscored": "invalid_verdict: an answer without its other order"}),
            })
            .collect();
        pref.inconsistent = Some(inconsistent);
        pairs
    } else {
        parsed.into_iter().map(|p| p.map_or_else(|why| json!({ "unscored": why }), |x| json!(x))).collect()
    };
    let refs: Vec<&Json> = resolved.iter().collect();
    decide(r, &CriterionKind::Preference, pass, judge, verdict, None, Some((refs, names)));
    if r.status == Status::Met || r.status == Status::Unmet {
        pref.preferred = match r.value {
            Some(1.0) => Some(names[0].to_string()),
            Some(0.0) => Some(names[1].to_string()),
            Some(0.5) => Some("tie".to_string()),
            _ => None,
        };
    }
    let j = r.judged_mut();
    j.label = None;
    j.preference = Some(Box::new(pref));
}

/// The candidate an answer prefers (`tie` for neither): a name, or `{"preference": NAME}`.
fn preference_of(a: &Json, names: [&str; 2]) -> Result<String, String> {
    if let Some(reason) = a.get("unscored") {
        return Err(reason.as_str().map(str::to_string).unwrap_or_else(|| reason.to_string()));
    }
    let core = a.get("preference").unwrap_or(a);
    match core.as_str() {
        Some(x) if x == names[0] || x == names[1] || x == "tie" => Ok(x.to_string()),
        _ => Err(format!("invalid_verdict: a preference is `{}`, `{}` or `tie`, found {core}", names[0], names[1])),
    }
}

/// Decide `r` from `verdict`'s samples, or from `resolved` samples of a preference (with
/// the candidates' names).
fn decide(
    r: &mut CriterionResult,
    kind: &CriterionKind,
    pass: Option<f64>,
    judge: &JudgeDecl,
    verdict: Option<&Json>,
    evidence_text: Option<&str>,
    resolved: Option<(Vec<&Json>, [&str; 2])>,
) {
    let Some(v) = verdict else {
        r.reason = Some(format!("no_verdict: judge `{}` has no recorded verdict for `{}`", judge.name, r.id));
        return;
    };
    let (samples, names): (Vec<&Json>, Option<[&str; 2]>) = match resolved {
        Some((s, names)) => (s, Some(names)),
        None => match recorded_samples(judge, v, judge.samples) {
            Ok(s) => (s, None),
            Err(reason) => {
                r.reason = Some(reason);
                return;
            }
        },
    };
    let taken = samples.len() as u32;
    let several = taken > 1 || judge.samples > 1;
    // How many voted, in the record of a judge that takes several samples.
    let count = |r: &mut CriterionResult, voted: usize| {
        if several {
            r.judged_mut().votes = Some(crate::engine::Votes { samples: taken, voted: voted as u32, agreed: 0 });
        }
    };
    // A sample the judge failed to give (`{"unscored": ...}`) leaves the vote; the others vote.
    let mut decided = Vec::new();
    let mut failed_sample: Option<String> = None;
    // Each sample's weight: a weighted jury's member weight (samples are in member order).
    let weights = judge.jury.as_ref().and_then(|j| j.weights.as_ref());
    for (i, s) in samples.into_iter().enumerate() {
        if let Some(reason) = s.get("unscored") {
            failed_sample.get_or_insert(reason.as_str().map(str::to_string).unwrap_or_else(|| reason.to_string()));
            continue;
        }
        match sample(kind, s, names) {
            Ok(mut x) => {
                x.weight = weights.and_then(|w| w.get(i).copied()).unwrap_or(1.0);
                decided.push(x)
            }
            Err(reason) => {
                r.reason = Some(reason);
                return;
            }
        }
    }
    if decided.is_empty() {
        count(r, 0);
        r.reason = failed_sample.or_else(|| Some("invalid_verdict: no samples".into()));
        return;
    }
    // Evidence rule: a met sample must quote the input (after whitespace normalisation); the
    // quote supports the verdict, so an unmet sample's quote is not checked. A met sample that
    // breaks the rule leaves the vote, like a sample the judge failed to give.
    if let Some(text) = judge.evidence_from.map(|_| evidence_text.unwrap_or("")) {
        let hay = normalize_ws(text);
        let mut kept = Vec::with_capacity(decided.len());
        let mut broken: Option<(String, Option<String>)> = None;
        for s in decided {
            match &s.evidence {
                Some(q) if s.value > 0.0 && !hay.contains(&normalize_ws(q)) => {
                    broken.get_or_insert((
                        "evidence_not_found: the quoted evidence does not occur in the response".into(),
                        Some(q.clone()),
                    ));
                }
                None if s.value > 0.0 => {
                    broken.get_or_insert((
                        "evidence_missing: the judge must quote evidence for a met verdict".into(),
                        None,
                    ));
                }
                _ => kept.push(s),
            }
        }
        if kept.is_empty() {
            let (reason, quote) = broken.unwrap_or_else(|| ("invalid_verdict: no samples".into(), None));
            count(r, 0);
            r.reason = Some(reason);
            r.judged_mut().evidence = quote;
            return;
        }
        if failed_sample.is_none() {
            failed_sample = broken.map(|(reason, _)| reason);
        }
        decided = kept;
    }
    count(r, decided.len());
    // `min_samples N`: a vote of fewer samples decides nothing.
    if let Some(min) = judge.min_samples.filter(|&m| (decided.len() as u32) < m) {
        r.reason = Some(format!(
            "too_few_samples: {} of {taken} samples voted, judge `{}` needs {min}{}",
            decided.len(),
            judge.name,
            failed_sample.map(|why| format!(" (the others: {why})")).unwrap_or_default()
        ));
        return;
    }
    // The evidence shown is a quote that supports a met result.
    let met_evidence = decided.iter().filter(|s| s.value > 0.0).find_map(|s| s.evidence.clone());
    let threshold = |s: &Sample| -> bool {
        match kind {
            // A single binary verdict is 0 or 1; a `mean` vote over samples is met from 0.5 up.
            CriterionKind::Binary => s.value >= pass.unwrap_or(0.5),
            CriterionKind::Ordinal { .. } => match (pass, s.level) {
                (Some(p), Some(l)) => l >= p,
                _ => s.value >= 0.5,
            },
            // Met when the first candidate is preferred (on balance, for a mean vote).
            CriterionKind::Preference => pass.map_or(s.value > 0.5, |p| s.value >= p),
            _ => s.value >= pass.unwrap_or(0.5),
        }
    };
    let n = decided.len();
    // P(yes) of a binary criterion scored by log-probability: the mean over the samples that
    // voted (all of them carry it, or it is not reported).
    let p_yes = {
        let p: Vec<f64> = decided.iter().filter_map(|s| s.p_yes).collect();
        (p.len() == n).then(|| p.iter().sum::<f64>() / n as f64)
    };
    // Each voting sample's own decision, to count how many the result agrees with.
    let sides: Vec<bool> = decided.iter().map(&threshold).collect();
    let chosen: Option<Sample> = if n == 1 {
        decided.pop()
    } else {
        match judge.vote {
            // `mean` is `weighted` with every weight 1 (× 1.0 and a sum of n ones are exact).
            Vote::Mean | Vote::Weighted => {
                let w = |s: &Sample| if judge.vote == Vote::Weighted { s.weight } else { 1.0 };
                let total: f64 = decided.iter().map(w).sum();
                let mean = decided.iter().map(|s| w(s) * s.value).sum::<f64>() / total;
                // For ordinal criteria the mean level is what `pass` is compared with.
                let levels: Vec<f64> = decided.iter().filter_map(|s| s.level.map(|l| l * w(s))).collect();
                let level = (levels.len() == n).then(|| levels.iter().sum::<f64>() / total);
                Some(Sample {
                    value: mean,
                    level,
                    label: None,
                    evidence: None,
                    p_yes: None,
                    position: None,
                    weight: 1.0,
                })
            }
            Vote::Unanimous => {
                if decided.iter().all(&threshold) {
                    decided.iter().min_by(|a, b| a.value.total_cmp(&b.value)).cloned()
                } else {
                    decided.iter().find(|s| !threshold(s)).cloned()
                }
            }
            Vote::Majority => {
                // The most frequent value; a tie between the top values is unscored.
                let mut counts: Vec<(f64, usize)> = Vec::new();
                for s in &decided {
                    match counts.iter_mut().find(|(v, _)| *v == s.value) {
                        Some(c) => c.1 += 1,
                        None => counts.push((s.value, 1)),
                    }
                }
                counts.sort_by_key(|c| std::cmp::Reverse(c.1));
                let mut top = counts[0].0;
                if counts.len() > 1 && counts[0].1 == counts[1].1 {
                    // Binary samples scored by log-probability break the tie: the mean P(yes)
                    // decides (met from 0.5 up). Anything else is unscored.
                    let p: Vec<f64> = decided.iter().filter_map(|s| s.p_yes).collect();
                    if !matches!(kind, CriterionKind::Binary) || p.len() != n {
                        r.reason = Some(format!("vote_tie: {n} samples split evenly"));
                        return;
                    }
                    let mean = p.iter().sum::<f64>() / n as f64;
                    top = if mean >= 0.5 { 1.0 } else { 0.0 };
                }
                decided.into_iter().find(|s| s.value == top)
            }
        }
    };
    // Never empty: `decided` has a sample for every vote above.
    let Some(chosen) = chosen else {
        r.reason = Some("invalid_verdict: no samples".into());
        return;
    };
    r.status = if threshold(&chosen) { Status::Met } else { Status::Unmet };
    let met = r.status == Status::Met;
    if let Some(v) = r.judged.as_deref_mut().and_then(|j| j.votes.as_mut()) {
        v.agreed = sides.iter().filter(|s| **s == met).count() as u32;
    }
    if r.status == Status::Met {
        r.judged_mut().evidence = chosen.evidence.clone().or(met_evidence);
    }
    r.value = Some(chosen.value);
    let j = r.judged_mut();
    j.level = chosen.level;
    j.label = chosen.label;
    j.position = chosen.position;
    j.p_yes = p_yes;
}

fn sample(kind: &CriterionKind, v: &Json, names: Option<[&str; 2]>) -> Result<Sample, String> {
    if let Some(reason) = v.get("unscored") {
        return Err(reason.as_str().map(str::to_string).unwrap_or_else(|| reason.to_string()));
    }
    let evidence = v.get("evidence").and_then(Json::as_str).map(str::to_string);
    let core = match v {
        Json::Object(o) => {
            o.get("verdict").or_else(|| o.get("level")).or_else(|| o.get("label")).or_else(|| o.get("value")).ok_or(
                "invalid_verdict: an object verdict needs `verdict`, `level`, `label`, `value` or `unscored`"
                    .to_string(),
            )?
        }
        other => other,
    };
    let mut s = match kind {
        CriterionKind::Binary => match core {
            Json::String(x) if x == "met" => Sample {
                value: 1.0,
                level: None,
                label: None,
                evidence: None,
                p_yes: None,
                position: None,
                weight: 1.0,
            },
            Json::String(x) if x == "unmet" => Sample {
                value: 0.0,
                level: None,
                label: None,
                evidence: None,
                p_yes: None,
                position: None,
                weight: 1.0,
            },
            Json::Bool(b) => Sample {
                value: if *b { 1.0 } else { 0.0 },
                level: None,
                label: None,
                evidence: None,
                p_yes: None,
                position: None,
                weight: 1.0,
            },
            Json::Number(n) if n.as_f64() == Some(1.0) || n.as_f64() == Some(0.0) => Sample {
                value: n.as_f64().unwrap_or_default(),
                level: None,
                label: None,
                evidence: None,
                p_yes: None,
                position: None,
                weight: 1.0,
            },
            other => return Err(format!("invalid_verdict: a binary verdict is met or unmet, found {other}")),
        },
        CriterionKind::Ordinal { levels } => {
            let l =
                core.as_f64().ok_or(format!("invalid_verdict: an ordinal verdict is a level number, found {core}"))?;
            if !levels.iter().any(|(x, _)| *x == l) {
                let all: Vec<String> = levels.iter().map(|(x, _)| x.to_string()).collect();
                return Err(format!("invalid_level: {l} is not one of {}", all.join(", ")));
            }
            let lo = levels.first().map_or(0.0, |x| x.0);
            let hi = levels.last().map_or(1.0, |x| x.0);
            let value = if hi > lo { (l - lo) / (hi - lo) } else { 1.0 };
            Sample { value, level: Some(l), label: None, evidence: None, p_yes: None, position: None, weight: 1.0 }
        }
        CriterionKind::Nominal { labels } => {
            let name = core.as_str().ok_or(format!("invalid_verdict: a nominal verdict is a label, found {core}"))?;
            let (_, value) = labels.iter().find(|(n, _)| n == name).ok_or_else(|| {
                let all: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
                format!("invalid_label: `{name}` is not one of {}", all.join(", "))
            })?;
            Sample {
                value: *value,
                level: None,
                label: Some(name.to_string()),
                evidence: None,
                p_yes: None,
                position: None,
                weight: 1.0,
            }
        }
        CriterionKind::Preference => {
            let names = names.unwrap_or(["", ""]);
            let x = preference_of(core, names)?;
            let value = if x == names[0] {
                1.0
            } else if x == names[1] {
                0.0
            } else {
                0.5
            };
            Sample { value, level: None, label: None, evidence: None, p_yes: None, position: None, weight: 1.0 }
        }
        CriterionKind::Continuous => {
            let x = core.as_f64().ok_or(format!("invalid_verdict: a continuous verdict is a number, found {core}"))?;
            if !(0.0..=1.0).contains(&x) {
                return Err(format!("value_out_of_range: {x} is outside [0, 1]"));
            }
            Sample { value: x, level: None, label: None, evidence: None, p_yes: None, position: None, weight: 1.0 }
        }
    };
    s.evidence = evidence;
    s.p_yes = v.get("p_yes").and_then(Json::as_f64).filter(|_| matches!(kind, CriterionKind::Binary));
    s.position = v.get("position").and_then(Json::as_u64).and_then(|p| u32::try_from(p).ok());
    Ok(s)
}

/// The value an extractor judge recorded, checked against the declared type.
pub fn extracted(judge: &JudgeDecl, ty: &Type, verdict: Option<&Json>) -> Result<Value, String> {
    let Some(v) = verdict else {
        return Err(format!("no_verdict: extractor `{}` has no recorded value", judge.name));
    };
    if let Some(reason) = v.get("unscored") {
        return Err(reason.as_str().map(str::to_string).unwrap_or_else(|| reason.to_string()));
    }
    let core = match v {
        Json::Object(o) => o.get("value").ok_or("invalid_verdict: an extracted value needs `value`")?,
        other => other,
    };
    match (ty, core) {
        (Type::Number, Json::Number(n)) => Ok(Value::Number(n.as_f64().unwrap_or(f64::NAN))),
        (Type::Number, Json::String(s)) => s
            .trim()
            .parse::<f64>()
            .map(Value::Number)
            .map_err(|_| format!("unparsable_extraction: `{s}` is not a number")),
        (Type::Text, Json::String(s)) => Ok(Value::text(s.as_str())),
        (Type::Bool, Json::Bool(b)) => Ok(Value::Bool(*b)),
        (Type::Any, other) => Ok(Value::from_json(other)),
        (t, other) => Err(format!("unparsable_extraction: expected {t}, found {other}")),
    }
}

/// Collapse runs of whitespace to one space and trim.
pub fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
