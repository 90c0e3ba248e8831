//! Judge dispatch for a chunk of rows: plan, call, and evaluate in rounds.
//!
//! A row is evaluated with the verdicts it already has while planning: a judge criterion
//! without a verdict is `skipped`, and the driver records which skipped criteria the row's
//! result actually needed (`RowResult::demanded`): one read by an expression, or aggregated by
//! anything other than an `all`/`any`/`at_least` that the other members already decide. Only
//! those are dispatched, for the whole chunk at once (the dispatcher deduplicates identical
//! requests across rows and runs them concurrently), and the rows that got answers are
//! evaluated again. A criterion behind a gate that fired is never reached, so it is never asked
//! for either. Rounds repeat until no row needs anything new; whatever is still skipped then
//! cost no call and stays `skipped` in the result.

use crate::engine::{Engine, RowResult, Status, VerdictSource};
use crate::ir::{Program, Step};
use crate::judge::{Cost, Criterion, Dispatcher, SeenInput, Task};
use crate::value::Value;
use rayon::prelude::*;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, HashMap};

/// The verdicts a row has so far, with planning on: a judge criterion without one is skipped.
struct Planning<'a>(&'a Vec<(String, Json)>);

impl VerdictSource for Planning<'_> {
    fn verdict(&self, id: &str) -> Option<&Json> {
        self.0.verdict(id)
    }

    fn planning(&self) -> bool {
        true
    }
}

/// The dispatcher as the runtime's [`super::ChunkJudge`], with planning counters.
pub struct Dispatching {
    pub dispatcher: Dispatcher,
    planned: std::sync::Mutex<ChunkStats>,
}

impl Dispatching {
    pub fn new(dispatcher: Dispatcher) -> Dispatching {
        Dispatching { dispatcher, planned: std::sync::Mutex::new(ChunkStats::default()) }
    }
}

impl super::ChunkJudge for Dispatching {
    fn evaluate_chunk(
        &self,
        engine: &dyn Engine,
        program: &Program,
        rows: Vec<super::JudgeRow>,
        deadline: Option<std::time::Instant>,
    ) -> Vec<super::Judged> {
        let mut pending: Vec<PendingRow> = rows.into_iter().map(PendingRow::from).collect();
        let s = evaluate_chunk_until(engine, program, &mut pending, &self.dispatcher, deadline);
        if let Ok(mut p) = self.planned.lock() {
            p.dispatched += s.dispatched;
            p.gated += s.gated;
            p.not_needed += s.not_needed;
            p.rounds += s.rounds;
            for (k, c) in &s.cascades {
                p.cascades.entry(k.clone()).or_default().add(c);
            }
            for (k, (asked, unanimous)) in s.juries {
                let e = p.juries.entry(k).or_default();
                e.0 += asked;
                e.1 += unanimous;
            }
        }
        pending
            .into_iter()
            .map(|r| super::Judged { result: r.result.unwrap_or_default(), models: r.models, timing: r.timing })
            .collect()
    }

    fn report(&self) -> String {
        report(&self.stats())
    }

    fn stats(&self) -> Json {
        let mut j = self.dispatcher.stats().to_json();
        if let (Some(o), Ok(p)) = (j.as_object_mut(), self.planned.lock()) {
            o.insert("criteria_dispatched".into(), json!(p.dispatched));
            o.insert("criteria_skipped_by_gates".into(), json!(p.gated));
            o.insert("criteria_not_needed".into(), json!(p.not_needed));
            o.insert("planning_rounds".into(), json!(p.rounds));
            if !p.cascades.is_empty() {
                o.insert("cascades".into(), serde_json::to_value(&p.cascades).unwrap_or(Json::Null));
            }
            if !p.juries.is_empty() {
                let mut juries = serde_json::Map::new();
                for ((jury, criterion), (asked, unanimous)) in &p.juries {
                    let e = juries.entry(jury.clone()).or_insert_with(|| json!({}));
                    e[criterion] = json!({"asked": asked, "unanimous": unanimous});
                }
                o.insert("juries".into(), Json::Object(juries));
            }
        }
        j
    }
}

/// The skipped criteria a row's latest result needs.
fn wanted(r: &PendingRow) -> &[String] {
    r.result.as_ref().map_or(&[][..], |x| &x.demanded[..])
}

/// The judge lines `rubric run` prints from [`super::ChunkJudge::stats`]: calls made, what
/// planning, deduplication and the cache saved, tokens, and latency percentiles per endpoint.
pub fn report(stats: &Json) -> String {
    let n = |k: &str| stats.get(k).and_then(Json::as_u64).unwrap_or(0);
    let mut out = format!(
        "judges: {} calls over HTTP ({} attempts, {} retries, {} failed, {} invalid replies); \
         {} answered from the cache, {} replayed, {} deduplicated in the batch, {} from earlier batches; \
         tokens {} in, {} out",
        n("http_requests"),
        n("http_attempts"),
        n("retries"),
        n("failed"),
        n("invalid_replies"),
        n("cache_hits"),
        n("replayed"),
        n("deduplicated"),
        n("memo_hits"),
        n("tokens_in"),
        n("tokens_out"),
    );
    out.push_str(&format!(
        "\nplanning: {} judged criteria asked, {} never asked ({} behind a gate that fired, {} not needed by the result) in {} rounds",
        n("criteria_dispatched"),
        n("criteria_skipped_by_gates") + n("criteria_not_needed"),
        n("criteria_skipped_by_gates"),
        n("criteria_not_needed"),
        n("planning_rounds"),
    ));
    if n("batches_submitted") + n("batches_resumed") > 0 {
        out.push_str(&format!(
            "\nbatch: {} requests through the Batch API in {} batches submitted and {} resumed from an earlier run \
             ({} status polls)",
            n("batch_lines"),
            n("batches_submitted"),
            n("batches_resumed"),
            n("batch_polls"),
        ));
    }
    out.push_str(&cost_report(stats));
    if let Some(aside) = stats.get("cache_set_aside").and_then(Json::as_str) {
        out.push_str(&format!(
            "\ncache: the judge cache failed its integrity check and was set aside as `{aside}`; a new one was started"
        ));
    }
    if n("cache_unverified") > 0 || n("cache_errors") > 0 {
        out.push_str(&format!(
            "\ncache: {} entries did not verify and were asked again; {} cache errors",
            n("cache_unverified"),
            n("cache_errors")
        ));
    }
    if let Some(down) = stats.get("endpoints_down").and_then(Json::as_object) {
        for (endpoint, b) in down {
            let k = |key: &str| b.get(key).and_then(Json::as_u64).unwrap_or(0);
            let (trips, refused, cut) = (k("trips"), k("refused"), k("cut"));
            let plural = |n: u64| if n == 1 { "" } else { "s" };
            out.push_str(&format!(
                "\nendpoint `{endpoint}` was considered down {trips} time{} (its circuit breaker tripped): \
                 {cut} attempt{} in flight ended then and {refused} not sent; their requests ended `endpoint_down`",
                plural(trips),
                plural(cut),
            ));
        }
    }
    if n("local_requests") > 0 || n("local_calls") > 0 {
        let ms = stats.get("local_ms").and_then(Json::as_f64).unwrap_or(0.0);
        out.push_str(&format!(
            "\nlocal judges: {} requests answered by local models in {} batched calls ({:.2}s, model loading included)",
            n("local_requests"),
            n("local_calls"),
            ms / 1000.0
        ));
    }
    if let Some(juries) = stats.get("juries").and_then(Json::as_object) {
        for (jury, by) in juries {
            let Some(by) = by.as_object() else { continue };
            let count = |c: &Json, k: &str| c.get(k).and_then(Json::as_u64).unwrap_or(0);
            let asked: u64 = by.values().map(|c| count(c, "asked")).sum();
            let unanimous: u64 = by.values().map(|c| count(c, "unanimous")).sum();
            let mut split: Vec<(f64, &String, u64, u64)> = by
                .iter()
                .map(|(k, c)| {
                    let (a, u) = (count(c, "asked"), count(c, "unanimous"));
                    (if a == 0 { 1.0 } else { u as f64 / a as f64 }, k, u, a)
                })
                .filter(|s| s.0 < 1.0)
                .collect();
            split.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
            let least: Vec<String> = split.iter().take(3).map(|(_, k, u, a)| format!("`{k}` {u}/{a}")).collect();
            out.push_str(&format!(
                "\njury `{jury}`: members unanimous on {unanimous} of {asked} criteria{}",
                if least.is_empty() { String::new() } else { format!(" (least: {})", least.join(", ")) }
            ));
        }
    }
    if let Some(cascades) = stats.get("cascades").and_then(Json::as_object) {
        for (name, c) in cascades {
            out.push_str(&cascade_report(name, c));
        }
    }
    if let Some(lat) = stats.get("latency_ms").and_then(Json::as_object) {
        for (endpoint, p) in lat {
            let f = |k: &str| p.get(k).and_then(Json::as_f64).unwrap_or(f64::NAN);
            out.push_str(&format!(
                "\nlatency `{endpoint}`: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} calls",
                f("p50"),
                f("p90"),
                f("p99"),
                f("max"),
                p.get("n").and_then(Json::as_u64).unwrap_or(0)
            ));
        }
    }
    out
}

/// A cascade's line of the run report: how many criteria escalated, what each member was asked
/// and cost, and what its last member would have cost deciding them all (its mean cost per
/// criterion it answered, times the criteria: an estimate, said so).
fn cascade_report(name: &str, c: &Json) -> String {
    let n = |v: &Json, k: &str| v.get(k).and_then(Json::as_u64).unwrap_or(0);
    let f = |v: &Json, k: &str| v.get(k).and_then(Json::as_f64).unwrap_or(0.0);
    let criteria = n(c, "criteria");
    let members = c.get("members").and_then(Json::as_array).cloned().unwrap_or_default();
    let parts: Vec<String> = members
        .iter()
        .map(|m| {
            format!(
                "`{}` asked {}, decided {} (${:.6})",
                m.get("judge").and_then(Json::as_str).unwrap_or("?"),
                n(m, "asked"),
                n(m, "decided"),
                f(m, "usd")
            )
        })
        .collect();
    let escalated = n(c, "escalated");
    let share = if criteria > 0 { 100.0 * escalated as f64 / criteria as f64 } else { 0.0 };
    let mut line =
        format!("\ncascade `{name}`: {criteria} criteria, {escalated} escalated ({share:.1}%): {}", parts.join(", "));
    let spent: f64 = members.iter().map(|m| f(m, "usd")).sum();
    if let Some(last) = members.last().filter(|m| n(m, "asked") > 0 && c.get("cost_unknown") != Some(&Json::Bool(true)))
    {
        let all = f(last, "usd") / n(last, "asked") as f64 * criteria as f64;
        if all > 0.0 {
            line.push_str(&format!(
                "; `{}` deciding all {criteria} would have cost about ${all:.6}: this cost ${spent:.6}, {:.1}% of that",
                last.get("judge").and_then(Json::as_str).unwrap_or("?"),
                100.0 * spent / all
            ));
        }
    }
    line
}

/// The cost lines of the run report: dollars by judge and endpoint, what the providers' prefix
/// caches saved, the calls whose cost is unknown, and the budget.
fn cost_report(stats: &Json) -> String {
    let f = |t: &Json, k: &str| t.get(k).and_then(Json::as_f64).unwrap_or(0.0);
    let n = |t: &Json, k: &str| t.get(k).and_then(Json::as_u64).unwrap_or(0);
    let mut out = String::new();
    let budget = stats.get("budget").map_or(String::new(), |b| {
        format!(
            "\nbudget: ${:.6} of ${:.6} spent; {} requests not sent (their criteria are unscored `budget`)",
            f(b, "spent_usd"),
            f(b, "limit_usd"),
            n(b, "refused"),
        )
    });
    if stats.get("accounted") != Some(&Json::Bool(true)) {
        return budget;
    }
    let Some(costs) = stats.get("costs").and_then(Json::as_object) else { return budget };
    let tallies: Vec<(&String, &String, &Json)> = costs
        .iter()
        .filter_map(|(j, by)| Some(by.as_object()?.iter().map(move |(e, t)| (j, e, t))))
        .flatten()
        .collect();
    if tallies.is_empty() {
        return budget;
    }
    let sum_f = |k: &str| tallies.iter().map(|t| f(t.2, k)).sum::<f64>();
    let sum_n = |k: &str| tallies.iter().map(|t| n(t.2, k)).sum::<u64>();
    let unknown = sum_n("no_usage") + sum_n("unpriced") + sum_n("timed_out");
    out.push_str(&format!(
        "\ncost: ${:.6} for {} calls answered over HTTP{}; prompt tokens {} ({} cached by the provider, saving ${:.6}), \
         completion tokens {}",
        sum_f("usd"),
        sum_n("calls"),
        if unknown > 0 { format!(" (and {unknown} of unknown cost)") } else { String::new() },
        sum_n("prompt_tokens"),
        sum_n("cached_tokens"),
        sum_f("saved_usd"),
        sum_n("completion_tokens"),
    ));
    if tallies.len() > 1 {
        for (judge, endpoint, t) in &tallies {
            out.push_str(&format!(
                "\ncost `{judge}` at `{endpoint}`: ${:.6} for {} calls, {} prompt tokens ({} cached), {} completion tokens",
                f(t, "usd"),
                n(t, "calls"),
                n(t, "prompt_tokens"),
                n(t, "cached_tokens"),
                n(t, "completion_tokens"),
            ));
        }
    }
    if unknown > 0 {
        out.push_str(&format!(
            "\ncost unknown for {unknown} calls: {} replies reported no usage, {} came from models without a price in \
             the judges configuration, {} timed out after they were sent (the provider may bill them)",
            sum_n("no_usage"),
            sum_n("unpriced"),
            sum_n("timed_out"),
        ));
    }
    out.push_str(&budget);
    out
}

/// One row being scored: its bound inputs, the verdicts known so far and its latest result.
pub struct PendingRow {
    pub inputs: Vec<Value>,
    pub verdicts: Vec<(String, Json)>,
    /// The row's group key under `--groups` (a group judge asks about every member at once).
    pub group: Option<String>,
    pub result: Option<RowResult>,
    /// What answered this row's judge calls, by criterion id.
    pub models: BTreeMap<String, super::Dispatched>,
    /// Where the row's time went: evaluating it and waiting for its judges.
    pub timing: super::RowTiming,
}

impl From<super::JudgeRow> for PendingRow {
    /// A row handed to the judges, not evaluated yet.
    fn from(r: super::JudgeRow) -> PendingRow {
        PendingRow {
            inputs: r.inputs,
            verdicts: r.verdicts,
            group: r.group,
            result: None,
            models: BTreeMap::new(),
            timing: super::RowTiming::default(),
        }
    }
}

/// What planning saved, counted over the chunk.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ChunkStats {
    /// Per jury and criterion (a block's instances as `NAME[]`): the criteria its members were
    /// asked, and on how many they were unanimous (every member answered, alike).
    pub juries: BTreeMap<(String, String), (u64, u64)>,
    /// Per cascade: where its criteria were decided, and what each member cost.
    pub cascades: BTreeMap<String, CascadeTally>,
    /// Judge criteria that were asked for and dispatched.
    pub dispatched: u64,
    /// Judge criteria never asked for because a gate stopped evaluation before them.
    pub gated: u64,
    /// Judge criteria never asked for because the result was decided without them.
    pub not_needed: u64,
    pub rounds: u64,
}

/// What one cascade did: per member (in cascade order, by name), the criteria it was asked,
/// decided and what its answers cost.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct CascadeTally {
    /// Criteria decided by the cascade.
    pub criteria: u64,
    /// Of them, decided by a member after the first.
    pub escalated: u64,
    pub members: Vec<MemberTally>,
    /// Some member's answer had an unknown cost.
    pub cost_unknown: bool,
}

#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct MemberTally {
    pub judge: String,
    pub asked: u64,
    pub decided: u64,
    pub usd: f64,
}

impl CascadeTally {
    /// Count one criterion's trail: the members asked, in order, with what each cost.
    fn count(&mut self, trail: &[Asked]) {
        self.criteria += 1;
        self.escalated += u64::from(trail.len() > 1);
        for (k, (who, _, cost)) in trail.iter().enumerate() {
            let at = match self.members.iter().position(|m| &m.judge == who) {
                Some(at) => at,
                None => {
                    self.members.push(MemberTally { judge: who.clone(), ..MemberTally::default() });
                    self.members.len() - 1
                }
            };
            let m = &mut self.members[at];
            m.asked += 1;
            m.decided += u64::from(k + 1 == trail.len());
            match cost.and_then(|c| c.known()) {
                Some(x) => m.usd += x,
                None => self.cost_unknown |= cost.is_some(),
            }
        }
    }

    fn add(&mut self, other: &CascadeTally) {
        self.criteria += other.criteria;
        self.escalated += other.escalated;
        self.cost_unknown |= other.cost_unknown;
        for o in &other.members {
            match self.members.iter_mut().find(|m| m.judge == o.judge) {
                Some(m) => {
                    m.asked += o.asked;
                    m.decided += o.decided;
                    m.usd += o.usd;
                }
                None => self.members.push(o.clone()),
            }
        }
    }
}

/// A cascade member asked about a criterion: its name, the models that answered, the cost.
type Asked = (String, Vec<String>, Option<Cost>);

/// Whether a cascade member's verdict calls for the next member: it is unscored (no sample
/// decided: each failed, or, under an evidence rule whose input reads `evidence`, is met
/// without quoting it), its samples split, or its graded answer (P(yes), value, or the share of
/// met samples) lies in a band.
fn escalates(rules: &[crate::ir::Escalate], v: &Json, evidence: Option<&str>) -> bool {
    use crate::interp::verdict::normalize_ws;
    use crate::ir::Escalate;
    let samples: Vec<&Json> = match v.get("samples").and_then(Json::as_array) {
        Some(s) => s.iter().collect(),
        None => vec![v],
    };
    let hay = evidence.map(normalize_ws);
    // A met sample whose quote the evidence rule will not find leaves the vote, as the engine
    // leaves it out (`interp::verdict`).
    let quotes = |s: &Json| {
        let met = s.get("verdict").and_then(Json::as_str) == Some("met")
            || s.get("value").and_then(Json::as_f64).is_some_and(|x| x > 0.0);
        match (&hay, met) {
            (Some(hay), true) => {
                s.get("evidence").and_then(Json::as_str).is_some_and(|q| hay.contains(&normalize_ws(q)))
            }
            _ => true,
        }
    };
    let decided: Vec<&Json> = samples.into_iter().filter(|s| s.get("unscored").is_none() && quotes(s)).collect();
    let answer = |s: &Json| ["verdict", "level", "label", "value"].iter().find_map(|k| s.get(*k)).cloned();
    let graded = |s: &Json| {
        s.get("p_yes").and_then(Json::as_f64).or_else(|| s.get("value").and_then(Json::as_f64)).or_else(|| {
            match s.get("verdict").and_then(Json::as_str) {
                Some("met") => Some(1.0),
                Some("unmet") => Some(0.0),
                _ => None,
            }
        })
    };
    rules.iter().any(|r| match r {
        Escalate::Unscored => decided.is_empty(),
        Escalate::Split => {
            let answers: Vec<Option<Json>> = decided.iter().map(|s| answer(s)).collect();
            answers.windows(2).any(|w| w[0] != w[1])
        }
        Escalate::Between { lo, hi } => {
            let ps: Vec<f64> = decided.iter().filter_map(|s| graded(s)).collect();
            !ps.is_empty() && {
                let p = ps.iter().sum::<f64>() / ps.len() as f64;
                *lo <= p && p <= *hi
            }
        }
    })
}

/// Rounds after which a row still asking for verdicts gives up on them (a chain of
/// criteria, each read by the next one's check, asks one link per round).
const MAX_ROUNDS: u64 = 64;

/// The judge criterion with result id `id` (`er`, `items[3]`), with its evaluated text, and
/// what its block `shows` the judge of this instance (empty for most).
fn criterion_for(program: &Program, id: &str, result: &RowResult) -> Option<(u32, Criterion, Vec<SeenInput>)> {
    let found = result.criterion(id);
    let text = found.and_then(|c| c.text.as_deref()).unwrap_or_default().to_string();
    let (decl, shown) = match id.split_once('[') {
        Some((name, _)) => program.steps.iter().find_map(|s| match s {
            Step::Each(e) if program.sets[e.set as usize].name == name => {
                let values = found.map_or(&[][..], |c| c.judged().shown.as_slice());
                Some((&e.template, Task::shown_of(e, values)))
            }
            _ => None,
        })?,
        None => (program.criteria.iter().find(|c| c.id == id)?, Vec::new()),
    };
    let judge = match &decl.verifier {
        crate::ir::Verifier::Judge { judge } | crate::ir::Verifier::Extract { judge, .. } => *judge,
        _ => return None,
    };
    Some((judge, Criterion::for_decl(program, decl, id.to_string(), text)?, shown))
}

/// Whether a criterion's result came from a judge (a verdict or an extraction).
fn is_judged(c: &crate::engine::CriterionResult) -> bool {
    c.source.starts_with("judge:") || c.source.starts_with("extract:")
}

/// Who a task answers for: its row, and for a jury member's or a cascade member's task, which.
pub(crate) type Owner = (usize, Option<Via>);

/// A task asked on behalf of a jury, a cascade or a group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Via {
    /// Member number `at` of jury `jury`.
    Jury { jury: u32, at: usize },
    /// Member number `tier` of cascade `cascade`.
    Cascade { cascade: u32, tier: usize },
    /// A group judge's task for the members (rows) listed at `at` of the round's groups.
    Group { at: usize },
}

/// What rows ask of group judges in a round: `(row, judge, criteria)`, in row order.
pub(crate) type GroupAsks = Vec<(usize, u32, Vec<Criterion>)>;

/// One task per group and group judge for the rows in `asks`: the rows of one group (consecutive
/// rows with the same key) that need the same criteria of the same judge are asked together,
/// each member's rollout in its own fence, what the judge sees by name from the first member.
/// Each task's members go into `members` (its owner is `Via::Group`). A row without a group is
/// settled unscored (`judge_group`), and so is a group of one under `returns ranking`.
pub(crate) fn group_tasks(
    program: &Program,
    rows: &mut [PendingRow],
    asks: GroupAsks,
    tasks: &mut Vec<Task>,
    owners: &mut Vec<Owner>,
    members: &mut Vec<Vec<usize>>,
) {
    // A group is a run of consecutive rows with the same key (a key that comes back later is
    // another run, and its rows `rubric::row::group_split` errors): each row's run number.
    let mut run_no = Vec::with_capacity(rows.len());
    for ri in 0..rows.len() {
        let same = ri > 0 && rows[ri].group == rows[ri - 1].group;
        run_no.push(if ri == 0 { 0 } else { run_no[ri - 1] + usize::from(!same) });
    }
    // Asks by (run, judge, criterion ids), in the order their first member comes.
    let mut runs: Vec<(u32, Vec<Criterion>, Vec<usize>)> = Vec::new();
    let mut run_of: HashMap<(usize, u32, Vec<String>), usize> = HashMap::new();
    for (ri, j, criteria) in asks {
        if rows[ri].group.is_none() {
            let name = &program.judges[j as usize].name;
            for c in criteria {
                let why = format!(
                    "judge_group: judge `{name}` judges the rollouts of a group together, and this row has no group \
                     (run with `--groups FIELD`)"
                );
                rows[ri].verdicts.push((c.id, json!({ "unscored": why })));
            }
            continue;
        }
        let ids: Vec<String> = criteria.iter().map(|c| c.id.clone()).collect();
        match run_of.get(&(run_no[ri], j, ids.clone())) {
            Some(&at) => runs[at].2.push(ri),
            None => {
                run_of.insert((run_no[ri], j, ids), runs.len());
                runs.push((j, criteria, vec![ri]));
            }
        }
    }
    for (j, criteria, rs) in runs {
        let judge = &program.judges[j as usize];
        if rs.len() < 2 && judge.returns == "ranking" {
            for c in criteria {
                let why = format!(
                    "judge_group: judge `{}` ranks rollouts, and only one rollout of this group needs it",
                    judge.name
                );
                rows[rs[0]].verdicts.push((c.id, json!({ "unscored": why })));
            }
            continue;
        }
        let Some(at) = judge.rollouts else { continue };
        let rollouts: Vec<Value> =
            rs.iter().map(|&ri| rows[ri].inputs.get(at as usize).cloned().unwrap_or(Value::Null)).collect();
        if let Some(t) = Task::for_group(program, j, criteria, &rows[rs[0]].inputs, rollouts) {
            tasks.push(t);
            owners.push((rs[0], Some(Via::Group { at: members.len() })));
            members.push(rs);
        }
    }
}

/// The tasks row `ri` needs for the criteria its latest result demands: one per judge with
/// every criterion the row needs from it (a jury: one per member). A demanded id that is not
/// a judged criterion is settled unscored so the rounds end. Returns the criteria asked for.
pub(crate) fn row_tasks(
    program: &Program,
    ri: usize,
    row: &mut PendingRow,
    tasks: &mut Vec<Task>,
    owners: &mut Vec<Owner>,
    grouped: &mut GroupAsks,
) -> u64 {
    let Some(result) = row.result.as_ref() else { return 0 };
    let mut asked = 0;
    // Criteria by judge; an instance shown something of its own (`shows`) is asked alone.
    let mut by_judge: BTreeMap<(u32, usize), (Vec<Criterion>, Vec<SeenInput>)> = BTreeMap::new();
    for id in &result.demanded {
        match criterion_for(program, id, result) {
            Some((j, c, shown)) if shown.is_empty() => by_judge.entry((j, 0)).or_default().0.push(c),
            Some((j, c, shown)) => {
                let at = by_judge.len() + 1;
                by_judge.insert((j, at), (vec![c], shown));
            }
            None => row.verdicts.push((id.clone(), json!({"unscored": "judge_internal: not a judged criterion"}))),
        }
    }
    for ((j, _), (criteria, shown)) in by_judge {
        asked += criteria.len() as u64;
        // A jury asks each of its members; their verdicts become its samples. A cascade asks
        // its first member; the next ones only where an answer escalates.
        let decl = program.judges.get(j as usize);
        // A group judge asks about the whole group at once (`group_tasks`).
        if decl.is_some_and(|d| d.rollouts.is_some()) {
            grouped.push((ri, j, criteria));
            continue;
        }
        let members = decl.and_then(|d| d.jury.as_ref()).map(|jy| jy.members.clone());
        let first = decl.and_then(|d| d.cascade.as_ref()).and_then(|c| c.members.first().copied());
        let task = |m: u32, criteria: Vec<Criterion>| {
            Task::for_program(program, m, criteria, &row.inputs).map(|t| t.with_shown(shown.clone()))
        };
        match (members, first) {
            (Some(members), _) => {
                for (at, m) in members.iter().enumerate() {
                    if let Some(t) = task(*m, criteria.clone()) {
                        tasks.push(t);
                        owners.push((ri, Some(Via::Jury { jury: j, at })));
                    }
                }
            }
            (None, Some(m)) => {
                if let Some(t) = task(m, criteria) {
                    tasks.push(t);
                    owners.push((ri, Some(Via::Cascade { cascade: j, tier: 0 })));
                }
            }
            (None, None) => {
                if let Some(t) = task(j, criteria) {
                    tasks.push(t);
                    owners.push((ri, None));
                }
            }
        }
    }
    asked
}

/// The first planning round of `rows`, dry: each row evaluated with the verdicts it has, and
/// the requests its demanded criteria would make, priced and checked against the cache by
/// [`Dispatcher::dry_run`]; nothing is sent. Returns the dry run, the criteria asked for, and
/// the judged criteria left undecided that later rounds may still ask for (a criterion behind a
/// judged gate, or read by another's check).
pub fn plan_rows(
    engine: &dyn Engine,
    program: &Program,
    rows: Vec<super::JudgeRow>,
    dispatcher: &Dispatcher,
) -> (crate::judge::DryRun, u64, u64) {
    let mut pending: Vec<PendingRow> = rows.into_iter().map(PendingRow::from).collect();
    pending.par_iter_mut().for_each(|row| {
        row.result = Some(engine.evaluate(program, &row.inputs, &Planning(&row.verdicts)));
    });
    let (mut tasks, mut owners, mut asked, mut later) = (Vec::new(), Vec::new(), 0, 0);
    let mut grouped = GroupAsks::new();
    for (ri, row) in pending.iter_mut().enumerate() {
        asked += row_tasks(program, ri, row, &mut tasks, &mut owners, &mut grouped);
        let demanded = row.result.as_ref().map_or(0, |r| r.demanded.len());
        let skipped = row
            .result
            .as_ref()
            .map_or(0, |r| r.criteria.iter().filter(|c| c.status == Status::Skipped && is_judged(c)).count());
        later += skipped.saturating_sub(demanded) as u64;
    }
    group_tasks(program, &mut pending, grouped, &mut tasks, &mut owners, &mut Vec::new());
    for ((_, via), t) in owners.iter().zip(&tasks) {
        if let Some(Via::Cascade { cascade, .. }) = via {
            let tiers = program.judges[*cascade as usize].cascade.as_ref().map_or(1, |c| c.members.len());
            later += (tiers as u64 - 1) * t.criteria().len() as u64;
        }
    }
    (dispatcher.dry_run(&tasks), asked, later)
}

/// Evaluate every row of a chunk, dispatching the judge calls they need.
pub fn evaluate_chunk(
    engine: &dyn Engine,
    program: &Program,
    rows: &mut [PendingRow],
    dispatcher: &Dispatcher,
) -> ChunkStats {
    evaluate_chunk_until(engine, program, rows, dispatcher, None)
}

/// [`evaluate_chunk`] with the rows' deadline: judge calls still unanswered then end
/// `judge_deadline` (the runtime then makes such a row `unscored` with reason `timeout`).
pub fn evaluate_chunk_until(
    engine: &dyn Engine,
    program: &Program,
    rows: &mut [PendingRow],
    dispatcher: &Dispatcher,
    deadline: Option<std::time::Instant>,
) -> ChunkStats {
    let mut stats = ChunkStats::default();
    // Rows whose verdicts changed since they were last evaluated.
    let mut dirty = vec![true; rows.len()];
    loop {
        stats.rounds += 1;
        rows.par_iter_mut().zip(dirty.par_iter()).filter(|(_, d)| **d).for_each(|(row, _)| {
            let start = std::time::Instant::now();
            row.result = Some(crate::stdlib::with_row_deadline(deadline, || {
                engine.evaluate(program, &row.inputs, &Planning(&row.verdicts))
            }));
            row.timing.evaluate_ms += start.elapsed().as_secs_f64() * 1000.0;
        });
        if rows.iter().all(|r| wanted(r).is_empty()) {
            break;
        }
        if stats.rounds >= MAX_ROUNDS {
            for row in rows.iter_mut() {
                for id in wanted(row).to_vec() {
                    row.verdicts.push((id, json!({"unscored": "judge_plan: too many dependent rounds"})));
                }
                row.result = Some(crate::stdlib::with_row_deadline(deadline, || {
                    engine.evaluate(program, &row.inputs, &row.verdicts)
                }));
            }
            break;
        }
        // One task per (row, judge) with every criterion the row needs from that judge.
        let mut tasks = Vec::new();
        let mut owners = Vec::new();
        let mut grouped = GroupAsks::new();
        for (ri, row) in rows.iter_mut().enumerate() {
            dirty[ri] = false;
            if wanted(row).is_empty() {
                continue;
            }
            dirty[ri] = true;
            stats.dispatched += row_tasks(program, ri, row, &mut tasks, &mut owners, &mut grouped);
        }
        // The members of each group task, by `Via::Group`'s index.
        let mut group_members: Vec<Vec<usize>> = Vec::new();
        group_tasks(program, rows, grouped, &mut tasks, &mut owners, &mut group_members);
        // Jury members' verdicts, by (row, jury, criterion): one per member, in member order.
        let mut panels: BTreeMap<(usize, u32, String), Vec<MemberVerdict>> = BTreeMap::new();
        // The cascade members asked so far, by (row, criterion): name, models, cost.
        let mut trails: BTreeMap<(usize, String), Vec<Asked>> = BTreeMap::new();
        // Escalations are asked in the same round, one member further each time.
        while !tasks.is_empty() {
            let answers = dispatcher.resolve_blocking_until(&tasks, deadline);
            let (mut next, mut next_owners) = (Vec::new(), Vec::new());
            // Each row's longest wait in this call: its requests flew together.
            let mut round_wait: BTreeMap<usize, f64> = BTreeMap::new();
            for ((owner, task), verdicts) in owners.iter().zip(&tasks).zip(answers) {
                let (ri, via) = *owner;
                let members: &[usize] = match via {
                    Some(Via::Group { at }) => &group_members[at],
                    _ => std::slice::from_ref(&ri),
                };
                for v in &verdicts {
                    for &m in members {
                        rows[m].timing.add_wait(&v.id, v.waited_ms);
                        let w = round_wait.entry(m).or_default();
                        *w = w.max(v.waited_ms);
                    }
                }
                let mut answered: Vec<String> = Vec::new();
                match via {
                    Some(Via::Group { at }) => {
                        let members = &group_members[at];
                        let n = members.len();
                        for v in verdicts {
                            answered.push(v.id.clone());
                            // The group's call is shared evenly by its members.
                            let cost = v.cost.map(|c| Cost { usd: c.usd / n as f64, unknown: c.unknown });
                            for (k, &m) in members.iter().enumerate() {
                                let d = super::Dispatched {
                                    models: v.models.clone(),
                                    cost: share(cost),
                                    ..Default::default()
                                };
                                rows[m].models.insert(v.id.clone(), d);
                                rows[m]
                                    .verdicts
                                    .push((v.id.clone(), crate::judge::reply::member_verdict(&v.verdict, k, n)));
                            }
                        }
                        for c in task.criteria().iter().filter(|c| !answered.contains(&c.id)) {
                            for &m in members {
                                let none = json!({"unscored": "judge_internal: no reply for this criterion"});
                                rows[m].verdicts.push((c.id.clone(), none));
                            }
                        }
                        continue;
                    }
                    Some(Via::Jury { jury: j, at }) => {
                        for v in verdicts {
                            answered.push(v.id.clone());
                            panels.entry((ri, j, v.id)).or_default().push((at, v.verdict, v.models, v.cost));
                        }
                        for c in task.criteria().iter().filter(|c| !answered.contains(&c.id)) {
                            let none = json!({"unscored": "judge_internal: no reply for this criterion"});
                            panels.entry((ri, j, c.id.clone())).or_default().push((at, none, vec![], None));
                        }
                        continue;
                    }
                    Some(Via::Cascade { cascade, tier }) => {
                        let Some(c) = program.judges[cascade as usize].cascade.as_ref() else { continue };
                        let member = program.judges[c.members[tier] as usize].name.clone();
                        let mut up: Vec<Criterion> = Vec::new();
                        for v in verdicts {
                            answered.push(v.id.clone());
                            let trail = trails.entry((ri, v.id.clone())).or_default();
                            trail.push((member.clone(), v.models.clone(), v.cost));
                            // The evidence rule, as the engine will apply it to this member's answer.
                            let evidence = program.judges[cascade as usize]
                                .evidence_from
                                .and_then(|i| rows[ri].inputs.get(i as usize))
                                .and_then(|x| x.as_text().map(str::to_string));
                            if tier + 1 < c.members.len() && escalates(&c.escalate, &v.verdict, evidence.as_deref()) {
                                up.extend(task.criteria().iter().find(|x| x.id == v.id).cloned());
                                continue;
                            }
                            let trail = trails.remove(&(ri, v.id.clone())).unwrap_or_default();
                            let name = &program.judges[cascade as usize].name;
                            stats.cascades.entry(name.clone()).or_default().count(&trail);
                            let mut d = super::Dispatched::default();
                            let mut cost: Option<Cost> = None;
                            for (who, models, c) in trail {
                                d.cascade.push(who);
                                for m in models {
                                    if !d.models.contains(&m) {
                                        d.models.push(m);
                                    }
                                }
                                if let Some(c) = c {
                                    cost.get_or_insert_with(Cost::default).add(c);
                                }
                            }
                            d.cost = share(cost);
                            let row = &mut rows[ri];
                            row.models.insert(v.id.clone(), d);
                            row.verdicts.push((v.id, v.verdict));
                        }
                        if !up.is_empty() {
                            let m = c.members[tier + 1];
                            if let Some(t) = Task::for_program(program, m, up, &rows[ri].inputs) {
                                next.push(t.with_shown(task.shown()));
                                next_owners.push((ri, Some(Via::Cascade { cascade, tier: tier + 1 })));
                            }
                        }
                    }
                    None => {
                        let row = &mut rows[ri];
                        for v in verdicts {
                            answered.push(v.id.clone());
                            row.models.insert(
                                v.id.clone(),
                                super::Dispatched { models: v.models, cost: share(v.cost), ..Default::default() },
                            );
                            row.verdicts.push((v.id, v.verdict));
                        }
                    }
                }
                for c in task.criteria() {
                    if !answered.contains(&c.id) {
                        rows[ri]
                            .verdicts
                            .push((c.id.clone(), json!({"unscored": "judge_internal: no reply for this criterion"})));
                    }
                }
            }
            for (ri, w) in round_wait {
                rows[ri].timing.judges_ms += w;
            }
            tasks = next;
            owners = next_owners;
        }
        for ((ri, j, id), mut members) in panels {
            members.sort_by_key(|m| m.0);
            let jury = &program.judges[j as usize];
            let key = match id.split_once('[') {
                Some((name, _)) => format!("{name}[]"),
                None => id.clone(),
            };
            let e = stats.juries.entry((jury.name.clone(), key)).or_default();
            e.0 += 1;
            e.1 += u64::from(unanimous(members.iter().map(|m| &m.1)));
            let mut models: Vec<String> = Vec::new();
            let mut cost: Option<Cost> = None;
            for m in &members {
                if let Some(c) = m.3 {
                    cost.get_or_insert_with(Cost::default).add(c);
                }
                for x in &m.2 {
                    if !models.contains(x) {
                        models.push(x.clone());
                    }
                }
            }
            let samples: Vec<Json> = members.into_iter().map(|m| m.1).collect();
            let row = &mut rows[ri];
            row.models.insert(id.clone(), super::Dispatched { models, cost: share(cost), ..Default::default() });
            row.verdicts.push((id, json!({ "samples": samples })));
        }
        // A demanded id that got no verdict at all would be asked again forever: settle it.
        for row in rows.iter_mut() {
            let Some(result) = row.result.as_ref() else { continue };
            let unanswered: Vec<String> =
                result.demanded.iter().filter(|id| row.verdicts.verdict(id).is_none()).cloned().collect();
            for id in unanswered {
                row.verdicts.push((id, json!({"unscored": "judge_internal: no reply"})));
            }
        }
    }
    for r in rows.iter().filter_map(|r| r.result.as_ref()) {
        for c in r.criteria.iter().filter(|c| is_judged(c)) {
            match c.status {
                Status::Skipped => stats.not_needed += 1,
                Status::Unscored if c.reason.as_deref().is_some_and(|x| x.starts_with("gated:")) => stats.gated += 1,
                _ => {}
            }
        }
    }
    stats
}

/// A jury member's verdict: its position among the members, the verdict, the models that gave
/// it, what it cost.
type MemberVerdict = (usize, Json, Vec<String>, Option<Cost>);

/// A criterion's cost as its record shows it.
fn share(cost: Option<Cost>) -> super::CostShare {
    match cost {
        None => super::CostShare::NotAccounted,
        Some(c) => c.known().map_or(super::CostShare::Unknown, super::CostShare::Usd),
    }
}

/// Whether a jury's member verdicts all answered, alike (the same verdict, level, label or
/// value).
fn unanimous<'a>(verdicts: impl Iterator<Item = &'a Json>) -> bool {
    let answers: Vec<Option<&Json>> =
        verdicts.map(|v| ["verdict", "level", "label", "value"].iter().find_map(|k| v.get(*k))).collect();
    answers.iter().all(|a| a.is_some()) && answers.windows(2).all(|w| w[0] == w[1])
}
