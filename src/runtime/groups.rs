//! Groups and advantages for RL trainers (`rubric run --groups`): rows that answer the same
//! prompt carry the same group id and sit next to each other in the input; once a group is
//! complete, each member's record gets its reward, its group-relative advantage, its verdict
//! vector, its strict-completion flag and the group's statistics (size, mean, standard
//! deviation, saturated criteria). The shaping rules come from the rubric's `reward`
//! declaration (or its defaults), so they are part of the bundle hash. Formulas: docs/rl.md.

use crate::ir::{AdvantageForm, RewardDecl, RewardUnscored, StdForm, Uncovered};
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
        std: StdForm::Sample,
        site: u32::MAX,
    }
}

/// A row's group key: its field `field` as JSON text, `None` when it is absent or null.
pub fn key_of(row: &Json, field: &str) -> Option<String> {
    row.get(field).filter(|v| !v.is_null()).map(|v| v.to_string())
}

/// A group's statistics over the rewards that entered it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupStats {
    /// Members whose reward entered the statistics.
    pub n: usize,
    pub mean: Option<f64>,
    /// The standard deviation the rubric declares (`std sample`, n − 1, by default; `std
    /// population`, n); 0 for one member.
    pub std: Option<f64>,
    /// An unscored member under `unscored flag_group`: no member gets an advantage.
    pub flagged: bool,
}

/// The mean and the standard deviation the rubric declares (`std sample`, n − 1, or `std
/// population`, n; 0 for one value) of `xs`; `None` when it is empty.
fn mean_std(decl: &RewardDecl, xs: &[f64]) -> Option<(f64, f64)> {
    let n = xs.len();
    let mean = (n > 0).then(|| xs.iter().sum::<f64>() / n as f64)?;
    let ss = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>();
    let std = match decl.std {
        _ if n < 2 => 0.0,
        StdForm::Sample => (ss / (n - 1) as f64).sqrt(),
        StdForm::Population => (ss / n as f64).sqrt(),
    };
    Some((mean, std))
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
    let (mean, std) = match mean_std(decl, &xs) {
        Some((m, s)) => (Some(m), Some(s)),
        None => (None, None),
    };
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
pub fn verdict(c: &Json) -> Option<bool> {
    match c.get("status").and_then(Json::as_str) {
        Some("met") => Some(true),
        Some("unmet") => Some(false),
        _ => None,
    }
}

/// Every criterion met where met is wanted: met when its points are not negative, unmet when
/// they are (a penalty item such as HealthBench's). An unscored or skipped criterion fails it.
pub fn strict(criteria: &[Json]) -> bool {
    criteria.iter().all(|c| {
        let negative = c.get("points").and_then(Json::as_f64).is_some_and(|p| p < 0.0);
        verdict(c) == Some(!negative)
    })
}

/// The members of a group that are not error records (indices into the group).
pub fn scored_members(members: &[Json]) -> Vec<usize> {
    (0..members.len()).filter(|&i| members[i].get("error").is_none()).collect()
}

/// The reward a record brings to its group: its `reward` when the rubric declares one (null
/// when unscored), else its score.
pub fn reward_of(record: &Json) -> Option<f64> {
    match record.get("reward") {
        Some(x) => x.as_f64(),
        None => record.get("score").and_then(Json::as_f64),
    }
}

/// What [`annotate`] writes into the records of a group, computed by the scalar path
/// ([`figures`]) or by the tensor numeric stage (`numeric`), which must agree.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupFigures {
    /// The members that are not error records ([`scored_members`]); the vectors below are
    /// indexed like it.
    pub scored: Vec<usize>,
    pub rewards: Vec<Option<f64>>,
    pub advantages: Vec<Option<f64>>,
    pub stats: GroupStats,
    /// [`strict`] of each scored member.
    pub strict: Vec<bool>,
    /// Criterion ids every scored member met (or left unmet), sorted.
    pub saturated_met: Vec<String>,
    pub saturated_unmet: Vec<String>,
    /// [`step_advantages`] of each scored member (`None` for a member without `step_rewards`).
    pub step_advantages: Vec<Option<Vec<Option<f64>>>>,
}

/// The group's figures on the scalar path.
pub fn figures(decl: &RewardDecl, members: &[Json]) -> GroupFigures {
    let scored = scored_members(members);
    let rewards: Vec<Option<f64>> = scored.iter().map(|&i| reward_of(&members[i])).collect();
    let (advantages, stats) = advantages(decl, &rewards);
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
    let saturated_met = tally.iter().filter(|(_, (m, u))| *m == size && *u == 0).map(|x| x.0.clone()).collect();
    let saturated_unmet = tally.iter().filter(|(_, (m, u))| *u == size && *m == 0).map(|x| x.0.clone()).collect();
    let strict = scored
        .iter()
        .map(|&i| strict(members[i].get("criteria").and_then(Json::as_array).map_or(&[][..], Vec::as_slice)))
        .collect();
    let step_advantages = step_advantages(decl, members, &scored, stats.flagged);
    GroupFigures { scored, rewards, advantages, stats, strict, saturated_met, saturated_unmet, step_advantages }
}

/// Step-level credit for agent RL, as process supervision in GRPO (Shao et al. 2024,
/// DeepSeekMath, §4.1.3): every step reward of the group's `scored` members (their records'
/// `step_rewards`, null ones left out) is normalised by the mean and standard deviation of
/// all of them (`std` as the rubric's `reward` declares, + ε), and a step's advantage is the
/// sum of the normalised rewards of that step and every later step of the same member (a
/// step whose own reward is null still gets the later ones'). Clipped as the `reward` clips.
/// `None` for a member without `step_rewards`, and for every member of a `flagged` group.
pub fn step_advantages(
    decl: &RewardDecl,
    members: &[Json],
    scored: &[usize],
    flagged: bool,
) -> Vec<Option<Vec<Option<f64>>>> {
    let steps: Vec<Option<Vec<Option<f64>>>> = scored
        .iter()
        .map(|&i| {
            let list = members[i].get("step_rewards")?.as_array()?;
            Some(list.iter().map(Json::as_f64).collect())
        })
        .collect();
    let xs: Vec<f64> = steps.iter().flatten().flatten().flatten().copied().collect();
    let Some((mean, std)) = mean_std(decl, &xs).filter(|_| !flagged) else { return vec![None; scored.len()] };
    steps
        .into_iter()
        .map(|member| {
            let rewards = member?;
            let mut out = vec![None; rewards.len()];
            let mut later = 0.0;
            for (t, r) in rewards.iter().enumerate().rev() {
                if let Some(r) = r {
                    later += (r - mean) / (std + decl.epsilon);
                }
                out[t] = Some(match decl.clip {
                    Some((lo, hi)) => later.clamp(lo, hi),
                    None => later,
                });
            }
            Some(out)
        })
        .collect()
}

/// Write a group's figures into its records: each scored member gets `reward`, `advantage`,
/// `strict`, `verdicts` and `group_stats`, in that order.
pub fn write_figures(members: &mut [Json], f: &GroupFigures) {
    let group_stats = json!({
        "size": f.scored.len(),
        "counted": f.stats.n,
        "mean": f.stats.mean.map_or(Json::Null, number_to_json),
        "std": f.stats.std.map_or(Json::Null, number_to_json),
        "flagged": f.stats.flagged,
        "saturated_met": f.saturated_met,
        "saturated_unmet": f.saturated_unmet,
    });
    for (k, &i) in f.scored.iter().enumerate() {
        let Some(o) = members.get_mut(i).and_then(Json::as_object_mut) else { continue };
        let verdicts: Vec<Json> = o
            .get("criteria")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .map(|c| verdict(c).map_or(Json::Null, |b| json!(u8::from(b))))
            .collect();
        let mut extra = Map::new();
        extra.insert("reward".into(), f.rewards.get(k).copied().flatten().map_or(Json::Null, number_to_json));
        extra.insert("advantage".into(), f.advantages.get(k).copied().flatten().map_or(Json::Null, number_to_json));
        if let Some(Some(steps)) = f.step_advantages.get(k) {
            let steps = steps.iter().map(|a| a.map_or(Json::Null, number_to_json)).collect();
            extra.insert("step_advantages".into(), Json::Array(steps));
        }
        extra.insert("strict".into(), json!(f.strict.get(k).copied().unwrap_or(false)));
        extra.insert("verdicts".into(), Json::Array(verdicts));
        extra.insert("group_stats".into(), group_stats.clone());
        o.extend(extra);
    }
}

/// Annotate the records of one complete group (error records are left as they are).
pub fn annotate(decl: &RewardDecl, members: &mut [Json]) {
    let f = figures(decl, members);
    write_figures(members, &f);
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

/// A row's response and its tokens' character offsets, for token credit (or why its
/// `token_offsets` cannot be used).
pub type Tokens = Result<(String, Vec<(usize, usize)>), String>;

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

/// A complete group waiting for its annotations: its records (error records included, in row
/// order) and, per record, the tokens of its row when the row carries `token_offsets`.
#[derive(Debug, Clone, Default)]
pub struct PendingGroup {
    pub members: Vec<Json>,
    pub tokens: Vec<Option<Tokens>>,
}

/// Records in row order, some of them in groups still to annotate.
enum Pending {
    Record(Json),
    Group(PendingGroup),
}

/// Collects records into groups of consecutive rows with the same group id and hands each
/// group back, annotated, once it is complete (the next id starts, or the input ends).
///
/// [`Grouper::push`] annotates a group as soon as it completes. A batch caller may instead
/// [`Grouper::enqueue`] a chunk's records and then [`Grouper::take_ready`]: every group the
/// chunk completed is annotated in one call, which the tensor numeric stage
/// ([`ChunkNumeric`](super::ChunkNumeric)) computes as one batch. Both give the same records.
pub struct Grouper<'p> {
    program: &'p crate::ir::Program,
    field: String,
    decl: RewardDecl,
    current: Option<(String, PendingGroup)>,
    done: HashSet<String>,
    pending: Vec<Pending>,
    numeric: Option<&'p dyn super::ChunkNumeric>,
}

impl<'p> Grouper<'p> {
    pub fn new(program: &'p crate::ir::Program, field: &str) -> Grouper<'p> {
        let decl = program.reward.clone().unwrap_or_else(default_reward);
        Grouper {
            program,
            field: field.to_string(),
            decl,
            current: None,
            done: HashSet::new(),
            pending: Vec::new(),
            numeric: None,
        }
    }

    /// Annotate groups with the tensor numeric stage (falling back to the scalar path, with a
    /// warning, if the stage fails).
    pub fn with_numeric(mut self, numeric: Option<&'p dyn super::ChunkNumeric>) -> Grouper<'p> {
        self.numeric = numeric;
        self
    }

    /// The group key of a row (its field, as canonical JSON), if it has one.
    pub fn key(&self, row: &Json) -> Option<String> {
        key_of(row, &self.field)
    }

    /// Add the record of the next row (`row`: the row as read, when it parsed). Returns the
    /// records now ready to write, in row order.
    pub fn push(&mut self, record: Json, row: Option<&Json>) -> Vec<Json> {
        self.enqueue(record, row);
        self.take_ready()
    }

    /// End the current group: annotate it and hand it back.
    pub fn flush(&mut self) -> Vec<Json> {
        self.end_group();
        self.take_ready()
    }

    /// [`Grouper::push`] without annotating: the records it would return wait for
    /// [`Grouper::take_ready`].
    pub fn enqueue(&mut self, mut record: Json, row: Option<&Json>) {
        if record.get("error").is_some() {
            // An error record keeps its place in the current group, and counts for nothing.
            match &mut self.current {
                Some((_, g)) => {
                    g.members.push(record);
                    g.tokens.push(None);
                }
                None => self.pending.push(Pending::Record(record)),
            }
            return;
        }
        let Some(key) = row.and_then(|r| self.key(r)) else {
            self.end_group();
            let message = format!("the row has no `{}` field: `--groups` needs every row's group id", self.field);
            self.pending.push(Pending::Record(into_error(record, "rubric::row::missing_group", message)));
            return;
        };
        if let Some(o) = record.as_object_mut() {
            o.insert("group".into(), row.and_then(|r| r.get(&self.field)).cloned().unwrap_or(Json::Null));
        }
        if self.current.as_ref().is_some_and(|(k, _)| *k != key) {
            self.end_group();
        }
        if self.current.is_none() && self.done.contains(&key) {
            let message = format!(
                "group {key} appeared earlier, apart from this row: the rows of a group must be consecutive (sort the input by `{}`)",
                self.field
            );
            self.pending.push(Pending::Record(into_error(record, "rubric::row::group_split", message)));
            return;
        }
        let tokens = row.and_then(tokens_of);
        match &mut self.current {
            Some((_, g)) => {
                g.members.push(record);
                g.tokens.push(tokens);
            }
            None => self.current = Some((key, PendingGroup { members: vec![record], tokens: vec![tokens] })),
        }
    }

    /// End the current group without annotating it yet.
    pub fn end_group(&mut self) {
        if let Some((key, g)) = self.current.take() {
            self.done.insert(key);
            self.pending.push(Pending::Group(g));
        }
    }

    /// Annotate every complete group waiting and hand back the records that are ready, in row
    /// order (the current, incomplete group stays).
    pub fn take_ready(&mut self) -> Vec<Json> {
        let pending = std::mem::take(&mut self.pending);
        let mut groups: Vec<PendingGroup> = Vec::new();
        let mut order: Vec<Option<Json>> = Vec::with_capacity(pending.len());
        for p in pending {
            match p {
                Pending::Record(r) => order.push(Some(r)),
                Pending::Group(g) => {
                    groups.push(g);
                    order.push(None);
                }
            }
        }
        if !groups.is_empty() {
            let tensor = self.numeric.map(|n| n.annotate_groups(self.program, &self.decl, &mut groups));
            match tensor {
                Some(Ok(())) => {}
                other => {
                    if let Some(Err(e)) = other {
                        super::numeric_warning(&e);
                    }
                    for g in &mut groups {
                        annotate_scalar(self.program, &self.decl, g);
                    }
                }
            }
        }
        let mut groups = groups.into_iter();
        let mut out = Vec::new();
        for slot in order {
            match slot {
                Some(r) => out.push(r),
                None => out.extend(groups.next().map(|g| g.members).unwrap_or_default()),
            }
        }
        out
    }
}

/// A group annotated on the scalar path: figures, then token credit for the members that
/// carry token offsets.
pub fn annotate_scalar(program: &crate::ir::Program, decl: &RewardDecl, g: &mut PendingGroup) {
    annotate(decl, &mut g.members);
    if g.tokens.iter().any(Option::is_some) {
        credit(program, decl, &mut g.members, &g.tokens);
    }
}

/// Token credit for the members that carry token offsets (crate::runtime::credit).
fn credit(program: &crate::ir::Program, decl: &RewardDecl, members: &mut [Json], tokens: &[Option<Tokens>]) {
    let scored = scored_members(members);
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
                let spans = super::credit::spans(program, &group[k], response);
                let uncovered = uncovered_credit(decl, o);
                let adv = |id: &str| per_criterion[k].get(id).copied();
                let credit = super::credit::token_credit(response, offsets, &spans, &adv, uncovered);
                write_token_credit(o, &credit, &spans, response);
            }
        }
    }
}

/// The credit of a token no span covers: the row's advantage (`uncovered row`; 0 when it has
/// none) or 0, read from the record once its figures are written.
pub fn uncovered_credit(decl: &RewardDecl, record: &Map<String, Json>) -> f64 {
    match decl.uncovered {
        Uncovered::Row => record.get("advantage").and_then(Json::as_f64).unwrap_or(0.0),
        Uncovered::Zero => 0.0,
    }
}

/// Write a member's `token_credit` and its `criterion_spans` (character offsets).
pub fn write_token_credit(
    o: &mut Map<String, Json>,
    credit: &[f64],
    spans: &[(String, super::credit::Spans)],
    response: &str,
) {
    let map = super::credit::char_offsets(response);
    let spans_json: Map<String, Json> = spans
        .iter()
        .map(|(id, ss)| {
            let cs: Vec<Json> = ss.iter().map(|(s, e)| json!([map[*s], map[*e]])).collect();
            (id.clone(), Json::Array(cs))
        })
        .collect();
    o.insert("token_credit".into(), json!(credit.iter().copied().map(number_to_json).collect::<Vec<_>>()));
    o.insert("criterion_spans".into(), Json::Object(spans_json));
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
    fn zscore_with_the_population_standard_deviation() {
        // numpy.std([1, 0, 0.5, 0.5]) = sqrt(0.5 / 4) = 0.35355339059327373 (ddof=0)
        let d = RewardDecl { std: StdForm::Population, ..decl(AdvantageForm::Zscore) };
        let (a, s) = advantages(&d, &[Some(1.0), Some(0.0), Some(0.5), Some(0.5)]);
        let sd = 0.353_553_390_593_273_73;
        assert!((s.std.unwrap() - sd).abs() < 1e-15);
        close(&a, &[Some(0.5 / (sd + 1e-6)), Some(-0.5 / (sd + 1e-6)), Some(0.0), Some(0.0)]);
        // One member: no spread either way.
        assert_eq!(advantages(&d, &[Some(0.7)]).1.std, Some(0.0));
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
