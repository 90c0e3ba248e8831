//! The engine interface and the result types every engine produces. The reference
//! interpreter (`interp`) implements it today; the Wasm and JIT engines implement the same
//! trait and must produce identical `RowResult`s.

use crate::ir::Program;
use crate::value::{number_to_json, Value};
use serde_json::{json, Map, Value as Json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// Recorded judge verdicts for one row, keyed by criterion id (`er`, `items[3]`).
pub trait VerdictSource {
    fn verdict(&self, criterion_id: &str) -> Option<&Json>;

    /// Whether a judge criterion without a verdict is still to be asked for (the runtime is
    /// planning judge calls): it is then `skipped` until the row's result needs it, instead of
    /// `unscored(no_verdict)`. See `runtime::dispatch`.
    fn planning(&self) -> bool {
        false
    }
}

/// No recorded verdicts: every judge criterion is `unscored(no_verdict)`.
pub struct NoVerdicts;

impl VerdictSource for NoVerdicts {
    fn verdict(&self, _: &str) -> Option<&Json> {
        None
    }
}

impl VerdictSource for Map<String, Json> {
    fn verdict(&self, id: &str) -> Option<&Json> {
        self.get(id)
    }
}

impl VerdictSource for Vec<(String, Json)> {
    fn verdict(&self, id: &str) -> Option<&Json> {
        self.iter().rev().find(|(k, _)| k == id).map(|(_, v)| v)
    }
}

/// One engine: evaluates a program on one row of bound inputs.
pub trait Engine: Send + Sync {
    fn name(&self) -> &'static str;
    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Met,
    Unmet,
    Unscored,
    /// A judged criterion whose verdict the row's result does not need (a decided `all`/`any`
    /// or `at_least` is all that reads it), so no judge call was made for it.
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::Unmet => "unmet",
            Status::Unscored => "unscored",
            Status::Skipped => "skipped",
        }
    }
}

/// A string of a criterion result. A program's own strings (a criterion's id and source, the
/// names of its sets, a constant text) are interned for the process ([`intern`]), so that
/// every row's result holds them without counting references; a string a row made (an `each`
/// instance's id, a computed text) is counted. Equal, hashed, ordered and printed as its text
/// whichever it is. See docs/decisions/0012-interned-result-strings.md.
#[derive(Clone)]
pub enum Name {
    Static(&'static str),
    Counted(Arc<str>),
}

impl Name {
    /// `s`, interned.
    pub fn interned(s: &str) -> Name {
        Name::Static(intern(s))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Name::Static(s) => s,
            Name::Counted(s) => s,
        }
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::Static("")
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl serde::Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::Counted(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name::Counted(Arc::from(s))
    }
}

impl From<Arc<str>> for Name {
    fn from(s: Arc<str>) -> Name {
        Name::Counted(s)
    }
}

/// `s` for the rest of the process: one copy per distinct text, however often it is interned.
/// Only programs' own strings are interned (never row data), so what this keeps is bounded by
/// the programs a process loads.
pub fn intern(s: &str) -> &'static str {
    static TABLE: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut table = TABLE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = table.get(s) {
        return s;
    }
    let s: &'static str = Box::leak(Box::from(s));
    table.insert(s);
    s
}

/// A list of interned names, itself interned (a criterion's sets).
pub fn intern_names(names: &[Name]) -> &'static [Name] {
    static TABLE: OnceLock<Mutex<HashSet<&'static [Name]>>> = OnceLock::new();
    if names.is_empty() {
        return &[];
    }
    let mut table = TABLE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = table.get(names) {
        return s;
    }
    let interned: Vec<Name> = names.iter().map(|n| Name::interned(n)).collect();
    let s: &'static [Name] = Box::leak(interned.into_boxed_slice());
    table.insert(s);
    s
}

#[derive(Debug, Clone, PartialEq)]
pub struct CriterionResult {
    pub id: Name,
    pub text: Option<Name>,
    /// `binary`, `ordinal`, `nominal` or `continuous`.
    pub kind: &'static str,
    pub status: Status,
    pub reason: Option<String>,
    /// In [0, 1]; `None` when unscored.
    pub value: Option<f64>,
    pub level: Option<f64>,
    pub label: Option<String>,
    pub points: Option<f64>,
    pub weight: f64,
    pub axis: Option<Name>,
    pub tags: Vec<String>,
    /// `check`, `value`, `judge:NAME` or `extract:NAME`.
    pub source: Name,
    pub evidence: Option<String>,
    pub extracted: Option<Box<Json>>,
    /// P(yes) / (P(yes) + P(no)) of a binary criterion whose judge scores by log-probability
    /// (`scoring logprob`, local judges): the mean over the samples that voted.
    pub p_yes: Option<f64>,
    /// For a judge that takes several samples: how many it took and how many voted (the
    /// others failed or broke the evidence rule).
    pub votes: Option<Votes>,
    /// A binary criterion of a calibrated judge: the calibrated probability of met, and what
    /// the judge said before calibration (the status is the calibrated decision).
    pub calibrated: Option<Calibrated>,
    /// An ordinal or nominal verdict of a judge with `order shuffled`: the position (1 =
    /// first) of the answer among the options as the judge was shown them.
    pub position: Option<u32>,
    /// A preference (a criterion decided by a comparing judge): what each request answered
    /// and which candidate the result prefers.
    pub preference: Option<Box<Preference>>,
    /// Names of the sets the criterion belongs to directly (interned: shared by every row's
    /// result).
    pub sets: &'static [Name],
    /// An `each` instance waiting for its verdict whose block `shows` its judge something: the
    /// values, in `shows` order (what the request fences beside the inputs). Not in records.
    pub shown: Vec<crate::value::Value>,
    /// An instance of a block over a trajectory's steps (`each s in run.steps`, a `List[Step]`):
    /// the step's `index`. Records carry it, and the row's `step_rewards` are made of it.
    pub step: Option<u32>,
}

/// A preference result beside its value (1: the first candidate, 0: the second, 0.5: a tie).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Preference {
    /// The candidate preferred (an input name) or `tie`; `None` for a mean of several answers
    /// that is none of them.
    pub preferred: Option<String>,
    /// Every answer the judge gave, in request order.
    pub asks: Vec<PreferenceAsk>,
    /// With `order both`: the samples whose two orders disagreed.
    pub inconsistent: Option<u32>,
}

/// One answer of a comparing judge: the candidate shown first (when known) and the one it
/// preferred (`tie`, or `None` when the request failed).
#[derive(Debug, Clone, PartialEq)]
pub struct PreferenceAsk {
    pub first: Option<String>,
    pub preferred: Option<String>,
}

/// A calibrated verdict: the calibrated probability and the judge's own status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibrated {
    pub p: f64,
    pub raw: Status,
}

/// The samples a criterion's judge took and those that voted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Votes {
    pub samples: u32,
    pub voted: u32,
    /// Of those that voted, how many decided as the result did (met or unmet).
    pub agreed: u32,
}

impl CriterionResult {
    pub fn is_met(&self) -> bool {
        self.status == Status::Met
    }

    pub fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        if let Some(t) = &self.text {
            m.insert("text".into(), json!(t));
        }
        m.insert("kind".into(), json!(self.kind));
        m.insert("status".into(), json!(self.status.as_str()));
        if let Some(r) = &self.reason {
            m.insert("reason".into(), json!(r));
        }
        m.insert("value".into(), self.value.map_or(Json::Null, number_to_json));
        if let Some(l) = self.level {
            m.insert("level".into(), number_to_json(l));
        }
        if let Some(l) = &self.label {
            m.insert("label".into(), json!(l));
        }
        if let Some(p) = self.points {
            m.insert("points".into(), number_to_json(p));
        }
        m.insert("weight".into(), number_to_json(self.weight));
        if let Some(a) = &self.axis {
            m.insert("axis".into(), json!(a));
        }
        if !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        m.insert("source".into(), json!(self.source));
        if let Some(e) = &self.evidence {
            m.insert("evidence".into(), json!(e));
        }
        if let Some(x) = &self.extracted {
            m.insert("extracted".into(), (**x).clone());
        }
        if let Some(p) = self.p_yes {
            m.insert("p_yes".into(), number_to_json(p));
        }
        if let Some(at) = self.position {
            m.insert("position".into(), json!(at));
        }
        if let Some(pr) = &self.preference {
            if let Some(x) = &pr.preferred {
                m.insert("preference".into(), json!(x));
            }
            let asks: Vec<Json> = pr.asks.iter().map(|a| json!({"first": a.first, "preferred": a.preferred})).collect();
            if !asks.is_empty() {
                m.insert("asks".into(), Json::Array(asks));
            }
            if let Some(n) = pr.inconsistent {
                m.insert("inconsistent".into(), json!(n));
            }
        }
        if let Some(c) = self.calibrated {
            m.insert("calibrated".into(), number_to_json(c.p));
            m.insert("raw".into(), json!(c.raw.as_str()));
        }
        if let Some(v) = self.votes {
            m.insert(
                "votes".into(),
                json!({"samples": v.samples, "voted": v.voted, "failed": v.samples - v.voted, "agreed": v.agreed}),
            );
        }
        if !self.sets.is_empty() {
            m.insert("sets".into(), json!(self.sets));
        }
        if let Some(k) = self.step {
            m.insert("step".into(), json!(k));
        }
        Json::Object(m)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    pub name: String,
    /// `None` when the gate was not reached (an earlier gate stopped evaluation) or its
    /// condition was unscored.
    pub passed: Option<bool>,
    pub action: &'static str,
    pub value: Option<f64>,
    pub reason: Option<String>,
}

/// A trap raised while evaluating a gate or the score.
#[derive(Debug, Clone, PartialEq)]
pub struct TrapInfo {
    pub code: &'static str,
    pub message: String,
    /// Where: a site of the program; the site table beside it says where that lies.
    pub site: Option<crate::ir::SiteId>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RowResult {
    /// `None` when the score is unscored.
    pub score: Option<f64>,
    pub unscored_reason: Option<String>,
    /// The reason (failure class) of the first gate that fired.
    pub failure_class: Option<String>,
    pub gates: Vec<GateResult>,
    pub criteria: Vec<CriterionResult>,
    /// Tree values of every group, in declaration order.
    pub groups: Vec<(String, Option<f64>)>,
    pub trap: Option<TrapInfo>,
    /// `None` when the rubric declares no `reward`; else the score less the penalty (`None`
    /// inside when the score or the penalty is unscored, with `reward_reason` for the latter).
    pub reward: Option<Option<f64>>,
    pub reward_reason: Option<String>,
    /// The report-only scores (`score NAME = ...`), in declaration order.
    pub scores: Vec<NamedScoreResult>,
    /// Ids of the `skipped` criteria the result turned out to need (planning only; not
    /// written): the runtime asks the judges for them and evaluates the row again.
    pub demanded: Vec<String>,
    /// Whether `score`, `unscored_reason` and `trap` came from the score expression (no gate
    /// stopped the row, no `each` list failed, no resource limit ended it); not written. The
    /// tensor numeric stage (`numeric`) recomputes exactly these rows' scores.
    pub score_evaluated: bool,
    /// Whether the program has a block over a trajectory's steps (a `List[Step]`): the record
    /// then has `step_rewards`, empty for a run without steps.
    pub over_steps: bool,
}

/// A report-only score of one row: its value, or why it has none.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamedScoreResult {
    pub name: String,
    pub value: Option<f64>,
    pub reason: Option<String>,
}

impl RowResult {
    pub fn criterion(&self, id: &str) -> Option<&CriterionResult> {
        self.criteria.iter().find(|c| &*c.id == id)
    }

    /// Each step's reward, when criteria are about steps (`CriterionResult::step`): the
    /// weighted mean value of the step's scored criteria (`null` for a step none of whose
    /// criteria is scored), for steps 0 to the last one any criterion is about (none for a run
    /// without steps). `None` when the program has no block over steps.
    pub fn step_rewards(&self) -> Option<Vec<Option<f64>>> {
        let steps = match self.criteria.iter().filter_map(|c| c.step).max() {
            Some(last) => last as usize + 1,
            None if self.over_steps => 0,
            None => return None,
        };
        let mut sums = vec![(0.0, 0.0); steps];
        for c in &self.criteria {
            if let (Some(k), Some(v), Status::Met | Status::Unmet) = (c.step, c.value, c.status) {
                sums[k as usize].0 += c.weight * v;
                sums[k as usize].1 += c.weight;
            }
        }
        Some(sums.into_iter().map(|(s, w)| (w > 0.0).then(|| s / w)).collect())
    }

    /// The result object written for a row (without row id and bundle information, which the
    /// runtime adds); `sites` locates a trap's site in the sources.
    pub fn to_json(&self, sites: &crate::ir::SiteTable) -> Map<String, Json> {
        let mut m = Map::new();
        m.insert("score".into(), self.score.map_or(Json::Null, number_to_json));
        m.insert("status".into(), json!(if self.score.is_some() { "scored" } else { "unscored" }));
        if let Some(r) = &self.unscored_reason {
            m.insert("unscored_reason".into(), json!(r));
        }
        m.insert("failure_class".into(), self.failure_class.as_ref().map_or(Json::Null, |f| json!(f)));
        if !self.scores.is_empty() {
            let values: Map<String, Json> =
                self.scores.iter().map(|s| (s.name.clone(), s.value.map_or(Json::Null, number_to_json))).collect();
            m.insert("scores".into(), Json::Object(values));
            let why: Map<String, Json> =
                self.scores.iter().filter_map(|s| Some((s.name.clone(), json!(s.reason.as_ref()?)))).collect();
            if !why.is_empty() {
                m.insert("scores_unscored".into(), Json::Object(why));
            }
        }
        if let Some(r) = self.reward {
            m.insert("reward".into(), r.map_or(Json::Null, number_to_json));
            if let Some(why) = &self.reward_reason {
                m.insert("reward_reason".into(), json!(why));
            }
        }
        m.insert(
            "gates".into(),
            Json::Array(
                self.gates
                    .iter()
                    .map(|g| {
                        let mut o = Map::new();
                        o.insert("name".into(), json!(g.name));
                        o.insert("passed".into(), g.passed.map_or(Json::Null, Json::Bool));
                        o.insert("action".into(), json!(g.action));
                        if let Some(v) = g.value {
                            o.insert("value".into(), number_to_json(v));
                        }
                        if let Some(r) = &g.reason {
                            o.insert("reason".into(), json!(r));
                        }
                        Json::Object(o)
                    })
                    .collect(),
            ),
        );
        m.insert("criteria".into(), Json::Array(self.criteria.iter().map(CriterionResult::to_json).collect()));
        if let Some(steps) = self.step_rewards() {
            m.insert(
                "step_rewards".into(),
                Json::Array(steps.into_iter().map(|r| r.map_or(Json::Null, number_to_json)).collect()),
            );
        }
        if !self.groups.is_empty() {
            let mut g = Map::new();
            for (n, v) in &self.groups {
                g.insert(n.clone(), v.map_or(Json::Null, number_to_json));
            }
            m.insert("groups".into(), Json::Object(g));
        }
        let axes = self.axes();
        if !axes.is_empty() {
            m.insert("axes".into(), Json::Object(axes));
        }
        if let Some(t) = &self.trap {
            m.insert(
                "trap".into(),
                json!({ "code": t.code, "message": t.message, "site": t.site.and_then(|id| sites.get(id)).map(|s| json!({"file": s.file, "start": s.start, "end": s.end})) }),
            );
        }
        m
    }

    /// Per-axis report: counts and, where criteria carry points, the points ratio of the axis.
    pub fn axes(&self) -> Map<String, Json> {
        let mut names: Vec<&str> = self.criteria.iter().filter_map(|c| c.axis.as_deref()).collect();
        names.sort();
        names.dedup();
        let mut out = Map::new();
        for a in names {
            let cs: Vec<&CriterionResult> = self.criteria.iter().filter(|c| c.axis.as_deref() == Some(a)).collect();
            let met = cs.iter().filter(|c| c.status == Status::Met).count();
            let unmet = cs.iter().filter(|c| c.status == Status::Unmet).count();
            let unscored = cs.len() - met - unmet;
            let achieved: f64 = cs
                .iter()
                .filter(|c| c.status == Status::Met)
                .map(|c| c.points.unwrap_or(0.0) * c.value.unwrap_or(0.0))
                .sum();
            let possible: f64 = cs.iter().filter_map(|c| c.points).filter(|p| *p > 0.0).sum();
            let mut o = Map::new();
            o.insert("met".into(), json!(met));
            o.insert("unmet".into(), json!(unmet));
            o.insert("unscored".into(), json!(unscored));
            if possible > 0.0 {
                o.insert("points_ratio".into(), number_to_json(achieved / possible));
            }
            out.insert(a.to_string(), Json::Object(o));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interning keeps one copy per text, and a name is its text whichever way it is held:
    /// equal, hashed, ordered and printed alike (records and digests cannot tell them apart).
    #[test]
    fn names_are_their_text_however_they_are_held() {
        let a = intern(&String::from("criterion-id"));
        let b = intern(&String::from("criterion-id"));
        assert!(std::ptr::eq(a, b), "one copy per distinct text");
        assert!(!std::ptr::eq(intern("other"), a));
        let fixed = Name::interned("c1");
        let counted = Name::from(String::from("c1"));
        assert_eq!(fixed, counted);
        assert_eq!(fixed, "c1");
        assert_eq!(format!("{fixed:?}"), format!("{:?}", Arc::<str>::from("c1")));
        assert_eq!(format!("{counted}"), "c1");
        let hash = |n: &Name| {
            use std::hash::{BuildHasher, BuildHasherDefault};
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(n)
        };
        assert_eq!(hash(&fixed), hash(&counted));
        let (a, b) = (Name::interned("a"), Name::from(String::from("b")));
        assert!(a < b);
        assert_eq!(json!(fixed), json!("c1"));
        let sets = [Name::from("x"), Name::interned("y")];
        let once = intern_names(&sets);
        assert!(std::ptr::eq(once, intern_names(&[Name::interned("x"), Name::from("y")])));
        assert!(once.iter().all(|n| matches!(n, Name::Static(_))));
        assert!(intern_names(&[]).is_empty());
    }
}
