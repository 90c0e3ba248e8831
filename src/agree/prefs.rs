//! Preference figures of a run whose rubric has a comparing judge (`compares A, B`): per
//! criterion, how often each candidate was preferred (and how often neither); and the judge's
//! position bias, from every answer it gave: how often the answer shown first was preferred,
//! and, where each sample was asked in both orders (`order both`), how often swapping the
//! order changed the answer.
//!
//! Input: the run's records (the `preference` and `asks` fields of preference criteria).
//! Pipeline position: after `runtime`, like the rest of `agree`; printed at the end of `rubric
//! run` and `rubric stats`, and written into the summary (`preferences`).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// A run's preference figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preferences {
    /// Per criterion (instances of an `each` block together, as `NAME[]`), in first-seen order.
    pub criteria: Vec<CriterionWins>,
    pub position: PositionBias,
}

/// How one criterion's preferences fell over the rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CriterionWins {
    pub id: String,
    /// Rows per result: a candidate's name, `tie`, or `mixed` (a mean vote between them).
    pub results: BTreeMap<String, usize>,
    pub unscored: usize,
}

/// Where the answer shown first stands against the one shown second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PositionBias {
    /// Answers whose shown order is known: preferring the first shown, the second, or neither.
    pub first_shown: usize,
    pub second_shown: usize,
    pub ties: usize,
    /// `first_shown / (first_shown + second_shown)`: 0.5 for a judge without position bias.
    pub first_shown_rate: Option<f64>,
    /// Samples answered in both orders, and those whose two answers differ.
    pub pairs: usize,
    pub flipped: usize,
    pub flip_rate: Option<f64>,
}

/// The figures of the records read from `results`; `None` when no record holds a preference.
pub fn tally(results: impl std::io::BufRead) -> Result<Option<Preferences>, String> {
    let mut p = Preferences::default();
    let mut any = false;
    for (i, line) in results.lines().enumerate() {
        let line = line.map_err(|e| format!("results line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Json>(&line) else { continue };
        let Some(criteria) = v.get("criteria").and_then(Json::as_array) else { continue };
        for c in criteria.iter().filter(|c| c.get("kind").and_then(Json::as_str) == Some("preference")) {
            any = true;
            add(&mut p, c);
        }
    }
    let rate = |a: usize, n: usize| (n > 0).then(|| a as f64 / n as f64);
    let b = &mut p.position;
    b.first_shown_rate = rate(b.first_shown, b.first_shown + b.second_shown);
    b.flip_rate = rate(b.flipped, b.pairs);
    Ok(any.then_some(p))
}

fn add(p: &mut Preferences, c: &Json) {
    let raw = c.get("id").and_then(Json::as_str).unwrap_or("");
    let id = match raw.find('[') {
        Some(at) if raw.ends_with(']') => format!("{}[]", &raw[..at]),
        _ => raw.to_string(),
    };
    let at = match p.criteria.iter().position(|w| w.id == id) {
        Some(at) => at,
        None => {
            p.criteria.push(CriterionWins { id, ..CriterionWins::default() });
            p.criteria.len() - 1
        }
    };
    let w = &mut p.criteria[at];
    match (c.get("status").and_then(Json::as_str), c.get("preference").and_then(Json::as_str)) {
        (Some("met" | "unmet"), Some(x)) => *w.results.entry(x.to_string()).or_default() += 1,
        (Some("met" | "unmet"), None) => *w.results.entry("mixed".to_string()).or_default() += 1,
        _ => w.unscored += 1,
    }
    let asks: Vec<(Option<&str>, Option<&str>)> = c
        .get("asks")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .map(|x| (x.get("first").and_then(Json::as_str), x.get("preferred").and_then(Json::as_str)))
                .collect()
        })
        .unwrap_or_default();
    let b = &mut p.position;
    for (first, preferred) in &asks {
        match (first, preferred) {
            (_, Some("tie")) => b.ties += 1,
            (Some(f), Some(x)) if f == x => b.first_shown += 1,
            (Some(_), Some(_)) => b.second_shown += 1,
            _ => {}
        }
    }
    if c.get("inconsistent").is_some() {
        for pair in asks.chunks(2) {
            if let [(_, Some(x)), (_, Some(y))] = pair {
                b.pairs += 1;
                b.flipped += usize::from(x != y);
            }
        }
    }
}

/// The figures as `rubric run` prints them.
pub fn render(p: &Preferences) -> String {
    let mut out = String::from("preferences (rows per result):");
    let width = p.criteria.iter().map(|w| w.id.chars().count()).max().unwrap_or(0).min(40);
    for w in &p.criteria {
        let mut parts: Vec<String> = w.results.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if w.unscored > 0 {
            parts.push(format!("unscored {}", w.unscored));
        }
        out.push_str(&format!("\n  {:width$}  {}", w.id, parts.join(", ")));
    }
    let b = &p.position;
    let rate = |r: Option<f64>| r.map_or("-".to_string(), |x| format!("{x:.3}"));
    out.push_str(&format!(
        "\n  position: the answer shown first was preferred {} times, the second {} ({} ties): first-shown rate {}",
        b.first_shown,
        b.second_shown,
        b.ties,
        rate(b.first_shown_rate)
    ));
    if b.pairs > 0 {
        out.push_str(&format!(
            "\n  swapping the order changed {} of {} answers asked in both orders: flip rate {}",
            b.flipped,
            b.pairs,
            rate(b.flip_rate)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-counted: a consistent win, a pair that flips with the order (a tie by the rule),
    /// an unscored criterion, and an instance of a block counted under the block.
    #[test]
    fn wins_and_position_bias_are_counted_from_the_asks() {
        let a = |first: &str, preferred: &str| format!(r#"{{"first":"{first}","preferred":"{preferred}"}}"#);
        let rec = |cs: &[String]| format!(r#"{{"row":0,"criteria":[{}]}}"#, cs.join(","));
        let crit = |id: &str, status: &str, pref: Option<&str>, asks: &[String]| {
            let pref = pref.map_or(String::new(), |p| format!(r#","preference":"{p}""#));
            format!(
                r#"{{"id":"{id}","kind":"preference","status":"{status}"{pref},"asks":[{}],"inconsistent":0}}"#,
                asks.join(",")
            )
        };
        let results = [
            rec(&[
                crit("acc", "met", Some("a"), &[a("a", "a"), a("b", "a")]),
                crit("clear", "unmet", Some("tie"), &[a("a", "a"), a("b", "b")]),
            ]),
            rec(&[
                crit("acc", "unscored", None, &[]),
                crit("items[0]", "unmet", Some("b"), &[a("a", "tie"), a("b", "tie")]),
            ]),
            r#"{"row":2,"criteria":[{"id":"x","kind":"binary","status":"met"}]}"#.to_string(),
        ]
        .join("\n");
        let p = tally(results.as_bytes()).unwrap().unwrap();
        let ids: Vec<&str> = p.criteria.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids, ["acc", "clear", "items[]"]);
        assert_eq!(p.criteria[0].results, BTreeMap::from([("a".to_string(), 1)]));
        assert_eq!(p.criteria[0].unscored, 1);
        assert_eq!(p.criteria[1].results, BTreeMap::from([("tie".to_string(), 1)]));
        // Answers: a/a first, b/a second, a/a first, b/b first, two ties.
        assert_eq!((p.position.first_shown, p.position.second_shown, p.position.ties), (3, 1, 2));
        assert_eq!(p.position.first_shown_rate, Some(0.75));
        // Pairs: (a, a) same, (a, b) flipped, (tie, tie) same.
        assert_eq!((p.position.pairs, p.position.flipped), (3, 1));
        assert!(render(&p).contains("flip rate 0.333"), "{}", render(&p));
        assert_eq!(tally("{\"row\":0,\"criteria\":[]}".as_bytes()).unwrap(), None);
    }
}
