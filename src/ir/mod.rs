//! Stage 4, the IR: a backend-neutral, serialisable, versioned and canonical description of a
//! compiled rubric. `types` produces it; `interp` (and later Wasm and the JIT) consume it.
//!
//! Architecture invariant: the IR is self-contained. It names intrinsics by name and overload
//! number, and holds no interned symbols, no `HashMap` and no floating state:
//! `canonical_bytes` of the same rubric is the same on every machine.
//!
//! Architecture invariant: the IR says what a rubric does, not how its source is laid out.
//! Nodes that can fail at run time carry a `SiteId`, numbered by the checker in the order it
//! meets them; where each site lies in the sources is a separate `SiteTable` that travels
//! beside the program and is never part of `canonical_bytes`, so comments, whitespace and
//! `rubric fmt` leave the `ir_hash` unchanged (decision record 0009).

pub mod calibration;
mod print;
mod typing;
pub mod validate;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

pub use print::{print_program, print_sites, stat_form};
pub use typing::{assignable, consistent, join, subst, unify, Bindings};

/// Bumped whenever the meaning or the serialised shape of the IR changes (2: the site table
/// left the IR for a `SiteTable` beside it; the program keeps `site_count`; 3: the node
/// `Narrowed`, an optional value proven not null, and judge calibrations).
pub const IR_VERSION: u32 = 3;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Program {
    pub ir_version: u32,
    pub rubric: RubricInfo,
    pub inputs: Vec<InputDecl>,
    pub judges: Vec<JudgeDecl>,
    pub functions: Vec<Function>,
    pub lets: Vec<LetDecl>,
    /// Gates and criteria in declaration order: the order of evaluation.
    pub steps: Vec<Step>,
    pub criteria: Vec<CriterionDecl>,
    pub sets: Vec<SetDecl>,
    pub score: Expr,
    /// Report-only scores (`score NAME = ...`), in declaration order: in every record beside
    /// the score, never the reward. Not serialised when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<NamedScore>,
    /// How the score becomes a training reward (`reward { ... }`); absent in rubrics that do
    /// not declare one (and then not serialised, so their canonical bytes and hash are as
    /// before the field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<RewardDecl>,
    /// Dataset-level statistics (`stat NAME = ...`), in declaration order; computed from the
    /// run's records by `agree::stats`, never by an engine. Not serialised when empty, so
    /// rubrics without any keep their canonical bytes and hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stats: Vec<StatDecl>,
    /// Generators (`generator NAME { ... fills INPUT }`), in declaration order: run by `rubric
    /// generate` before scoring, never by an engine. Not serialised when empty, so rubrics
    /// without any keep their canonical bytes and hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generators: Vec<GeneratorDecl>,
    pub examples: Vec<Example>,
    /// How many sites the program's nodes name: every `SiteId` in it is below this. Where
    /// they lie is the `SiteTable` beside the program (same length), not part of the IR.
    pub site_count: u32,
    /// What the engines compute once for this program at run time (`interp::prepared`):
    /// never serialised, empty in a clone.
    #[serde(skip)]
    pub prepared: PreparedCell,
}

/// Reward shaping declared in the rubric, hence part of its hash (docs/rl.md has the formulas).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardDecl {
    pub advantage: AdvantageForm,
    /// Added to the group's standard deviation (`zscore`).
    pub epsilon: f64,
    /// Advantages are clipped to `[lo, hi]`.
    pub clip: Option<(f64, f64)>,
    /// Subtracted from the score to give the reward (a length penalty, say).
    pub penalty: Option<Expr>,
    pub unscored: RewardUnscored,
    /// The credit of a token no criterion's span covers.
    pub uncovered: Uncovered,
    /// The standard deviation `zscore` divides by (not serialised when `sample`, so rubrics
    /// that do not choose keep their hash).
    #[serde(default, skip_serializing_if = "StdForm::is_sample")]
    pub std: StdForm,
    pub site: SiteId,
}

/// Which standard deviation of a group's rewards `zscore` divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdForm {
    /// √(Σ(r − mean)² / (n − 1)), as `torch.std` (TRL, verl, OpenRLHF).
    #[default]
    Sample,
    /// √(Σ(r − mean)² / n), as `numpy.std`.
    Population,
}

impl StdForm {
    pub const ALL: &'static [(&'static str, StdForm)] =
        &[("sample", StdForm::Sample), ("population", StdForm::Population)];

    pub fn is_sample(&self) -> bool {
        *self == StdForm::Sample
    }
}

/// A report-only score: a `Number` expression over what the score may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedScore {
    pub name: String,
    pub expr: Expr,
    pub site: SiteId,
}

/// A dataset-level statistic declared in the rubric (`docs/statistics.md`): an aggregate over
/// rows of a per-row measure, optionally one value per key, optionally clipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatDecl {
    pub name: String,
    pub agg: StatAgg,
    pub measure: StatMeasure,
    /// `rate(MEASURE OP VALUE)`: the row counts when the comparison holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<StatTest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<StatPer>,
    /// The aggregate (not each row) is clipped to `[lo, hi]`, as HealthBench clips its mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<(f64, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatAgg {
    /// The mean of the measure over the rows that define it.
    Mean,
    /// The fraction of those rows where the test holds (a binary criterion: where it is met).
    Rate,
    /// A Bradley–Terry ranking of the systems a pair of inputs names (`per input A, B`), the
    /// measure read as A's share of the win: one Elo-scale rating per system.
    BradleyTerry,
}

impl StatAgg {
    pub const ALL: &'static [(&'static str, StatAgg)] =
        &[("mean", StatAgg::Mean), ("rate", StatAgg::Rate), ("bradley_terry", StatAgg::BradleyTerry)];
}

/// What a statistic reads from each row's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StatMeasure {
    /// The row's score.
    Score,
    /// A report-only score (`score NAME = ...`).
    NamedScore { name: String },
    /// A criterion's value (1 or 0 for a binary one).
    Criterion { id: String },
    /// Σ points of the met criteria of a set over Σ of its positive points.
    PointsRatio { set: String },
    /// The fraction of a set's criteria that are met.
    MetRatio { set: String },
}

impl StatMeasure {
    /// The functions a measure may call, by name.
    pub const FUNCTIONS: &'static [&'static str] = &["points_ratio", "met_ratio"];

    /// The set a measure reads, if it reads one.
    pub fn set(&self) -> Option<&str> {
        match self {
            StatMeasure::PointsRatio { set } | StatMeasure::MetRatio { set } => Some(set),
            StatMeasure::Score | StatMeasure::NamedScore { .. } | StatMeasure::Criterion { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatTest {
    pub op: CmpOp,
    pub value: f64,
}

/// One value of the statistic per key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StatPer {
    /// Per tag (starting with `prefix`) of the set's criteria: each row's measure over the
    /// criteria that carry the tag.
    Tag { prefix: String },
    /// Per axis of the set's criteria, likewise.
    Axis,
    /// Per value of a row input (each item of a `List[Text]`): the rows that have it.
    Input { name: String },
    /// Per system of a pairwise comparison (`per input first, second`, both `Text`): each row
    /// compares the system named by `first` with the one named by `second` (`bradley_terry`).
    Pair { first: String, second: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageForm {
    /// (r − mean) / (std + ε), with the sample standard deviation (GRPO).
    Zscore,
    /// r − mean.
    Mean,
    /// r − mean of the other members (RLOO).
    LeaveOneOut,
    /// Centred ranks in [−1, 1] (ties share their mean rank).
    Rank,
}

impl AdvantageForm {
    pub const ALL: &'static [(&'static str, AdvantageForm)] = &[
        ("zscore", AdvantageForm::Zscore),
        ("mean", AdvantageForm::Mean),
        ("leave_one_out", AdvantageForm::LeaveOneOut),
        ("rank", AdvantageForm::Rank),
    ];
}

/// How an unscored row enters its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardUnscored {
    /// Left out of the group's statistics; its reward and advantage are null.
    Exclude,
    /// Its reward is 0 and it counts in the group.
    Zero,
    /// Every advantage of its group is null and the group is flagged.
    FlagGroup,
}

impl RewardUnscored {
    pub const ALL: &'static [(&'static str, RewardUnscored)] = &[
        ("exclude", RewardUnscored::Exclude),
        ("zero", RewardUnscored::Zero),
        ("flag_group", RewardUnscored::FlagGroup),
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Uncovered {
    /// The row's advantage.
    Row,
    Zero,
}

impl Uncovered {
    pub const ALL: &'static [(&'static str, Uncovered)] = &[("row", Uncovered::Row), ("zero", Uncovered::Zero)];
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricInfo {
    pub name: String,
    pub version: String,
    pub title: Option<String>,
}

/// Where a site lies: the module that contains it (`main` for the rubric, `std.text`,
/// `lib.checks`; never a path) and byte offsets into that module's source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    pub file: String,
    pub start: u32,
    pub end: u32,
}

/// A node that can fail at run time (a trap's location, an example's expectation): an index
/// below `Program::site_count`, numbered by the checker in the order it meets the nodes, so
/// it depends on what the rubric says, not on where it is written.
pub type SiteId = u32;

/// Where each site of a program lies in its sources, in site order: the layout the IR leaves
/// out. It travels beside the program (the front end's `types::Compiled::sites`, a bundle's
/// `source-map.json`) for diagnostics, trap locations in results and `explain`, and is never
/// part of `canonical_bytes` or the `ir_hash`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteTable {
    sites: Vec<Site>,
}

impl SiteTable {
    pub fn new(sites: Vec<Site>) -> SiteTable {
        SiteTable { sites }
    }

    /// Add the next site; returns its id.
    pub fn push(&mut self, site: Site) -> SiteId {
        self.sites.push(site);
        (self.sites.len() - 1) as SiteId
    }

    pub fn get(&self, id: SiteId) -> Option<&Site> {
        self.sites.get(id as usize)
    }

    pub fn len(&self) -> usize {
        self.sites.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Site> {
        self.sites.iter()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputDecl {
    pub name: String,
    pub ty: Type,
    pub default: Option<Expr>,
    /// `from "FIELD"`: the row field the input reads (its name when unset). Absent from the
    /// serialised IR when unset, so IR hashes of rubrics without it are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl InputDecl {
    /// The row field this input reads.
    pub fn field(&self) -> &str {
        self.field.as_deref().unwrap_or(&self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vote {
    Majority,
    Mean,
    Unanimous,
    /// A jury's weighted mean: each member's value times its weight (`weights`), over the
    /// weights of the members that voted; met from 0.5 up.
    Weighted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scoring {
    /// The verdict is read from the reply's label.
    Label,
    /// P(yes) from token log-probabilities gives a continuous value.
    Logprob,
}

/// The order in which a judge is shown an ordinal or nominal criterion's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// As declared.
    #[default]
    Fixed,
    /// Permuted per request, by a seed drawn from what the request asks (so the same request
    /// is the same request again, for the cache and replays); the position of the answer as
    /// shown is recorded.
    Shuffled,
    /// A comparing judge (`compares A, B`) is asked in both positions: each sample once with
    /// `A` shown first and once with `B` shown first.
    Both,
}

impl Order {
    pub fn is_fixed(&self) -> bool {
        *self == Order::Fixed
    }
}

/// A generator (`generator NAME { ... }`): an LLM that writes the list input `fills` of each row
/// from the inputs it `sees`, before scoring (`rubric generate`), through the judges' dispatch.
/// Its items must have the element type of that input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorDecl {
    pub name: String,
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub seed: Option<u64>,
    /// Inputs rendered into the template, fenced (indices into `Program::inputs`).
    pub sees: Vec<u32>,
    /// The input it writes (a list input; index into `Program::inputs`).
    pub fills: u32,
    pub template: String,
    pub system: Option<String>,
}

impl GeneratorDecl {
    /// The judge that asks this generator's requests through the judges' dispatch (endpoint
    /// routing by name, cache, transcripts): its model, sampling, inputs and prompt, one sample,
    /// one item list per call.
    pub fn as_judge(&self) -> JudgeDecl {
        JudgeDecl {
            name: self.name.clone(),
            model: self.model.clone(),
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self.max_tokens,
            seed: self.seed,
            samples: 1,
            min_samples: None,
            vote: Vote::Majority,
            sees: self.sees.clone(),
            returns: "extract".into(),
            reply_fields: vec![],
            evidence_from: None,
            template: Some(self.template.clone()),
            system: self.system.clone(),
            scoring: Scoring::Label,
            per_call: 1,
            local: None,
            calibration: None,
            order: Order::Fixed,
            jury: None,
            reasoning_effort: None,
            cascade: None,
            compares: None,
            rollouts: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeDecl {
    pub name: String,
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub seed: Option<u64>,
    pub samples: u32,
    /// `min_samples N`: fewer voting samples leave the criterion `too_few_samples`. Absent
    /// from the serialised IR when unset, so IR hashes of rubrics without it are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_samples: Option<u32>,
    pub vote: Vote,
    /// Inputs rendered into the judge's prompt (indices into `Program::inputs`).
    pub sees: Vec<u32>,
    /// `verdict`, `level`, `label`, `value` or `extract`.
    pub returns: String,
    pub reply_fields: Vec<(String, Type)>,
    /// The input a quoted evidence must occur in.
    pub evidence_from: Option<u32>,
    pub template: Option<String>,
    pub system: Option<String>,
    pub scoring: Scoring,
    /// Criteria per call (1 = one call per criterion).
    pub per_call: u32,
    /// `local "DIR"`: the model directory of a local logprob judge (as written; resolved at run
    /// time). Absent from the serialised IR when unset, so IR hashes of rubrics without local
    /// judges are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// `calibration "FILE"`: the maps read from the file when the rubric was compiled (so the
    /// calibration is part of the IR hash). Absent when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<calibration::Calibration>,
    /// `order shuffled`: ordinal and nominal options in a per-request order. Absent when fixed.
    #[serde(default, skip_serializing_if = "Order::is_fixed")]
    pub order: Order,
    /// `jury A, B, C`: the judge is a panel; its members (other judges, by index) are each asked
    /// and their verdicts are its samples, combined by its `vote`. Absent for other judges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jury: Option<Jury>,
    /// `reasoning_effort E`: sent as the request's `reasoning_effort`. Absent when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// `cascade A, B` with its `escalate` conditions: the judge asks its first member, and the
    /// next one where an answer meets a condition. Absent for other judges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cascade: Option<Cascade>,
    /// `compares A, B`: the judge compares two candidates (inputs, by index), shown to it as
    /// the first and the second answer, and returns a preference per criterion. Absent for
    /// other judges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compares: Option<Compare>,
    /// `rollouts X`: a group judge. One request shows input `X` (by index) of every member of
    /// the row's group (`--groups`), each in its own fence, and the reply scores or ranks them
    /// all; each member's criterion gets its own value. Absent for other judges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollouts: Option<u32>,
}

impl JudgeDecl {
    /// Requests per sample of a criterion: 2 for a comparing judge asked in both orders (`order
    /// both`), 1 otherwise.
    pub fn orders(&self) -> u32 {
        if self.compares.is_some() && self.order == Order::Both {
            2
        } else {
            1
        }
    }

    /// Answers recorded per criterion: every sample in every order.
    pub fn asks(&self) -> u32 {
        self.samples.max(1) * self.orders()
    }
}

/// A comparing judge's candidates and what an answer that changes with the order becomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    /// The input shown first in the first order (a preference for it is the value 1).
    pub first: u32,
    /// The other candidate (a preference for it is the value 0; a tie is 0.5).
    pub second: u32,
    /// `inconsistent tie|unscored`, for `order both`: a pair of answers that disagree.
    #[serde(default, skip_serializing_if = "Inconsistent::is_tie")]
    pub inconsistent: Inconsistent,
}

/// What a sample whose two orders disagree becomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Inconsistent {
    /// A tie (a win only counts when both orders agree).
    #[default]
    Tie,
    /// `unscored(position_inconsistent)`: the sample leaves the vote.
    Unscored,
}

impl Inconsistent {
    pub fn is_tie(&self) -> bool {
        *self == Inconsistent::Tie
    }

    pub fn name(self) -> &'static str {
        match self {
            Inconsistent::Tie => "tie",
            Inconsistent::Unscored => "unscored",
        }
    }
}

/// A cascade's members, cheapest first, and when a member's answer goes to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cascade {
    pub members: Vec<u32>,
    pub escalate: Vec<Escalate>,
}

/// A cascade as written: `A, B (escalate between 0.2 and 0.8, unscored)`, its members named by
/// `name`.
pub fn cascade_text(c: &Cascade, name: &dyn Fn(u32) -> String) -> String {
    let members: Vec<String> = c.members.iter().map(|m| name(*m)).collect();
    let whens: Vec<String> = c
        .escalate
        .iter()
        .map(|e| match e {
            Escalate::Between { lo, hi } => format!("between {lo} and {hi}"),
            Escalate::Split => "split".into(),
            Escalate::Unscored => "unscored".into(),
        })
        .collect();
    format!("{} (escalate {})", members.join(", "), whens.join(", "))
}

/// When a cascade asks its next member.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Escalate {
    /// The answer's P(yes), value, or met share of its samples lies in `[lo, hi]`.
    Between { lo: f64, hi: f64 },
    /// The answer's samples do not all agree.
    Split,
    /// The answer is unscored (failed, unparsable, its evidence not found...).
    Unscored,
}

/// A jury's members and, for `vote weighted`, their weights (in member order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jury {
    pub members: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<f64>>,
}

/// The `{{name}}` slots of a judge template, each once, in order of appearance (what the checker
/// checks against `sees` and the validator checks again).
pub fn template_slots(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find("{{") {
        rest = &rest[i + 2..];
        if let Some(j) = rest.find("}}") {
            let slot = rest[..j].trim();
            if !slot.is_empty() && !out.iter().any(|s: &String| s == slot) {
                out.push(slot.to_string());
            }
            rest = &rest[j + 2..];
        } else {
            break;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Function {
    pub name: String,
    pub params: Vec<(String, Type)>,
    pub ret: Type,
    /// Number of locals used by the body; parameters are locals `0..params.len()`.
    pub locals: u32,
    pub body: Expr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LetDecl {
    pub name: String,
    pub ty: Type,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    Gate(Box<GateDecl>),
    /// Evaluate static criterion `criteria[i]`.
    Criterion(u32),
    /// Expand a per-instance template over a list: one criterion per element.
    Each(Box<EachDecl>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateAction {
    Score,
    Cap,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateDecl {
    pub name: String,
    pub cond: Expr,
    pub action: GateAction,
    pub value: Expr,
    pub reason: Option<String>,
    pub site: SiteId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EachDecl {
    /// The set that collects the generated criteria.
    pub set: u32,
    pub list: Expr,
    /// The local the element is bound to while the template's expressions are evaluated.
    pub local: u32,
    /// Total locals the template needs.
    pub locals: u32,
    /// The template; its `id` is the block name and generated ids read `name[i]`.
    pub template: CriterionDecl,
    /// What the template's judge is shown of each instance (`shows step, task = run.task`),
    /// each evaluated with the element bound and fenced under its name in the instance's
    /// request. Not serialised when empty, so blocks without keep their bytes and hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shows: Vec<ShownDecl>,
}

/// One item of an `each` block's `shows`: a fence name and the expression shown in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShownDecl {
    pub name: String,
    pub expr: Expr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CriterionKind {
    Binary,
    Ordinal {
        levels: Vec<(f64, String)>,
    },
    Nominal {
        labels: Vec<(String, f64)>,
    },
    Continuous,
    /// Decided by a comparing judge: the value is the share of the preference that goes to
    /// the judge's first candidate (1 it, 0 the other, 0.5 a tie).
    Preference,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Verifier {
    Judge { judge: u32 },
    Check { expr: Expr },
    Value { expr: Expr },
    Extract { judge: u32, from: u32, ty: Type, local: u32, check: Expr },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriterionDecl {
    pub id: String,
    pub text: Expr,
    pub kind: CriterionKind,
    pub points: Option<Expr>,
    pub weight: Option<Expr>,
    pub axis: Option<String>,
    pub tags: Option<Expr>,
    /// Threshold on the value (or the level, for ordinal criteria) at or above which the
    /// criterion counts as met. Binary criteria ignore it.
    pub pass: Option<Expr>,
    pub verifier: Verifier,
    /// Sets the criterion belongs to directly (tier, block, group), innermost first.
    pub sets: Vec<u32>,
    pub site: SiteId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetKind {
    /// Every criterion of the rubric.
    All,
    Tier,
    Block,
    Each,
    Group,
    /// The sub-checks of one criterion (`PARENT.*`): not members of `all`.
    Checks,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Member {
    Criterion(u32),
    /// All criteria generated by `steps[i]` (an `Each` step).
    Each(u32),
    Set(u32),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetDecl {
    pub name: String,
    pub kind: SetKind,
    /// Group weight (constant), for trees.
    pub weight: Option<f64>,
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub name: String,
    pub bindings: Vec<(u32, Expr)>,
    pub verdicts: Vec<(String, serde_json::Value)>,
    pub expects: Vec<Expect>,
    pub site: SiteId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Expect {
    Score { value: Option<f64>, within: f64, site: SiteId },
    Failure { class: Option<String>, site: SiteId },
    Group { name: String, value: f64, within: f64, site: SiteId },
    Criterion { id: String, verdict: serde_json::Value, site: SiteId },
}

/// Static types. `Conversation` is `List[{content: Text, role: Text}]`, `Image` the record
/// [`Type::image`]; record fields are kept sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Type {
    Null,
    Bool,
    Number,
    Text,
    Json,
    List(Box<Type>),
    Record(Vec<(String, Type)>),
    Optional(Box<Type>),
    /// A criterion's result: `met`, `value`, `points`, `weight`, `unscored`.
    Verdict,
    /// A set of criteria (aggregation argument).
    Set,
    /// What an aggregation does with `unscored` criteria.
    Policy,
    /// A type variable in intrinsic signatures.
    Var(String),
    /// The type of an expression that already failed to check (suppresses cascades), and of
    /// the elements of an empty list literal.
    Any,
}

impl Type {
    pub fn conversation() -> Type {
        Type::List(Box::new(Type::message()))
    }

    pub fn message() -> Type {
        Type::Record(vec![("content".into(), Type::Text), ("role".into(), Type::Text)])
    }

    /// An agent's run (`Trajectory`), bound from chat messages in the OpenAI format
    /// (`runtime::bind`): the task (the first user message), every message as a turn, the
    /// assistant's steps, its last answer, and the messages as given (`json`, what the
    /// trajectory intrinsics read).
    pub fn trajectory() -> Type {
        Type::Record(vec![
            ("answer".into(), Type::Text),
            ("json".into(), Type::Json),
            ("messages".into(), Type::conversation()),
            ("steps".into(), Type::List(Box::new(Type::step()))),
            ("task".into(), Type::Text),
        ])
    }

    /// One step of a trajectory (`Step`): an assistant message, numbered from 0, with the tool
    /// calls it made, each with the result a tool message gave it.
    pub fn step() -> Type {
        Type::Record(vec![
            ("calls".into(), Type::List(Box::new(Type::tool_call()))),
            ("content".into(), Type::Text),
            ("index".into(), Type::Number),
        ])
    }

    /// One tool call of a step (`ToolCall`): its arguments parsed, and the content of the tool
    /// message that answered it (`null` when none did).
    pub fn tool_call() -> Type {
        Type::Record(vec![
            ("arguments".into(), Type::Json),
            ("id".into(), Type::Text),
            ("name".into(), Type::Text),
            ("result".into(), Type::optional(Type::Text)),
        ])
    }

    /// `Image`: what a row's image reference is read into (`runtime::bind`, `crate::image`).
    /// `url` is the canonical data URI of the bytes, or the URL of an image passed by URL, whose
    /// other fields are `null` (it is not read). `sha256` is `sha256:` and hex; `phash` the
    /// 64-bit perceptual hash in 16 hex digits.
    pub fn image() -> Type {
        let opt = |t: Type| Type::Optional(Box::new(t));
        Type::Record(vec![
            ("format".into(), opt(Type::Text)),
            ("height".into(), opt(Type::Number)),
            ("phash".into(), opt(Type::Text)),
            ("sha256".into(), opt(Type::Text)),
            ("url".into(), Type::Text),
            ("width".into(), opt(Type::Number)),
        ])
    }

    /// Whether values of this type hold an `Image` anywhere (an image, a list of them, a record
    /// with one...).
    pub fn holds_image(&self) -> bool {
        match self {
            t if *t == Type::image() => true,
            Type::List(t) | Type::Optional(t) => t.holds_image(),
            Type::Record(fields) => fields.iter().any(|(_, t)| t.holds_image()),
            _ => false,
        }
    }

    pub fn optional(t: Type) -> Type {
        match t {
            Type::Optional(_) | Type::Null | Type::Any => t,
            t => Type::Optional(Box::new(t)),
        }
    }

    /// The type without its optional wrapper.
    pub fn strip_optional(&self) -> &Type {
        match self {
            Type::Optional(t) => t,
            t => t,
        }
    }

    pub fn is_optional(&self) -> bool {
        matches!(self, Type::Optional(_) | Type::Null)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Null => write!(f, "Null"),
            Type::Bool => write!(f, "Bool"),
            Type::Number => write!(f, "Number"),
            Type::Text => write!(f, "Text"),
            Type::Json => write!(f, "Json"),
            t if *t == Type::conversation() => write!(f, "Conversation"),
            t if *t == Type::message() => write!(f, "Message"),
            t if *t == Type::trajectory() => write!(f, "Trajectory"),
            t if *t == Type::step() => write!(f, "Step"),
            t if *t == Type::tool_call() => write!(f, "ToolCall"),
            t if *t == Type::image() => write!(f, "Image"),
            Type::List(t) => write!(f, "List[{t}]"),
            Type::Record(fields) => {
                write!(f, "{{")?;
                for (i, (n, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{n}: {t}")?;
                }
                write!(f, "}}")
            }
            Type::Optional(t) => write!(f, "{t}?"),
            Type::Verdict => write!(f, "Verdict"),
            Type::Set => write!(f, "Set"),
            Type::Policy => write!(f, "Policy"),
            Type::Var(v) => write!(f, "{v}"),
            Type::Any => write!(f, "_"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Leave unscored criteria out, as if they were not in the set.
    Skip,
    /// Count an unscored criterion as unmet (value 0).
    Unmet,
    /// Any unscored criterion makes the aggregate unscored.
    Propagate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggOp {
    /// Σ weight·value / Σ weight
    WeightedMean,
    /// Σ value / n
    Mean,
    /// met / n
    Fraction,
    /// Σ points·value over met / Σ positive points (HealthBench)
    PointsRatio,
    /// Σ points·value over met criteria
    SumPoints,
    /// Σ positive points
    MaxPoints,
    /// Weighted tree over a group: a node is the weighted mean of its children.
    Tree,
    All,
    Any,
    /// At least k met (k is the first extra argument).
    AtLeast,
    CountMet,
    Count,
    MinValue,
    MaxValue,
}

impl AggOp {
    pub fn name(self) -> &'static str {
        match self {
            AggOp::WeightedMean => "weighted_mean",
            AggOp::Mean => "mean",
            AggOp::Fraction => "fraction",
            AggOp::PointsRatio => "points_ratio",
            AggOp::SumPoints => "sum_points",
            AggOp::MaxPoints => "max_points",
            AggOp::Tree => "tree",
            AggOp::All => "all",
            AggOp::Any => "any",
            AggOp::AtLeast => "at_least",
            AggOp::CountMet => "count_met",
            AggOp::Count => "count",
            AggOp::MinValue => "min_value",
            AggOp::MaxValue => "max_value",
        }
    }

    pub const ALL: &'static [AggOp] = &[
        AggOp::WeightedMean,
        AggOp::Mean,
        AggOp::Fraction,
        AggOp::PointsRatio,
        AggOp::SumPoints,
        AggOp::MaxPoints,
        AggOp::Tree,
        AggOp::All,
        AggOp::Any,
        AggOp::AtLeast,
        AggOp::CountMet,
        AggOp::Count,
        AggOp::MinValue,
        AggOp::MaxValue,
    ];

    pub fn from_name(name: &str) -> Option<AggOp> {
        AggOp::ALL.iter().copied().find(|a| a.name() == name)
    }

    /// The result type of the aggregate.
    pub fn result_type(self) -> Type {
        match self {
            AggOp::All | AggOp::Any | AggOp::AtLeast => Type::Bool,
            _ => Type::Number,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HigherOrder {
    Map,
    Filter,
    All,
    Any,
    Count,
}

impl HigherOrder {
    pub const ALL: &'static [HigherOrder] =
        &[HigherOrder::Map, HigherOrder::Filter, HigherOrder::All, HigherOrder::Any, HigherOrder::Count];

    /// The list function's name, as written in rubrics (`map(xs, x => ...)`).
    pub fn name(self) -> &'static str {
        match self {
            HigherOrder::Map => "map",
            HigherOrder::Filter => "filter",
            HigherOrder::All => "all",
            HigherOrder::Any => "any",
            HigherOrder::Count => "count",
        }
    }

    pub fn from_name(name: &str) -> Option<HigherOrder> {
        HigherOrder::ALL.iter().copied().find(|h| h.name() == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    /// Text concatenation.
    Concat,
    And,
    Or,
    Coalesce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// The comparison on two numbers (a statistic's test).
    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Const {
    Null,
    Bool(bool),
    Number(f64),
    Text(std::sync::Arc<str>),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
}

// Cloning and comparing recurse once per level of nesting, several frames a level: each level
// grows the stack when it runs low, so that a program as deep as `validate::MAX_EXPR_DEPTH`
// can be cloned and compared on a 2 MiB thread (a rayon worker's, where an engine caches it).
impl Clone for Expr {
    fn clone(&self) -> Expr {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || Expr { kind: self.kind.clone(), ty: self.ty.clone() })
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Expr) -> bool {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.kind == other.kind && self.ty == other.ty)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExprKind {
    Const(Const),
    Input(u32),
    Local(u32),
    Let(u32),
    /// A static criterion's verdict.
    Criterion(u32),
    List(Vec<Expr>),
    /// Fields sorted by name.
    Record(Vec<(String, Expr)>),
    Field {
        base: Box<Expr>,
        name: String,
        site: SiteId,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
        site: SiteId,
    },
    Unary {
        op: UnOp,
        arg: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        site: SiteId,
    },
    /// A chain `a < b <= c`: every operand evaluated once, left to right.
    Compare {
        first: Box<Expr>,
        rest: Vec<(CmpOp, Expr)>,
    },
    If {
        cond: Box<Expr>,
        then: Box<Expr>,
        els: Box<Expr>,
    },
    Intrinsic {
        name: String,
        overload: u32,
        args: Vec<Expr>,
        site: SiteId,
    },
    Call {
        func: u32,
        args: Vec<Expr>,
        site: SiteId,
    },
    Aggregate {
        op: AggOp,
        set: u32,
        policy: Policy,
        args: Vec<Expr>,
        site: SiteId,
    },
    HigherOrder {
        op: HigherOrder,
        list: Box<Expr>,
        local: u32,
        body: Box<Expr>,
    },
    /// The value of an optional expression (`arg`, of type `T?`) where the checker proved it
    /// is not null (after `x != null` in a score gate, an `and`, an `or` or an `if`): the same
    /// value, typed `T`. Engines that hold `T` and `T?` alike pass it through; the compiled
    /// engines convert the handle to `T`'s representation (`backend::lower::Repr`).
    Narrowed(Box<Expr>),
}

impl Expr {
    pub fn constant(c: Const) -> Expr {
        let ty = match &c {
            Const::Null => Type::Null,
            Const::Bool(_) => Type::Bool,
            Const::Number(_) => Type::Number,
            Const::Text(_) => Type::Text,
        };
        Expr { kind: ExprKind::Const(c), ty }
    }

    pub fn as_number(&self) -> Option<f64> {
        match &self.kind {
            ExprKind::Const(Const::Number(n)) => Some(*n),
            ExprKind::Unary { op: UnOp::Neg, arg } => arg.as_number().map(|n| -n),
            _ => None,
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::Const(Const::Text(t)) => Some(t),
            _ => None,
        }
    }
}

/// A slot for what the engines derive from a program at run time, once (`interp::prepared`
/// fills it): it is not part of the program, so it is equal to every other slot, empty in a
/// clone and never serialised.
#[derive(Default)]
pub struct PreparedCell(std::sync::OnceLock<std::sync::Arc<dyn std::any::Any + Send + Sync>>);

impl PreparedCell {
    /// The value in the slot, made by `make` on first use.
    pub fn get_or_init(
        &self,
        make: impl FnOnce() -> std::sync::Arc<dyn std::any::Any + Send + Sync>,
    ) -> &std::sync::Arc<dyn std::any::Any + Send + Sync> {
        self.0.get_or_init(make)
    }
}

impl Clone for PreparedCell {
    fn clone(&self) -> PreparedCell {
        PreparedCell::default()
    }
}

impl PartialEq for PreparedCell {
    fn eq(&self, _: &PreparedCell) -> bool {
        true
    }
}

impl std::fmt::Debug for PreparedCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreparedCell")
    }
}

impl Program {
    /// The canonical serialisation: compact JSON of the program with fields in declaration
    /// order. Deterministic because the IR holds only vectors and sorted records.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // Serialising recurses several frames per level of expression nesting (up to
        // `validate::MAX_EXPR_DEPTH`), more than a 2 MiB thread has: it runs on a segment of
        // its own.
        #[expect(clippy::expect_used, reason = "the IR has string keys and plain fields: serde_json cannot fail on it")]
        stacker::grow(64 << 20, || serde_json::to_vec(self).expect("IR serialises"))
    }

    /// `sha256:<hex>` of the canonical bytes.
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.canonical_bytes());
        let mut s = String::from("sha256:");
        for b in digest {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }

    /// `site` when the program has such a site (nodes the checker did not place, such as a
    /// default reward, carry `u32::MAX`).
    pub fn known_site(&self, site: SiteId) -> Option<SiteId> {
        (site < self.site_count).then_some(site)
    }

    /// Whether the program runs programs (calls the `exec` intrinsic anywhere): read off its
    /// canonical form, so that no place an expression can sit is missed.
    pub fn executes(&self) -> bool {
        let bytes = self.canonical_bytes();
        let needle = br#""intrinsic":{"name":"exec","#;
        bytes.windows(needle.len()).any(|w| w == needle)
    }

    /// Whether `e` reads only the row's inputs, constants and `let`s: no criterion or
    /// aggregation in it or in the `let`s and functions it reaches, and no local it does not
    /// bind itself (an `each` element, an extracted value). Such an expression needs neither
    /// the decided criteria nor the driver's locals: the engines evaluate it in any order
    /// among the criteria around it.
    pub fn reads_only_inputs(&self, e: &Expr) -> bool {
        let mut reads = std::collections::BTreeSet::new();
        let mut bound = std::collections::BTreeSet::new();
        walk(e, &mut |x| match &x.kind {
            ExprKind::Local(i) => {
                reads.insert(*i);
            }
            ExprKind::HigherOrder { local, .. } => {
                bound.insert(*local);
            }
            _ => {}
        });
        if !reads.is_subset(&bound) {
            return false;
        }
        // `let`s and functions reached, each looked at once (their locals are their own).
        let mut seen_lets = std::collections::BTreeSet::new();
        let mut seen_fns = std::collections::BTreeSet::new();
        let mut todo = vec![e];
        let mut ok = true;
        while let Some(e) = todo.pop() {
            walk(e, &mut |x| match &x.kind {
                ExprKind::Criterion(_) | ExprKind::Aggregate { .. } => ok = false,
                ExprKind::Let(i) if seen_lets.insert(*i) => match self.lets.get(*i as usize) {
                    Some(l) => todo.push(&l.value),
                    None => ok = false,
                },
                ExprKind::Call { func, .. } if seen_fns.insert(*func) => match self.functions.get(*func as usize) {
                    Some(f) => todo.push(&f.body),
                    None => ok = false,
                },
                _ => {}
            });
            if !ok {
                return false;
            }
        }
        ok
    }

    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.inputs.iter().position(|i| i.name == name)
    }

    pub fn set_index(&self, name: &str) -> Option<usize> {
        self.sets.iter().position(|s| s.name == name)
    }
}

/// Visit every sub-expression.
pub fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || walk_inner(e, f))
}

fn walk_inner(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::List(xs) => xs.iter().for_each(|x| walk(x, f)),
        ExprKind::Record(fs) => fs.iter().for_each(|(_, x)| walk(x, f)),
        ExprKind::Field { base, .. } => walk(base, f),
        ExprKind::Index { base, index, .. } => {
            walk(base, f);
            walk(index, f)
        }
        ExprKind::Unary { arg, .. } => walk(arg, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            walk(lhs, f);
            walk(rhs, f)
        }
        ExprKind::Compare { first, rest } => {
            walk(first, f);
            rest.iter().for_each(|(_, x)| walk(x, f))
        }
        ExprKind::If { cond, then, els } => {
            walk(cond, f);
            walk(then, f);
            walk(els, f)
        }
        ExprKind::Intrinsic { args, .. } | ExprKind::Call { args, .. } | ExprKind::Aggregate { args, .. } => {
            args.iter().for_each(|x| walk(x, f))
        }
        ExprKind::HigherOrder { list, body, .. } => {
            walk(list, f);
            walk(body, f)
        }
        ExprKind::Narrowed(arg) => walk(arg, f),
        _ => {}
    }
}
