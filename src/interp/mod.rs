//! Stage 5, the reference interpreter: evaluates an `ir::Program` on one row of bound inputs
//! and recorded verdicts. It is the semantic oracle the Wasm and JIT engines are compared
//! against, so it stays boring: a direct recursive walk, no caching beyond the per-row text
//! index and `let` values.

mod verdict;

use crate::engine::{CriterionResult, Engine, GateResult, RowResult, Status, TrapInfo, VerdictSource};
use crate::ir::{
    self, AggOp, BinOp, CmpOp, Const, CriterionDecl, CriterionKind, Expr, ExprKind, GateAction, HigherOrder, Member,
    Policy, Program, SetKind, Step, UnOp, Verifier,
};
use crate::stdlib::{self, EvalCtx, Trap, TrapKind};
use crate::value::Value;
use std::sync::Arc;

/// The reference interpreter as an [`Engine`].
pub struct Interpreter;

impl Engine for Interpreter {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        evaluate(program, inputs, verdicts, None)
    }
}

/// One line of an `explain` trace.
#[derive(Debug, Clone)]
pub struct TraceEvent {
    /// `gate NAME`, `criterion ID` or `score`.
    pub step: String,
    /// A sub-expression (by site) and its value.
    pub site: Option<ir::Site>,
    pub value: String,
}

/// Evaluate one row. With `trace`, every intrinsic and function call records its value.
pub fn evaluate(
    p: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
    trace: Option<&mut Vec<TraceEvent>>,
) -> RowResult {
    let mut it = Interp {
        p,
        inputs,
        verdicts,
        ctx: EvalCtx::new(),
        lets: vec![None; p.lets.len()],
        criteria: vec![None; p.criteria.len()],
        each: vec![Vec::new(); p.steps.len()],
        trace,
        step_name: String::new(),
    };
    it.run()
}

/// Evaluate a constant expression (example bindings, input defaults).
pub fn eval_constant(p: &Program, e: &Expr) -> Result<Value, Trap> {
    let no = crate::engine::NoVerdicts;
    let mut it = Interp {
        p,
        inputs: &[],
        verdicts: &no,
        ctx: EvalCtx::new(),
        lets: vec![None; p.lets.len()],
        criteria: vec![None; p.criteria.len()],
        each: vec![Vec::new(); p.steps.len()],
        trace: None,
        step_name: String::new(),
    };
    let mut locals = Vec::new();
    it.eval(e, &mut locals)
}

struct Interp<'a> {
    p: &'a Program,
    inputs: &'a [Value],
    verdicts: &'a dyn VerdictSource,
    ctx: EvalCtx,
    lets: Vec<Option<Result<Value, Trap>>>,
    criteria: Vec<Option<CriterionResult>>,
    /// Results of each `Each` step, by step index.
    each: Vec<Vec<CriterionResult>>,
    trace: Option<&'a mut Vec<TraceEvent>>,
    step_name: String,
}

fn unscored(reason: impl Into<Arc<str>>) -> Value {
    Value::Unscored(reason.into())
}

fn trap_reason(t: &Trap) -> String {
    format!("{}: {}", t.kind.code(), t.message)
}

impl<'a> Interp<'a> {
    fn run(&mut self) -> RowResult {
        let mut result = RowResult::default();
        let mut stopped: Option<String> = None;
        let mut caps: Vec<f64> = Vec::new();
        for (si, step) in self.p.steps.iter().enumerate() {
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
                    self.step_name = format!("gate {}", g.name);
                    let mut locals = Vec::new();
                    let cond = self.eval(&g.cond, &mut locals);
                    self.note(None, || cond.as_ref().map_or_else(trap_reason, |v| v.to_string()));
                    match cond {
                        Ok(Value::Bool(true)) => result.gates.push(GateResult {
                            name: g.name.clone(),
                            passed: Some(true),
                            action,
                            value: None,
                            reason: g.reason.clone(),
                        }),
                        Ok(Value::Bool(false)) => {
                            let value = self.eval(&g.value, &mut locals);
                            let class = g.reason.clone().unwrap_or_else(|| g.name.clone());
                            let v = match value {
                                Ok(Value::Number(n)) => Some(n),
                                Ok(Value::Unscored(r)) => {
                                    result.unscored_reason = Some(format!("gate `{}`: {r}", g.name));
                                    None
                                }
                                Err(t) => {
                                    result.trap = Some(self.trap_info(&t, g.site));
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
                                    result.trap = Some(self.trap_info(&t, g.site));
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
                    let decl = &self.p.criteria[*ci as usize];
                    let r = if let Some(gate) = &stopped {
                        let mut locals = Vec::new();
                        self.skipped(decl, &decl.id, gate, &mut locals)
                    } else {
                        self.step_name = format!("criterion {}", decl.id);
                        let mut locals = Vec::new();
                        self.criterion(decl, &decl.id, &mut locals)
                    };
                    self.criteria[*ci as usize] = Some(r);
                }
                Step::Each(e) => {
                    let mut locals = vec![Value::Null; e.locals as usize];
                    self.step_name = format!("criteria {}", self.p.sets[e.set as usize].name);
                    let list = self.eval(&e.list, &mut locals);
                    let name = &self.p.sets[e.set as usize].name;
                    let mut out = Vec::new();
                    match list {
                        Ok(Value::List(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                locals[e.local as usize] = item.clone();
                                let id = format!("{name}[{i}]");
                                let r = match &stopped {
                                    Some(gate) => self.skipped(&e.template, &id, gate, &mut locals),
                                    None => {
                                        self.step_name = format!("criterion {id}");
                                        self.criterion(&e.template, &id, &mut locals)
                                    }
                                };
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
                            result.trap.get_or_insert(self.trap_info(&t, e.template.site));
                            result.unscored_reason.get_or_insert(format!("criteria `{name}`: {}", trap_reason(&t)));
                        }
                    }
                    self.each[si] = out;
                }
            }
        }
        if stopped.is_none() && result.unscored_reason.is_none() {
            self.step_name = "score".into();
            let mut locals = Vec::new();
            match self.eval(&self.p.score, &mut locals) {
                Ok(Value::Number(n)) if n.is_finite() => {
                    result.score = Some(caps.iter().fold(n, |acc, c| acc.min(*c)));
                }
                Ok(Value::Number(n)) => result.unscored_reason = Some(format!("the score is not finite ({n})")),
                Ok(Value::Unscored(r)) => result.unscored_reason = Some(r.to_string()),
                Ok(other) => result.unscored_reason = Some(format!("the score produced {other}")),
                Err(t) => {
                    let site = score_site(&self.p.score);
                    result.trap = Some(self.trap_info(&t, site.unwrap_or(u32::MAX)));
                    result.unscored_reason = Some(trap_reason(&t));
                }
            }
        }
        // Criteria in step order.
        for (si, step) in self.p.steps.iter().enumerate() {
            match step {
                Step::Criterion(ci) => {
                    if let Some(r) = &self.criteria[*ci as usize] {
                        result.criteria.push(r.clone());
                    }
                }
                Step::Each(_) => result.criteria.extend(self.each[si].iter().cloned()),
                Step::Gate(_) => {}
            }
        }
        let policies = group_policies(self.p);
        for (i, s) in self.p.sets.iter().enumerate() {
            if s.kind == SetKind::Group {
                let v = match self.aggregate(AggOp::Tree, i as u32, policies[i], &[]) {
                    Ok(Value::Number(n)) => Some(n),
                    _ => None,
                };
                result.groups.push((s.name.clone(), v));
            }
        }
        result
    }

    fn trap_info(&self, t: &Trap, site: u32) -> TrapInfo {
        TrapInfo { code: t.kind.code(), message: t.message.clone(), site: self.p.sites.get(site as usize).cloned() }
    }

    fn note(&mut self, site: Option<u32>, value: impl FnOnce() -> String) {
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.push(TraceEvent {
                step: self.step_name.clone(),
                site: site.and_then(|s| self.p.sites.get(s as usize).cloned()),
                value: value(),
            });
        }
    }

    fn base_result(&mut self, d: &CriterionDecl, id: &str, locals: &mut Vec<Value>) -> CriterionResult {
        let text = match self.eval(&d.text, locals) {
            Ok(Value::Text(t)) => Some(t.to_string()),
            _ => None,
        };
        let num = |this: &mut Self, e: &Option<Expr>, locals: &mut Vec<Value>| -> Option<f64> {
            e.as_ref().and_then(|e| this.eval(e, locals).ok()).and_then(|v| v.as_number())
        };
        let points = num(self, &d.points, locals);
        let weight = num(self, &d.weight, locals).unwrap_or(1.0);
        let tags = match d.tags.as_ref().map(|t| self.eval(t, locals)) {
            Some(Ok(Value::List(l))) => l.iter().filter_map(|v| v.as_text().map(str::to_string)).collect(),
            _ => vec![],
        };
        // An axis may also come from an `axis:NAME` tag (HealthBench rows carry their axes so).
        let axis = d.axis.clone().or_else(|| tags.iter().find_map(|t| t.strip_prefix("axis:").map(str::to_string)));
        let source = match &d.verifier {
            Verifier::Judge { judge } => format!("judge:{}", self.p.judges[*judge as usize].name),
            Verifier::Extract { judge, .. } => format!("extract:{}", self.p.judges[*judge as usize].name),
            Verifier::Check { .. } => "check".into(),
            Verifier::Value { .. } => "value".into(),
        };
        CriterionResult {
            id: id.to_string(),
            text,
            kind: match d.kind {
                CriterionKind::Binary => "binary",
                CriterionKind::Ordinal { .. } => "ordinal",
                CriterionKind::Nominal { .. } => "nominal",
                CriterionKind::Continuous => "continuous",
            },
            status: Status::Unscored,
            reason: None,
            value: None,
            level: None,
            label: None,
            points,
            weight,
            axis,
            tags,
            source,
            evidence: None,
            extracted: None,
            sets: d.sets.iter().map(|s| self.p.sets[*s as usize].name.clone()).collect(),
        }
    }

    fn skipped(&mut self, d: &CriterionDecl, id: &str, gate: &str, locals: &mut Vec<Value>) -> CriterionResult {
        let mut r = self.base_result(d, id, locals);
        r.reason = Some(format!("gated: gate `{gate}` stopped evaluation before this criterion"));
        r
    }

    fn criterion(&mut self, d: &CriterionDecl, id: &str, locals: &mut Vec<Value>) -> CriterionResult {
        let mut r = self.base_result(d, id, locals);
        let pass = match d.pass.as_ref().map(|e| self.eval(e, locals)) {
            Some(Ok(Value::Number(n))) => Some(n),
            _ => None,
        };
        match &d.verifier {
            Verifier::Check { expr } => match self.eval(expr, locals) {
                Ok(Value::Bool(b)) => {
                    r.status = if b { Status::Met } else { Status::Unmet };
                    r.value = Some(if b { 1.0 } else { 0.0 });
                }
                Ok(Value::Unscored(reason)) => r.reason = Some(reason.to_string()),
                Ok(other) => r.reason = Some(format!("check produced {other}")),
                Err(t) => r.reason = Some(trap_reason(&t)),
            },
            Verifier::Value { expr } => match self.eval(expr, locals) {
                Ok(Value::Number(n)) if (0.0..=1.0).contains(&n) => {
                    r.value = Some(n);
                    r.status = if n >= pass.unwrap_or(0.5) { Status::Met } else { Status::Unmet };
                }
                Ok(Value::Number(n)) => r.reason = Some(format!("value_out_of_range: {n} is outside [0, 1]")),
                Ok(Value::Unscored(reason)) => r.reason = Some(reason.to_string()),
                Ok(other) => r.reason = Some(format!("value produced {other}")),
                Err(t) => r.reason = Some(trap_reason(&t)),
            },
            Verifier::Judge { judge } => {
                let j = &self.p.judges[*judge as usize];
                let evidence_text = j
                    .evidence_from
                    .and_then(|i| self.inputs.get(i as usize))
                    .and_then(|v| v.as_text().map(str::to_string));
                verdict::apply(&mut r, &d.kind, pass, j, self.verdicts.verdict(id), evidence_text.as_deref());
            }
            Verifier::Extract { judge, ty, local, check, .. } => {
                let j = &self.p.judges[*judge as usize];
                match verdict::extracted(j, ty, self.verdicts.verdict(id)) {
                    Ok(v) => {
                        r.extracted = Some(v.to_json());
                        if locals.len() <= *local as usize {
                            locals.resize(*local as usize + 1, Value::Null);
                        }
                        locals[*local as usize] = v;
                        match self.eval(check, locals) {
                            Ok(Value::Bool(b)) => {
                                r.status = if b { Status::Met } else { Status::Unmet };
                                r.value = Some(if b { 1.0 } else { 0.0 });
                            }
                            Ok(Value::Unscored(reason)) => r.reason = Some(reason.to_string()),
                            Ok(other) => r.reason = Some(format!("check produced {other}")),
                            Err(t) => r.reason = Some(trap_reason(&t)),
                        }
                    }
                    Err(reason) => r.reason = Some(reason),
                }
            }
        }
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.push(TraceEvent {
                step: self.step_name.clone(),
                site: None,
                value: format!(
                    "=> {}{}",
                    r.status.as_str(),
                    r.reason.as_ref().map(|x| format!(" ({x})")).unwrap_or_default()
                ),
            });
        }
        r
    }

    /// The results of a set's criteria, flattened in member order.
    fn members(&self, set: u32, out: &mut Vec<CriterionResult>) {
        for m in &self.p.sets[set as usize].members {
            match m {
                Member::Criterion(c) => {
                    if let Some(r) = &self.criteria[*c as usize] {
                        out.push(r.clone());
                    }
                }
                Member::Each(step) => out.extend(self.each[*step as usize].iter().cloned()),
                Member::Set(s) => self.members(*s, out),
            }
        }
    }

    fn aggregate(&mut self, op: AggOp, set: u32, policy: Policy, args: &[Value]) -> Result<Value, Trap> {
        if op == AggOp::Tree {
            return self.tree(set, policy);
        }
        let mut all = Vec::new();
        self.members(set, &mut all);
        let name = &self.p.sets[set as usize].name;
        let mut rs: Vec<(bool, f64, f64, f64)> = Vec::new(); // (met, value, weight, points)
        for r in &all {
            match r.status {
                Status::Unscored => match policy {
                    Policy::Propagate => {
                        return Ok(unscored(format!(
                            "criterion `{}` is unscored ({})",
                            r.id,
                            r.reason.as_deref().unwrap_or("no reason")
                        )))
                    }
                    Policy::Skip => {}
                    Policy::Unmet => rs.push((false, 0.0, r.weight, r.points.unwrap_or(0.0))),
                },
                s => rs.push((s == Status::Met, r.value.unwrap_or(0.0), r.weight, r.points.unwrap_or(0.0))),
            }
        }
        let n = rs.len() as f64;
        let empty = || Ok(unscored(format!("no scored criteria in `{name}`")));
        Ok(match op {
            AggOp::WeightedMean => {
                if rs.is_empty() {
                    return empty();
                }
                let mut num = 0.0;
                let mut den = 0.0;
                for (_, v, w, _) in &rs {
                    num += v * w;
                    den += w;
                }
                if den == 0.0 {
                    return Err(Trap::new(TrapKind::DivisionByZero, format!("the weights of `{name}` sum to 0")));
                }
                Value::Number(num / den)
            }
            AggOp::Mean => {
                if rs.is_empty() {
                    return empty();
                }
                Value::Number(rs.iter().map(|r| r.1).sum::<f64>() / n)
            }
            AggOp::Fraction => {
                if rs.is_empty() {
                    return empty();
                }
                Value::Number(rs.iter().filter(|r| r.0).count() as f64 / n)
            }
            AggOp::PointsRatio => {
                let mut achieved = 0.0;
                let mut possible = 0.0;
                for (met, v, _, p) in &rs {
                    if *met {
                        achieved += p * v;
                    }
                    if *p > 0.0 {
                        possible += p;
                    }
                }
                if possible == 0.0 {
                    return Ok(unscored(format!("no positive points in `{name}`")));
                }
                Value::Number(achieved / possible)
            }
            AggOp::SumPoints => {
                let mut s = 0.0;
                for (met, v, _, p) in &rs {
                    if *met {
                        s += p * v;
                    }
                }
                Value::Number(s)
            }
            AggOp::MaxPoints => Value::Number(rs.iter().map(|r| r.3).filter(|p| *p > 0.0).sum()),
            AggOp::All => Value::Bool(rs.iter().all(|r| r.0)),
            AggOp::Any => Value::Bool(rs.iter().any(|r| r.0)),
            AggOp::AtLeast => {
                let k = args.first().and_then(Value::as_number).unwrap_or(f64::NAN);
                Value::Bool(rs.iter().filter(|r| r.0).count() as f64 >= k)
            }
            AggOp::CountMet => Value::Number(rs.iter().filter(|r| r.0).count() as f64),
            AggOp::Count => Value::Number(n),
            AggOp::MinValue => {
                if rs.is_empty() {
                    return empty();
                }
                Value::Number(rs.iter().map(|r| r.1).fold(f64::INFINITY, f64::min))
            }
            AggOp::MaxValue => {
                if rs.is_empty() {
                    return empty();
                }
                Value::Number(rs.iter().map(|r| r.1).fold(f64::NEG_INFINITY, f64::max))
            }
            AggOp::Tree => unreachable!(),
        })
    }

    /// A node's score is Σ(child score × child weight) / Σ(child weight), summed left to
    /// right as PaperBench does. With `skip`, unscored children leave the node.
    fn tree(&mut self, set: u32, policy: Policy) -> Result<Value, Trap> {
        let mut num = 0.0;
        let mut den = 0.0;
        let members = self.p.sets[set as usize].members.clone();
        for m in &members {
            let (score, weight): (Option<f64>, f64) = match m {
                Member::Criterion(c) => match &self.criteria[*c as usize] {
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
                    let w = self.p.sets[*s as usize].weight.unwrap_or(1.0);
                    match self.tree(*s, policy)? {
                        Value::Number(n) => (Some(n), w),
                        Value::Unscored(r) => match policy {
                            Policy::Skip => continue,
                            _ => return Ok(Value::Unscored(r)),
                        },
                        _ => continue,
                    }
                }
                Member::Each(step) => {
                    let rs = self.each[*step as usize].clone();
                    for r in rs {
                        let (s, w) = match r.status {
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
            let name = &self.p.sets[set as usize].name;
            return Ok(unscored(format!("no scored children in group `{name}`")));
        }
        Ok(Value::Number(num / den))
    }

    fn eval(&mut self, e: &Expr, locals: &mut Vec<Value>) -> Result<Value, Trap> {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.eval_inner(e, locals))
    }

    fn eval_inner(&mut self, e: &Expr, locals: &mut Vec<Value>) -> Result<Value, Trap> {
        Ok(match &e.kind {
            ExprKind::Const(c) => match c {
                Const::Null => Value::Null,
                Const::Bool(b) => Value::Bool(*b),
                Const::Number(n) => Value::Number(*n),
                Const::Text(t) => Value::Text(Arc::from(t.as_str())),
            },
            ExprKind::Input(i) => self.inputs.get(*i as usize).cloned().unwrap_or(Value::Null),
            ExprKind::Local(i) => locals.get(*i as usize).cloned().unwrap_or(Value::Null),
            ExprKind::Let(i) => {
                if let Some(v) = &self.lets[*i as usize] {
                    return v.clone();
                }
                let mut fresh = Vec::new();
                let v = self.eval(&self.p.lets[*i as usize].value, &mut fresh);
                self.lets[*i as usize] = Some(v.clone());
                return v;
            }
            ExprKind::Criterion(c) => self.verdict_value(*c),
            ExprKind::List(xs) => {
                let mut out = Vec::with_capacity(xs.len());
                for x in xs {
                    out.push(self.eval(x, locals)?);
                }
                Value::list(out)
            }
            ExprKind::Record(fs) => {
                let mut out = std::collections::BTreeMap::new();
                for (n, x) in fs {
                    out.insert(Arc::from(n.as_str()), self.eval(x, locals)?);
                }
                Value::Record(Arc::new(out))
            }
            ExprKind::Field { base, name, .. } => match self.eval(base, locals)? {
                Value::Record(r) => r.get(name.as_str()).cloned().unwrap_or(Value::Null),
                Value::Unscored(r) => Value::Unscored(r),
                other => return Err(Trap::new(TrapKind::Type, format!("cannot read `.{name}` of {other}"))),
            },
            ExprKind::Index { base, index, .. } => {
                let b = self.eval(base, locals)?;
                let i = self.eval(index, locals)?;
                match (b, i) {
                    (Value::Unscored(r), _) | (_, Value::Unscored(r)) => Value::Unscored(r),
                    (Value::List(l), Value::Number(n)) => {
                        if n.fract() != 0.0 || n < 0.0 || n as usize >= l.len() {
                            return Err(Trap::new(
                                TrapKind::OutOfRange,
                                format!("index {n} is out of range for a list of {}", l.len()),
                            ));
                        }
                        l[n as usize].clone()
                    }
                    (b, i) => return Err(Trap::new(TrapKind::Type, format!("cannot index {b} with {i}"))),
                }
            }
            ExprKind::Unary { op, arg } => match (op, self.eval(arg, locals)?) {
                (_, Value::Unscored(r)) => Value::Unscored(r),
                (UnOp::Neg, Value::Number(n)) => Value::Number(-n),
                (UnOp::Not, Value::Bool(b)) => Value::Bool(!b),
                (_, v) => return Err(Trap::new(TrapKind::Type, format!("bad operand {v}"))),
            },
            ExprKind::Binary { op, lhs, rhs, .. } => self.binary(*op, lhs, rhs, locals)?,
            ExprKind::Compare { first, rest } => {
                let mut prev = self.eval(first, locals)?;
                let mut result = Value::Bool(true);
                for (op, x) in rest {
                    let v = self.eval(x, locals)?;
                    let r = compare(*op, &prev, &v)?;
                    result = match (result, r) {
                        (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
                        (Value::Unscored(u), _) | (_, Value::Unscored(u)) => Value::Unscored(u),
                        _ => Value::Bool(true),
                    };
                    prev = v;
                }
                result
            }
            ExprKind::If { cond, then, els } => match self.eval(cond, locals)? {
                Value::Bool(true) => self.eval(then, locals)?,
                Value::Bool(false) => self.eval(els, locals)?,
                Value::Unscored(r) => Value::Unscored(r),
                other => return Err(Trap::new(TrapKind::Type, format!("condition is {other}"))),
            },
            ExprKind::Intrinsic { name, overload, args, site } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a, locals)?);
                }
                if let Some(u) = vals.iter().find(|v| v.is_unscored()) {
                    return Ok(u.clone());
                }
                let intr = stdlib::lookup(name)
                    .nth(*overload as usize)
                    .map(|(_, i)| i)
                    .ok_or_else(|| Trap::new(TrapKind::Type, format!("unknown intrinsic `{name}`#{overload}")))?;
                let v = (intr.imp)(&vals, &mut self.ctx)?;
                self.note(Some(*site), || v.to_string());
                v
            }
            ExprKind::Call { func, args, site } => {
                let f = &self.p.functions[*func as usize];
                let mut frame = vec![Value::Null; (f.locals as usize).max(args.len())];
                for (i, a) in args.iter().enumerate() {
                    frame[i] = self.eval(a, locals)?;
                }
                let v = self.eval(&f.body, &mut frame)?;
                self.note(Some(*site), || v.to_string());
                v
            }
            ExprKind::Aggregate { op, set, policy, args, site } => {
                let mut vals = Vec::new();
                for a in args {
                    vals.push(self.eval(a, locals)?);
                }
                let v = self.aggregate(*op, *set, *policy, &vals)?;
                self.note(Some(*site), || v.to_string());
                v
            }
            ExprKind::HigherOrder { op, list, local, body } => {
                let l = match self.eval(list, locals)? {
                    Value::List(l) => l,
                    Value::Unscored(r) => return Ok(Value::Unscored(r)),
                    other => return Err(Trap::new(TrapKind::Type, format!("expected a list, found {other}"))),
                };
                let slot = *local as usize;
                if locals.len() <= slot {
                    locals.resize(slot + 1, Value::Null);
                }
                let mut out = Vec::new();
                let mut saw_unscored: Option<Value> = None;
                for item in l.iter() {
                    locals[slot] = item.clone();
                    let v = self.eval(body, locals)?;
                    match op {
                        HigherOrder::Map => out.push(v),
                        _ => match v {
                            Value::Bool(b) => {
                                if *op == HigherOrder::Filter && b {
                                    out.push(item.clone());
                                }
                                if *op == HigherOrder::All && !b {
                                    return Ok(Value::Bool(false));
                                }
                                if *op == HigherOrder::Any && b {
                                    return Ok(Value::Bool(true));
                                }
                                if *op == HigherOrder::Count && b {
                                    out.push(Value::Null);
                                }
                            }
                            u @ Value::Unscored(_) => saw_unscored = Some(u),
                            other => return Err(Trap::new(TrapKind::Type, format!("predicate produced {other}"))),
                        },
                    }
                }
                if let Some(u) = saw_unscored {
                    return Ok(u);
                }
                match op {
                    HigherOrder::Map | HigherOrder::Filter => Value::list(out),
                    HigherOrder::All => Value::Bool(true),
                    HigherOrder::Any => Value::Bool(false),
                    HigherOrder::Count => Value::Number(out.len() as f64),
                }
            }
        })
    }

    fn verdict_value(&self, c: u32) -> Value {
        let Some(r) = &self.criteria[c as usize] else {
            return unscored("criterion not evaluated");
        };
        let mut m = std::collections::BTreeMap::new();
        let reason =
            || unscored(format!("criterion `{}` is unscored ({})", r.id, r.reason.as_deref().unwrap_or("no reason")));
        let scored = r.status != Status::Unscored;
        m.insert(Arc::from("met"), if scored { Value::Bool(r.status == Status::Met) } else { reason() });
        m.insert(Arc::from("value"), if scored { Value::Number(r.value.unwrap_or(0.0)) } else { reason() });
        m.insert(Arc::from("points"), Value::Number(r.points.unwrap_or(0.0)));
        m.insert(Arc::from("weight"), Value::Number(r.weight));
        m.insert(Arc::from("unscored"), Value::Bool(!scored));
        Value::Record(Arc::new(m))
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, locals: &mut Vec<Value>) -> Result<Value, Trap> {
        // Kleene logic: a decided side can decide the result even if the other is unscored.
        match op {
            BinOp::And => {
                let a = self.eval(lhs, locals)?;
                if a == Value::Bool(false) {
                    return Ok(a);
                }
                let b = self.eval(rhs, locals)?;
                return Ok(match (a, b) {
                    (_, Value::Bool(false)) => Value::Bool(false),
                    (Value::Unscored(r), _) | (_, Value::Unscored(r)) => Value::Unscored(r),
                    _ => Value::Bool(true),
                });
            }
            BinOp::Or => {
                let a = self.eval(lhs, locals)?;
                if a == Value::Bool(true) {
                    return Ok(a);
                }
                let b = self.eval(rhs, locals)?;
                return Ok(match (a, b) {
                    (_, Value::Bool(true)) => Value::Bool(true),
                    (Value::Unscored(r), _) | (_, Value::Unscored(r)) => Value::Unscored(r),
                    _ => Value::Bool(false),
                });
            }
            BinOp::Coalesce => {
                let a = self.eval(lhs, locals)?;
                return if a == Value::Null { self.eval(rhs, locals) } else { Ok(a) };
            }
            _ => {}
        }
        let a = self.eval(lhs, locals)?;
        let b = self.eval(rhs, locals)?;
        Ok(match (op, a, b) {
            (_, Value::Unscored(r), _) | (_, _, Value::Unscored(r)) => Value::Unscored(r),
            (BinOp::Concat | BinOp::Add, Value::Text(x), Value::Text(y)) => Value::Text(Arc::from(format!("{x}{y}"))),
            (BinOp::Add, Value::Number(x), Value::Number(y)) => Value::Number(x + y),
            (BinOp::Sub, Value::Number(x), Value::Number(y)) => Value::Number(x - y),
            (BinOp::Mul, Value::Number(x), Value::Number(y)) => Value::Number(x * y),
            (BinOp::Div, Value::Number(x), Value::Number(y)) => {
                if y == 0.0 {
                    return Err(Trap::new(TrapKind::DivisionByZero, format!("{x} / 0")));
                }
                Value::Number(x / y)
            }
            (BinOp::Rem, Value::Number(x), Value::Number(y)) => {
                if y == 0.0 {
                    return Err(Trap::new(TrapKind::DivisionByZero, format!("{x} % 0")));
                }
                Value::Number(x % y)
            }
            (op, a, b) => return Err(Trap::new(TrapKind::Type, format!("bad operands for {op:?}: {a} and {b}"))),
        })
    }
}

/// The unscored policy each group is reported with: that of the `tree(...)` in the score
/// that covers it (the nearest enclosing one), else `propagate`.
fn group_policies(p: &Program) -> Vec<Policy> {
    let mut declared: Vec<Option<Policy>> = vec![None; p.sets.len()];
    ir::walk(&p.score, &mut |e| {
        if let ExprKind::Aggregate { op: AggOp::Tree, set, policy, .. } = &e.kind {
            declared[*set as usize].get_or_insert(*policy);
        }
    });
    fn down(p: &Program, set: usize, inherited: Option<Policy>, declared: &[Option<Policy>], out: &mut Vec<Policy>) {
        let here = declared[set].or(inherited);
        out[set] = here.unwrap_or(Policy::Propagate);
        for m in &p.sets[set].members {
            if let Member::Set(s) = m {
                down(p, *s as usize, here, declared, out);
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
            down(p, i, None, &declared, &mut out);
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

/// Structural equality and ordering of values, shared by every engine.
pub fn compare(op: CmpOp, a: &Value, b: &Value) -> Result<Value, Trap> {
    if let Value::Unscored(r) = a {
        return Ok(Value::Unscored(r.clone()));
    }
    if let Value::Unscored(r) = b {
        return Ok(Value::Unscored(r.clone()));
    }
    Ok(Value::Bool(match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        _ => {
            let ord = match (a, b) {
                (Value::Number(x), Value::Number(y)) => x.partial_cmp(y),
                (Value::Text(x), Value::Text(y)) => Some(x.cmp(y)),
                _ => return Err(Trap::new(TrapKind::Type, format!("cannot order {a} and {b}"))),
            };
            let Some(ord) = ord else { return Ok(Value::Bool(false)) };
            match op {
                CmpOp::Lt => ord.is_lt(),
                CmpOp::Le => ord.is_le(),
                CmpOp::Gt => ord.is_gt(),
                _ => ord.is_ge(),
            }
        }
    }))
}
