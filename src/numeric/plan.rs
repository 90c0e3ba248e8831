//! The plan of the tensor numeric stage (`numeric`): the score expression of a compiled
//! rubric rewritten, where it can be, into the forms the stage computes as tensor operations
//! over the criterion-result matrix. A score with any other form has no plan and stays on the
//! scalar path.
//!
//! The forms (anything else has no plan):
//!
//! - number and boolean constants;
//! - every aggregation of the language over a set (`weighted_mean`, `mean`, `fraction`,
//!   `points_ratio`, `sum_points`, `max_points`, `tree`, `all`, `any`, `at_least` with a
//!   constant count, `count_met`, `count`, `min_value`, `max_value`), with any unscored policy;
//! - `.met`, `.value`, `.points`, `.weight` and `.unscored` of a static criterion;
//! - `-x`, `not b`, `+ - * /` on numbers, Kleene `and`/`or`, comparison chains of numbers
//!   (and `==`/`!=` of booleans), `if … then … else`;
//! - the intrinsics `abs`, `floor`, `ceil`, `min(a, b)`, `max(a, b)` and `clip(x, lo, hi)` with
//!   constant bounds `lo <= hi`;
//! - `let`s whose value is one of these forms (inlined: they are pure).
//!
//! Inputs, functions, `%`, `??`, text, lists, records and every other intrinsic have no plan.
//! Tiers and blocks are sets, so every tier formula made of these forms has one. The group
//! trees of the result's `groups` object always have one.

use crate::ir::{AggOp, BinOp, CmpOp, Const, Expr, ExprKind, Policy, Program, SetKind, Type, UnOp};

/// A field of a criterion read as a value (`er.met`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictField {
    Met,
    Value,
    Points,
    Weight,
    Unscored,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Func {
    Abs,
    Floor,
    Ceil,
    Min,
    Max,
    Clip { lo: f64, hi: f64 },
}

/// A node of a plan; numbers and booleans alike are computed as `f64` (booleans 0/1).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Num(f64),
    Bool(bool),
    /// `op(set, k, unscored: policy)`; `k` is NaN when absent (as `interp::aggregate` reads it).
    Agg {
        op: AggOp,
        set: u32,
        policy: Policy,
        k: f64,
    },
    Field {
        criterion: u32,
        field: VerdictField,
    },
    Neg(Box<Node>),
    Not(Box<Node>),
    /// `site` numbers the node for its division-by-zero trap.
    Arith {
        op: Arith,
        lhs: Box<Node>,
        rhs: Box<Node>,
    },
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Compare {
        first: Box<Node>,
        rest: Vec<(CmpOp, Node)>,
    },
    If {
        cond: Box<Node>,
        then: Box<Node>,
        els: Box<Node>,
    },
    Call {
        func: Func,
        args: Vec<Node>,
    },
}

/// What the stage computes for a rubric.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub score: Node,
    /// Every group set with the policy its tree is reported with (`groups` of a result), in
    /// declaration order.
    pub groups: Vec<(u32, Policy)>,
}

/// How deep `let`s and expressions may nest in a plan.
const MAX_DEPTH: usize = 256;

impl Plan {
    /// The plan of a program's score, or why it has none (the first form it cannot compute).
    pub fn compile(p: &Program) -> Result<Plan, String> {
        let score = node(p, &p.score, 0)?;
        let policies = crate::interp::driver::group_policies(p);
        let groups = p
            .sets
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kind == SetKind::Group)
            .map(|(i, _)| (i as u32, policies.get(i).copied().unwrap_or(Policy::Propagate)))
            .collect();
        Ok(Plan { score, groups })
    }
}

fn unsupported(what: impl std::fmt::Display) -> String {
    format!("the score uses {what}, which the tensor stage does not compute")
}

fn is_number(e: &Expr) -> bool {
    e.ty == Type::Number
}

fn node(p: &Program, e: &Expr, depth: usize) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(unsupported("expressions nested too deeply"));
    }
    let sub = |x: &Expr| node(p, x, depth + 1).map(Box::new);
    Ok(match &e.kind {
        ExprKind::Const(Const::Number(n)) => Node::Num(*n),
        ExprKind::Const(Const::Bool(b)) => Node::Bool(*b),
        ExprKind::Const(_) => return Err(unsupported("a text or null constant")),
        ExprKind::Let(i) => match p.lets.get(*i as usize) {
            Some(l) => node(p, &l.value, depth + 1).map_err(|why| format!("{why} (in `let {}`)", l.name))?,
            None => return Err(unsupported("an unknown `let`")),
        },
        ExprKind::Aggregate { op, set, policy, args, .. } => {
            if *set as usize >= p.sets.len() {
                return Err(unsupported("an unknown set"));
            }
            let k = match args.first() {
                None => f64::NAN,
                Some(a) => {
                    a.as_number().ok_or_else(|| unsupported(format!("`{}` with a computed count", op.name())))?
                }
            };
            if args.len() > 1 {
                return Err(unsupported(format!("`{}` with extra arguments", op.name())));
            }
            Node::Agg { op: *op, set: *set, policy: *policy, k }
        }
        ExprKind::Field { base, name, .. } => match &base.kind {
            ExprKind::Criterion(c) if (*c as usize) < p.criteria.len() => {
                let field = match name.as_str() {
                    "met" => VerdictField::Met,
                    "value" => VerdictField::Value,
                    "points" => VerdictField::Points,
                    "weight" => VerdictField::Weight,
                    "unscored" => VerdictField::Unscored,
                    other => return Err(unsupported(format!("the criterion field `.{other}`"))),
                };
                Node::Field { criterion: *c, field }
            }
            _ => return Err(unsupported(format!("the field `.{name}` of a value that is not a criterion"))),
        },
        ExprKind::Unary { op: UnOp::Neg, arg } if is_number(arg) => Node::Neg(sub(arg)?),
        ExprKind::Unary { op: UnOp::Not, arg } if arg.ty == Type::Bool => Node::Not(sub(arg)?),
        ExprKind::Binary { op, lhs, rhs, .. } => {
            let arith = match op {
                BinOp::Add => Some(Arith::Add),
                BinOp::Sub => Some(Arith::Sub),
                BinOp::Mul => Some(Arith::Mul),
                BinOp::Div => Some(Arith::Div),
                _ => None,
            };
            match (op, arith) {
                (_, Some(a)) if is_number(lhs) && is_number(rhs) => {
                    Node::Arith { op: a, lhs: sub(lhs)?, rhs: sub(rhs)? }
                }
                (BinOp::And, _) if lhs.ty == Type::Bool && rhs.ty == Type::Bool => Node::And(sub(lhs)?, sub(rhs)?),
                (BinOp::Or, _) if lhs.ty == Type::Bool && rhs.ty == Type::Bool => Node::Or(sub(lhs)?, sub(rhs)?),
                (op, _) => return Err(unsupported(format!("the operator {op:?} on these operands"))),
            }
        }
        ExprKind::Compare { first, rest } => {
            let all_numbers = is_number(first) && rest.iter().all(|(_, x)| is_number(x));
            let bool_equality = first.ty == Type::Bool
                && rest.iter().all(|(op, x)| x.ty == Type::Bool && matches!(op, CmpOp::Eq | CmpOp::Ne));
            if !all_numbers && !bool_equality {
                return Err(unsupported("a comparison of values that are not numbers"));
            }
            let mut out = Vec::with_capacity(rest.len());
            for (op, x) in rest {
                out.push((*op, node(p, x, depth + 1)?));
            }
            Node::Compare { first: sub(first)?, rest: out }
        }
        ExprKind::If { cond, then, els } if cond.ty == Type::Bool && then.ty == els.ty && then.ty == e.ty => {
            if !matches!(e.ty, Type::Number | Type::Bool) {
                return Err(unsupported("an `if` whose value is not a number or a boolean"));
            }
            Node::If { cond: sub(cond)?, then: sub(then)?, els: sub(els)? }
        }
        ExprKind::Intrinsic { name, overload, args, .. } => {
            let numbers = args.iter().all(is_number);
            let func = match (name.as_str(), overload, args.len()) {
                ("abs", 0, 1) => Func::Abs,
                ("floor", 0, 1) => Func::Floor,
                ("ceil", 0, 1) => Func::Ceil,
                ("min", 0, 2) => Func::Min,
                ("max", 0, 2) => Func::Max,
                ("clip", 0, 3) => match (args[1].as_number(), args[2].as_number()) {
                    (Some(lo), Some(hi)) if lo <= hi => Func::Clip { lo, hi },
                    _ => return Err(unsupported("`clip` with bounds that are not constants lo <= hi")),
                },
                _ => return Err(unsupported(format!("the intrinsic `{name}`"))),
            };
            if !numbers {
                return Err(unsupported(format!("`{name}` of values that are not numbers")));
            }
            let args = match func {
                Func::Clip { .. } => vec![node(p, &args[0], depth + 1)?],
                _ => args.iter().map(|a| node(p, a, depth + 1)).collect::<Result<_, _>>()?,
            };
            Node::Call { func, args }
        }
        ExprKind::Input(i) => {
            let name = p.inputs.get(*i as usize).map_or("?", |d| d.name.as_str());
            return Err(unsupported(format!("the input `{name}`")));
        }
        ExprKind::Call { func, .. } => {
            let name = p.functions.get(*func as usize).map_or("?", |f| f.name.as_str());
            return Err(unsupported(format!("the function `{name}`")));
        }
        ExprKind::Criterion(_) => return Err(unsupported("a criterion as a record")),
        ExprKind::Local(_) => return Err(unsupported("a local")),
        ExprKind::Narrowed(_) => return Err(unsupported("a value narrowed from an optional one")),
        ExprKind::List(_) => return Err(unsupported("a list")),
        ExprKind::Record(_) => return Err(unsupported("a record")),
        ExprKind::Index { .. } => return Err(unsupported("an index")),
        ExprKind::HigherOrder { op, .. } => return Err(unsupported(format!("`{op:?}` over a list"))),
        ExprKind::Unary { .. } => return Err(unsupported("a unary operator on these operands")),
        ExprKind::If { .. } => return Err(unsupported("an `if` with branches of different types")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(score: &str) -> Result<Plan, String> {
        let src = format!(
            "rubric t @ 1.0.0\ninput response: Text\ntier core {{\n  criterion a \"A\" points 2 check true\n  criterion b \"B\" check false\n}}\ngroup g {{ criterion c \"C\" check true }}\nlet half = 0.5 * fraction(core)\nscore = {score}\n"
        );
        let c = crate::types::compile_source("t.rubric", &src);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        Plan::compile(c.program.as_ref().unwrap())
    }

    #[test]
    fn aggregations_arithmetic_lets_and_numeric_intrinsics_have_a_plan() {
        for score in [
            "weighted_mean(all)",
            "clip(points_ratio(core, unscored: skip), 0, 1)",
            "half + min(a.value, tree(g)) - max(0, count(all) / 4)",
            "if all(core) and not b.unscored then 1 else abs(-mean(core, unscored: unmet))",
            "if at_least(all, 2) or 0 < fraction(all) <= 0.5 then floor(sum_points(all)) else ceil(max_points(all))",
        ] {
            assert!(plan(score).is_ok(), "{score}: {:?}", plan(score));
        }
        let p = plan("tree(g)").unwrap();
        assert_eq!(p.groups, vec![(2, Policy::Propagate)], "`all`, `core`, then `g`");
    }

    #[test]
    fn inputs_functions_and_text_have_no_plan_and_say_why() {
        let why = plan("if word_count(response) > 3 then 1 else 0").unwrap_err();
        assert!(why.contains("`word_count`"), "{why}");
        assert!(plan("clip(fraction(all), 0, count(all))").unwrap_err().contains("bounds"));
        assert!(plan("fraction(all) % 2").is_err());
    }
}
