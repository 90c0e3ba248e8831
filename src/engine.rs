//! The engine interface and the result types every engine produces. The reference
//! interpreter (`interp`) implements it today; the Wasm and JIT engines implement the same
//! trait and must produce identical `RowResult`s.

use crate::ir::Program;
use crate::value::{JsonNumber, Value};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value as Json};
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
    pub points: Option<f64>,
    pub weight: f64,
    pub axis: Option<Name>,
    pub tags: Vec<String>,
    /// `check`, `value`, `judge:NAME` or `extract:NAME`.
    pub source: Name,
    /// What a judge added ([`Judged`]): `None` for a result nothing judged, as every check's
    /// is. Kept behind one pointer so that the results of checks, most of a row's, are small
    /// to make, move and drop (docs/performance.md, the eighteenth step). Read it with
    /// [`CriterionResult::judged`], write it with [`CriterionResult::judged_mut`].
    pub judged: Option<Box<Judged>>,
    /// Names of the sets the criterion belongs to directly (interned: shared by every row's
    /// result).
    pub sets: &'static [Name],
    /// An instance of a block over a trajectory's steps (`each s in run.steps`, a `List[Step]`):
    /// the step's `index`. Records carry it, and the row's `step_rewards` are made of it.
    pub step: Option<u32>,
}

/// The parts of a criterion's result that a judge gives (all empty for a check's).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Judged {
    pub level: Option<f64>,
    pub label: Option<String>,
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
    /// An `each` instance waiting for its verdict whose block `shows` its judge something: the
    /// values, in `shows` order (what the request fences beside the inputs). Not in records.
    pub shown: Vec<crate::value::Value>,
}

/// The judged parts of a result nothing judged.
static NOT_JUDGED: Judged = Judged {
    level: None,
    label: None,
    evidence: None,
    extracted: None,
    p_yes: None,
    votes: None,
    calibrated: None,
    position: None,
    preference: None,
    shown: Vec::new(),
};

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

    /// What a judge added to this result (all empty when nothing judged it).
    pub fn judged(&self) -> &Judged {
        self.judged.as_deref().unwrap_or(&NOT_JUDGED)
    }

    /// What a judge added to this result, to change it (made empty on first use).
    pub fn judged_mut(&mut self) -> &mut Judged {
        self.judged.get_or_insert_with(Default::default)
    }

    /// The criterion's object in a record ([`CriterionResult`]'s `Serialize`, which writes it
    /// straight to a record's line).
    pub fn to_json(&self) -> Json {
        to_json_value(self)
    }
}

/// A value as JSON. Records' parts serialise into JSON text and values alike; nothing in them
/// can fail to serialise (keys are strings, numbers go through [`Num`]).
fn to_json_value(value: &impl Serialize) -> Json {
    #[expect(clippy::expect_used, reason = "a record's parts have string keys and no failing Serialize")]
    serde_json::to_value(value).expect("a record part serialises")
}

/// A number as records write it ([`JsonNumber`], as `value::number_to_json` does).
#[derive(Debug, Clone, Copy)]
pub struct Num(pub f64);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match JsonNumber::of(self.0) {
            JsonNumber::Integer(i) => s.serialize_i64(i),
            JsonNumber::Float(x) => s.serialize_f64(x),
            JsonNumber::Null => s.serialize_unit(),
        }
    }
}

/// `null` or the number.
fn num(n: Option<f64>) -> Option<Num> {
    n.map(Num)
}

/// A criterion's object in a record: the keys in this order, the optional ones only when set.
impl Serialize for CriterionResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &self.id)?;
        if let Some(t) = &self.text {
            m.serialize_entry("text", t)?;
        }
        m.serialize_entry("kind", self.kind)?;
        m.serialize_entry("status", self.status.as_str())?;
        if let Some(r) = &self.reason {
            m.serialize_entry("reason", r)?;
        }
        m.serialize_entry("value", &num(self.value))?;
        let j = self.judged();
        if let Some(l) = j.level {
            m.serialize_entry("level", &Num(l))?;
        }
        if let Some(l) = &j.label {
            m.serialize_entry("label", l)?;
        }
        if let Some(p) = self.points {
            m.serialize_entry("points", &Num(p))?;
        }
        m.serialize_entry("weight", &Num(self.weight))?;
        if let Some(a) = &self.axis {
            m.serialize_entry("axis", a)?;
        }
        if !self.tags.is_empty() {
            m.serialize_entry("tags", &self.tags)?;
        }
        m.serialize_entry("source", &self.source)?;
        if let Some(e) = &j.evidence {
            m.serialize_entry("evidence", e)?;
        }
        if let Some(x) = &j.extracted {
            m.serialize_entry("extracted", &**x)?;
        }
        if let Some(p) = j.p_yes {
            m.serialize_entry("p_yes", &Num(p))?;
        }
        if let Some(at) = j.position {
            m.serialize_entry("position", &at)?;
        }
        if let Some(pr) = &j.preference {
            if let Some(x) = &pr.preferred {
                m.serialize_entry("preference", x)?;
            }
            if !pr.asks.is_empty() {
                m.serialize_entry("asks", &pr.asks)?;
            }
            if let Some(n) = pr.inconsistent {
                m.serialize_entry("inconsistent", &n)?;
            }
        }
        if let Some(c) = j.calibrated {
            m.serialize_entry("calibrated", &Num(c.p))?;
            m.serialize_entry("raw", c.raw.as_str())?;
        }
        if let Some(v) = &j.votes {
            m.serialize_entry("votes", v)?;
        }
        if !self.sets.is_empty() {
            m.serialize_entry("sets", self.sets)?;
        }
        if let Some(k) = self.step {
            m.serialize_entry("step", &k)?;
        }
        m.end()
    }
}

impl Serialize for PreferenceAsk {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("first", &self.first)?;
        m.serialize_entry("preferred", &self.preferred)?;
        m.end()
    }
}

impl Serialize for Votes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("samples", &self.samples)?;
        m.serialize_entry("voted", &self.voted)?;
        m.serialize_entry("failed", &(self.samples - self.voted))?;
        m.serialize_entry("agreed", &self.agreed)?;
        m.end()
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
        match to_json_value(&ResultFields { result: self, sites }) {
            Json::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// Serialise the fields of [`RowResult::to_json`] into `m`, in that order: a record's line
    /// is written straight from the result, without a JSON tree in between.
    pub fn serialize_fields<M: SerializeMap>(&self, sites: &crate::ir::SiteTable, m: &mut M) -> Result<(), M::Error> {
        self.serialize_fields_as(sites, RecordForm::Full, m)
    }

    /// [`RowResult::serialize_fields`] in `form`: the full record's fields, the same written
    /// for JSON text (`RecordForm::Text`), or those of a compact record (`rubric run
    /// --compact`): `values`, each criterion's value in criteria order (`null` unless met or
    /// unmet), where the full record has `criteria`, and no `gates` or `groups`.
    pub fn serialize_fields_as<M: SerializeMap>(
        &self,
        sites: &crate::ir::SiteTable,
        form: RecordForm,
        m: &mut M,
    ) -> Result<(), M::Error> {
        m.serialize_entry("score", &num(self.score))?;
        m.serialize_entry("status", if self.score.is_some() { "scored" } else { "unscored" })?;
        if let Some(r) = &self.unscored_reason {
            m.serialize_entry("unscored_reason", r)?;
        }
        m.serialize_entry("failure_class", &self.failure_class)?;
        if !self.scores.is_empty() {
            m.serialize_entry("scores", &ScoreValues(&self.scores))?;
            if self.scores.iter().any(|s| s.reason.is_some()) {
                m.serialize_entry("scores_unscored", &ScoreReasons(&self.scores))?;
            }
        }
        if let Some(r) = self.reward {
            m.serialize_entry("reward", &num(r))?;
            if let Some(why) = &self.reward_reason {
                m.serialize_entry("reward_reason", why)?;
            }
        }
        match form {
            RecordForm::Compact => m.serialize_entry("values", &CompactValues(&self.criteria))?,
            RecordForm::Full => {
                m.serialize_entry("gates", &self.gates)?;
                m.serialize_entry("criteria", &self.criteria)?;
            }
            RecordForm::Text => {
                m.serialize_entry("gates", &self.gates)?;
                m.serialize_entry("criteria", &CriteriaText(&self.criteria))?;
            }
        }
        if let Some(steps) = self.step_rewards() {
            let steps: Vec<Option<Num>> = steps.into_iter().map(num).collect();
            m.serialize_entry("step_rewards", &steps)?;
        }
        if form != RecordForm::Compact && !self.groups.is_empty() {
            m.serialize_entry("groups", &GroupValues(&self.groups))?;
        }
        let axes = self.axis_counts();
        if !axes.is_empty() {
            m.serialize_entry("axes", &AxisMap(&axes))?;
        }
        if let Some(t) = &self.trap {
            m.serialize_entry("trap", &TrapFields { trap: t, site: t.site.and_then(|id| sites.get(id)) })?;
        }
        Ok(())
    }

    /// Per-axis report: counts and, where criteria carry points, the points ratio of the axis.
    pub fn axes(&self) -> Map<String, Json> {
        match to_json_value(&AxisMap(&self.axis_counts())) {
            Json::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// Each axis the criteria name, in name order, with its counts.
    fn axis_counts(&self) -> Vec<(&str, AxisCounts)> {
        let mut names: Vec<&str> = self.criteria.iter().filter_map(|c| c.axis.as_deref()).collect();
        if names.is_empty() {
            return Vec::new();
        }
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .map(|a| {
                let mut n = AxisCounts::default();
                let mut achieved = 0.0;
                let mut possible = 0.0;
                for c in self.criteria.iter().filter(|c| c.axis.as_deref() == Some(a)) {
                    match c.status {
                        Status::Met => {
                            n.met += 1;
                            achieved += c.points.unwrap_or(0.0) * c.value.unwrap_or(0.0);
                        }
                        Status::Unmet => n.unmet += 1,
                        Status::Unscored | Status::Skipped => n.unscored += 1,
                    }
                    if let Some(p) = c.points.filter(|p| *p > 0.0) {
                        possible += p;
                    }
                }
                n.points_ratio = (possible > 0.0).then(|| achieved / possible);
                (a, n)
            })
            .collect()
    }
}

/// Which record [`RowResult::serialize_fields_as`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordForm {
    /// The full record, to any serializer.
    Full,
    /// The full record, to a JSON text serializer (`serde_json::to_string` and its kin): the
    /// same text, with the criterion objects seen before on this thread copied from their text
    /// ([`CriteriaText`]). A JSON value made this way would parse each of them again.
    Text,
    /// The compact record.
    Compact,
}

/// The most criterion objects a thread keeps the text of; it starts over when full.
const CRITERION_TEXTS: usize = 8192;

thread_local! {
    /// The JSON text of criterion results this thread wrote, by everything that text says.
    static CRITERION_TEXT: std::cell::RefCell<rustc_hash::FxHashMap<CriterionKey, Box<serde_json::value::RawValue>>> =
        std::cell::RefCell::new(rustc_hash::FxHashMap::default());
}

/// Everything a criterion object's text is made of, for a result whose strings are all
/// interned (program strings: the same address is the same text), whose value is none, 0 or 1,
/// and that has none of a judge's fields (reason, level, label, tags, evidence, extraction,
/// votes...): most results of checks and of plain judged criteria, the same for every row. Other
/// results have no key and are written field by field.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct CriterionKey {
    id: (usize, usize),
    text: Option<(usize, usize)>,
    kind: (usize, usize),
    status: u8,
    value: Option<u64>,
    points: Option<u64>,
    weight: u64,
    axis: Option<(usize, usize)>,
    source: (usize, usize),
    sets: (usize, usize),
}

impl CriterionKey {
    fn of(c: &CriterionResult) -> Option<CriterionKey> {
        // Every field named, so that a new one must be thought about here.
        let CriterionResult {
            id,
            text,
            kind,
            status,
            reason,
            value,
            points,
            weight,
            axis,
            tags,
            source,
            judged,
            sets,
            step,
        } = c;
        // Every judged part named too (`shown` is not in records).
        let judge_said = judged.as_deref().is_some_and(|j| {
            let Judged { level, label, evidence, extracted, p_yes, votes, calibrated, position, preference, shown: _ } =
                j;
            level.is_some()
                || label.is_some()
                || evidence.is_some()
                || extracted.is_some()
                || p_yes.is_some()
                || votes.is_some()
                || calibrated.is_some()
                || position.is_some()
                || preference.is_some()
        });
        if judge_said
            || reason.is_some()
            || !tags.is_empty()
            || step.is_some()
            || !matches!(value, None | Some(0.0) | Some(1.0))
            || value.is_some_and(f64::is_sign_negative)
        {
            return None;
        }
        let name = |n: &Name| match n {
            Name::Static(s) => Some((s.as_ptr() as usize, s.len())),
            Name::Counted(_) => None,
        };
        // An absent name is keyed as absent; a counted one leaves the result without a key.
        let optional = |n: &Option<Name>| n.as_ref().map_or(Some(None), |n| name(n).map(Some));
        Some(CriterionKey {
            id: name(id)?,
            text: optional(text)?,
            kind: (kind.as_ptr() as usize, kind.len()),
            status: *status as u8,
            value: value.map(f64::to_bits),
            points: points.map(f64::to_bits),
            weight: weight.to_bits(),
            axis: optional(axis)?,
            source: name(source)?,
            sets: (sets.as_ptr() as usize, sets.len()),
        })
    }
}

/// A record's criteria for JSON text: an object whose [`CriterionKey`] this thread has seen
/// is copied from the text it was written as then.
struct CriteriaText<'a>(&'a [CriterionResult]);

impl Serialize for CriteriaText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        CRITERION_TEXT.with(|texts| {
            let mut texts = texts.borrow_mut();
            let mut seq = s.serialize_seq(Some(self.0.len()))?;
            for c in self.0 {
                let Some(key) = CriterionKey::of(c) else {
                    seq.serialize_element(c)?;
                    continue;
                };
                if let Some(text) = texts.get(&key) {
                    seq.serialize_element(&**text)?;
                    continue;
                }
                match serde_json::to_string(c).ok().and_then(|t| serde_json::value::RawValue::from_string(t).ok()) {
                    Some(text) => {
                        seq.serialize_element(&*text)?;
                        if texts.len() >= CRITERION_TEXTS {
                            texts.clear();
                        }
                        texts.insert(key, text);
                    }
                    None => seq.serialize_element(c)?,
                }
            }
            seq.end()
        })
    }
}

/// A compact record's `values`: each criterion's `value` as its full record writes it when it
/// is met or unmet, else `null`.
struct CompactValues<'a>(&'a [CriterionResult]);

impl Serialize for CompactValues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| match c.status {
            Status::Met | Status::Unmet => num(c.value),
            _ => None,
        }))
    }
}

/// A row's result as the fields of its record ([`RowResult::serialize_fields`]).
struct ResultFields<'a> {
    result: &'a RowResult,
    sites: &'a crate::ir::SiteTable,
}

impl Serialize for ResultFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        self.result.serialize_fields(self.sites, &mut m)?;
        m.end()
    }
}

impl Serialize for GateResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("passed", &self.passed)?;
        m.serialize_entry("action", self.action)?;
        if let Some(v) = self.value {
            m.serialize_entry("value", &Num(v))?;
        }
        if let Some(r) = &self.reason {
            m.serialize_entry("reason", r)?;
        }
        m.end()
    }
}

/// `scores`: each report-only score's value by name.
struct ScoreValues<'a>(&'a [NamedScoreResult]);

impl Serialize for ScoreValues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|x| (&x.name, num(x.value))))
    }
}

/// `scores_unscored`: why each unscored report-only score has no value.
struct ScoreReasons<'a>(&'a [NamedScoreResult]);

impl Serialize for ScoreReasons<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().filter_map(|x| Some((&x.name, x.reason.as_ref()?))))
    }
}

/// `groups`: each group's tree value by name.
struct GroupValues<'a>(&'a [(String, Option<f64>)]);

impl Serialize for GroupValues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(n, v)| (n, num(*v))))
    }
}

/// One axis of a row's `axes`.
#[derive(Debug, Default)]
struct AxisCounts {
    met: usize,
    unmet: usize,
    unscored: usize,
    points_ratio: Option<f64>,
}

impl Serialize for AxisCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("met", &self.met)?;
        m.serialize_entry("unmet", &self.unmet)?;
        m.serialize_entry("unscored", &self.unscored)?;
        if let Some(r) = self.points_ratio {
            m.serialize_entry("points_ratio", &Num(r))?;
        }
        m.end()
    }
}

struct AxisMap<'a, 'r>(&'a [(&'r str, AxisCounts)]);

impl Serialize for AxisMap<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(a, n)| (a, n)))
    }
}

/// A record's `trap`: its code, message and where its site lies (`null` when it has none).
struct TrapFields<'a> {
    trap: &'a TrapInfo,
    site: Option<&'a crate::ir::Site>,
}

impl Serialize for TrapFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("code", self.trap.code)?;
        m.serialize_entry("message", &self.trap.message)?;
        m.serialize_entry("site", &self.site)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A decided result of a check, every field spelled out (`engine` sits below the
    /// interpreter, whose templates make such results: the module edges allow no call up).
    fn plain(id: Name, status: Status, value: Option<f64>) -> CriterionResult {
        CriterionResult {
            id,
            text: Some(Name::interned("Says \"hi\" \u{1}")),
            kind: "binary",
            status,
            reason: None,
            value,
            judged: None,
            points: Some(2.0),
            weight: 1.5,
            axis: Some(Name::interned("ax")),
            tags: Vec::new(),
            source: Name::interned("check"),
            sets: intern_names(&[Name::interned("s")]),
            step: None,
        }
    }

    /// Criterion objects written as text are those serde writes field by field, whether the
    /// thread has their text already or not: results that differ in any field the key covers
    /// get their own text, and those without a key (a counted name, a judge's field, a value
    /// other than 0 or 1) are written field by field and not kept.
    #[test]
    fn criterion_texts_are_the_criteria_written_field_by_field() {
        CRITERION_TEXT.with(|t| t.borrow_mut().clear());
        let kept = || CRITERION_TEXT.with(|t| t.borrow().len());
        let mut rs = vec![
            plain(Name::interned("a"), Status::Met, Some(1.0)),
            plain(Name::interned("a"), Status::Unmet, Some(0.0)),
            plain(Name::interned("b"), Status::Unscored, None),
            plain(Name::interned("b"), Status::Skipped, None),
            CriterionResult { weight: 2.5, ..plain(Name::interned("a"), Status::Met, Some(1.0)) },
            CriterionResult { sets: &[], ..plain(Name::interned("a"), Status::Met, Some(1.0)) },
            CriterionResult {
                text: None,
                axis: None,
                points: None,
                ..plain(Name::interned("a"), Status::Met, Some(1.0))
            },
        ];
        let keyed = rs.len();
        rs.extend([
            plain(Name::Counted("a".into()), Status::Met, Some(1.0)),
            plain(Name::interned("c"), Status::Met, Some(0.5)),
            plain(Name::interned("c"), Status::Unmet, Some(-0.0)),
            CriterionResult { reason: Some("why".into()), ..plain(Name::interned("c"), Status::Unscored, None) },
            CriterionResult { tags: vec!["t".into()], ..plain(Name::interned("c"), Status::Met, Some(1.0)) },
            CriterionResult { step: Some(3), ..plain(Name::interned("c"), Status::Met, Some(1.0)) },
        ]);
        let field_by_field = serde_json::to_string(&rs).expect("serialises");
        for round in 0..3 {
            assert_eq!(serde_json::to_string(&CriteriaText(&rs)).expect("serialises"), field_by_field, "round {round}");
            assert_eq!(kept(), keyed, "round {round}");
        }
        assert!(field_by_field.contains(r#""weight":2.5"#), "{field_by_field}");
    }

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
