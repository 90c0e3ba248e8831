//! `rubric import autorubric`: an Autorubric rubric (JSON or YAML: the list of criteria that
//! `Rubric.from_dict` takes, `{name, weight, requirement}` with optional `scale_type` and
//! `options` of `{label, value, na}`; or an object with that list as `criteria` and the grader's
//! `cannot_assess_config`, `{strategy, partial_credit}`) becomes a rubric with one judged
//! criterion per Autorubric criterion and Autorubric's score written out: Σ weight·value of the
//! judged criteria, abstentions (CANNOT_ASSESS, an NA option: an unscored verdict) handled by
//! the strategy (SKIP, ZERO, PARTIAL, FAIL), over the positive weights, clamped to [0, 1]
//! (`autorubric/scoring.py`, `score_reports`).

use super::{check_keys, comment, num_field, quote, sanitize_package, str_field, ImportError, Imported};
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::fmt::Write as _;

enum Strategy {
    Skip,
    Zero,
    Partial(f64),
    Fail,
}

struct Criterion {
    id: String,
    weight: f64,
    /// Scored options (label, value); empty for a binary criterion.
    options: Vec<(String, f64)>,
}

pub fn import(text: &str, name: &str) -> Result<Imported, ImportError> {
    let doc: Json =
        serde_yaml_ng::from_str(text).map_err(|e| ImportError::malformed(format!("not YAML or JSON: {e}")))?;
    let (list, strategy) = match &doc {
        Json::Array(l) => (l.clone(), Strategy::Skip),
        Json::Object(_) => {
            check_keys(&doc, "the rubric", &["criteria", "cannot_assess_config"])?;
            let list =
                doc.get("criteria").and_then(Json::as_array).cloned().ok_or("the rubric has no `criteria` list")?;
            (list, strategy(doc.get("cannot_assess_config"))?)
        }
        _ => return Err(ImportError::malformed("an Autorubric rubric is a list of criteria")),
    };
    if list.is_empty() {
        return Err(ImportError::malformed("the rubric has no criteria"));
    }
    let mut criteria = Vec::new();
    let mut used = BTreeSet::new();
    let mut decls = String::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("criterion {}", i + 1);
        check_keys(c, &format!("`{at}`"), &["name", "weight", "requirement", "scale_type", "options"])?;
        let requirement =
            c.get("requirement").and_then(Json::as_str).ok_or_else(|| format!("{at}: no `requirement`"))?;
        let weight = c.get("weight").and_then(Json::as_f64).ok_or_else(|| format!("{at}: no numeric `weight`"))?;
        let base = match c.get("name").and_then(Json::as_str) {
            Some(n) => sanitize_package(n),
            None => format!("c{}", i + 1),
        };
        let mut id = base.clone();
        let mut k = 2;
        while crate::syntax::printer::KEYWORDS.contains(&id.as_str()) || !used.insert(id.clone()) {
            id = format!("{base}_{k}");
            k += 1;
        }
        let mut options = Vec::new();
        if let Some(opts) = c.get("options") {
            let opts = opts.as_array().ok_or_else(|| format!("{at}: `options` is not a list"))?;
            for (j, o) in opts.iter().enumerate() {
                check_keys(o, &format!("`{at}, option {}`", j + 1), &["label", "value", "na"])?;
                let at_option = format!("{at}, option {}", j + 1);
                let (label, value) = (str_field(o, "label", &at_option)?, num_field(o, "value", &at_option)?);
                if !(0.0..=1.0).contains(&value) {
                    return Err(ImportError::malformed(format!(
                        "{at}, option {}: `value` {value} is outside [0, 1]",
                        j + 1
                    )));
                }
                if o.get("na").and_then(Json::as_bool) == Some(true) {
                    continue; // an abstention: recorded as an unscored verdict
                }
                if options.iter().any(|(l, _): &(String, f64)| l == label) {
                    return Err(ImportError::unsupported(
                        format!("{at}: the option label `{label}` twice"),
                        "give every option its own label",
                    ));
                }
                options.push((label.to_string(), value));
            }
            if options.is_empty() {
                return Err(ImportError::malformed(format!("{at}: no option that is not NA")));
            }
        }
        let kind = if options.is_empty() {
            String::new()
        } else {
            let map: Vec<String> = options.iter().map(|(l, v)| format!("{}: {v}", quote(l))).collect();
            format!(" nominal {{{}}}", map.join(", "))
        };
        let _ = writeln!(decls, "criterion {id} {}{kind} points {weight} by grader", quote(requirement));
        criteria.push(Criterion { id, weight, options });
    }
    let mut src = String::new();
    let _ = writeln!(src, "rubric autorubric.{} @ 1.0.0 \"Imported from Autorubric\"\n", sanitize_package(name));
    comment(
        &mut src,
        "Imported from an Autorubric rubric by `rubric import autorubric`. A criterion's verdict is\n\
         met/unmet (binary) or one of its options (multi-choice, by label); CANNOT_ASSESS or an NA\n\
         option is an unscored verdict. The score is Autorubric's `score_reports`: Σ weight x value\n\
         of the judged criteria, abstentions by the strategy below, over the positive weights,\n\
         clamped to [0, 1] (with no positive weight: 1 + sum / Σ |negative weights|).",
    );
    let _ = writeln!(
        src,
        "// CANNOT_ASSESS strategy: {}\n",
        match strategy {
            Strategy::Skip => "SKIP (left out of the sum and the weights)".to_string(),
            Strategy::Zero => "ZERO (counts 0, its weight stays)".to_string(),
            Strategy::Partial(p) => format!("PARTIAL {p} (a positive weight earns {p} of it)"),
            Strategy::Fail => "FAIL (the worst realizable verdict)".to_string(),
        }
    );
    src.push_str("input query: Text = \"\"\ninput response: Text\n\n");
    src.push_str("judge grader {\n  sees query, response\n}\n\n");
    src.push_str(&decls);
    let skip = matches!(strategy, Strategy::Skip);
    let term =
        |c: &Criterion, judged: String, abstain: String| format!("(if {}.unscored then {abstain} else {judged})", c.id);
    let sum = |parts: Vec<String>| if parts.is_empty() { "0".to_string() } else { parts.join("\n  + ") };
    let weighted: Vec<String> = criteria
        .iter()
        .map(|c| {
            let abstain = match strategy {
                Strategy::Skip | Strategy::Zero => 0.0,
                Strategy::Partial(p) => {
                    if c.weight > 0.0 {
                        p * c.weight
                    } else {
                        0.0
                    }
                }
                Strategy::Fail => {
                    if c.options.is_empty() {
                        c.weight.min(0.0)
                    } else {
                        let worst = if c.weight >= 0.0 {
                            c.options.iter().map(|o| o.1).fold(f64::INFINITY, f64::min)
                        } else {
                            c.options.iter().map(|o| o.1).fold(f64::NEG_INFINITY, f64::max)
                        };
                        worst * c.weight
                    }
                }
            };
            term(c, format!("{} * {}.value", c.weight, c.id), abstain.to_string())
        })
        .collect();
    let weights = |positive: bool| -> Vec<String> {
        criteria
            .iter()
            .filter(|c| if positive { c.weight > 0.0 } else { c.weight < 0.0 })
            .map(|c| {
                let w = c.weight.abs();
                if skip {
                    term(c, w.to_string(), "0".into())
                } else {
                    w.to_string()
                }
            })
            .collect()
    };
    if skip {
        let judged: Vec<String> = criteria.iter().map(|c| term(c, "1".into(), "0".into())).collect();
        let _ = writeln!(src, "\n// criteria judged (not abstaining)\nlet judged = {}", sum(judged));
    } else {
        src.push('\n');
    }
    let _ = writeln!(src, "let weighted_sum = {}", sum(weighted));
    let _ = writeln!(src, "let positive = {}", sum(weights(true)));
    let _ = writeln!(src, "let negative = {}", sum(weights(false)));
    src.push_str("\nscore =\n");
    if skip {
        // every criterion abstained: no score (`mean` of a set whose every member is skipped is unscored)
        src.push_str("  if judged == 0 then mean(all, unscored: skip)\n  else ");
    } else {
        src.push_str("  ");
    }
    src.push_str(
        "if positive > 0 then clip(weighted_sum / positive, 0, 1)\n  \
         else if negative > 0 then clip(1 + weighted_sum / negative, 0, 1)\n  else 0\n",
    );
    let notes = vec![
        "an unscored verdict is an abstention (CANNOT_ASSESS, an NA option), whatever its reason: Autorubric takes the worst case for a judge error \
         it cannot classify, and gives no score when every judge call of a row failed"
            .to_string(),
    ];
    Ok(Imported { source: src, rows: None, notes })
}

fn strategy(config: Option<&Json>) -> Result<Strategy, ImportError> {
    let Some(c) = config else { return Ok(Strategy::Skip) };
    check_keys(c, "`cannot_assess_config`", &["strategy", "partial_credit"])?;
    let name = c.get("strategy").and_then(Json::as_str).unwrap_or("skip").to_ascii_lowercase();
    Ok(match name.as_str() {
        "skip" => Strategy::Skip,
        "zero" => Strategy::Zero,
        "fail" => Strategy::Fail,
        "partial" => Strategy::Partial(c.get("partial_credit").and_then(Json::as_f64).unwrap_or(0.5)),
        other => {
            return Err(ImportError::unsupported(
                format!("the CANNOT_ASSESS strategy `{other}`"),
                "Autorubric's strategies are skip, zero, partial and fail",
            ))
        }
    })
}
