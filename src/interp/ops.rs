//! Value-level semantics of every IR operation, shared by all engines: what a field read, an
//! index, an operator, a comparison, a condition, an intrinsic call or one step of a
//! `map`/`filter`/`all`/`any`/`count` does to `Value`s, including how `unscored` propagates and
//! which trap each misuse raises. The interpreter calls these directly from its tree walk; the
//! Wasm and JIT engines call them from their host functions whenever a value is not a plain
//! number or boolean. So the engines can only disagree in how they order and route these calls
//! (codegen), never in what an operation means.

use crate::ir::{BinOp, CmpOp, Const, HigherOrder, UnOp};
use crate::stdlib::{self, EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::Value;
use std::sync::Arc;

pub fn unscored(reason: impl Into<Arc<str>>) -> Value {
    Value::Unscored(reason.into())
}

/// The text a trap leaves as an unscored reason: `rubric::trap::KIND: message`.
pub fn trap_reason(t: &Trap) -> String {
    format!("{}: {}", t.kind.code(), t.message)
}

pub fn const_value(c: &Const) -> Value {
    match c {
        Const::Null => Value::Null,
        Const::Bool(b) => Value::Bool(*b),
        Const::Number(n) => Value::Number(*n),
        Const::Text(t) => Value::Text(t.clone()),
    }
}

/// `base.name`.
pub fn field(base: Value, name: &str) -> Result<Value, Trap> {
    match base {
        Value::Record(r) => Ok(r.get(name).cloned().unwrap_or(Value::Null)),
        Value::Unscored(r) => Ok(Value::Unscored(r)),
        other => Err(Trap::new(TrapKind::Type, format!("cannot read `.{name}` of {other}"))),
    }
}

/// `base[index]`.
pub fn index(base: Value, index: Value) -> Result<Value, Trap> {
    match (base, index) {
        (Value::Unscored(r), _) | (_, Value::Unscored(r)) => Ok(Value::Unscored(r)),
        (Value::List(l), Value::Number(n)) => {
            if n.fract() != 0.0 || n < 0.0 || n as usize >= l.len() {
                return Err(Trap::new(
                    TrapKind::OutOfRange,
                    format!("index {n} is out of range for a list of {}", l.len()),
                ));
            }
            Ok(l[n as usize].clone())
        }
        (b, i) => Err(Trap::new(TrapKind::Type, format!("cannot index {b} with {i}"))),
    }
}

pub fn unary(op: UnOp, v: Value) -> Result<Value, Trap> {
    match (op, v) {
        (_, Value::Unscored(r)) => Ok(Value::Unscored(r)),
        (UnOp::Neg, Value::Number(n)) => Ok(Value::Number(-n)),
        (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (_, v) => Err(Trap::new(TrapKind::Type, format!("bad operand {v}"))),
    }
}

/// Whether `a and b` is decided by its left operand alone (`false`), before `b` is evaluated.
pub fn and_short(a: &Value) -> bool {
    *a == Value::Bool(false)
}

/// Whether `a or b` is decided by its left operand alone (`true`).
pub fn or_short(a: &Value) -> bool {
    *a == Value::Bool(true)
}

/// Kleene `a and b`, once both operands are known (and `a` did not decide alone).
pub fn and(a: Value, b: Value) -> Value {
    match (a, b) {
        (_, Value::Bool(false)) => Value::Bool(false),
        (Value::Unscored(r), _) | (_, Value::Unscored(r)) => Value::Unscored(r),
        _ => Value::Bool(true),
    }
}

/// Kleene `a or b`, once both operands are known (and `a` did not decide alone).
pub fn or(a: Value, b: Value) -> Value {
    match (a, b) {
        (_, Value::Bool(true)) => Value::Bool(true),
        (Value::Unscored(r), _) | (_, Value::Unscored(r)) => Value::Unscored(r),
        _ => Value::Bool(false),
    }
}

/// The strict binary operators (both operands evaluated): arithmetic and concatenation.
/// `and`, `or` and `??` short-circuit and are decided by the engines with [`and`], [`or`] and
/// a null test.
pub fn arith(op: BinOp, a: Value, b: Value) -> Result<Value, Trap> {
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

/// Structural equality and ordering of values.
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

/// Folds the result of one comparison of a chain (`a < b <= c`) into the chain's result so
/// far, which starts as `true`: a `false` anywhere decides, else the first unscored.
pub fn chain(acc: Value, r: Value) -> Value {
    match (acc, r) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
        (Value::Unscored(u), _) | (_, Value::Unscored(u)) => Value::Unscored(u),
        _ => Value::Bool(true),
    }
}

/// What an `if` does with its condition: `Ok(Ok(branch))`, or `Ok(Err(unscored))` when the
/// whole `if` is unscored.
pub fn condition(v: Value) -> Result<Result<bool, Value>, Trap> {
    match v {
        Value::Bool(b) => Ok(Ok(b)),
        u @ Value::Unscored(_) => Ok(Err(u)),
        other => Err(Trap::new(TrapKind::Type, format!("condition is {other}"))),
    }
}

/// Call intrinsic `name`#`overload` on evaluated arguments. An unscored argument (the first)
/// is the result: intrinsics never see `unscored`.
pub fn call_intrinsic(name: &str, overload: u32, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    if let Some(u) = args.iter().find(|v| v.is_unscored()) {
        return Ok(u.clone());
    }
    call_metered(resolve_intrinsic(name, overload)?, args, ctx)
}

/// The work an intrinsic's argument or result stands for: its bytes or elements (shallow).
fn work_of(v: &Value) -> usize {
    match v {
        Value::Text(t) => t.len(),
        Value::List(l) => l.len(),
        Value::Record(r) => r.len(),
        Value::Json(j) => match &**j {
            serde_json::Value::String(s) => s.len(),
            serde_json::Value::Array(a) => a.len(),
            serde_json::Value::Object(o) => o.len(),
            _ => 1,
        },
        _ => 1,
    }
}

/// Call `intr`, charging the row's budget for what it reads before the call and for what it
/// made after (an intrinsic that can make more than its inputs checks that itself, as it
/// works). With an unlimited budget this is the bare call.
fn call_metered(intr: &'static Intrinsic, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    if ctx.budget.limits().is_none() {
        return ctx.call_memoised(intr, args);
    }
    ctx.work(1 + args.iter().map(work_of).sum::<usize>())?;
    let v = (intr.imp)(args, ctx)?;
    ctx.work(work_of(&v))?;
    Ok(v)
}

/// Intrinsic `name`#`overload` of the catalogue, for an engine that resolves its calls once,
/// ahead of time, and then calls them with [`call_resolved`].
pub fn resolve_intrinsic(name: &str, overload: u32) -> Result<&'static Intrinsic, Trap> {
    /// Every intrinsic by name, its overloads in rank order: built once per process.
    static BY_NAME: std::sync::LazyLock<rustc_hash::FxHashMap<&'static str, Vec<&'static Intrinsic>>> =
        std::sync::LazyLock::new(|| {
            let mut m: rustc_hash::FxHashMap<&'static str, Vec<&'static Intrinsic>> = Default::default();
            for i in stdlib::intrinsics() {
                m.entry(i.name).or_default().push(i);
            }
            m
        });
    BY_NAME
        .get(name)
        .and_then(|v| v.get(overload as usize).copied())
        .ok_or_else(|| Trap::new(TrapKind::Type, format!("unknown intrinsic `{name}`#{overload}")))
}

/// [`call_intrinsic`] of an intrinsic already resolved: the same rule (an unscored argument is
/// the result), without the lookup by name.
pub fn call_resolved(intr: &'static Intrinsic, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    if let Some(u) = args.iter().find(|v| v.is_unscored()) {
        return Ok(u.clone());
    }
    call_metered(intr, args, ctx)
}

/// [`call_resolved`] without the row's memo: for a caller that keeps the result for the rest
/// of the row itself (the JIT's row slots), where a memo entry would never be read.
pub fn call_resolved_once(intr: &'static Intrinsic, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    if let Some(u) = args.iter().find(|v| v.is_unscored()) {
        return Ok(u.clone());
    }
    if ctx.budget.limits().is_none() {
        return (intr.imp)(args, ctx);
    }
    call_metered(intr, args, ctx)
}

/// The list a `map`/`filter`/`all`/`any`/`count` iterates over: `Ok(Ok(items))`, or
/// `Ok(Err(unscored))` when the list itself is unscored (the result is then that value).
pub fn iteration_list(v: Value) -> Result<Result<Arc<Vec<Value>>, Value>, Trap> {
    match v {
        Value::List(l) => Ok(Ok(l)),
        u @ Value::Unscored(_) => Ok(Err(u)),
        other => Err(Trap::new(TrapKind::Type, format!("expected a list, found {other}"))),
    }
}

/// The state of one `map`/`filter`/`all`/`any`/`count` over a list: fed the body's value for
/// every element in order ([`Fold::step`]), it says when the result is decided early and
/// builds the result ([`Fold::finish`]). An unscored predicate does not stop the walk (a later
/// element may still decide `all`/`any`); the last unscored one is the result if none does.
pub struct Fold {
    op: HigherOrder,
    out: Vec<Value>,
    saw_unscored: Option<Value>,
}

impl Fold {
    pub fn new(op: HigherOrder) -> Fold {
        Fold { op, out: Vec::new(), saw_unscored: None }
    }

    /// Feed the body's value `v` for `item`; `Some(result)` when the result is decided now.
    pub fn step(&mut self, item: &Value, v: Value) -> Result<Option<Value>, Trap> {
        let op = self.op;
        match op {
            HigherOrder::Map => self.out.push(v),
            _ => match v {
                Value::Bool(b) => {
                    if op == HigherOrder::Filter && b {
                        self.out.push(item.clone());
                    }
                    if op == HigherOrder::All && !b {
                        return Ok(Some(Value::Bool(false)));
                    }
                    if op == HigherOrder::Any && b {
                        return Ok(Some(Value::Bool(true)));
                    }
                    if op == HigherOrder::Count && b {
                        self.out.push(Value::Null);
                    }
                }
                u @ Value::Unscored(_) => self.saw_unscored = Some(u),
                other => return Err(Trap::new(TrapKind::Type, format!("predicate produced {other}"))),
            },
        }
        Ok(None)
    }

    /// The elements collected so far (the Wasm engine meters them).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The result after every element was fed without an early decision.
    pub fn finish(self) -> Value {
        if let Some(u) = self.saw_unscored {
            return u;
        }
        match self.op {
            HigherOrder::Map | HigherOrder::Filter => Value::list(self.out),
            HigherOrder::All => Value::Bool(true),
            HigherOrder::Any => Value::Bool(false),
            HigherOrder::Count => Value::Number(self.out.len() as f64),
        }
    }
}
