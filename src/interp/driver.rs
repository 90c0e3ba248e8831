//! The step driver shared by every engine: runs a row's gates, criteria and `each` blocks in
//! declaration order (gates stop or cap, gated criteria, recorded verdicts through `verdict`),
//! then the score, the caps, the criteria list and the group trees, and assembles the
//! `RowResult`. It never evaluates an IR expression itself: every expression it needs (a gate's
//! condition or value, an `each` list, a criterion's text, points, weight, tags, pass, check,
//! value or extract check, the score) is a [`Root`] handed to an [`Evaluator`] — the tree walk
//! of the interpreter, or a compiled function of the Wasm engine. Aggregations and criterion
//! values (`er.met`) read the decided criteria through [`aggregate`] and [`verdict_value`],
//! also shared. So the engines share every rule but expression evaluation.

use super::ops::{trap_reason, unscored};
use super::verdict;
use super::TraceEvent;
use crate::engine::{CriterionResult, GateResult, Name, NamedScoreResult, RowResult, Status, TrapInfo, VerdictSource};
use crate::ir::validate::{MAX_GROUP_DEPTH, MAX_LOCALS};
use crate::ir::{
    self, AggOp, CriterionDecl, Expr, ExprKind, GateAction, Member, Policy, Program, SetKind, Step, Verifier,
};
use crate::stdlib::{Trap, TrapKind};
use crate::value::Value;
use std::sync::Arc;

/// Which part of a gate a root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GatePart {
    Cond,
    Value,
}

/// Whose attribute a criterion root is: a static criterion (`criteria[i]`) or the template of
/// the `each` step `steps[i]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Criterion(u32),
    Each(u32),
}

/// An expression-valued part of a criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attr {
    Text,
    Points,
    Weight,
    Tags,
    Pass,
    /// The expression of a `check` or `value` verifier, or the check of an `extract`.
    Verifier,
    /// Item `k` of an `each` block's `shows`: what its judge is shown of the instance.
    Shown(u32),
}

/// A top-level expression the driver evaluates: the unit an engine compiles and runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Root {
    Gate {
        step: u32,
        part: GatePart,
    },
    EachList {
        step: u32,
    },
    Criterion {
        owner: Owner,
        attr: Attr,
    },
    Score,
    /// The `penalty` of the `reward` declaration.
    Penalty,
    /// A report-only score (`score NAME = ...`), by index.
    NamedScore(u32),
}

impl Root {
    /// A stable name (the Wasm engine exports each root under it): `gate3.cond`,
    /// `each2.list`, `c5.text`, `each2.points`, `score`.
    pub fn name(self) -> String {
        let attr = |a: Attr| -> String {
            match a {
                Attr::Text => "text".into(),
                Attr::Points => "points".into(),
                Attr::Weight => "weight".into(),
                Attr::Tags => "tags".into(),
                Attr::Pass => "pass".into(),
                Attr::Verifier => "verifier".into(),
                Attr::Shown(k) => format!("shown{k}"),
            }
        };
        match self {
            Root::Gate { step, part: GatePart::Cond } => format!("gate{step}.cond"),
            Root::Gate { step, part: GatePart::Value } => format!("gate{step}.value"),
            Root::EachList { step } => format!("each{step}.list"),
            Root::Criterion { owner: Owner::Criterion(c), attr: a } => format!("c{c}.{}", attr(a)),
            Root::Criterion { owner: Owner::Each(s), attr: a } => format!("each{s}.{}", attr(a)),
            Root::Score => "score".into(),
            Root::Penalty => "penalty".into(),
            Root::NamedScore(i) => format!("scores{i}"),
        }
    }

    /// The site a trap in this root is reported at when it ends the row (a resource limit).
    pub fn site(self, p: &Program) -> u32 {
        let step = |s: u32| p.steps.get(s as usize);
        match self {
            Root::Gate { step: s, .. } => match step(s) {
                Some(Step::Gate(g)) => g.site,
                _ => u32::MAX,
            },
            Root::EachList { step: s } | Root::Criterion { owner: Owner::Each(s), .. } => match step(s) {
                Some(Step::Each(e)) => e.template.site,
                _ => u32::MAX,
            },
            Root::Criterion { owner: Owner::Criterion(c), .. } => {
                p.criteria.get(c as usize).map_or(u32::MAX, |d| d.site)
            }
            Root::Score => score_site(&p.score).unwrap_or(u32::MAX),
            Root::Penalty => p.reward.as_ref().map_or(u32::MAX, |r| r.site),
            Root::NamedScore(i) => p.scores.get(i as usize).map_or(u32::MAX, |s| s.site),
        }
    }
}

fn criterion_roots<'p>(owner: Owner, d: &'p CriterionDecl, out: &mut Vec<(Root, &'p Expr)>) {
    let mut push = |attr: Attr, e: &'p Expr| out.push((Root::Criterion { owner, attr }, e));
    push(Attr::Text, &d.text);
    if let Some(e) = &d.points {
        push(Attr::Points, e);
    }
    if let Some(e) = &d.weight {
        push(Attr::Weight, e);
    }
    if let Some(e) = &d.tags {
        push(Attr::Tags, e);
    }
    if let Some(e) = &d.pass {
        push(Attr::Pass, e);
    }
    match &d.verifier {
        Verifier::Check { expr } | Verifier::Value { expr } => push(Attr::Verifier, expr),
        Verifier::Extract { check, .. } => push(Attr::Verifier, check),
        Verifier::Judge { .. } => {}
    }
}

/// Every root of a program with its expression, in a canonical order (steps in order, then
/// the score). An engine that compiles ahead of time compiles exactly these.
pub fn roots(p: &Program) -> Vec<(Root, &Expr)> {
    let mut out = Vec::new();
    for (si, step) in p.steps.iter().enumerate() {
        let si = si as u32;
        match step {
            Step::Gate(g) => {
                out.push((Root::Gate { step: si, part: GatePart::Cond }, &g.cond));
                out.push((Root::Gate { step: si, part: GatePart::Value }, &g.value));
            }
            Step::Criterion(ci) => {
                if let Some(d) = p.criteria.get(*ci as usize) {
                    criterion_roots(Owner::Criterion(*ci), d, &mut out);
                }
            }
            Step::Each(e) => {
                out.push((Root::EachList { step: si }, &e.list));
                criterion_roots(Owner::Each(si), &e.template, &mut out);
                for (k, shown) in e.shows.iter().enumerate() {
                    out.push((Root::Criterion { owner: Owner::Each(si), attr: Attr::Shown(k as u32) }, &shown.expr));
                }
            }
        }
    }
    out.push((Root::Score, &p.score));
    if let Some(e) = p.reward.as_ref().and_then(|r| r.penalty.as_ref()) {
        out.push((Root::Penalty, e));
    }
    for (i, s) in p.scores.iter().enumerate() {
        out.push((Root::NamedScore(i as u32), &s.expr));
    }
    out
}

/// The criteria decided so far in a row: what criterion values and aggregations read.
#[derive(Debug, Clone, Default)]
pub struct Decided {
    /// Every result in the order it was decided (step order: the order of the row's record),
    /// so that the row takes them as they are.
    results: Vec<CriterionResult>,
    /// By static criterion index: its place in `results`.
    criteria: Vec<Option<u32>>,
    /// By step index: the places of an `each` step's results.
    each: Vec<std::ops::Range<u32>>,
    /// `skipped` criteria that an expression needed (read, or aggregated by something a
    /// skipped member could still change): while planning, these are the verdicts to ask for.
    pub demand: std::cell::RefCell<Vec<String>>,
}

impl Decided {
    pub fn new(p: &Program) -> Decided {
        Decided {
            results: Vec::with_capacity(p.criteria.len()),
            criteria: vec![None; p.criteria.len()],
            each: vec![0..0; p.steps.len()],
            demand: Default::default(),
        }
    }

    /// The result of static criterion `c`, once decided.
    pub fn criterion(&self, c: u32) -> Option<&CriterionResult> {
        let at = (*self.criteria.get(c as usize)?)?;
        self.results.get(at as usize)
    }

    /// The results of the `each` step `step` (none before it ran).
    pub fn each(&self, step: u32) -> &[CriterionResult] {
        let r = self.each.get(step as usize).cloned().unwrap_or(0..0);
        self.results.get(r.start as usize..r.end as usize).unwrap_or(&[])
    }

    /// Decide static criterion `c` (a criterion is decided once).
    pub fn set_criterion(&mut self, c: u32, r: CriterionResult) {
        if let Some(slot) = self.criteria.get_mut(c as usize) {
            *slot = Some(self.results.len() as u32);
            self.results.push(r);
        }
    }

    /// Decide static criterion `c` as the result `make` makes, made in place (not built
    /// elsewhere and copied in): that result, where it now is.
    #[inline]
    pub fn set_criterion_with(
        &mut self,
        c: u32,
        make: impl FnOnce() -> CriterionResult,
    ) -> Option<&mut CriterionResult> {
        let slot = self.criteria.get_mut(c as usize)?;
        *slot = Some(self.results.len() as u32);
        self.results.push(make());
        self.results.last_mut()
    }

    /// Decide the first criteria of plain run `run` as their checks' booleans `met` decide
    /// them, as `apply_check` does: each result made from its template straight into its place.
    pub fn set_run(&mut self, run: &super::prepared::PlainRun, met: &[bool]) {
        let start = self.results.len();
        self.results.extend(run.templates.iter().zip(met).map(|(t, &met)| t.decided(met)));
        for (i, &c) in run.criteria.iter().take(self.results.len() - start).enumerate() {
            if let Some(slot) = self.criteria.get_mut(c as usize) {
                *slot = Some((start + i) as u32);
            }
        }
    }

    /// Decide the instances of the `each` step `step`, in order.
    pub fn set_each(&mut self, step: u32, rs: Vec<CriterionResult>) {
        if let Some(slot) = self.each.get_mut(step as usize) {
            let start = self.results.len() as u32;
            self.results.extend(rs);
            *slot = start..self.results.len() as u32;
        }
    }

    /// Every result, in the order decided.
    pub fn into_results(self) -> Vec<CriterionResult> {
        self.results
    }

    fn demand(&self, id: &str) {
        self.demand.borrow_mut().push(id.to_string());
    }
}

/// The `explain` trace of a row and the step being evaluated.
#[derive(Default)]
pub struct Trace<'t> {
    events: Option<&'t mut Vec<TraceEvent>>,
    step: String,
}

impl<'t> Trace<'t> {
    pub fn new(events: Option<&'t mut Vec<TraceEvent>>) -> Trace<'t> {
        Trace { events, step: String::new() }
    }

    pub fn is_on(&self) -> bool {
        self.events.is_some()
    }

    /// Record a value computed at `site` (nothing when tracing is off).
    pub fn note(&mut self, p: &Program, site: Option<u32>, value: impl FnOnce() -> String) {
        if let Some(tr) = self.events.as_deref_mut() {
            tr.push(TraceEvent { step: self.step.clone(), site: site.and_then(|s| p.known_site(s)), value: value() });
        }
    }
}

/// Evaluates the IR expressions of one row. `root` names the expression `e` (an engine that
/// compiled the roots runs the compiled one; the interpreter walks `e`). `locals` holds the
/// values bound by the driver (the element of an `each` block, an extracted value).
pub trait Evaluator {
    fn eval(
        &mut self,
        root: Root,
        e: &Expr,
        locals: &mut Vec<Value>,
        decided: &mut Decided,
        trace: &mut Trace<'_>,
    ) -> Result<Value, Trap>;

    /// The checks of the plain run `run` of `p` (`prepared::PlainRun`: criteria whose checks
    /// read only the inputs), in order, into `out` ([`CheckOutcomes`]): plain booleans for as
    /// long as they are, then the first answer that is anything else (a value of another type,
    /// `unscored`, a trap), after which the criteria are the driver's to evaluate one by one.
    /// An engine that can evaluate a run in one go (the JIT) does; the others evaluate each
    /// check as a root.
    fn checks(&mut self, p: &Program, run: u32, decided: &mut Decided, trace: &mut Trace<'_>, out: &mut CheckOutcomes) {
        let Some(run) = super::prepared(p).runs.get(run as usize) else { return };
        let mut locals = Vec::new();
        for (root, e) in run.checks(p) {
            // A constant check is its value, as the driver takes any constant root.
            let v = match &e.kind {
                ExprKind::Const(c) => Ok(super::ops::const_value(c)),
                _ => self.eval(root, e, &mut locals, decided, trace),
            };
            if !out.push(v) {
                return;
            }
        }
    }
}

/// What a plain run's checks answered ([`Evaluator::checks`]): the booleans of the first
/// checks, in order, as plain as the results made from them; then, where a check answered
/// anything else, that answer, and no check after it.
#[derive(Debug, Default)]
pub struct CheckOutcomes {
    pub met: Vec<bool>,
    pub last: Option<Result<Value, Trap>>,
}

impl CheckOutcomes {
    /// How many checks answered.
    pub fn len(&self) -> usize {
        self.met.len() + usize::from(self.last.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next check's answer: `false` when it is not a plain boolean, and the run stops.
    pub fn push(&mut self, v: Result<Value, Trap>) -> bool {
        match v {
            Ok(Value::Bool(b)) => {
                self.met.push(b);
                true
            }
            other => {
                self.last = Some(other);
                false
            }
        }
    }

    fn clear(&mut self) {
        self.met.clear();
        self.last = None;
    }
}

/// Evaluate one row with `ev` evaluating the expressions.
pub fn run_row(
    p: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
    ev: &mut dyn Evaluator,
    trace: Option<&mut Vec<TraceEvent>>,
) -> RowResult {
    Driver {
        p,
        prepared: super::prepared(p),
        inputs,
        verdicts,
        ev,
        decided: Decided::new(p),
        trace: Trace::new(trace),
        limit: None,
        checks: CheckOutcomes::default(),
        run_until: 0,
    }
    .run()
}

struct Driver<'a, 't> {
    p: &'a Program,
    /// `p`'s prepared facts.
    prepared: &'a super::prepared::Prepared,
    inputs: &'a [Value],
    verdicts: &'a dyn VerdictSource,
    ev: &'a mut dyn Evaluator,
    decided: Decided,
    trace: Trace<'t>,
    /// A resource limit hit by some root, with that root: the row ends there.
    limit: Option<(Trap, Root)>,
    /// The answers of a plain run's checks (`Evaluator::checks`), kept for the next run.
    checks: CheckOutcomes,
    /// The step after the last criterion decided with its plain run.
    run_until: usize,
}

impl<'a> Driver<'a, '_> {
    fn eval(&mut self, root: Root, e: &Expr, locals: &mut Vec<Value>) -> Result<Value, Trap> {
        if let Some((t, _)) = &self.limit {
            return Err(t.clone());
        }
        // A constant root (a criterion's text, its weight) is its value: no engine is asked.
        if let ExprKind::Const(c) = &e.kind {
            return Ok(super::ops::const_value(c));
        }
        let r = self.ev.eval(root, e, locals, &mut self.decided, &mut self.trace);
        if let Err(t) = &r {
            if t.kind == TrapKind::Limit {
                self.limit = Some((t.clone(), root));
            }
        }
        r
    }

    /// Name the step being evaluated, for the trace (the name is made only while tracing).
    fn set_step(&mut self, name: impl FnOnce() -> String) {
        if self.trace.is_on() {
            self.trace.step = name();
        }
    }

    fn run(mut self) -> RowResult {
        let p = self.p;
        let mut result = RowResult::default();
        let mut stopped: Option<String> = None;
        let mut caps: Vec<f64> = Vec::new();
        for (si, step) in p.steps.iter().enumerate() {
            // The criteria of the plain run decided last (`plain_run`) are decided already.
            if si < self.run_until {
                continue;
            }
            let step_no = si as u32;
            match step {
                Step::Gate(g) => {
                    let action = match g.action {
                        GateAction::Score => "score",
                        GateAction::Cap => "cap",
                    };
                    if stopped.is_some() {
                        result.gates.push(GateResult {
                            name: g.name.clone(),
                            passed: None,
                            action,
                            value: None,
                            reason: g.reason.clone(),
                        });
                        continue;
                    }
                    self.set_step(|| format!("gate {}", g.name));
                    let mut locals = Vec::new();
                    let cond = self.eval(Root::Gate { step: step_no, part: GatePart::Cond }, &g.cond, &mut locals);
                    self.trace.note(p, None, || cond.as_ref().map_or_else(trap_reason, |v| v.to_string()));
                    match cond {
                        Ok(Value::Bool(true)) => result.gates.push(GateResult {
                            name: g.name.clone(),
                            passed: Some(true),
                            action,
                            value: None,
                            reason: g.reason.clone(),
                        }),
                        Ok(Value::Bool(false)) => {
                            let value =
                                self.eval(Root::Gate { step: step_no, part: GatePart::Value }, &g.value, &mut locals);
                            let class = g.reason.clone().unwrap_or_else(|| g.name.clone());
                            let v = match value {
                                Ok(Value::Number(n)) => Some(n),
                                Ok(Value::Unscored(r)) => {
                                    result.unscored_reason = Some(format!("gate `{}`: {r}", g.name));
                                    None
                                }
                                Err(t) => {
                                    result.trap = Some(trap_info(p, &t, g.site));
                                    result.unscored_reason = Some(format!("gate `{}`: {}", g.name, trap_reason(&t)));
                                    None
                                }
                                Ok(other) => {
                                    result.unscored_reason = Some(format!("gate `{}` produced {other}", g.name));
                                    None
                                }
                            };
                            result.gates.push(GateResult {
                                name: g.name.clone(),
                                passed: Some(false),
                                action,
                                value: v,
                                reason: g.reason.clone(),
                            });
                            if result.failure_class.is_none() {
                                result.failure_class = Some(class);
                            }
                            match g.action {
                                GateAction::Score => {
                                    // Caps declared before bound whatever sets the score.
                                    result.score = v.map(|x| caps.iter().fold(x, |acc, c| acc.min(*c)));
                                    stopped = Some(g.name.clone());
                                }
                                GateAction::Cap => match v {
                                    Some(c) => caps.push(c),
                                    None => stopped = Some(g.name.clone()),
                                },
                            }
                        }
                        other => {
                            let why = match other {
                                Ok(Value::Unscored(r)) => r.to_string(),
                                Err(t) => {
                                    result.trap = Some(trap_info(p, &t, g.site));
                                    trap_reason(&t)
                                }
                                Ok(v) => format!("condition produced {v}"),
                            };
                            result.gates.push(GateResult {
                                name: g.name.clone(),
                                passed: None,
                                action,
                                value: None,
                                reason: g.reason.clone(),
                            });
                            result.unscored_reason = Some(format!("gate `{}` could not be decided: {why}", g.name));
                            result.score = None;
                            stopped = Some(g.name.clone());
                        }
                    }
                }
                Step::Criterion(ci) => {
                    let Some(decl) = p.criteria.get(*ci as usize) else {
                        return invalid_program(format!("step {si} evaluates criterion {ci}, which does not exist"));
                    };
                    // Deciding the plain run that starts here, if one does.
                    if stopped.is_none() && self.plain_run(si) {
                        continue;
                    }
                    let owner = Owner::Criterion(*ci);
                    let mut locals = Vec::new();
                    let r = if let Some(gate) = &stopped {
                        self.skipped(owner, decl, None, gate, &mut locals)
                    } else {
                        self.set_step(|| format!("criterion {}", decl.id));
                        self.criterion(owner, decl, None, &mut locals)
                    };
                    self.decided.set_criterion(*ci, r);
                }
                Step::Each(e) => {
                    let (Some(set), true) = (p.sets.get(e.set as usize), e.local < e.locals && e.locals <= MAX_LOCALS)
                    else {
                        return invalid_program(format!("step {si} names set {} or local {} wrongly", e.set, e.local));
                    };
                    let mut locals = vec![Value::Null; e.locals as usize];
                    let name = &set.name;
                    self.set_step(|| format!("criteria {name}"));
                    let list = self.eval(Root::EachList { step: step_no }, &e.list, &mut locals);
                    let owner = Owner::Each(step_no);
                    let mut out = Vec::new();
                    // A block over a trajectory's steps: each instance says which step it is about.
                    let over_steps = matches!(&e.list.ty, crate::ir::Type::List(t) if **t == crate::ir::Type::step());
                    result.over_steps |= over_steps;
                    match list {
                        Ok(Value::List(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                locals[e.local as usize] = item.clone();
                                let id: Arc<str> = Arc::from(format!("{name}[{i}]"));
                                let r = match &stopped {
                                    Some(gate) => self.skipped(owner, &e.template, Some(id), gate, &mut locals),
                                    None => {
                                        self.set_step(|| format!("criterion {id}"));
                                        let mut r = self.criterion(owner, &e.template, Some(id), &mut locals);
                                        if !e.shows.is_empty() && r.source.starts_with("judge:") {
                                            self.shown(owner, e, &mut r, &mut locals);
                                        }
                                        r
                                    }
                                };
                                let mut r = r;
                                if over_steps {
                                    r.step = step_index(item);
                                }
                                out.push(r);
                            }
                        }
                        Ok(Value::Unscored(r)) => {
                            result.unscored_reason.get_or_insert(format!("criteria `{name}`: {r}"));
                        }
                        Ok(Value::Null) => {}
                        Ok(other) => {
                            result
                                .unscored_reason
                                .get_or_insert(format!("criteria `{name}`: expected a list, found {other}"));
                        }
                        Err(t) => {
                            result.trap.get_or_insert(trap_info(p, &t, e.template.site));
                            result.unscored_reason.get_or_insert(format!("criteria `{name}`: {}", trap_reason(&t)));
                        }
                    }
                    self.decided.set_each(step_no, out);
                }
            }
        }
        if stopped.is_none() && result.unscored_reason.is_none() {
            result.score_evaluated = true;
            self.set_step(|| "score".into());
            let mut locals = Vec::new();
            match self.eval(Root::Score, &p.score, &mut locals) {
                Ok(Value::Number(n)) if n.is_finite() => {
                    result.score = Some(caps.iter().fold(n, |acc, c| acc.min(*c)));
                }
                Ok(Value::Number(n)) => result.unscored_reason = Some(format!("the score is not finite ({n})")),
                Ok(Value::Unscored(r)) => result.unscored_reason = Some(r.to_string()),
                Ok(other) => result.unscored_reason = Some(format!("the score produced {other}")),
                Err(t) => {
                    let site = score_site(&p.score);
                    result.trap = Some(trap_info(p, &t, site.unwrap_or(u32::MAX)));
                    result.unscored_reason = Some(trap_reason(&t));
                }
            }
        }
        // Report-only scores: as the score, under the same gates and caps.
        for (i, s) in p.scores.iter().enumerate() {
            let (value, reason) = if let Some(gate) = &stopped {
                match result.score {
                    Some(v) => (Some(v), None),
                    None => (None, Some(format!("gate `{gate}` stopped evaluation and left no score"))),
                }
            } else if let (false, Some(r)) = (result.score_evaluated, &result.unscored_reason) {
                (None, Some(r.clone()))
            } else {
                self.set_step(|| format!("score {}", s.name));
                let mut locals = Vec::new();
                match self.eval(Root::NamedScore(i as u32), &s.expr, &mut locals) {
                    Ok(Value::Number(n)) if n.is_finite() => (Some(caps.iter().fold(n, |acc, c| acc.min(*c))), None),
                    Ok(Value::Number(n)) => (None, Some(format!("the score is not finite ({n})"))),
                    Ok(Value::Unscored(r)) => (None, Some(r.to_string())),
                    Ok(other) => (None, Some(format!("the score produced {other}"))),
                    Err(t) => (None, Some(trap_reason(&t))),
                }
            };
            result.scores.push(NamedScoreResult { name: s.name.clone(), value, reason });
        }
        // The reward: the score less the penalty.
        if let Some(rw) = &p.reward {
            let reward = match (result.score, &rw.penalty) {
                (None, _) => None,
                (Some(s), None) => Some(s),
                (Some(s), Some(e)) => {
                    self.set_step(|| "reward".into());
                    let mut locals = Vec::new();
                    match self.eval(Root::Penalty, e, &mut locals) {
                        Ok(Value::Number(n)) if n.is_finite() => Some(s - n),
                        Ok(Value::Unscored(r)) => {
                            result.reward_reason = Some(format!("the penalty is unscored: {r}"));
                            None
                        }
                        Ok(other) => {
                            result.reward_reason = Some(format!("the penalty produced {other}"));
                            None
                        }
                        Err(t) => {
                            result.reward_reason = Some(format!("the penalty failed: {}", trap_reason(&t)));
                            None
                        }
                    }
                }
            };
            result.reward = Some(reward);
        }
        let policies = &self.prepared.group_policies;
        for (i, s) in p.sets.iter().enumerate() {
            if s.kind == SetKind::Group {
                let policy = policies.get(i).copied().unwrap_or(Policy::Propagate);
                let v = match tree(p, &self.decided, i as u32, policy, 0) {
                    Ok(Value::Number(n)) => Some(n),
                    _ => None,
                };
                result.groups.push((s.name.clone(), v));
            }
        }
        // Criteria in step order (the order they were decided), moved out as one vector:
        // nothing reads the decided results after this.
        let mut demanded = self.decided.demand.take();
        demanded.sort();
        demanded.dedup();
        result.demanded = demanded;
        result.criteria = std::mem::take(&mut self.decided).into_results();
        // A resource limit ends the row: whatever ran after it saw the same trap, and the row
        // is unscored with the trap at the root that hit it.
        if let Some((t, root)) = &self.limit {
            result.score_evaluated = false;
            result.score = None;
            for s in &mut result.scores {
                s.value = None;
                s.reason = Some(trap_reason(t));
            }
            result.unscored_reason = Some(trap_reason(t));
            result.trap = Some(trap_info(p, t, root.site(p)));
        }
        result
    }

    /// Decide the plain run that starts at step `step` (`prepared::PlainRun`), its checks
    /// evaluated together (`Evaluator::checks`) and each result its criterion's template with
    /// its check applied, as `criterion` would decide it; up to and with the first check that
    /// fails, the criteria after which are evaluated one by one. `false` when no run starts at
    /// `step`, and while tracing or after a resource limit (each criterion is then evaluated as
    /// any other).
    fn plain_run(&mut self, step: usize) -> bool {
        if self.trace.is_on() || self.limit.is_some() {
            return false;
        }
        let Some(run) = self.prepared.run_at.get(step).copied().flatten() else { return false };
        let prepared = self.prepared;
        let Some(facts) = prepared.runs.get(run as usize) else { return false };
        let criteria = &facts.criteria[..];
        let mut checks = std::mem::take(&mut self.checks);
        checks.clear();
        checks.met.reserve(criteria.len());
        self.ev.checks(self.p, run, &mut self.decided, &mut self.trace, &mut checks);
        if checks.is_empty() {
            self.checks = checks;
            return false;
        }
        self.run_until = step + checks.len();
        self.decided.set_run(facts, &checks.met);
        if let (Some(v), Some(&c)) = (checks.last.take(), criteria.get(checks.met.len())) {
            if let Err(t) = &v {
                if t.kind == TrapKind::Limit {
                    self.limit =
                        Some((t.clone(), Root::Criterion { owner: Owner::Criterion(c), attr: Attr::Verifier }));
                }
            }
            // Every criterion of a run has a template (`prepared::plain_runs` makes it so).
            if let Some(template) = prepared.templates.get(c as usize).and_then(Option::as_ref) {
                if let Some(r) = self.decided.set_criterion_with(c, || template.clone().into_result(Vec::new())) {
                    apply_check(r, v);
                }
            }
        }
        self.checks = checks;
        true
    }

    /// The shared metadata of `owner` (computed afresh for a program the prepared facts do not
    /// describe).
    fn meta(&self, owner: Owner, d: &CriterionDecl) -> std::borrow::Cow<'a, super::prepared::CriterionMeta> {
        let prepared = self.prepared;
        let meta = match owner {
            Owner::Criterion(c) => prepared.criteria.get(c as usize),
            Owner::Each(s) => prepared.each.get(s as usize).and_then(Option::as_ref),
        };
        match meta {
            Some(m) if m.id.len() == d.id.len() => std::borrow::Cow::Borrowed(m),
            _ => std::borrow::Cow::Owned(super::prepared::CriterionMeta::of(self.p, d)),
        }
    }

    /// A result of `d` as yet undecided; `id` is an `each` instance's (`None`: `d`'s own).
    fn base_result(
        &mut self,
        owner: Owner,
        d: &CriterionDecl,
        id: Option<Arc<str>>,
        locals: &mut Vec<Value>,
    ) -> CriterionResult {
        let root = |attr| Root::Criterion { owner, attr };
        let meta = self.meta(owner, d);
        let text = match &meta.text {
            Some(t) => Some(t.clone()),
            None => match self.eval(root(Attr::Text), &d.text, locals) {
                Ok(Value::Text(t)) => Some(Name::Counted(t)),
                _ => None,
            },
        };
        let num = |this: &mut Self, attr: Attr, e: &Option<Expr>, locals: &mut Vec<Value>| -> Option<f64> {
            e.as_ref().and_then(|e| this.eval(root(attr), e, locals).ok()).and_then(|v| v.as_number())
        };
        // Constant points and weight are the program's (a row that hit a resource limit reads
        // them as any other root then: not at all).
        let (points, weight) = match meta.numbers {
            Some(numbers) if self.limit.is_none() => numbers,
            _ => {
                let points = num(self, Attr::Points, &d.points, locals);
                (points, num(self, Attr::Weight, &d.weight, locals).unwrap_or(1.0))
            }
        };
        let (tags, axis) = match &meta.axis {
            Some(axis) => (vec![], axis.clone()),
            None => {
                let tags: Vec<String> = match d.tags.as_ref().map(|t| self.eval(root(Attr::Tags), t, locals)) {
                    Some(Ok(Value::List(l))) => l.iter().filter_map(|v| v.as_text().map(str::to_string)).collect(),
                    _ => vec![],
                };
                // An axis may also come from an `axis:NAME` tag (HealthBench rows carry their
                // axes so).
                let axis =
                    d.axis.as_deref().map(Name::interned).or_else(|| {
                        tags.iter().find_map(|t| t.strip_prefix("axis:").map(|a| Name::Counted(Arc::from(a))))
                    });
                (tags, axis)
            }
        };
        let id = id.map_or_else(|| meta.id.clone(), Name::Counted);
        meta.undecided(d, id, text, (points, weight), axis).into_result(tags)
    }

    /// What a judged instance's judge is shown (`shows`), evaluated with the element bound:
    /// kept on a result still waiting for its verdict, for the request; an item that fails
    /// leaves the instance unscored, since its judge cannot be shown what the rubric says.
    fn shown(&mut self, owner: Owner, e: &crate::ir::EachDecl, r: &mut CriterionResult, locals: &mut Vec<Value>) {
        let mut values = Vec::with_capacity(e.shows.len());
        for (k, item) in e.shows.iter().enumerate() {
            let root = Root::Criterion { owner, attr: Attr::Shown(k as u32) };
            let why = match self.eval(root, &item.expr, locals) {
                Ok(Value::Unscored(why)) => why.to_string(),
                Ok(v) => {
                    values.push(v);
                    continue;
                }
                Err(t) => trap_reason(&t),
            };
            r.status = Status::Unscored;
            r.reason = Some(format!("shows `{}`: {why}", item.name));
            r.value = None;
            if let Some(j) = r.judged.as_deref_mut() {
                j.level = None;
                j.label = None;
            }
            return;
        }
        if r.status == Status::Skipped && !values.is_empty() {
            r.judged_mut().shown = values;
        }
    }

    fn skipped(
        &mut self,
        owner: Owner,
        d: &CriterionDecl,
        id: Option<Arc<str>>,
        gate: &str,
        locals: &mut Vec<Value>,
    ) -> CriterionResult {
        let mut r = self.base_result(owner, d, id, locals);
        r.reason = Some(format!("gated: gate `{gate}` stopped evaluation before this criterion"));
        r
    }

    fn criterion(
        &mut self,
        owner: Owner,
        d: &CriterionDecl,
        id: Option<Arc<str>>,
        locals: &mut Vec<Value>,
    ) -> CriterionResult {
        let p = self.p;
        let root = |attr| Root::Criterion { owner, attr };
        let mut r = self.base_result(owner, d, id, locals);
        // Only a judged criterion looks its verdict up by id (a check needs no copy of it).
        let judged = matches!(d.verifier, Verifier::Judge { .. } | Verifier::Extract { .. });
        let id = judged.then(|| r.id.clone());
        let id = id.as_deref().unwrap_or_default();
        let pass = match d.pass.as_ref().map(|e| self.eval(root(Attr::Pass), e, locals)) {
            Some(Ok(Value::Number(n))) => Some(n),
            _ => None,
        };
        match &d.verifier {
            Verifier::Check { expr } => {
                let v = self.eval(root(Attr::Verifier), expr, locals);
                apply_check(&mut r, v);
            }
            Verifier::Value { expr } => match self.eval(root(Attr::Verifier), expr, locals) {
                Ok(Value::Number(n)) if (0.0..=1.0).contains(&n) => {
                    r.value = Some(n);
                    r.status = if n >= pass.unwrap_or(0.5) { Status::Met } else { Status::Unmet };
                }
                Ok(Value::Number(n)) => r.reason = Some(format!("value_out_of_range: {n} is outside [0, 1]")),
                Ok(Value::Unscored(reason)) => r.reason = Some(reason.to_string()),
                Ok(other) => r.reason = Some(format!("value produced {other}")),
                Err(t) => r.reason = Some(trap_reason(&t)),
            },
            Verifier::Judge { .. } | Verifier::Extract { .. }
                if self.verdicts.planning() && self.verdicts.verdict(id).is_none() =>
            {
                r.status = Status::Skipped;
                r.reason = Some(NOT_NEEDED.into());
            }
            Verifier::Judge { judge } | Verifier::Extract { judge, .. } if p.judges.get(*judge as usize).is_none() => {
                r.reason = Some(format!("invalid program: judge {judge} does not exist"));
            }
            Verifier::Extract { local, .. } if *local >= MAX_LOCALS => {
                r.reason = Some(format!("invalid program: local {local} is out of range"));
            }
            Verifier::Judge { judge } => {
                let j = &p.judges[*judge as usize];
                let evidence_text = j
                    .evidence_from
                    .and_then(|i| self.inputs.get(i as usize))
                    .and_then(|v| v.as_text().map(str::to_string));
                // A block's instances (`items[3]`) share the block's calibration key `items[]`.
                let key = if *id == d.id { d.id.clone() } else { format!("{}[]", d.id) };
                let name = |i: u32| p.inputs.get(i as usize).map(|x| x.name.as_str());
                let candidates = j.compares.as_ref().and_then(|c| Some([name(c.first)?, name(c.second)?]));
                verdict::apply(
                    &mut r,
                    &d.kind,
                    pass,
                    j,
                    &key,
                    self.verdicts.verdict(id),
                    evidence_text.as_deref(),
                    candidates,
                );
            }
            Verifier::Extract { judge, ty, local, check, .. } => {
                let j = &p.judges[*judge as usize];
                match verdict::extracted(j, ty, self.verdicts.verdict(id)) {
                    Ok(v) => {
                        r.judged_mut().extracted = Some(Box::new(v.to_json()));
                        if locals.len() <= *local as usize {
                            locals.resize(*local as usize + 1, Value::Null);
                        }
                        locals[*local as usize] = v;
                        let v = self.eval(root(Attr::Verifier), check, locals);
                        apply_check(&mut r, v);
                    }
                    Err(reason) => r.reason = Some(reason),
                }
            }
        }
        if self.trace.is_on() {
            let value =
                format!("=> {}{}", r.status.as_str(), r.reason.as_ref().map(|x| format!(" ({x})")).unwrap_or_default());
            self.trace.note(p, None, || value);
        }
        r
    }
}

/// The `index` of a `Step` value (`ir::Type::step`), when it is a whole number.
fn step_index(step: &Value) -> Option<u32> {
    match step {
        Value::Record(r) => match r.get("index") {
            Some(Value::Number(n)) if *n >= 0.0 && n.fract() == 0.0 && *n <= f64::from(u32::MAX) => Some(*n as u32),
            _ => None,
        },
        _ => None,
    }
}

/// The reason of a `skipped` criterion: planning found that the row's result does not need it.
pub const NOT_NEEDED: &str = "not_needed: the row's result is decided without this verdict";

fn trap_info(p: &Program, t: &Trap, site: u32) -> TrapInfo {
    TrapInfo { code: t.kind.code(), message: t.message.clone(), site: p.known_site(site) }
}

/// A criterion as a value (`er.met`, `er.value`...): a record of its decided result.
pub fn verdict_value(decided: &Decided, c: u32) -> Value {
    let Some(r) = decided.criterion(c) else {
        return unscored("criterion not evaluated");
    };
    if r.status == Status::Skipped {
        decided.demand(&r.id);
        return unscored(format!("criterion `{}` is waiting for its verdict", r.id));
    }
    let mut m = std::collections::BTreeMap::new();
    let reason =
        || unscored(format!("criterion `{}` is unscored ({})", r.id, r.reason.as_deref().unwrap_or("no reason")));
    let scored = r.status != Status::Unscored;
    m.insert(Arc::from("met"), if scored { Value::Bool(r.status == Status::Met) } else { reason() });
    m.insert(Arc::from("value"), if scored { Value::Number(r.value.unwrap_or(0.0)) } else { reason() });
    m.insert(Arc::from("points"), Value::Number(r.points.unwrap_or(0.0)));
    m.insert(Arc::from("weight"), Value::Number(r.weight));
    m.insert(Arc::from("unscored"), Value::Bool(!scored));
    // The share of a jury's members (or a judge's samples) that voted as the result decided:
    // 1 for a single verdict.
    let agreement = match r.judged().votes {
        Some(v) if v.voted > 0 => Value::Number(f64::from(v.agreed) / f64::from(v.voted)),
        _ => Value::Number(1.0),
    };
    m.insert(Arc::from("agreement"), if scored { agreement } else { reason() });
    Value::Record(Arc::new(m))
}

/// A row of a program that does not hold together (possible only for a program that was not
/// validated): unscored, with a `rubric::trap::type` trap that says why.
fn invalid_program(why: String) -> RowResult {
    let t = Trap::new(TrapKind::Type, format!("the program is not valid: {why}"));
    RowResult {
        unscored_reason: Some(trap_reason(&t)),
        trap: Some(TrapInfo { code: t.kind.code(), message: t.message, site: None }),
        ..RowResult::default()
    }
}

/// What an aggregation needs of a set's decided members, gathered in one pass in member
/// order (each sum in the order, and from the start, that summing the members one by one
/// gives: `Sum` of floats starts at `-0.0`).
struct Tally<'d> {
    /// The aggregation (which sums to keep).
    op: AggOp,
    /// Members that count: scored, or unscored under `unmet`.
    n: usize,
    met: usize,
    /// Σ value × weight and Σ weight (`weighted_mean`).
    weighted: f64,
    weights: f64,
    /// Σ value (`mean`).
    values: f64,
    /// Σ points × value of the met members, and Σ of the positive points.
    achieved: f64,
    possible: f64,
    min: f64,
    max: f64,
    /// Members still without a verdict, by id.
    skipped: Vec<&'d str>,
}

impl<'d> Tally<'d> {
    fn new(op: AggOp) -> Self {
        Tally {
            op,
            n: 0,
            met: 0,
            weighted: 0.0,
            weights: 0.0,
            values: -0.0,
            achieved: 0.0,
            possible: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            skipped: Vec::new(),
        }
    }

    /// Which sums `op` reads ([`Tally::add`]'s `S`): the aggregation is chosen once per set,
    /// not once per member.
    fn sums(op: AggOp) -> u8 {
        match op {
            AggOp::WeightedMean => SUMS_WEIGHTED,
            AggOp::Mean => SUMS_MEAN,
            AggOp::PointsRatio | AggOp::SumPoints | AggOp::MaxPoints => SUMS_POINTS,
            AggOp::MinValue => SUMS_MIN,
            AggOp::MaxValue => SUMS_MAX,
            _ => SUMS_COUNTS,
        }
    }

    #[inline(always)]
    fn add<const S: u8>(&mut self, met: bool, value: f64, weight: f64, points: f64) {
        self.n += 1;
        self.met += usize::from(met);
        // Only the sums the aggregation reads (the others stay as they started).
        match S {
            SUMS_WEIGHTED => {
                self.weighted += value * weight;
                self.weights += weight;
            }
            SUMS_MEAN => self.values += value,
            SUMS_POINTS => {
                if met {
                    self.achieved += points * value;
                }
                if points > 0.0 {
                    self.possible += points;
                }
            }
            SUMS_MIN => self.min = self.min.min(value),
            SUMS_MAX => self.max = self.max.max(value),
            _ => {}
        }
    }

    /// Member `r` under `policy`; `Err` is the set's result when `r` decides it (an unscored
    /// member that propagates).
    #[inline(always)]
    fn member<const S: u8>(&mut self, r: &'d CriterionResult, policy: Policy) -> Result<(), Value> {
        match r.status {
            Status::Skipped => self.skipped.push(&r.id),
            Status::Unscored => match policy {
                Policy::Propagate => {
                    return Err(unscored(format!(
                        "criterion `{}` is unscored ({})",
                        r.id,
                        r.reason.as_deref().unwrap_or("no reason")
                    )))
                }
                Policy::Skip => {}
                Policy::Unmet => self.add::<S>(false, 0.0, r.weight, r.points.unwrap_or(0.0)),
            },
            s => self.add::<S>(s == Status::Met, r.value.unwrap_or(0.0), r.weight, r.points.unwrap_or(0.0)),
        }
        Ok(())
    }

    /// Every decided member of `set`, its subsets' included, in member order.
    fn set(&mut self, p: &Program, decided: &'d Decided, set: u32, policy: Policy) -> Result<(), Value> {
        match Tally::sums(self.op) {
            SUMS_WEIGHTED => self.members::<SUMS_WEIGHTED>(p, decided, set, policy, 0),
            SUMS_MEAN => self.members::<SUMS_MEAN>(p, decided, set, policy, 0),
            SUMS_POINTS => self.members::<SUMS_POINTS>(p, decided, set, policy, 0),
            SUMS_MIN => self.members::<SUMS_MIN>(p, decided, set, policy, 0),
            SUMS_MAX => self.members::<SUMS_MAX>(p, decided, set, policy, 0),
            _ => self.members::<SUMS_COUNTS>(p, decided, set, policy, 0),
        }
    }

    fn members<const S: u8>(
        &mut self,
        p: &Program,
        decided: &'d Decided,
        set: u32,
        policy: Policy,
        depth: usize,
    ) -> Result<(), Value> {
        let Some(s) = p.sets.get(set as usize).filter(|_| depth <= MAX_GROUP_DEPTH) else { return Ok(()) };
        for m in &s.members {
            match m {
                Member::Criterion(c) => {
                    if let Some(r) = decided.criterion(*c) {
                        self.member::<S>(r, policy)?;
                    }
                }
                Member::Each(step) => {
                    for r in decided.each(*step) {
                        self.member::<S>(r, policy)?;
                    }
                }
                Member::Set(s) => self.members::<S>(p, decided, *s, policy, depth + 1)?,
            }
        }
        Ok(())
    }
}

/// The sums a [`Tally`] keeps beside its counts, by aggregation ([`Tally::sums`]).
const SUMS_WEIGHTED: u8 = 0;
const SUMS_MEAN: u8 = 1;
const SUMS_POINTS: u8 = 2;
const SUMS_MIN: u8 = 3;
const SUMS_MAX: u8 = 4;
/// Counts only (`all`, `any`, `at_least`...).
const SUMS_COUNTS: u8 = 5;

/// An aggregation (`mean(S)`, `at_least(S, k)`, `tree(G)`...) over the decided criteria of a
/// set, with its unscored policy and its evaluated extra arguments.
pub fn aggregate(
    p: &Program,
    decided: &Decided,
    op: AggOp,
    set: u32,
    policy: Policy,
    args: &[Value],
) -> Result<Value, Trap> {
    if set as usize >= p.sets.len() {
        return Err(Trap::new(TrapKind::Type, format!("unknown set #{set}")));
    }
    if op == AggOp::Tree {
        return tree(p, decided, set, policy, 0);
    }
    let mut t = Tally::new(op);
    if let Err(v) = t.set(p, decided, set, policy) {
        return Ok(v);
    }
    let name = &p.sets[set as usize].name;
    if !t.skipped.is_empty() {
        // Members still without a verdict: `all`, `any` and `at_least` may be decided by the
        // others whatever those verdicts are; anything else needs them.
        let met = t.met as f64;
        let open = t.skipped.len() as f64;
        let settled = match op {
            AggOp::All => (t.met < t.n).then_some(false),
            AggOp::Any => (met > 0.0).then_some(true),
            AggOp::AtLeast => {
                let k = args.first().and_then(Value::as_number).unwrap_or(f64::NAN);
                if met >= k {
                    Some(true)
                } else if met + open < k {
                    Some(false)
                } else {
                    None
                }
            }
            _ => None,
        };
        if let Some(b) = settled {
            return Ok(Value::Bool(b));
        }
        for id in &t.skipped {
            decided.demand(id);
        }
        return Ok(unscored(format!("`{name}` is waiting for {} verdicts", t.skipped.len())));
    }
    let n = t.n as f64;
    let empty = || Ok(unscored(format!("no scored criteria in `{name}`")));
    Ok(match op {
        AggOp::WeightedMean => {
            if t.n == 0 {
                return empty();
            }
            if t.weights == 0.0 {
                return Err(Trap::new(TrapKind::DivisionByZero, format!("the weights of `{name}` sum to 0")));
            }
            Value::Number(t.weighted / t.weights)
        }
        AggOp::Mean => {
            if t.n == 0 {
                return empty();
            }
            Value::Number(t.values / n)
        }
        AggOp::Fraction => {
            if t.n == 0 {
                return empty();
            }
            Value::Number(t.met as f64 / n)
        }
        AggOp::PointsRatio => {
            if t.possible == 0.0 {
                return Ok(unscored(format!("no positive points in `{name}`")));
            }
            Value::Number(t.achieved / t.possible)
        }
        AggOp::SumPoints => Value::Number(t.achieved),
        // `Sum` of no points is `-0.0`; after the first, `possible` holds the same sum.
        AggOp::MaxPoints => Value::Number(if t.possible == 0.0 { -0.0 } else { t.possible }),
        AggOp::All => Value::Bool(t.met == t.n),
        AggOp::Any => Value::Bool(t.met > 0),
        AggOp::AtLeast => {
            let k = args.first().and_then(Value::as_number).unwrap_or(f64::NAN);
            Value::Bool(t.met as f64 >= k)
        }
        AggOp::CountMet => Value::Number(t.met as f64),
        AggOp::Count => Value::Number(n),
        AggOp::MinValue => {
            if t.n == 0 {
                return empty();
            }
            Value::Number(t.min)
        }
        AggOp::MaxValue => {
            if t.n == 0 {
                return empty();
            }
            Value::Number(t.max)
        }
        AggOp::Tree => unreachable!("handled above"),
    })
}

/// A node's score is Σ(child score × child weight) / Σ(child weight), summed left to right as
/// PaperBench does. With `skip`, unscored children leave the node.
fn tree(p: &Program, decided: &Decided, set: u32, policy: Policy, depth: usize) -> Result<Value, Trap> {
    let Some(node) = p.sets.get(set as usize).filter(|_| depth <= MAX_GROUP_DEPTH) else {
        return Err(Trap::new(TrapKind::Type, format!("set {set} is not a group of this program")));
    };
    let mut num = 0.0;
    let mut den = 0.0;
    for m in &node.members {
        let (score, weight): (Option<f64>, f64) = match m {
            Member::Criterion(c) => match decided.criterion(*c) {
                Some(r) if r.status == Status::Skipped => {
                    decided.demand(&r.id);
                    return Ok(unscored(format!("criterion `{}` is waiting for its verdict", r.id)));
                }
                Some(r) if r.status != Status::Unscored => (r.value, r.weight),
                Some(r) => match policy {
                    Policy::Propagate => {
                        return Ok(unscored(format!(
                            "criterion `{}` is unscored ({})",
                            r.id,
                            r.reason.as_deref().unwrap_or("")
                        )))
                    }
                    Policy::Skip => continue,
                    Policy::Unmet => (Some(0.0), r.weight),
                },
                None => continue,
            },
            Member::Set(s) => {
                let w = p.sets.get(*s as usize).and_then(|s| s.weight).unwrap_or(1.0);
                match tree(p, decided, *s, policy, depth + 1)? {
                    Value::Number(n) => (Some(n), w),
                    Value::Unscored(r) => match policy {
                        Policy::Skip => continue,
                        _ => return Ok(Value::Unscored(r)),
                    },
                    _ => continue,
                }
            }
            Member::Each(step) => {
                for r in decided.each(*step) {
                    let (s, w) = match r.status {
                        Status::Skipped => {
                            decided.demand(&r.id);
                            return Ok(unscored(format!("criterion `{}` is waiting for its verdict", r.id)));
                        }
                        Status::Unscored => match policy {
                            Policy::Propagate => return Ok(unscored(format!("criterion `{}` is unscored", r.id))),
                            Policy::Skip => continue,
                            Policy::Unmet => (0.0, r.weight),
                        },
                        _ => (r.value.unwrap_or(0.0), r.weight),
                    };
                    num += s * w;
                    den += w;
                }
                continue;
            }
        };
        num += score.unwrap_or(0.0) * weight;
        den += weight;
    }
    if den == 0.0 {
        return Ok(unscored(format!("no scored children in group `{}`", node.name)));
    }
    Ok(Value::Number(num / den))
}

/// The unscored policy each group is reported with: that of the `tree(...)` in the score
/// that covers it (the nearest enclosing one), else `propagate`. Indexed by set.
pub fn group_policies(p: &Program) -> Vec<Policy> {
    let mut declared: Vec<Option<Policy>> = vec![None; p.sets.len()];
    ir::walk(&p.score, &mut |e| {
        if let ExprKind::Aggregate { op: AggOp::Tree, set, policy, .. } = &e.kind {
            if let Some(d) = declared.get_mut(*set as usize) {
                d.get_or_insert(*policy);
            }
        }
    });
    fn down(
        p: &Program,
        set: usize,
        inherited: Option<Policy>,
        declared: &[Option<Policy>],
        out: &mut Vec<Policy>,
        depth: usize,
    ) {
        let (Some(s), Some(d)) = (p.sets.get(set), declared.get(set)) else { return };
        if depth > MAX_GROUP_DEPTH {
            return;
        }
        let here = d.or(inherited);
        out[set] = here.unwrap_or(Policy::Propagate);
        for m in &s.members {
            if let Member::Set(c) = m {
                down(p, *c as usize, here, declared, out, depth + 1);
            }
        }
    }
    let mut out = vec![Policy::Propagate; p.sets.len()];
    let children: std::collections::HashSet<usize> = p
        .sets
        .iter()
        .flat_map(|s| s.members.iter().filter_map(|m| if let Member::Set(x) = m { Some(*x as usize) } else { None }))
        .collect();
    for i in 0..p.sets.len() {
        if !children.contains(&i) {
            down(p, i, None, &declared, &mut out, 0);
        }
    }
    out
}

fn score_site(e: &Expr) -> Option<u32> {
    match &e.kind {
        ExprKind::Binary { site, .. }
        | ExprKind::Aggregate { site, .. }
        | ExprKind::Intrinsic { site, .. }
        | ExprKind::Call { site, .. } => Some(*site),
        ExprKind::If { cond, .. } => score_site(cond),
        _ => None,
    }
}

/// What a check that answered `met` makes of its criterion: its status and value.
#[inline(always)]
pub(super) fn check_verdict(met: bool) -> (Status, Option<f64>) {
    if met {
        (Status::Met, Some(1.0))
    } else {
        (Status::Unmet, Some(0.0))
    }
}

/// A check's value decides a binary criterion: `true` met, `false` unmet, unscored or a trap
/// unscored with the reason. Shared by `check` and `extract ... check`.
#[inline]
fn apply_check(r: &mut CriterionResult, v: Result<Value, Trap>) {
    match v {
        Ok(Value::Bool(b)) => (r.status, r.value) = check_verdict(b),
        Ok(Value::Unscored(reason)) => r.reason = Some(reason.to_string()),
        Ok(other) => r.reason = Some(format!("check produced {other}")),
        Err(t) => r.reason = Some(trap_reason(&t)),
    }
}
