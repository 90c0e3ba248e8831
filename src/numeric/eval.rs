//! Tensor evaluation of a [`Plan`] over a batch's criterion-result matrix: every node computes,
//! for all rows at once, a value, a state (a value, unscored, or a trap) and a reason code,
//! with the rules of the scalar path (`interp::aggregate`, `interp::verdict_value` and
//! `interp::ops`) written as masks and selections. Part of the tensor numeric stage
//! (`numeric`).
//!
//! A reason is carried as a number (`kind + 16 × (a + 2²⁰ × b)`: which template, which column,
//! set or count) and turned into the scalar path's text on the host, from the row's criterion
//! results, only for the rows that need one.
//!
//! Exactness on the CPU: sums over a set run over the set's columns in member order, the order
//! in which the scalar path adds them (candle's CPU reduction of an `f64` row adds its elements
//! left to right from +0.0); a cell left out is replaced by +0.0 (selected, never multiplied by
//! 0), which leaves a sum that started at +0.0 unchanged. Trees add member by member with
//! elementwise operations. Everything else is elementwise IEEE arithmetic, as in the scalar
//! path.

use super::matrix::{as_f64, DeviceMatrix, HostMatrix, MAX_INDEX};
use super::plan::{Arith, Func, Node, Plan, VerdictField};
use crate::engine::CriterionResult;
use crate::ir::{AggOp, CmpOp, Member, Policy, Program};
use crate::stdlib::{Trap, TrapKind};
use candle_core::{DType, Device, Result, Tensor};
use std::collections::HashMap;
use std::rc::Rc;

/// Row states.
pub const OK: u8 = 0;
pub const UNSCORED: u8 = 1;
pub const TRAP: u8 = 2;

/// Reason templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// `criterion `ID` is unscored (REASON)` (`no reason`): a criterion read as a value; a = column.
    CriterionUnscored = 0,
    /// The same text for the first unscored member of a set: a = set, b = position.
    MemberUnscored = 1,
    /// `criterion `ID` is unscored (REASON)` (empty reason): a tree's criterion member; a = column.
    TreeCriterionUnscored = 2,
    /// `criterion `ID` is unscored`: a tree's `each` member; a = column.
    TreeEachUnscored = 3,
    /// `criterion `ID` is waiting for its verdict`; a = column.
    Waiting = 4,
    /// `` `SET` is waiting for N verdicts ``; a = set, b = N.
    SetWaiting = 5,
    /// `no scored criteria in `SET``; a = set.
    Empty = 6,
    /// `no positive points in `SET``; a = set.
    NoPositivePoints = 7,
    /// `no scored children in group `SET``; a = set.
    NoScoredChildren = 8,
    /// Trap: `the weights of `SET` sum to 0`; a = set.
    WeightsSumToZero = 9,
    /// Trap: `X / 0`, X in `aux`.
    DivByZero = 10,
    /// `criterion not evaluated`.
    NotEvaluated = 11,
}

const KINDS: [Kind; 12] = [
    Kind::CriterionUnscored,
    Kind::MemberUnscored,
    Kind::TreeCriterionUnscored,
    Kind::TreeEachUnscored,
    Kind::Waiting,
    Kind::SetWaiting,
    Kind::Empty,
    Kind::NoPositivePoints,
    Kind::NoScoredChildren,
    Kind::WeightsSumToZero,
    Kind::DivByZero,
    Kind::NotEvaluated,
];

const SPAN: f64 = MAX_INDEX as f64;

/// A node's result for every row of the batch: `[rows]` tensors.
#[derive(Clone)]
struct Val {
    /// The value (a boolean is 0 or 1); meaningless unless `st` is [`OK`].
    v: Tensor,
    /// [`OK`], [`UNSCORED`] or [`TRAP`] (`u8`).
    st: Tensor,
    /// The reason code when `st` is not [`OK`].
    code: Tensor,
    /// The number a trap message quotes.
    aux: Tensor,
}

/// What the stage computed for a batch, on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    pub rows: usize,
    pub value: Vec<f64>,
    pub state: Vec<u8>,
    code: Vec<f64>,
    aux: Vec<f64>,
    /// Per group of the plan (`Plan::groups`): its tree value per row, `None` when unscored.
    pub groups: Vec<Vec<Option<f64>>>,
}

/// A row's score as the scalar path has it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Value(f64),
    Unscored(String),
    Trap(Trap),
}

impl Scores {
    /// Row `row`'s outcome; `criteria` are that row's criterion results (reasons quote them).
    pub fn outcome(&self, p: &Program, m: &HostMatrix, row: usize, criteria: &[CriterionResult]) -> Outcome {
        match self.state.get(row).copied() {
            Some(OK) => Outcome::Value(self.value[row]),
            Some(st) => {
                let code = self.code[row];
                let kind = KINDS.get((code % 16.0) as usize).copied().unwrap_or(Kind::NotEvaluated);
                let rest = (code / 16.0).floor();
                let a = (rest % SPAN) as usize;
                let b = (rest / SPAN).floor() as usize;
                let set_name = || p.sets.get(a).map_or("?", |s| s.name.as_str());
                let criterion = |col: usize| m.entry_at(row, col).and_then(|e| criteria.get(e));
                let id = |col: usize| criterion(col).map_or("?", |c| &*c.id).to_string();
                let reason = |col: usize, none: &str| {
                    criterion(col).and_then(|c| c.reason.clone()).unwrap_or_else(|| none.to_string())
                };
                let text = match kind {
                    Kind::CriterionUnscored => {
                        format!("criterion `{}` is unscored ({})", id(a), reason(a, "no reason"))
                    }
                    Kind::MemberUnscored => {
                        let col =
                            p.sets.get(a).map(|_| m.layout.set_columns(p, a as u32)).and_then(|c| c.get(b).copied());
                        let col = col.unwrap_or(usize::MAX);
                        format!("criterion `{}` is unscored ({})", id(col), reason(col, "no reason"))
                    }
                    Kind::TreeCriterionUnscored => format!("criterion `{}` is unscored ({})", id(a), reason(a, "")),
                    Kind::TreeEachUnscored => format!("criterion `{}` is unscored", id(a)),
                    Kind::Waiting => format!("criterion `{}` is waiting for its verdict", id(a)),
                    Kind::SetWaiting => format!("`{}` is waiting for {b} verdicts", set_name()),
                    Kind::Empty => format!("no scored criteria in `{}`", set_name()),
                    Kind::NoPositivePoints => format!("no positive points in `{}`", set_name()),
                    Kind::NoScoredChildren => format!("no scored children in group `{}`", set_name()),
                    Kind::WeightsSumToZero => {
                        let t = format!("the weights of `{}` sum to 0", set_name());
                        return Outcome::Trap(Trap::new(TrapKind::DivisionByZero, t));
                    }
                    Kind::DivByZero => {
                        let t = format!("{} / 0", self.aux[row]);
                        return Outcome::Trap(Trap::new(TrapKind::DivisionByZero, t));
                    }
                    Kind::NotEvaluated => "criterion not evaluated".to_string(),
                };
                if st == TRAP {
                    // No trap template carries a criterion's text; keep it readable anyway.
                    return Outcome::Trap(Trap::new(TrapKind::Type, text));
                }
                Outcome::Unscored(text)
            }
            None => Outcome::Unscored("row out of range".into()),
        }
    }
}

/// Whether a scalar result (`interp::aggregate`, `interp::eval_decided`) and a tensor outcome
/// are the same: numbers bit for bit (any NaN equals any NaN), booleans as 0/1, unscored
/// reasons and traps equal.
pub fn agrees(scalar: &std::result::Result<crate::value::Value, Trap>, tensor: &Outcome) -> bool {
    use crate::value::Value;
    match (scalar, tensor) {
        (Ok(Value::Number(x)), Outcome::Value(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Ok(Value::Bool(b)), Outcome::Value(y)) => *y == if *b { 1.0 } else { 0.0 },
        (Ok(Value::Unscored(r)), Outcome::Unscored(s)) => **r == **s,
        (Err(t), Outcome::Trap(u)) => t == u,
        _ => false,
    }
}

/// Evaluate `plan` on the matrix `m` on `dev`.
pub fn evaluate(plan: &Plan, p: &Program, m: &HostMatrix, dev: &Device) -> Result<Scores> {
    if m.rows == 0 {
        return Ok(Scores {
            rows: 0,
            value: vec![],
            state: vec![],
            code: vec![],
            aux: vec![],
            groups: vec![vec![]; plan.groups.len()],
        });
    }
    if p.sets.len() >= MAX_INDEX {
        candle_core::bail!("{} sets: the numeric stage takes at most {MAX_INDEX}", p.sets.len());
    }
    let dm = DeviceMatrix::upload(m, dev)?;
    let mut ev = Eval::new(p, m, dm, dev)?;
    let score = ev.node(&plan.score, 0)?;
    let mut groups = Vec::with_capacity(plan.groups.len());
    for (set, policy) in &plan.groups {
        let t = ev.tree(*set, *policy, 0)?;
        let v = t.v.to_vec1::<f64>()?;
        let st = t.st.to_vec1::<u8>()?;
        groups.push(v.into_iter().zip(st).map(|(v, s)| (s == OK).then_some(v)).collect());
    }
    Ok(Scores {
        rows: m.rows,
        value: score.v.to_vec1()?,
        state: score.st.to_vec1()?,
        code: score.code.to_vec1()?,
        aux: score.aux.to_vec1()?,
        groups,
    })
}

struct Eval<'a> {
    p: &'a Program,
    host: &'a HostMatrix,
    m: DeviceMatrix,
    dev: Device,
    rows: usize,
    sets: HashMap<u32, Rc<DeviceMatrix>>,
    trees: HashMap<(u32, u8), Val>,
    zero: Tensor,
    zero_u8: Tensor,
}

/// The deepest tree (nested groups) evaluated.
const MAX_TREE_DEPTH: usize = 64;

impl<'a> Eval<'a> {
    fn new(p: &'a Program, host: &'a HostMatrix, m: DeviceMatrix, dev: &Device) -> Result<Eval<'a>> {
        let rows = m.rows;
        Ok(Eval {
            p,
            host,
            m,
            dev: dev.clone(),
            rows,
            sets: HashMap::new(),
            trees: HashMap::new(),
            zero: Tensor::zeros(rows, DType::F64, dev)?,
            zero_u8: Tensor::zeros(rows, DType::U8, dev)?,
        })
    }

    fn full(&self, x: f64) -> Result<Tensor> {
        Tensor::full(x, self.rows, &self.dev)
    }

    fn ok(&self, v: Tensor) -> Val {
        Val { v, st: self.zero_u8.clone(), code: self.zero.clone(), aux: self.zero.clone() }
    }

    /// A failed result: `st` with the reason `kind`, `a` and `b` (constants or per row).
    fn fail(&self, st: u8, kind: Kind, a: Operand, b: Operand) -> Result<Val> {
        let a = a.tensor(self)?;
        let b = b.tensor(self)?;
        let code = b.affine(SPAN, 0.0)?.add(&a)?.affine(16.0, kind as u8 as f64)?;
        Ok(Val { v: self.zero.clone(), st: Tensor::full(st, self.rows, &self.dev)?, code, aux: self.zero.clone() })
    }

    /// The columns of `set` in member order.
    fn set(&mut self, set: u32) -> Result<Rc<DeviceMatrix>> {
        if let Some(s) = self.sets.get(&set) {
            return Ok(s.clone());
        }
        let cols = self.host.layout.set_columns(self.p, set);
        let s = Rc::new(self.m.select(&cols)?);
        self.sets.insert(set, s.clone());
        Ok(s)
    }

    fn node(&mut self, n: &Node, depth: usize) -> Result<Val> {
        if depth > 512 {
            candle_core::bail!("plan nested too deeply");
        }
        let d = depth + 1;
        match n {
            Node::Num(x) => Ok(self.ok(self.full(*x)?)),
            Node::Bool(b) => Ok(self.ok(self.full(if *b { 1.0 } else { 0.0 })?)),
            Node::Agg { op: AggOp::Tree, set, policy, .. } => self.tree(*set, *policy, 0),
            Node::Agg { op, set, policy, k } => self.aggregate(*op, *set, *policy, *k),
            Node::Field { criterion, field } => self.field(*criterion, *field),
            Node::Neg(a) => {
                let a = self.node(a, d)?;
                let r = self.ok(a.v.neg()?);
                pick(&failed(&a)?, &a, &r)
            }
            Node::Not(a) => {
                let a = self.node(a, d)?;
                let r = self.ok(as_f64(&a.v.eq(0.0)?)?);
                pick(&failed(&a)?, &a, &r)
            }
            Node::Arith { op, lhs, rhs } => {
                let a = self.node(lhs, d)?;
                let b = self.node(rhs, d)?;
                let v = match op {
                    Arith::Add => a.v.add(&b.v)?,
                    Arith::Sub => a.v.sub(&b.v)?,
                    Arith::Mul => a.v.mul(&b.v)?,
                    Arith::Div => a.v.div(&b.v)?,
                };
                let mut r = self.ok(v);
                if *op == Arith::Div {
                    let mut trap = self.fail(TRAP, Kind::DivByZero, Operand::C(0.0), Operand::C(0.0))?;
                    trap.aux = a.v.clone();
                    r = pick(&b.v.eq(0.0)?, &trap, &r)?;
                }
                // Priority, lowest first: b unscored, a unscored, b trapped, a trapped.
                r = pick(&b.st.eq(UNSCORED)?, &b, &r)?;
                r = pick(&a.st.eq(UNSCORED)?, &a, &r)?;
                r = pick(&b.st.eq(TRAP)?, &b, &r)?;
                pick(&a.st.eq(TRAP)?, &a, &r)
            }
            Node::And(l, r) | Node::Or(l, r) => {
                // Kleene logic: `and` decided by a false side, `or` by a true one; the left
                // side first (its trap, then its deciding value, then the right side's).
                let decide = if matches!(n, Node::And(..)) { 0.0 } else { 1.0 };
                let a = self.node(l, d)?;
                let b = self.node(r, d)?;
                let decided = self.ok(self.full(decide)?);
                let mut out = self.ok(self.full(1.0 - decide)?);
                out = pick(&b.st.eq(UNSCORED)?, &b, &out)?;
                out = pick(&a.st.eq(UNSCORED)?, &a, &out)?;
                out = pick(&and(&b.st.eq(OK)?, &b.v.eq(decide)?)?, &decided, &out)?;
                out = pick(&b.st.eq(TRAP)?, &b, &out)?;
                out = pick(&and(&a.st.eq(OK)?, &a.v.eq(decide)?)?, &decided, &out)?;
                pick(&a.st.eq(TRAP)?, &a, &out)
            }
            Node::Compare { first, rest } => {
                let mut operands = vec![self.node(first, d)?];
                for (_, x) in rest {
                    operands.push(self.node(x, d)?);
                }
                // Each comparison: unscored from its left operand, else its right one.
                let mut any_false = self.zero_u8.clone();
                let mut comparisons = Vec::with_capacity(rest.len());
                for (i, (op, _)) in rest.iter().enumerate() {
                    let (a, b) = (&operands[i], &operands[i + 1]);
                    let holds = match op {
                        CmpOp::Eq => a.v.eq(&b.v)?,
                        CmpOp::Ne => a.v.ne(&b.v)?,
                        CmpOp::Lt => a.v.lt(&b.v)?,
                        CmpOp::Le => a.v.le(&b.v)?,
                        CmpOp::Gt => a.v.gt(&b.v)?,
                        CmpOp::Ge => a.v.ge(&b.v)?,
                    };
                    let both_ok = and(&a.st.eq(OK)?, &b.st.eq(OK)?)?;
                    any_false = or(&any_false, &and(&both_ok, &holds.eq(0u8)?)?)?;
                    let unscored_side = pick(&a.st.ne(OK)?, a, b)?;
                    comparisons.push((both_ok, unscored_side));
                }
                let mut out = self.ok(self.full(1.0)?);
                for (both_ok, side) in comparisons.iter().rev() {
                    out = pick(&both_ok.eq(0u8)?, side, &out)?;
                }
                out = pick(&any_false, &self.ok(self.full(0.0)?), &out)?;
                for o in operands.iter().rev() {
                    out = pick(&o.st.eq(TRAP)?, o, &out)?;
                }
                Ok(out)
            }
            Node::If { cond, then, els } => {
                let c = self.node(cond, d)?;
                let t = self.node(then, d)?;
                let e = self.node(els, d)?;
                let r = pick(&c.v.ne(0.0)?, &t, &e)?;
                pick(&failed(&c)?, &c, &r)
            }
            Node::Call { func, args } => {
                let vals: Vec<Val> = args.iter().map(|a| self.node(a, d)).collect::<Result<_>>()?;
                let x = |i: usize| -> Result<&Tensor> {
                    vals.get(i).map(|v| &v.v).ok_or_else(|| candle_core::Error::Msg("missing argument".into()))
                };
                let v = match func {
                    Func::Abs => x(0)?.abs()?,
                    Func::Floor => x(0)?.floor()?,
                    Func::Ceil => x(0)?.ceil()?,
                    // f64::min / f64::max: a NaN side yields the other.
                    Func::Min => {
                        let (a, b) = (x(0)?, x(1)?);
                        b.ne(b)?.where_cond(a, &a.lt(b)?.where_cond(a, b)?)?
                    }
                    Func::Max => {
                        let (a, b) = (x(0)?, x(1)?);
                        b.ne(b)?.where_cond(a, &a.gt(b)?.where_cond(a, b)?)?
                    }
                    // f64::clamp: below lo is lo, above hi is hi, NaN stays NaN.
                    Func::Clip { lo, hi } => {
                        let a = x(0)?;
                        let lo_t = self.full(*lo)?;
                        let hi_t = self.full(*hi)?;
                        let a = a.lt(&lo_t)?.where_cond(&lo_t, a)?;
                        a.gt(&hi_t)?.where_cond(&hi_t, &a)?
                    }
                };
                let mut out = self.ok(v);
                for a in vals.iter().rev() {
                    out = pick(&a.st.eq(UNSCORED)?, a, &out)?;
                }
                for a in vals.iter().rev() {
                    out = pick(&a.st.eq(TRAP)?, a, &out)?;
                }
                Ok(out)
            }
        }
    }

    /// `criterion.field` (`interp::verdict_value`, then the field).
    fn field(&mut self, criterion: u32, field: VerdictField) -> Result<Val> {
        let Some(col) = self.host.layout.criterion(criterion) else {
            return self.fail(UNSCORED, Kind::NotEvaluated, Operand::C(0.0), Operand::C(0.0));
        };
        let column = |t: &Tensor| DeviceMatrix::column(t, col);
        let (met, uns, skipped, valid) =
            (column(&self.m.met)?, column(&self.m.unscored)?, column(&self.m.skipped)?, column(&self.m.valid)?);
        let mut out = match field {
            VerdictField::Met => self.ok(as_f64(&met)?),
            VerdictField::Value => self.ok(column(&self.m.value)?),
            VerdictField::Points => self.ok(column(&self.m.points)?),
            VerdictField::Weight => self.ok(column(&self.m.weight)?),
            VerdictField::Unscored => self.ok(as_f64(&uns)?),
        };
        if matches!(field, VerdictField::Met | VerdictField::Value) {
            let c = self.fail(UNSCORED, Kind::CriterionUnscored, Operand::C(col as f64), Operand::C(0.0))?;
            out = pick(&uns, &c, &out)?;
        }
        let waiting = self.fail(UNSCORED, Kind::Waiting, Operand::C(col as f64), Operand::C(0.0))?;
        out = pick(&skipped, &waiting, &out)?;
        let missing = self.fail(UNSCORED, Kind::NotEvaluated, Operand::C(0.0), Operand::C(0.0))?;
        pick(&valid.eq(0u8)?, &missing, &out)
    }

    /// A flat aggregation (`interp::aggregate`).
    fn aggregate(&mut self, op: AggOp, set: u32, policy: Policy, k: f64) -> Result<Val> {
        let s = self.set(set)?;
        let setf = || Operand::C(set as f64);
        let scored = or(&s.met, &s.unmet)?;
        let kept = if policy == Policy::Unmet { or(&scored, &s.unscored)? } else { scored.clone() };
        // Kept cells' values; an unscored cell kept as unmet has value 0.
        let value = scored.where_cond(&s.value, &s.value.zeros_like()?)?;
        let zeros = s.value.zeros_like()?;
        let sum = |mask: &Tensor, x: &Tensor| -> Result<Tensor> { mask.where_cond(x, &zeros)?.sum(1) };
        let count = |mask: &Tensor| -> Result<Tensor> { as_f64(mask)?.sum(1) };
        let n = count(&kept)?;
        let met = count(&s.met)?;
        let empty = self.fail(UNSCORED, Kind::Empty, setf(), Operand::C(0.0))?;
        let n_zero = n.eq(0.0)?;
        let boolean = |t: Tensor| -> Result<Val> { Ok(self.ok(as_f64(&t)?)) };
        let body = match op {
            AggOp::WeightedMean => {
                let num = sum(&kept, &value.mul(&s.weight)?)?;
                let den = sum(&kept, &s.weight)?;
                let r = self.ok(num.div(&den)?);
                let trap = self.fail(TRAP, Kind::WeightsSumToZero, setf(), Operand::C(0.0))?;
                let r = pick(&den.eq(0.0)?, &trap, &r)?;
                pick(&n_zero, &empty, &r)?
            }
            AggOp::Mean => pick(&n_zero, &empty, &self.ok(sum(&kept, &value)?.div(&n)?))?,
            AggOp::Fraction => pick(&n_zero, &empty, &self.ok(met.div(&n)?))?,
            AggOp::PointsRatio | AggOp::SumPoints => {
                let achieved = sum(&s.met, &s.points.mul(&value)?)?;
                if op == AggOp::SumPoints {
                    self.ok(achieved)
                } else {
                    let possible = sum(&and(&kept, &s.points.gt(0.0)?)?, &s.points)?;
                    let none = self.fail(UNSCORED, Kind::NoPositivePoints, setf(), Operand::C(0.0))?;
                    pick(&possible.eq(0.0)?, &none, &self.ok(achieved.div(&possible)?))?
                }
            }
            AggOp::MaxPoints => {
                let positive = and(&kept, &s.points.gt(0.0)?)?;
                // Rust's float `sum` starts at -0.0: a set without positive points sums to -0.0.
                let total = sum(&positive, &s.points)?;
                let none = count(&positive)?.eq(0.0)?;
                self.ok(none.where_cond(&self.full(-0.0)?, &total)?)
            }
            AggOp::All => boolean(count(&and(&kept, &s.met.eq(0u8)?)?)?.eq(0.0)?)?,
            AggOp::Any => boolean(met.gt(0.0)?)?,
            AggOp::AtLeast => boolean(met.ge(k)?)?,
            AggOp::CountMet => self.ok(met.clone()),
            AggOp::Count => self.ok(n.clone()),
            AggOp::MinValue | AggOp::MaxValue => {
                let min = op == AggOp::MinValue;
                let fill =
                    Tensor::full(if min { f64::INFINITY } else { f64::NEG_INFINITY }, (self.rows, s.cols), &self.dev)?;
                let values = kept.where_cond(&value, &fill)?;
                let v = if min { values.min(1)? } else { values.max(1)? };
                pick(&n_zero, &empty, &self.ok(v))?
            }
            AggOp::Tree => return self.tree(set, policy, 0),
        };
        // Members still waiting for a verdict: `all`, `any` and `at_least` may be decided by
        // the others; anything else waits.
        let open = count(&s.skipped)?;
        let waiting = self.fail(UNSCORED, Kind::SetWaiting, setf(), Operand::T(open.clone()))?;
        let waiting = match op {
            AggOp::All => {
                let unmet_kept = count(&and(&kept, &s.met.eq(0u8)?)?)?.gt(0.0)?;
                pick(&unmet_kept, &self.ok(self.full(0.0)?), &waiting)?
            }
            AggOp::Any => pick(&met.gt(0.0)?, &self.ok(self.full(1.0)?), &waiting)?,
            AggOp::AtLeast => {
                let w = pick(&met.add(&open)?.lt(k)?, &self.ok(self.full(0.0)?), &waiting)?;
                pick(&met.ge(k)?, &self.ok(self.full(1.0)?), &w)?
            }
            _ => waiting,
        };
        let mut out = pick(&open.gt(0.0)?, &waiting, &body)?;
        if policy == Policy::Propagate {
            // The first unscored member, in member order.
            let positions: Vec<f64> = (0..s.cols).map(|i| i as f64).collect();
            let positions = Tensor::from_vec(positions, s.cols, &self.dev)?.broadcast_as((self.rows, s.cols))?;
            let inf = Tensor::full(f64::INFINITY, (self.rows, s.cols), &self.dev)?;
            let first = s.unscored.where_cond(&positions.contiguous()?, &inf)?.min(1)?;
            let any = first.lt(f64::INFINITY)?;
            let first = any.where_cond(&first, &self.zero)?;
            let r = self.fail(UNSCORED, Kind::MemberUnscored, setf(), Operand::T(first))?;
            out = pick(&any, &r, &out)?;
        }
        Ok(out)
    }

    /// `tree(set)`: each node the weighted mean of its children, added member by member in
    /// member order (the scalar path's `tree`); the first member that decides the node
    /// unscored (a skipped criterion, an unscored one under `propagate`, an unscored subtree
    /// unless `skip`) gives its reason.
    fn tree(&mut self, set: u32, policy: Policy, depth: usize) -> Result<Val> {
        if let Some(v) = self.trees.get(&(set, policy as u8)) {
            return Ok(v.clone());
        }
        if depth > MAX_TREE_DEPTH {
            candle_core::bail!("groups nested too deeply");
        }
        let Some(decl) = self.p.sets.get(set as usize) else {
            candle_core::bail!("unknown set #{set}");
        };
        let members = decl.members.clone();
        let mut num = self.zero.clone();
        let mut den = self.zero.clone();
        let mut done = self.zero_u8.clone();
        let mut first = self.ok(self.zero.clone());
        // One child: rows that stop here (with `stop`), else rows that add `value × weight`.
        let mut child = |this: &Self, stop: &Tensor, stop_val: &Val, adds: &Tensor, value: &Tensor, weight: &Tensor| {
            let newly = and(stop, &done.eq(0u8)?)?;
            first = pick(&newly, stop_val, &first)?;
            done = or(&done, stop)?;
            num = num.add(&adds.where_cond(&value.mul(weight)?, &this.zero)?)?;
            den = den.add(&adds.where_cond(weight, &this.zero)?)?;
            Ok::<(), candle_core::Error>(())
        };
        let cell = |this: &Self, col: usize, each: bool| -> Result<(Tensor, Val, Tensor, Tensor, Tensor)> {
            let c = |t: &Tensor| DeviceMatrix::column(t, col);
            let (met, unmet, uns, skipped) =
                (c(&this.m.met)?, c(&this.m.unmet)?, c(&this.m.unscored)?, c(&this.m.skipped)?);
            let (value, weight) = (c(&this.m.value)?, c(&this.m.weight)?);
            let colf = || Operand::C(col as f64);
            let mut stop_val = this.fail(UNSCORED, Kind::Waiting, colf(), Operand::C(0.0))?;
            let mut stop = skipped;
            if policy == Policy::Propagate {
                let kind = if each { Kind::TreeEachUnscored } else { Kind::TreeCriterionUnscored };
                let u = this.fail(UNSCORED, kind, colf(), Operand::C(0.0))?;
                stop_val = pick(&uns, &u, &stop_val)?;
                stop = or(&stop, &uns)?;
            }
            let scored = or(&met, &unmet)?;
            let (adds, value) = if policy == Policy::Unmet {
                (or(&scored, &uns)?, scored.where_cond(&value, &this.zero)?)
            } else {
                (scored, value)
            };
            Ok((stop, stop_val, adds, value, weight))
        };
        for m in &members {
            match m {
                Member::Criterion(c) => {
                    let Some(col) = self.host.layout.criterion(*c) else { continue };
                    let (stop, stop_val, adds, value, weight) = cell(self, col, false)?;
                    child(self, &stop, &stop_val, &adds, &value, &weight)?;
                }
                Member::Each(step) => {
                    let (start, width) = self.host.layout.each(*step);
                    for col in start..start + width {
                        let (stop, stop_val, adds, value, weight) = cell(self, col, true)?;
                        child(self, &stop, &stop_val, &adds, &value, &weight)?;
                    }
                }
                Member::Set(s) => {
                    let w = self.p.sets.get(*s as usize).and_then(|d| d.weight).unwrap_or(1.0);
                    let sub = self.tree(*s, policy, depth + 1)?;
                    let ok = sub.st.eq(OK)?;
                    let stop = if policy == Policy::Skip { sub.st.eq(TRAP)? } else { ok.eq(0u8)? };
                    child(self, &stop, &sub, &ok, &sub.v, &self.full(w)?)?;
                }
            }
        }
        let none = self.fail(UNSCORED, Kind::NoScoredChildren, Operand::C(set as f64), Operand::C(0.0))?;
        let out = pick(&den.eq(0.0)?, &none, &self.ok(num.div(&den)?))?;
        let out = pick(&done, &first, &out)?;
        self.trees.insert((set, policy as u8), out.clone());
        Ok(out)
    }
}

/// A reason operand: a constant or one number per row.
enum Operand {
    C(f64),
    T(Tensor),
}

impl Operand {
    fn tensor(self, e: &Eval<'_>) -> Result<Tensor> {
        match self {
            Operand::C(x) => e.full(x),
            Operand::T(t) => Ok(t),
        }
    }
}

/// Rows of `a` where `mask`, else rows of `b`.
fn pick(mask: &Tensor, a: &Val, b: &Val) -> Result<Val> {
    Ok(Val {
        v: mask.where_cond(&a.v, &b.v)?,
        st: mask.where_cond(&a.st, &b.st)?,
        code: mask.where_cond(&a.code, &b.code)?,
        aux: mask.where_cond(&a.aux, &b.aux)?,
    })
}

fn failed(v: &Val) -> Result<Tensor> {
    v.st.ne(OK)
}

fn and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.mul(b)
}

fn or(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.maximum(b)
}
