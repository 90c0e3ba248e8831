//! Groups and advantages for RL trainers (`rubric run --groups`): rows that answer the same
//! prompt carry the same group id and sit next to each other in the input; once a group is
//! complete, each member's record gets its reward, its group-relative advantage, its verdict
//! vector, its strict-completion flag and the group's statistics (size, mean, standard
//! deviation, saturated criteria). The shaping rules come from the rubric's `reward`
//! declaration (or its defaults), so they are part of the bundle hash. Formulas: docs/rl.md.

use crate::ir::{AdvantageForm, RewardDecl, RewardUnscored, Uncovered};
use crate::value::number_to_json;
use serde_json::{json, Map, Value as Json};
use std::collections::{BTreeMap, HashSet};

/// The declaration used when a rubric has none: z-scored advantages, ε = 1e-6, no clip, no
/// penalty, unscored rows left out of their group, uncovered tokens 0.
pub fn default_reward() -> RewardDecl {
    RewardDecl {
        advantage: AdvantageForm::Zscore,
        epsilon: 1e-6,
        clip: None,
        penalty: None,
        unscored: RewardUnscored::Exclude,
        uncovered: Uncovered::Zero,
        site: u32::MAX,
    }
}

/// A group's statistics over the rewards that entered it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupStats {
    /// Members whose reward entered the statistics.
    pub n: usize,
    pub mean: Option<f64>,
    /// The sample standard deviation (n − 1); 0 for one member.
    pub std: Option<f64>,
    /// An unscored member under `unscored flag_group`: no member gets an advantage.
    pub flagged: bool,
}

/// Each member's advantage (`None`: left out), and the group's statistics.
pub fn advantages(decl: &RewardDecl, rewards: &[Option<f64>]) -> (Vec<Option<f64>>, GroupStats) {
    let rewards: Vec<Option<f64>> = match decl.unscored {
        RewardUnscored::Zero => rewards.iter().map(|r| Some(r.unwrap_or(0.0))).collect(),
        _ => rewards.to_vec(),
    };
    let flagged = decl.unscored == RewardUnscored::FlagGroup && rewards.iter().any(Option::is_none);
    let xs: Vec<f64> = rewards.iter().flatten().copied().collect();
    let n = xs.len();
    let mean = (n > 0).then(|| xs.iter().sum::<f64>() / n as f64);
    let std =
        mean.map(
            |m| {
                if n < 2 {
                    0.0
                } else {
                    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64).sqrt()
                }
            },
        );
    let stats = GroupStats { n, mean, std, flagged };
    if flagged || n == 0 {
        return (vec![None; rewards.len()], stats);
    }
    let (m, s) = (mean.unwrap_or(0.0), std.unwrap_or(0.0));
    let sum: f64 = xs.iter().sum();
    let adv = |r: f64| -> f64 {
        match decl.advantage {
            AdvantageForm::Zscore => (r - m) / (s + decl.epsilon),
            AdvantageForm::Mean => r - m,
            AdvantageForm::LeaveOneOut => {
                if n < 2 {
                    0.0
                } else {
                    r - (sum - r) / (n - 1) as f64
                }
            }
            AdvantageForm::Rank => {
                if n < 2 {
                    0.0
                } else {
                    // 1-based rank; ties share the mean of the ranks they span.
                    let below = xs.iter().filter(|x| **x < r).count() as f64;
                    let equal = xs.iter().filter(|x| **x == r).count() as f64;
                    let rank = below + (equal + 1.0) / 2.0;
                    let mid = (n as f64 + 1.0) / 2.0;
                    (rank - mid) / ((n as f64 - 1.0) / 2.0)
                }
            }
        }
    };
    let out = rewards
        .iter()
        .map(|r| {
            r.map(|r| {
                let a = adv(r);
                match decl.clip {
                    Some((lo, hi)) => a.clamp(lo, hi),
                    None => a,
                }
            })
        })
        .collect();
    (out, stats)
}

/// A criterion's verdict in a record: `Some(true)` met, `Some(false)` unmet, `None` otherwise.
fn verdict(c: &Json) -> Option<bool> {
    match c.get("status").and_then(Json::as_str) {
        Some("met") => Some(true),
        Some("unmet") => Some(false),
        _ => None,
    }
}

/// Every criterion met where met is wanted: met when its points are not negative, unmet when
/// they are (a penalty item such as HealthBench's). An unscored or skipped criterion fails it.
fn strict(criteria: &[Json]) -> bool {
    criteria.iter().all(|c| {
        let negative = c.get("points").and_then(Json::as_f64).is_some_and(|p| p < 0.0);
        verdict(c) == Some(!negative)
    })
}

/// Annotate the records of one complete group (error records are left as they are).
pub fn annotate(decl: &RewardDecl, members: &mut [Json]) {
    let scored: Vec<usize> = (0..members.len()).filter(|&i| members[i].get("error").is_none()).collect();
    let reward_of = |r: &Json| -> Option<f64> {
        match r.get("reward") {
            Some(x) => x.as_f64(),
            None => r.get("score").and_then(Json::as_f64),
        }
    };
    let rewards: Vec<Option<f64>> = scored.iter().map(|&i| reward_of(&members[i])).collect();
    let (adv, stats) = advantages(decl, &rewards);
    // Saturation: criteria (by id) that every member where it is decided has met, or unmet.
    let mut tally: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for &i in &scored {
        for c in members[i].get("criteria").and_then(Json::as_array).into_iter().flatten() {
            let id = c.get("id").and_then(Json::as_str).unwrap_or_default().to_string();
            let e = tally.entry(id).or_default();
            match verdict(c) {
                Some(true) => e.0 += 1,
                Some(false) => e.1 += 1,
                None => {}
            }
        }
    }
    let size = scored.len();
    let saturated_met: Vec<&String> = tally.iter().filter(|(_, (m, u))| *m == size && *u == 0).map(|x| x.0).collect();
    let saturated_unmet: Vec<&String> = tally.iter().filter(|(_, (m, u))| *u == size && *m == 0).map(|x| x.0).collect();
    let group_stats = json!({
        "size": size,
        "counted": stats.n,
        "mean": stats.mean.map_or(Json::Null, number_to_json),
        "std": stats.std.map_or(Json::Null, number_to_json),
        "flagged": stats.flagged,
        "saturated_met": saturated_met,
        "saturated_unmet": saturated_unmet,
    });
    for (k, &i) in scored.iter().enumerate() {
        let Some(o) = members[i].as_object_mut() else { continue };
        let criteria: Vec<Json> = o.get("criteria").and_then(Json::as_array).cloned().unwrap_or_default();
        let verdicts: Vec<Json> =
            criteria.iter().map(|c| verdict(c).map_or(Json::Null, |b| json!(u8::from(b)))).collect();
        let mut extra = Map::new();
        extra.insert("reward".into(), rewards[k].map_or(Json::Null, number_to_json));
        extra.insert("advantage".into(), adv[k].map_or(Json::Null, number_to_json));
        extra.insert("strict".into(), json!(strict(&criteria)));
        extra.insert("verdicts".into(), Json::Array(verdicts));
        extra.insert("group_stats".into(), group_stats.clone());
        o.extend(extra);
    }
}

/// The record turned into an error record: its row, id and rubric identity, and the error.
fn into_error(record: Json, code: &str, message: String) -> Json {
    let mut out = Map::new();
    if let Json::Object(o) = record {
        for (k, v) in o {
            if matches!(k.as_str(), "row" | "id" | "rubric" | "version" | "ir_hash" | "bundle") {
                out.insert(k, v);
            }
        }
    }
    out.insert("error".into(), json!({ "code": code, "message": message }));
    Json::Object(out)
}

/// Each criterion's advantage within the group, per member: `sign × (v − mean) × share`, where
/// `v` is the member's value of the criterion (met: its value, unmet: 0), `mean` its mean over
/// the members where it is decided, `share` its weight over the sum of the member's criterion
/// weights, and `sign` −1 for a criterion with negative points (meeting it is bad), else +1.
pub fn criterion_advantages(members: &[Json]) -> Vec<BTreeMap<String, f64>> {
    let crits = |r: &Json| r.get("criteria").and_then(Json::as_array).cloned().unwrap_or_default();
    let value = |c: &Json| -> Option<f64> {
        match verdict(c)? {
            true => Some(c.get("value").and_then(Json::as_f64).unwrap_or(1.0)),
            false => Some(0.0),
        }
    };
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for m in members {
        for c in crits(m) {
            if let (Some(id), Some(v)) = (c.get("id").and_then(Json::as_str), value(&c)) {
                let e = sums.entry(id.to_string()).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
    }
    members
        .iter()
        .map(|m| {
            let cs = crits(m);
            let total: f64 = cs.iter().map(|c| c.get("weight").and_then(Json::as_f64).unwrap_or(1.0)).sum();
            cs.iter()
                .filter_map(|c| {
                    let id = c.get("id").and_then(Json::as_str)?;
                    let v = value(c)?;
                    let (sum, n) = sums.get(id)?;
                    let w = c.get("weight").and_then(Json::as_f64).unwrap_or(1.0);
                    let sign = if c.get("points").and_then(Json::as_f64).is_some_and(|p| p < 0.0) { -1.0 } else { 1.0 };
                    let share = if total > 0.0 { w / total } else { 0.0 };
                    Some((id.to_string(), sign * (v - sum / *n as f64) * share))
                })
                .collect()
        })
        .collect()
}

/// A row's response and its tokens' character offsets, for token credit.
type Tokens = Result<(String, Vec<(usize, usize)>), String>;

fn tokens_of(row: &Json) -> Option<Tokens> {
    let offsets = row.get("token_offsets")?;
    let parse = || -> Option<Vec<(usize, usize)>> {
        offsets
            .as_array()?
            .iter()
            .map(|t| {
                let p = t.as_array()?;
                let (s, e) = (p.first()?.as_u64()? as usize, p.get(1)?.as_u64()? as usize);
                (p.len() == 2 && s <= e).then_some((s, e))
            })
            .collect()
    };
    Some(match (row.get("response").and_then(Json::as_str), parse()) {
        (Some(r), Some(t)) => Ok((r.to_string(), t)),
        (None, _) => Err("token credit needs the row's `response` text".into()),
        (_, None) => Err("`token_offsets` must be a list of [start, end] character offsets".into()),
    })
}

/// Collects records into groups of consecutive rows with the same group id and hands each
/// group back, annotated, once it is complete (the next id starts, or the input ends).
pub struct Grouper<'p> {
    program: &'p crate::ir::Program,
    field: String,
    decl: RewardDecl,
    current: Option<(String, Vec<Json>, Vec<Option<Tokens>>)>,
    done: HashSet<String>,
}

impl<'p> Grouper<'p> {
    pub fn new(program: &'p crate::ir::Program, field: &str) -> Grouper<'p> {
        let decl = program.reward.clone().unwrap_or_else(default_reward);
        Grouper { program, field: field.to_string(), decl, current: None, done: HashSet::new() }
    }

    /// The group key of a row (its field, as canonical JSON), if it has one.
    pub fn key(&self, row: &Json) -> Option<String> {
        row.get(&self.field).filter(|v| !v.is_null()).map(|v| v.to_string())
    }

    /// Add the record of the next row (`row`: the row as read, when it parsed). Returns the
    /// records now ready to write, in row order.
    pub fn push(&mut self, mut record: Json, row: Option<&Json>) -> Vec<Json> {
        if record.get("error").is_some() {
            // An error record keeps its place in the current group, and counts for nothing.
            return match &mut self.current {
                Some((_, members, tokens)) => {
                    members.push(record);
                    tokens.push(None);
                    Vec::new()
                }
                None => vec![record],
            };
        }
        let Some(key) = row.and_then(|r| self.key(r)) else {
            let mut ready = self.flush();
            let message = format!("the row has no `{}` field: `--groups` needs every row's group id", self.field);
            ready.push(into_error(record, "rubric::row::missing_group", message));
            return ready;
        };
        if let Some(o) = record.as_object_mut() {
            o.insert("group".into(), row.and_then(|r| r.get(&self.field)).cloned().unwrap_or(Json::Null));
        }
        let mut ready = Vec::new();
        if self.current.as_ref().is_some_and(|(k, _, _)| *k != key) {
            ready = self.flush();
        }
        if self.current.is_none() && self.done.contains(&key) {
            let message = format!(
                "group {key} appeared earlier, apart from this row: the rows of a group must be consecutive (sort the input by `{}`)",
                self.field
            );
            ready.push(into_error(record, "rubric::row::group_split", message));
            return ready;
        }
        let tokens = row.and_then(tokens_of);
        match &mut self.current {
            Some((_, members, toks)) => {
                members.push(record);
                toks.push(tokens);
            }
            None => self.current = Some((key, vec![record], vec![tokens])),
        }
        ready
    }

    /// End the current group: annotate it and hand it back.
    pub fn flush(&mut self) -> Vec<Json> {
        match self.current.take() {
            Some((key, mut members, tokens)) => {
                annotate(&self.decl, &mut members);
                if tokens.iter().any(Option::is_some) {
                    self.credit(&mut members, &tokens);
                }
                self.done.insert(key);
                members
            }
            None => Vec::new(),
        }
    }

    /// Token credit for the members that carry token offsets (crate::runtime::credit).
    fn credit(&self, members: &mut [Json], tokens: &[Option<Tokens>]) {
        let scored: Vec<usize> = (0..members.len()).filter(|&i| members[i].get("error").is_none()).collect();
        let group: Vec<Json> = scored.iter().map(|&i| members[i].clone()).collect();
        let per_criterion = criterion_advantages(&group);
        for (k, &i) in scored.iter().enumerate() {
            let Some(t) = &tokens[i] else { continue };
            let Some(o) = members[i].as_object_mut() else { continue };
            match t {
                Err(why) => {
                    o.insert("token_credit_error".into(), json!(why));
                }
                Ok((response, offsets)) => {
                    let spans = super::credit::spans(self.program, &group[k], response);
                    let row_adv = o.get("advantage").and_then(Json::as_f64);
                    let uncovered = match self.decl.uncovered {
                        Uncovered::Row => row_adv.unwrap_or(0.0),
                        Uncovered::Zero => 0.0,
                    };
                    let adv = |id: &str| per_criterion[k].get(id).copied();
                    let credit = super::credit::token_credit(response, offsets, &spans, &adv, uncovered);
                    let map = super::credit::char_offsets(response);
                    let spans_json: Map<String, Json> = spans
                        .iter()
                        .map(|(id, ss)| {
                            let cs: Vec<Json> = ss.iter().map(|(s, e)| json!([map[*s], map[*e]])).collect();
                            (id.clone(), Json::Array(cs))
                        })
                        .collect();
                    o.insert("token_credit".into(), json!(credit.into_iter().map(number_to_json).collect::<Vec<_>>()));
                    o.insert("criterion_spans".into(), Json::Object(spans_json));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(form: AdvantageForm) -> RewardDecl {
        RewardDecl { advantage: form, ..default_reward() }
    }

    fn close(a: &[Option<f64>], b: &[Option<f64>]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            match (x, y) {
                (Some(x), Some(y)) => assert!((x - y).abs() < 1e-9, "{a:?} vs {b:?}"),
                (None, None) => {}
                _ => panic!("{a:?} vs {b:?}"),
            }
        }
    }

    #[test]
    fn zscore_by_hand() {
        // rewards 1, 0, 0.5, 0.5: mean 0.5, sample variance (0.25+0.25+0+0)/3 = 1/6
        let (a, s) = advantages(&decl(AdvantageForm::Zscore), &[Some(1.0), Some(0.0), Some(0.5), Some(0.5)]);
        let sd = (1.0f64 / 6.0).sqrt();
        close(&a, &[Some(0.5 / (sd + 1e-6)), Some(-0.5 / (sd + 1e-6)), Some(0.0), Some(0.0)]);
        assert_eq!((s.n, s.mean), (4, Some(0.5)));
        assert!((s.std.unwrap() - sd).abs() < 1e-12);
    }

    #[test]
    fn mean_leave_one_out_and_rank_by_hand() {
        let r = [Some(1.0), Some(0.0), Some(0.5), Some(0.5)];
        close(&advantages(&decl(AdvantageForm::Mean), &r).0, &[Some(0.5), Some(-0.5), Some(0.0), Some(0.0)]);
        // RLOO: 1 − (0 + .5 + .5)/3, 0 − 2/3, .5 − 1.5/3, .5 − 1.5/3
        close(
            &advantages(&decl(AdvantageForm::LeaveOneOut), &r).0,
            &[Some(1.0 - 1.0 / 3.0), Some(-2.0 / 3.0), Some(0.0), Some(0.0)],
        );
        // ranks 4, 1, 2.5, 2.5 centred on 2.5 and scaled by 1.5
        close(&advantages(&decl(AdvantageForm::Rank), &r).0, &[Some(1.0), Some(-1.0), Some(0.0), Some(0.0)]);
    }

    #[test]
    fn unscored_rows_excluded_zeroed_or_flagging_the_group() {
        let r = [Some(1.0), None, Some(0.0)];
        let mut d = decl(AdvantageForm::Mean);
        close(&advantages(&d, &r).0, &[Some(0.5), None, Some(-0.5)]);
        d.unscored = RewardUnscored::Zero;
        close(&advantages(&d, &r).0, &[Some(2.0 / 3.0), Some(-1.0 / 3.0), Some(-1.0 / 3.0)]);
        d.unscored = RewardUnscored::FlagGroup;
        let (a, s) = advantages(&d, &r);
        close(&a, &[None, None, None]);
        assert!(s.flagged);
    }

    #[test]
    fn clip_and_single_member_groups() {
        let mut d = decl(AdvantageForm::Zscore);
        d.clip = Some((-0.5, 0.5));
        close(&advantages(&d, &[Some(1.0), Some(0.0)]).0, &[Some(0.5), Some(-0.5)]);
        close(&advantages(&decl(AdvantageForm::Zscore), &[Some(0.7)]).0, &[Some(0.0)]);
        close(&advantages(&decl(AdvantageForm::Rank), &[Some(0.7)]).0, &[Some(0.0)]);
    }

    #[test]
    fn annotate_marks_saturation_and_strict_completion() {
        let rec = |score: f64, a: &str, b: &str, pen: &str| {
            json!({"score": score, "criteria": [
                {"id": "a", "status": a}, {"id": "b", "status": b}, {"id": "bad", "status": pen, "points": -5}
            ]})
        };
        let mut g =
            vec![rec(1.0, "met", "met", "unmet"), rec(0.5, "met", "unmet", "unmet"), rec(0.0, "met", "unmet", "met")];
        annotate(&decl(AdvantageForm::Mean), &mut g);
        assert_eq!(g[0]["group_stats"]["saturated_met"], json!(["a"]));
        assert_eq!(g[0]["group_stats"]["saturated_unmet"], json!([]));
        assert_eq!(
            (g[0]["strict"].clone(), g[1]["strict"].clone(), g[2]["strict"].clone()),
            (json!(true), json!(false), json!(false))
        );
        assert_eq!(g[2]["verdicts"], json!([1, 0, 1]));
        assert_eq!(g[1]["advantage"].as_f64(), Some(0.0));
    }

    #[test]
    fn groups_are_runs_of_consecutive_rows() {
        let c = crate::types::compile_source(
            "t.rubric",
            "rubric t @ 1.0.0\ninput response: Text\ncriterion a \"A\" check true\nreward { advantage mean }\n",
        );
        let p = c.program.expect("compiles");
        let mut gr = Grouper::new(&p, "group");
        let row = |g: &str| json!({"group": g});
        let rec = |i: u64, s: f64| json!({"row": i, "score": s, "criteria": []});
        assert!(gr.push(rec(0, 1.0), Some(&row("p1"))).is_empty());
        assert!(gr.push(rec(1, 0.0), Some(&row("p1"))).is_empty());
        let out = gr.push(rec(2, 0.5), Some(&row("p2")));
        assert_eq!(out.len(), 2);
        assert_eq!((out[0]["advantage"].clone(), out[1]["advantage"].clone()), (json!(0.5), json!(-0.5)));
        assert_eq!(out[0]["group"], "p1");
        // p1 again, apart from its run: p2 ends, and the row is an error record, never a
        // silently wrong advantage.
        let out = gr.push(rec(3, 1.0), Some(&row("p1")));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["group"], "p2");
        assert_eq!(out[1]["error"]["code"], "rubric::row::group_split", "{out:?}");
        let out = gr.push(rec(4, 1.0), Some(&json!({})));
        assert_eq!(out.last().unwrap()["error"]["code"], "rubric::row::missing_group");
        assert!(gr.flush().is_empty());
    }
}
