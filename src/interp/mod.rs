//! Stage 5, the reference interpreter: evaluates an `ir::Program` on one row of bound inputs
//! and recorded verdicts. It is the semantic oracle the Wasm and JIT engines are compared
//! against, so it stays boring: a direct recursive walk over each expression, no caching beyond
//! the per-row text index, `let` values and, with no limits and no trace, the row's answers of
//! functions that answer from their arguments alone and are called from two places or more
//! (`Prepared::memoised`; asked again with the same arguments, they answer what they answered).
//! Two shortcuts give exactly what the walk gives, work charged included: places read where
//! they are ([`place`]), and an `if` chain of text tests of one place taking its branch from a
//! table (`prepared::TextSwitch`). [`evaluate_walked`] uses neither the tables nor the memo.
//!
//! The rest of a row's evaluation is shared with every engine: `driver` runs the steps and
//! assembles the result, `ops` gives every operation its meaning on values, `verdict` applies
//! recorded judge verdicts. The walk here only decides the order in which `ops` are applied.

pub mod driver;
pub mod ops;
pub mod prepared;
pub(crate) mod verdict;

pub use driver::{
    aggregate, roots, run_row, verdict_value, Attr, CheckOutcomes, Decided, Evaluator, GatePart, Owner, Root, Trace,
};
pub use ops::compare;
pub use prepared::prepared;

use crate::engine::{Engine, RowResult, VerdictSource};
use crate::ir::validate::MAX_LOCALS;
use crate::ir::{BinOp, CmpOp, Const, Expr, ExprKind, Program};
use crate::stdlib::{Budget, EvalCtx, Limits, Trap, TrapKind};
use crate::value::Value;
use prepared::TextSwitch;
use rustc_hash::FxHashMap;
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

/// The reference interpreter under a row's [`Limits`] (`rubric explain` of a bundle, `--engine
/// interp` on one): every expression node is one unit of fuel, intrinsics charge theirs, the
/// deadline is read as they work, and everything the row allocates counts against its memory
/// (`meter`). Results are the interpreter's; only a row over a limit differs (its limit trap).
pub struct LimitedInterpreter {
    pub limits: Limits,
}

impl Engine for LimitedInterpreter {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        evaluate_within(program, inputs, verdicts, None, Some(self.limits))
    }
}

/// One line of an `explain` trace.
#[derive(Debug, Clone)]
pub struct TraceEvent {
    /// `gate NAME`, `criterion ID` or `score`.
    pub step: String,
    /// A sub-expression (by site) and its value.
    pub site: Option<crate::ir::SiteId>,
    pub value: String,
}

/// Evaluate one row. With `trace`, every intrinsic and function call records its value.
pub fn evaluate(
    p: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
    trace: Option<&mut Vec<TraceEvent>>,
) -> RowResult {
    evaluate_within(p, inputs, verdicts, trace, None)
}

/// [`evaluate`], under `limits` when there are some.
pub fn evaluate_within(
    p: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
    trace: Option<&mut Vec<TraceEvent>>,
    limits: Option<Limits>,
) -> RowResult {
    walk_row(|| Walker::new(p, inputs), verdicts, trace, limits).0
}

/// How a row used the function memo ([`Walker::memo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoUse {
    /// Function calls whose answers it kept.
    pub kept: usize,
    /// Calls it answered.
    pub answered: u64,
}

/// [`evaluate_within`], and how the row used the function memo (what the tests of the memo
/// look at).
pub fn evaluate_memo_use(
    p: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
    trace: Option<&mut Vec<TraceEvent>>,
    limits: Option<Limits>,
) -> (RowResult, MemoUse) {
    walk_row(|| Walker::new(p, inputs), verdicts, trace, limits)
}

/// [`evaluate_within`] with every `if` chain's conditions tested one by one, as written: the
/// walk the text switches (`prepared::TextSwitch`) are held to, branch and work alike.
pub fn evaluate_walked(
    p: &Program,
    inputs: &[Value],
    verdicts: &dyn VerdictSource,
    limits: Option<Limits>,
) -> RowResult {
    walk_row(|| Walker::bare(p, inputs), verdicts, None, limits).0
}

/// Run the row of the walker `walker` makes, under `limits` (everything it allocates metered,
/// the walker included, and its work charged) when there are some.
fn walk_row<'a>(
    walker: impl FnOnce() -> Walker<'a>,
    verdicts: &dyn VerdictSource,
    trace: Option<&mut Vec<TraceEvent>>,
    limits: Option<Limits>,
) -> (RowResult, MemoUse) {
    let _meter = limits.map(|_| crate::meter::RowMeter::open());
    let mut walker = walker();
    let (p, inputs) = (walker.p, walker.inputs);
    if let Some(limits) = limits {
        walker.ctx = EvalCtx::with_budget(Budget::new(limits));
    }
    let result = run_row(p, inputs, verdicts, &mut walker, trace);
    (result, MemoUse { kept: walker.memo.len(), answered: walker.memo_hits })
}

/// Evaluate a constant expression (example bindings, input defaults).
pub fn eval_constant(p: &Program, e: &Expr) -> Result<Value, Trap> {
    let mut walker = Walker::bare(p, &[]);
    let decided = Decided::new(p);
    let mut trace = Trace::new(None);
    Walk { w: &mut walker, decided: &decided, trace: &mut trace }.eval(e, &mut Vec::new())
}

/// Evaluate an expression that reads only criteria (the score of a rubric whose score needs
/// no inputs) against criteria already decided: the scalar oracle of the tensor numeric stage
/// (`numeric`) and of `rubric bench-numeric`. Inputs read as null.
pub fn eval_decided(p: &Program, decided: &Decided, e: &Expr) -> Result<Value, Trap> {
    let mut walker = Walker::bare(p, &[]);
    let mut trace = Trace::new(None);
    Walk { w: &mut walker, decided, trace: &mut trace }.eval(e, &mut Vec::new())
}

/// The interpreter's per-row state: the inputs, the intrinsics' context and the `let` cache.
struct Walker<'a> {
    p: &'a Program,
    inputs: &'a [Value],
    ctx: EvalCtx,
    lets: Vec<Option<Result<Value, Trap>>>,
    /// Function calls in progress (a validated program's calls form no cycle, so this stays
    /// below the number of functions).
    calls: usize,
    /// Expressions being evaluated, innermost included.
    depth: u32,
    /// Cleared frames of finished function calls, for the next calls.
    frames: Vec<Vec<Value>>,
    /// The program's text switches (`prepared::TextSwitch`); none for a constant expression.
    switches: &'a FxHashMap<usize, TextSwitch>,
    /// By function index, whether the function's answers are kept for the row
    /// (`Prepared::memoised`); none for a constant expression or a walk as written.
    memoised: &'a [bool],
    /// The row's answers of those functions, by the function and the identity of its arguments
    /// ([`arg_key`]), beside the arguments themselves: held here, their texts, lists and records
    /// cannot be freed and their addresses taken by other values while the row runs.
    memo: FxHashMap<MemoKey, (smallvec::SmallVec<[Value; 4]>, Value)>,
    /// Calls the memo answered in this row.
    memo_hits: u64,
}

impl<'a> Walker<'a> {
    /// The walker of a row of `p`.
    fn new(p: &'a Program, inputs: &'a [Value]) -> Walker<'a> {
        let prepared = prepared(p);
        Walker { switches: &prepared.switches, memoised: &prepared.memoised, ..Walker::bare(p, inputs) }
    }

    /// A walker without the program's prepared facts: for a constant expression, which may be
    /// evaluated while its program is still being built (an example's binding, an input's
    /// default), before the program can be prepared.
    fn bare(p: &'a Program, inputs: &'a [Value]) -> Walker<'a> {
        static NONE: std::sync::LazyLock<FxHashMap<usize, TextSwitch>> = std::sync::LazyLock::new(FxHashMap::default);
        // The oracle computes every intrinsic call as written: no scan plan, no memo.
        Walker {
            p,
            inputs,
            ctx: EvalCtx::new(),
            lets: vec![None; p.lets.len()],
            calls: 0,
            depth: 0,
            frames: Vec::new(),
            switches: &NONE,
            memoised: &[],
            memo: FxHashMap::default(),
            memo_hits: 0,
        }
    }
}

/// The value a place (an input, a local, a field of a place) holds, read where it is instead
/// of through copies of the records on the way, with the number of expressions it stands for
/// (the work the walk would have charged). `None` when `e` is not a place or a base on the way
/// is not a record: the general path then gives the value or the trap.
fn place<'v>(inputs: &'v [Value], e: &Expr, locals: &'v [Value]) -> Option<(&'v Value, u64)> {
    static NULL: Value = Value::Null;
    match &e.kind {
        ExprKind::Input(i) => Some((inputs.get(*i as usize)?, 1)),
        ExprKind::Local(i) => Some((locals.get(*i as usize)?, 1)),
        ExprKind::Narrowed(arg) => place(inputs, arg, locals).map(|(v, n)| (v, n + 1)),
        ExprKind::Field { base, name, .. } => match place(inputs, base, locals)? {
            (Value::Record(r), n) => Some((r.get(name.as_str()).unwrap_or(&NULL), n + 1)),
            _ => None,
        },
        _ => None,
    }
}

/// `a == b` where one side is a text constant and the other a place holding a text (the
/// dispatch on an id that standard library functions do): whether they are equal, compared
/// in place, and the work the walk would have charged for the two sides. `None` otherwise.
fn text_equals_constant(inputs: &[Value], a: &Expr, b: &Expr, locals: &[Value]) -> Option<(bool, u64)> {
    let (constant, other) = match (&a.kind, &b.kind) {
        (ExprKind::Const(Const::Text(t)), _) => (t, b),
        (_, ExprKind::Const(Const::Text(t))) => (t, a),
        _ => return None,
    };
    match place(inputs, other, locals)? {
        (Value::Text(t), n) => Some((**t == **constant, n + 1)),
        _ => None,
    }
}

/// A function call in the memo: the function, and each argument's identity ([`arg_key`]).
type MemoKey = (u32, smallvec::SmallVec<[(u8, u64); 4]>);

/// An argument's identity for the function memo ([`Walker::memo`]): a scalar by its value, a
/// text, list, record or JSON value by its address (two equal texts at two addresses are two
/// keys: a call asked again is asked with the same values, not copies of them).
fn arg_key(v: &Value) -> (u8, u64) {
    match v {
        Value::Null => (0, 0),
        Value::Bool(b) => (1, u64::from(*b)),
        Value::Number(n) => (2, n.to_bits()),
        Value::Text(t) => (3, Arc::as_ptr(t) as *const u8 as usize as u64),
        Value::List(l) => (4, Arc::as_ptr(l) as usize as u64),
        Value::Record(r) => (5, Arc::as_ptr(r) as usize as u64),
        Value::Json(j) => (6, Arc::as_ptr(j) as usize as u64),
        Value::Unscored(u) => (7, Arc::as_ptr(u) as *const u8 as usize as u64),
    }
}

/// A trap for an IR that does not hold together (possible only for a program that was not
/// validated, `ir::validate`).
fn invalid(why: String) -> Trap {
    Trap::new(TrapKind::Type, format!("the program is not valid: {why}"))
}

impl Evaluator for Walker<'_> {
    fn eval(
        &mut self,
        _root: Root,
        e: &Expr,
        locals: &mut Vec<Value>,
        decided: &mut Decided,
        trace: &mut Trace<'_>,
    ) -> Result<Value, Trap> {
        Walk { w: self, decided, trace }.eval(e, locals)
    }
}

/// One walk over an expression, with what it may read.
struct Walk<'x, 'a, 't> {
    w: &'x mut Walker<'a>,
    decided: &'x Decided,
    trace: &'x mut Trace<'t>,
}

impl Walk<'_, '_, '_> {
    fn note(&mut self, site: u32, value: impl FnOnce() -> String) {
        self.trace.note(self.w.p, Some(site), value);
    }

    fn eval(&mut self, e: &Expr, locals: &mut Vec<Value>) -> Result<Value, Trap> {
        self.w.ctx.budget.work(1)?;
        // The stack is looked at every 8 levels of nesting (a level takes far less than an
        // eighth of the red zone).
        self.w.depth += 1;
        let v = if self.w.depth.is_multiple_of(8) {
            stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.eval_inner(e, locals))
        } else {
            self.eval_inner(e, locals)
        };
        self.w.depth -= 1;
        v
    }

    /// The branch the `if` chain headed by `head` (with condition `cond`) takes, when it is a
    /// text switch (`prepared::TextSwitch`) and its place holds a text: found in the switch's
    /// table, with the work charged that testing its conditions one by one would charge (per
    /// condition tested: its `if`, its comparison, the place and the constant; the head's `if`
    /// is charged already). `None`: test the conditions as written.
    fn switched<'e>(&mut self, head: &'e Expr, cond: &Expr, locals: &[Value]) -> Result<Option<&'e Expr>, Trap> {
        if self.w.switches.is_empty() {
            return Ok(None);
        }
        let Some(switch) = self.w.switches.get(&(cond as *const Expr as usize)) else { return Ok(None) };
        let Some((place_expr, _)) = prepared::text_test(cond) else { return Ok(None) };
        let Some((Value::Text(text), n)) = place(self.w.inputs, place_expr, locals) else { return Ok(None) };
        let level = switch.levels.get(&**text).copied().unwrap_or(switch.len);
        // The `if` whose condition holds (or the last one), and the branch it takes.
        let last = switch.len - 1;
        let mut at = head;
        for _ in 0..level.min(last) {
            let ExprKind::If { els, .. } = &at.kind else { return Ok(None) };
            at = els;
        }
        let ExprKind::If { cond, then, els } = &at.kind else { return Ok(None) };
        let branch = if level <= last {
            // The table's constant is this condition's: a chain that is not the one the table
            // was made of is walked as written.
            if prepared::text_test(cond).map(|(_, t)| t) != Some(&**text) {
                return Ok(None);
            }
            then
        } else {
            els
        };
        let tested = u64::from(level.min(last)) + 1;
        self.w.ctx.budget.work(tested * (n + 3) - 1)?;
        Ok(Some(branch))
    }

    fn eval_inner(&mut self, e: &Expr, locals: &mut Vec<Value>) -> Result<Value, Trap> {
        let p = self.w.p;
        Ok(match &e.kind {
            ExprKind::Const(c) => ops::const_value(c),
            ExprKind::Input(i) => self.w.inputs.get(*i as usize).cloned().unwrap_or(Value::Null),
            ExprKind::Local(i) => locals.get(*i as usize).cloned().unwrap_or(Value::Null),
            ExprKind::Let(i) => {
                let (Some(slot), Some(decl)) = (self.w.lets.get(*i as usize), p.lets.get(*i as usize)) else {
                    return Err(invalid(format!("let {i} does not exist")));
                };
                if let Some(v) = slot {
                    return v.clone();
                }
                // While the let is evaluated, reading it again is a cycle, not a recursion.
                self.w.lets[*i as usize] = Some(Err(invalid(format!("let `{}` reads itself", decl.name))));
                let mut fresh = Vec::new();
                let v = self.eval(&decl.value, &mut fresh);
                self.w.lets[*i as usize] = Some(v.clone());
                return v;
            }
            ExprKind::Criterion(c) => verdict_value(self.decided, *c),
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
            ExprKind::Field { base, name, .. } => {
                if let Some((v, n)) = place(self.w.inputs, e, locals) {
                    self.w.ctx.budget.work(n - 1)?;
                    return Ok(v.clone());
                }
                ops::field(self.eval(base, locals)?, name)?
            }
            // `T` and `T?` are held alike: the proof that it is not null changes only the type.
            ExprKind::Narrowed(arg) => self.eval(arg, locals)?,
            ExprKind::Index { base, index, .. } => {
                let b = self.eval(base, locals)?;
                let i = self.eval(index, locals)?;
                ops::index(b, i)?
            }
            ExprKind::Unary { op, arg } => ops::unary(*op, self.eval(arg, locals)?)?,
            ExprKind::Binary { op, lhs, rhs, .. } => {
                // Kleene logic: a decided side can decide the result even if the other is unscored.
                match op {
                    BinOp::And => {
                        let a = self.eval(lhs, locals)?;
                        if ops::and_short(&a) {
                            return Ok(a);
                        }
                        ops::and(a, self.eval(rhs, locals)?)
                    }
                    BinOp::Or => {
                        let a = self.eval(lhs, locals)?;
                        if ops::or_short(&a) {
                            return Ok(a);
                        }
                        ops::or(a, self.eval(rhs, locals)?)
                    }
                    BinOp::Coalesce => {
                        let a = self.eval(lhs, locals)?;
                        return if a == Value::Null { self.eval(rhs, locals) } else { Ok(a) };
                    }
                    _ => {
                        let a = self.eval(lhs, locals)?;
                        let b = self.eval(rhs, locals)?;
                        ops::arith(*op, a, b)?
                    }
                }
            }
            ExprKind::Compare { first, rest } => {
                if let [(op @ (CmpOp::Eq | CmpOp::Ne), second)] = rest.as_slice() {
                    if let Some((equal, n)) = text_equals_constant(self.w.inputs, first, second, locals) {
                        self.w.ctx.budget.work(n)?;
                        return Ok(Value::Bool(equal == (*op == CmpOp::Eq)));
                    }
                }
                let mut prev = self.eval(first, locals)?;
                let mut result = Value::Bool(true);
                for (op, x) in rest {
                    let v = self.eval(x, locals)?;
                    result = ops::chain(result, ops::compare(*op, &prev, &v)?);
                    prev = v;
                }
                result
            }
            ExprKind::If { cond, then, els } => {
                if let Some(branch) = self.switched(e, cond, locals)? {
                    return self.eval(branch, locals);
                }
                match ops::condition(self.eval(cond, locals)?)? {
                    Ok(true) => self.eval(then, locals)?,
                    Ok(false) => self.eval(els, locals)?,
                    Err(u) => u,
                }
            }
            ExprKind::Intrinsic { name, overload, args, site } => {
                let mut vals: smallvec::SmallVec<[Value; 4]> = smallvec::SmallVec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a, locals)?);
                }
                if let Some(u) = vals.iter().find(|v| v.is_unscored()) {
                    return Ok(u.clone());
                }
                let v = ops::call_intrinsic(name, *overload, &vals, &mut self.w.ctx)?;
                self.note(*site, || v.to_string());
                v
            }
            ExprKind::Call { func, args, site } => {
                let Some(f) = p.functions.get(*func as usize) else {
                    return Err(invalid(format!("function {func} does not exist")));
                };
                if self.w.calls > p.functions.len() {
                    return Err(invalid(format!("function `{}` calls itself", f.name)));
                }
                // Frames are reused: a call allocates nothing once the row's deepest call ran.
                let mut frame = self.w.frames.pop().unwrap_or_default();
                frame.resize((f.locals.min(MAX_LOCALS) as usize).max(args.len()), Value::Null);
                for (i, a) in args.iter().enumerate() {
                    frame[i] = self.eval(a, locals)?;
                }
                // A function that answers from its arguments alone, asked again with the same
                // ones: its answer. Only with no limits (the work a row is charged stays the
                // walk's) and no trace (which shows every call's inner values).
                let memo = self.w.memoised.get(*func as usize).copied().unwrap_or(false)
                    && self.w.ctx.budget.limits().is_none()
                    && !self.trace.is_on();
                let key = memo.then(|| (*func, frame[..args.len()].iter().map(arg_key).collect()));
                if let Some(v) = key.as_ref().and_then(|k| self.w.memo.get(k)).map(|(_, v)| v.clone()) {
                    self.w.memo_hits += 1;
                    frame.clear();
                    self.w.frames.push(frame);
                    return Ok(v);
                }
                self.w.calls += 1;
                let v = self.eval(&f.body, &mut frame);
                self.w.calls -= 1;
                if let (Some(key), Ok(v)) = (key, &v) {
                    self.w.memo.insert(key, (frame[..args.len()].iter().cloned().collect(), v.clone()));
                }
                frame.clear();
                self.w.frames.push(frame);
                let v = v?;
                self.note(*site, || v.to_string());
                v
            }
            ExprKind::Aggregate { op, set, policy, args, site } => {
                let mut vals = Vec::new();
                for a in args {
                    vals.push(self.eval(a, locals)?);
                }
                let v = aggregate(p, self.decided, *op, *set, *policy, &vals)?;
                self.note(*site, || v.to_string());
                v
            }
            ExprKind::HigherOrder { op, list, local, body } => {
                let l = match ops::iteration_list(self.eval(list, locals)?)? {
                    Ok(l) => l,
                    Err(u) => return Ok(u),
                };
                let slot = *local as usize;
                if *local >= MAX_LOCALS {
                    return Err(invalid(format!("local {local} is out of range")));
                }
                if locals.len() <= slot {
                    locals.resize(slot + 1, Value::Null);
                }
                let mut fold = ops::Fold::new(*op);
                for item in l.iter() {
                    locals[slot] = item.clone();
                    let v = self.eval(body, locals)?;
                    if let Some(decided) = fold.step(item, v)? {
                        return Ok(decided);
                    }
                }
                fold.finish()
            }
        })
    }
}
