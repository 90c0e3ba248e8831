//! A readable, index-free description of a compiled program: every input, judge, gate,
//! criterion, set, let and function with its expressions printed in rubric-like infix syntax and
//! every index resolved to a name. `rubric inspect` shows it, the bundle manifest takes its
//! judges and entry point from it, and `rubric diff` compares two of them, so that moving a
//! declaration (which renumbers indices and shifts source sites) is not reported as a change.

use crate::ir::{
    BinOp, Const, CriterionDecl, CriterionKind, Expr, ExprKind, GateAction, JudgeDecl, Member, Policy, Program,
    Scoring, SetKind, Step, UnOp, Verifier, Vote,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Description {
    pub rubric: RubricView,
    pub ir_hash: String,
    pub inputs: Vec<InputView>,
    pub judges: Vec<JudgeView>,
    pub gates: Vec<GateView>,
    pub criteria: Vec<CriterionView>,
    pub sets: Vec<SetView>,
    pub lets: Vec<NamedExpr>,
    pub functions: Vec<NamedExpr>,
    pub score: String,
    pub score_type: String,
    /// Report-only scores (`score NAME = ...`): name and expression.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<NamedExpr>,
    /// Run statistics (`stat NAME = ...`): name and form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stats: Vec<NamedExpr>,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricView {
    pub name: String,
    pub version: String,
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputView {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    /// A row must carry it (not optional and no default).
    pub required: bool,
    pub default: Option<String>,
    /// The row field it reads, when that is not its name (`from "FIELD"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// A judge as a bundle's manifest lists it: everything that decides what is sent to the model
/// and how its reply is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeView {
    pub name: String,
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    pub seed: Option<u64>,
    pub samples: u32,
    pub vote: String,
    /// The inputs rendered into its prompt.
    pub sees: Vec<String>,
    pub returns: String,
    pub reply_fields: Vec<(String, String)>,
    /// The input a quoted evidence must occur in.
    pub evidence_from: Option<String>,
    pub template: Option<String>,
    pub system: Option<String>,
    pub scoring: String,
    pub per_call: u32,
    /// The model directory of a local judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Its calibration: the file, each map (criteria, method, threshold, pairs) and a hash of
    /// the maps, so that any change to them shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// `shuffled` when ordinal and nominal options are shown in a per-request order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// A jury's members (and weights), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jury: Option<String>,
    /// A cascade's members, by name, and when it escalates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cascade: Option<String>,
    /// A comparing judge's candidates (`answer_a, answer_b`) and what an inconsistent pair
    /// becomes under `order both`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compares: Option<String>,
    /// A group judge's rollouts input (`rollouts X`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollouts: Option<String>,
    /// The criteria it decides (a per-instance block as `name[]`).
    pub criteria: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateView {
    pub name: String,
    /// 0-based position among the steps (gates and criteria in evaluation order).
    pub step: usize,
    pub condition: String,
    pub action: String,
    pub value: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionView {
    /// The id; a per-instance template reads `name[]`.
    pub id: String,
    pub step: usize,
    pub per_instance: bool,
    pub text: String,
    pub kind: String,
    /// Ordinal levels or nominal labels.
    pub scale: Option<String>,
    pub points: Option<String>,
    pub weight: Option<String>,
    pub pass: Option<String>,
    pub axis: Option<String>,
    pub tags: Option<String>,
    /// `check`, `value`, `judge` or `extract`.
    pub verifier: String,
    /// The check or value expression, the judge's name, or the extraction and its check.
    pub verifier_detail: String,
    /// Enclosing sets, innermost first, as `tier essential`.
    pub sets: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetView {
    pub name: String,
    pub kind: String,
    pub weight: Option<f64>,
    pub members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedExpr {
    pub name: String,
    /// The type (a let) or the signature (a function).
    #[serde(rename = "type")]
    pub ty: String,
    pub value: String,
}

pub fn describe(p: &Program) -> Description {
    let printer = Printer { p, locals: Locals::new() };
    let inputs = p
        .inputs
        .iter()
        .map(|i| InputView {
            name: i.name.clone(),
            ty: i.ty.to_string(),
            required: !i.ty.is_optional() && i.default.is_none(),
            default: i.default.as_ref().map(|d| printer.expr(d)),
            field: i.field.clone(),
        })
        .collect();
    let mut gates = Vec::new();
    let mut criteria = Vec::new();
    for (step, s) in p.steps.iter().enumerate() {
        match s {
            Step::Gate(g) => gates.push(GateView {
                name: g.name.clone(),
                step,
                condition: printer.expr(&g.cond),
                action: match g.action {
                    GateAction::Score => "score",
                    GateAction::Cap => "cap",
                }
                .into(),
                value: printer.expr(&g.value),
                reason: g.reason.clone(),
            }),
            // A validated program's steps name existing criteria; any other is left out.
            Step::Criterion(c) => {
                if let Some(d) = p.criteria.get(*c as usize) {
                    criteria.push(criterion_view(p, d, step, None));
                }
            }
            Step::Each(e) => {
                let list = printer.expr(&e.list);
                let element = format!("{list}[i]");
                criteria.push(criterion_view(p, &e.template, step, Some((e.local, element))));
            }
        }
    }
    let sets = p
        .sets
        .iter()
        .map(|s| SetView {
            name: s.name.clone(),
            kind: set_kind(s.kind).into(),
            weight: s.weight,
            members: s.members.iter().map(|m| member_name(p, m)).collect(),
        })
        .collect();
    let lets = p
        .lets
        .iter()
        .map(|l| NamedExpr { name: l.name.clone(), ty: l.ty.to_string(), value: printer.expr(&l.value) })
        .collect();
    let functions = p
        .functions
        .iter()
        .map(|f| {
            let locals: Locals = f.params.iter().enumerate().map(|(i, (n, _))| (i as u32, n.clone())).collect();
            let params: Vec<String> = f.params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
            NamedExpr {
                name: f.name.clone(),
                ty: format!("({}) -> {}", params.join(", "), f.ret),
                value: Printer { p, locals }.expr(&f.body),
            }
        })
        .collect();
    Description {
        rubric: RubricView {
            name: p.rubric.name.clone(),
            version: p.rubric.version.clone(),
            title: p.rubric.title.clone(),
        },
        ir_hash: p.hash(),
        inputs,
        judges: p.judges.iter().enumerate().map(|(i, j)| judge_view(p, i, j)).collect(),
        gates,
        criteria,
        sets,
        lets,
        functions,
        score: printer.expr(&p.score),
        score_type: p.score.ty.to_string(),
        scores: p
            .scores
            .iter()
            .map(|s| NamedExpr { name: s.name.clone(), ty: s.expr.ty.to_string(), value: printer.expr(&s.expr) })
            .collect(),
        stats: p
            .stats
            .iter()
            .map(|s| {
                let line = crate::ir::stat_form(s);
                NamedExpr { name: s.name.clone(), ty: "stat".into(), value: line }
            })
            .collect(),
        examples: p.examples.iter().map(|e| e.name.clone()).collect(),
    }
}

fn set_kind(k: SetKind) -> &'static str {
    match k {
        SetKind::All => "all",
        SetKind::Tier => "tier",
        SetKind::Block => "criteria",
        SetKind::Each => "each",
        SetKind::Group => "group",
        SetKind::Checks => "checks",
    }
}

fn member_name(p: &Program, m: &Member) -> String {
    match m {
        Member::Criterion(c) => p.criteria.get(*c as usize).map_or_else(|| format!("#{c}"), |c| c.id.clone()),
        Member::Each(s) => match p.steps.get(*s as usize) {
            Some(Step::Each(e)) => format!("{}[]", e.template.id),
            _ => format!("step#{s}"),
        },
        Member::Set(s) => p.sets.get(*s as usize).map_or_else(|| format!("set#{s}"), |s| s.name.clone()),
    }
}

fn judge_name(p: &Program, j: u32) -> String {
    p.judges.get(j as usize).map_or_else(|| format!("judge#{j}"), |j| j.name.clone())
}

fn input_name(p: &Program, i: u32) -> String {
    p.inputs.get(i as usize).map_or_else(|| format!("input#{i}"), |i| i.name.clone())
}

fn judge_view(p: &Program, index: usize, j: &JudgeDecl) -> JudgeView {
    let mut criteria = Vec::new();
    for s in &p.steps {
        let (c, suffix) = match s {
            Step::Criterion(c) => match p.criteria.get(*c as usize) {
                Some(c) => (c, ""),
                None => continue,
            },
            Step::Each(e) => (&e.template, "[]"),
            Step::Gate(_) => continue,
        };
        if let Verifier::Judge { judge } | Verifier::Extract { judge, .. } = &c.verifier {
            if *judge as usize == index {
                criteria.push(format!("{}{suffix}", c.id));
            }
        }
    }
    JudgeView {
        name: j.name.clone(),
        model: j.model.clone(),
        temperature: j.temperature,
        top_p: j.top_p,
        max_tokens: j.max_tokens,
        reasoning_effort: j.reasoning_effort.clone(),
        seed: j.seed,
        samples: j.samples,
        vote: match j.vote {
            Vote::Majority => "majority",
            Vote::Mean => "mean",
            Vote::Unanimous => "unanimous",
            Vote::Weighted => "weighted",
        }
        .into(),
        sees: j.sees.iter().map(|i| input_name(p, *i)).collect(),
        returns: j.returns.clone(),
        reply_fields: j.reply_fields.iter().map(|(n, t)| (n.clone(), t.to_string())).collect(),
        evidence_from: j.evidence_from.map(|i| input_name(p, i)),
        template: j.template.clone(),
        system: j.system.clone(),
        scoring: match j.scoring {
            Scoring::Label => "label",
            Scoring::Logprob => "logprob",
        }
        .into(),
        per_call: j.per_call,
        local: j.local.clone(),
        calibration: j.calibration.as_ref().map(calibration_summary),
        order: match j.order {
            crate::ir::Order::Fixed => None,
            crate::ir::Order::Shuffled => Some("shuffled".to_string()),
            crate::ir::Order::Both => Some("both".to_string()),
        },
        jury: j.jury.as_ref().map(|jy| {
            let names: Vec<String> =
                jy.members.iter().map(|m| p.judges.get(*m as usize).map_or("?".into(), |d| d.name.clone())).collect();
            match &jy.weights {
                Some(w) => format!(
                    "{} (weights {})",
                    names.join(", "),
                    w.iter().map(|x| num(*x)).collect::<Vec<_>>().join(", ")
                ),
                None => names.join(", "),
            }
        }),
        cascade: j
            .cascade
            .as_ref()
            .map(|c| crate::ir::cascade_text(c, &|m| p.judges.get(m as usize).map_or("?".into(), |d| d.name.clone()))),
        compares: j.compares.as_ref().map(|c| {
            let name = |i: u32| p.inputs.get(i as usize).map_or("?".to_string(), |x| x.name.clone());
            let rule = if j.order == crate::ir::Order::Both {
                format!(" (inconsistent {})", c.inconsistent.name())
            } else {
                String::new()
            };
            format!("{}, {}{rule}", name(c.first), name(c.second))
        }),
        rollouts: j.rollouts.map(|i| p.inputs.get(i as usize).map_or("?".to_string(), |x| x.name.clone())),
        criteria,
    }
}

fn criterion_view(p: &Program, c: &CriterionDecl, step: usize, each: Option<(u32, String)>) -> CriterionView {
    let mut printer = Printer { p, locals: Locals::new() };
    let per_instance = each.is_some();
    if let Some((local, name)) = each {
        printer.name_local(local, name);
    }
    let opt = |e: &Option<Expr>| e.as_ref().map(|e| printer.expr(e));
    let (kind, scale) = match &c.kind {
        CriterionKind::Binary => ("binary", None),
        CriterionKind::Continuous => ("continuous", None),
        CriterionKind::Preference => ("preference", None),
        CriterionKind::Ordinal { levels } => {
            let l: Vec<String> = levels.iter().map(|(n, d)| format!("{} {}", num(*n), quote(d))).collect();
            ("ordinal", Some(format!("[{}]", l.join(", "))))
        }
        CriterionKind::Nominal { labels } => {
            let l: Vec<String> = labels.iter().map(|(n, v)| format!("{n}: {}", num(*v))).collect();
            ("nominal", Some(format!("{{{}}}", l.join(", "))))
        }
    };
    let (verifier, verifier_detail) = match &c.verifier {
        Verifier::Judge { judge } => ("judge", judge_name(p, *judge)),
        Verifier::Check { expr } => ("check", printer.expr(expr)),
        Verifier::Value { expr } => ("value", printer.expr(expr)),
        Verifier::Extract { judge, from, ty, local, check } => {
            let mut inner = Printer { p, locals: printer.locals.clone() };
            inner.name_local(*local, "extracted".into());
            (
                "extract",
                format!(
                    "extract {ty} from {} by {} check {}",
                    input_name(p, *from),
                    judge_name(p, *judge),
                    inner.expr(check)
                ),
            )
        }
    };
    CriterionView {
        id: if per_instance { format!("{}[]", c.id) } else { c.id.clone() },
        step,
        per_instance,
        text: printer.expr(&c.text),
        kind: kind.into(),
        scale,
        points: opt(&c.points),
        weight: opt(&c.weight),
        pass: opt(&c.pass),
        axis: c.axis.clone(),
        tags: opt(&c.tags),
        verifier: verifier.into(),
        verifier_detail,
        sets: c
            .sets
            .iter()
            .filter_map(|s| p.sets.get(*s as usize))
            .map(|s| format!("{} {}", set_kind(s.kind), s.name))
            .collect(),
    }
}

/// A number as rubric source writes it: integers without a fraction.
pub fn num(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Binding strength, weakest first (as the grammar's `expr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Lowest,
    Coalesce,
    Or,
    And,
    Not,
    Compare,
    Add,
    Mul,
    Neg,
    Postfix,
}

/// Names of locals by index (a map, not a vector: an index is only as large as the program
/// says, and a program from a bundle could say anything).
type Locals = std::collections::BTreeMap<u32, String>;

struct Printer<'a> {
    p: &'a Program,
    /// Names of locals where known (function parameters, the element of a per-instance
    /// block); others print as `$N`.
    locals: Locals,
}

impl Printer<'_> {
    fn name_local(&mut self, local: u32, name: String) {
        self.locals.insert(local, name);
    }

    fn local(&self, l: u32) -> String {
        self.locals.get(&l).cloned().unwrap_or_else(|| format!("${l}"))
    }

    pub fn expr(&self, e: &Expr) -> String {
        self.at(e, Prec::Lowest)
    }

    fn at(&self, e: &Expr, min: Prec) -> String {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || {
            let (s, prec) = self.form(e);
            if prec < min {
                format!("({s})")
            } else {
                s
            }
        })
    }

    fn list(&self, xs: &[Expr]) -> String {
        xs.iter().map(|x| self.expr(x)).collect::<Vec<_>>().join(", ")
    }

    fn form(&self, e: &Expr) -> (String, Prec) {
        let p = self.p;
        let atom = |s: String| (s, Prec::Postfix);
        match &e.kind {
            ExprKind::Const(c) => match c {
                Const::Null => atom("null".into()),
                Const::Bool(b) => atom(b.to_string()),
                Const::Number(n) if *n < 0.0 => (num(*n), Prec::Neg),
                Const::Number(n) => atom(num(*n)),
                Const::Text(t) => atom(quote(t)),
            },
            ExprKind::Input(i) => atom(input_name(p, *i)),
            ExprKind::Local(l) => atom(self.local(*l)),
            ExprKind::Let(l) => atom(p.lets.get(*l as usize).map_or_else(|| format!("let#{l}"), |l| l.name.clone())),
            ExprKind::Criterion(c) => {
                atom(p.criteria.get(*c as usize).map_or_else(|| format!("criterion#{c}"), |c| c.id.clone()))
            }
            ExprKind::List(xs) => atom(format!("[{}]", self.list(xs))),
            ExprKind::Record(fs) => {
                let f: Vec<String> = fs.iter().map(|(k, v)| format!("{k}: {}", self.expr(v))).collect();
                atom(format!("{{{}}}", f.join(", ")))
            }
            ExprKind::Field { base, name, .. } => atom(format!("{}.{name}", self.at(base, Prec::Postfix))),
            // The source wrote the value itself; the narrowing is the checker's.
            ExprKind::Narrowed(arg) => self.form(arg),
            ExprKind::Index { base, index, .. } => {
                atom(format!("{}[{}]", self.at(base, Prec::Postfix), self.expr(index)))
            }
            ExprKind::Unary { op: UnOp::Neg, arg } => (format!("-{}", self.at(arg, Prec::Neg)), Prec::Neg),
            ExprKind::Unary { op: UnOp::Not, arg } => (format!("not {}", self.at(arg, Prec::Not)), Prec::Not),
            ExprKind::Binary { op, lhs, rhs, .. } => {
                let (sym, prec) = match op {
                    BinOp::Add => ("+", Prec::Add),
                    BinOp::Concat => ("+", Prec::Add),
                    BinOp::Sub => ("-", Prec::Add),
                    BinOp::Mul => ("*", Prec::Mul),
                    BinOp::Div => ("/", Prec::Mul),
                    BinOp::Rem => ("%", Prec::Mul),
                    BinOp::And => ("and", Prec::And),
                    BinOp::Or => ("or", Prec::Or),
                    BinOp::Coalesce => ("??", Prec::Coalesce),
                };
                let right = next(prec);
                (format!("{} {sym} {}", self.at(lhs, prec), self.at(rhs, right)), prec)
            }
            ExprKind::Compare { first, rest } => {
                let mut s = self.at(first, Prec::Add);
                for (op, x) in rest {
                    s.push_str(&format!(" {} {}", op.symbol(), self.at(x, Prec::Add)));
                }
                (s, Prec::Compare)
            }
            ExprKind::If { cond, then, els } => {
                (format!("if {} then {} else {}", self.expr(cond), self.expr(then), self.expr(els)), Prec::Lowest)
            }
            ExprKind::Intrinsic { name, args, .. } => atom(format!("{name}({})", self.list(args))),
            ExprKind::Call { func, args, .. } => {
                let name = p.functions.get(*func as usize).map_or_else(|| format!("fn#{func}"), |f| f.name.clone());
                atom(format!("{name}({})", self.list(args)))
            }
            ExprKind::Aggregate { op, set, policy, args, .. } => {
                let mut parts =
                    vec![p.sets.get(*set as usize).map_or_else(|| format!("set#{set}"), |s| s.name.clone())];
                parts.extend(args.iter().map(|a| self.expr(a)));
                match policy {
                    Policy::Propagate => {}
                    Policy::Skip => parts.push("unscored: skip".into()),
                    Policy::Unmet => parts.push("unscored: unmet".into()),
                }
                atom(format!("{}({})", op.name(), parts.join(", ")))
            }
            ExprKind::HigherOrder { op, list, local, body } => {
                atom(format!("{}({}, {} => {})", op.name(), self.expr(list), self.local(*local), self.expr(body)))
            }
        }
    }
}

fn next(p: Prec) -> Prec {
    match p {
        Prec::Lowest => Prec::Coalesce,
        Prec::Coalesce => Prec::Or,
        Prec::Or => Prec::And,
        Prec::And => Prec::Not,
        Prec::Not => Prec::Compare,
        Prec::Compare => Prec::Add,
        Prec::Add => Prec::Mul,
        Prec::Mul => Prec::Neg,
        Prec::Neg | Prec::Postfix => Prec::Postfix,
    }
}

/// Print one expression of `p` (inspect's score line, diff's details).
pub fn print_expr(p: &Program, e: &Expr) -> String {
    Printer { p, locals: Locals::new() }.expr(e)
}

/// A calibration in one line: `FILE: * isotonic (9 points) at 0.55 over 69 pairs; ...
/// (maps sha256:…)`.
fn calibration_summary(c: &crate::ir::calibration::Calibration) -> String {
    use crate::ir::calibration::Method;
    use sha2::{Digest, Sha256};
    let maps: Vec<String> = c
        .maps
        .iter()
        .map(|m| {
            let method = match &m.map {
                Method::Isotonic { points } => format!("isotonic ({} points)", points.len()),
                Method::Platt { a, b } => format!("platt (a {}, b {})", num(*a), num(*b)),
                Method::Confusion { met, unmet } => format!("confusion (met {}, unmet {})", num(*met), num(*unmet)),
            };
            format!("{} {method} at {} over {} pairs", m.criteria, num(m.threshold), m.pairs)
        })
        .collect();
    let bytes = serde_json::to_vec(&c.maps).unwrap_or_default();
    let hash: String = Sha256::digest(&bytes).iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{}: {} (maps sha256:{hash})", c.file, maps.join("; "))
}
