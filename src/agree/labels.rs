//! Human labels as data: a JSONL file keyed like verdict files. Each line names a row (its
//! 0-based index among the input rows, or its `id`), an optional `annotator`, and one label
//! (`"criterion": ID, "label": X`) or many (`"labels": {ID: X, ...}`). A label is `"met"`,
//! `"unmet"`, `true`, `false`, `1` or `0` for a binary criterion, a number for an ordinal
//! level or a continuous value, a string for a nominal label.
//!
//! Every label is checked against the run's records: a row that names no row, a criterion the
//! row's result does not have, a label of the wrong form for the criterion's kind, and a
//! second label from the same annotator for the same item are errors, each with its line;
//! all of them are reported, and none is dropped in silence. A line without `annotator` is
//! an anonymous annotator of its own (`line N`).

use super::{Kind, Record};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};

/// A label's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    Bool(bool),
    Number(f64),
    Name(String),
}

/// One label, resolved to its row.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelEntry {
    pub row: usize,
    pub criterion: String,
    pub annotator: String,
    pub label: Label,
    /// 1-based line of the labels file.
    pub line: usize,
}

/// Read and check a labels file against `records`. `Err` holds every problem found.
pub fn read(text: &str, records: &[Record]) -> Result<Vec<LabelEntry>, Vec<String>> {
    let by_index: HashMap<usize, &Record> = records.iter().map(|r| (r.row, r)).collect();
    let by_id: HashMap<&str, &Record> = records.iter().filter_map(|r| Some((r.id.as_deref()?, r))).collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut seen: BTreeMap<(usize, String, String), usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let mut err = |m: String| errors.push(format!("labels line {line}: {m}"));
        let v: Json = match serde_json::from_str(raw) {
            Ok(v @ Json::Object(_)) => v,
            Ok(_) => {
                err("not a JSON object".into());
                continue;
            }
            Err(e) => {
                err(format!("not JSON: {e}"));
                continue;
            }
        };
        let record = match v.get("row") {
            Some(Json::Number(n)) => match n.as_u64().and_then(|k| by_index.get(&(k as usize))) {
                Some(r) => *r,
                None => {
                    err(format!("row {n} is not a row of the results ({} rows)", records.len()));
                    continue;
                }
            },
            Some(Json::String(s)) => match by_id.get(s.as_str()) {
                Some(r) => *r,
                None => {
                    err(format!("no row has the id {s:?}"));
                    continue;
                }
            },
            _ => {
                err("no `row` (a 0-based row index or a row id)".into());
                continue;
            }
        };
        let annotator = match v.get("annotator") {
            None | Some(Json::Null) => format!("line {line}"),
            Some(Json::String(s)) => s.clone(),
            Some(Json::Number(n)) => n.to_string(),
            Some(other) => {
                err(format!("`annotator` must be a string, found {other}"));
                continue;
            }
        };
        let pairs: Vec<(String, &Json)> = match (v.get("criterion"), v.get("labels")) {
            (Some(Json::String(c)), None) => match v.get("label") {
                Some(l) => vec![(c.clone(), l)],
                None => {
                    err(format!("no `label` for criterion `{c}`"));
                    continue;
                }
            },
            (None, Some(Json::Object(m))) => m.iter().map(|(k, l)| (k.clone(), l)).collect(),
            _ => {
                err("give `\"criterion\": ID, \"label\": X` or `\"labels\": {ID: X, ...}`".into());
                continue;
            }
        };
        if record.error.is_some() {
            // The row has no result to compare with; the report counts these labels.
            for (c, l) in pairs {
                let label = match l {
                    Json::String(s) => Label::Name(s.clone()),
                    Json::Number(n) => Label::Number(n.as_f64().unwrap_or(f64::NAN)),
                    Json::Bool(b) => Label::Bool(*b),
                    _ => Label::Name(l.to_string()),
                };
                out.push(LabelEntry { row: record.row, criterion: c, annotator: annotator.clone(), label, line });
            }
            continue;
        }
        for (c, l) in pairs {
            let Some(crit) = record.criteria.iter().find(|x| x.id == c) else {
                let known: Vec<&str> = record.criteria.iter().map(|x| x.id.as_str()).take(12).collect();
                let more = if record.criteria.len() > 12 { ", ..." } else { "" };
                err(format!("row {} has no criterion `{c}` (its criteria: {}{more})", record.row, known.join(", ")));
                continue;
            };
            let label = match parse(crit.kind, l) {
                Ok(x) => x,
                Err(why) => {
                    err(format!("criterion `{c}` is {}: {why}", crit.kind.name()));
                    continue;
                }
            };
            if let Some(first) = seen.insert((record.row, c.clone(), annotator.clone()), line) {
                err(format!(
                    "a second label from annotator {annotator:?} for row {} criterion `{c}` (the first is on line {first})",
                    record.row
                ));
                continue;
            }
            out.push(LabelEntry { row: record.row, criterion: c, annotator: annotator.clone(), label, line });
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A label of a criterion of `kind`.
fn parse(kind: Kind, v: &Json) -> Result<Label, String> {
    match (kind, v) {
        (Kind::Binary, Json::Bool(b)) => Ok(Label::Bool(*b)),
        (Kind::Binary, Json::String(s)) if s == "met" || s == "unmet" => Ok(Label::Bool(s == "met")),
        (Kind::Binary, Json::Number(n)) if n.as_f64() == Some(1.0) || n.as_f64() == Some(0.0) => {
            Ok(Label::Bool(n.as_f64() == Some(1.0)))
        }
        (Kind::Binary, other) => Err(format!("a label is \"met\", \"unmet\", true, false, 1 or 0, found {other}")),
        (Kind::Ordinal, Json::Number(n)) => Ok(Label::Number(n.as_f64().unwrap_or(f64::NAN))),
        (Kind::Ordinal, other) => Err(format!("a label is a level (a number), found {other}")),
        (Kind::Continuous, Json::Number(n)) => match n.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => Ok(Label::Number(x)),
            _ => Err(format!("a label is a value in [0, 1], found {n}")),
        },
        (Kind::Continuous, other) => Err(format!("a label is a value in [0, 1], found {other}")),
        (Kind::Nominal, Json::String(s)) => Ok(Label::Name(s.clone())),
        (Kind::Nominal, other) => Err(format!("a label is a label name (a string), found {other}")),
    }
}
