//! The host side of the JIT engine: the per-row context (`Ctx`) that compiled code carries in
//! its first argument — the value table behind every handle, the inputs, the driver's locals
//! and decided criteria, the `let` cache, literals and folds in progress — and every
//! `abi::HostFn` as an `extern "C"` function. Each is a thin adapter from handles to the
//! interpreter's shared semantics (`interp::ops`, `interp::aggregate`, `interp::verdict_value`)
//! and the intrinsics (`stdlib`), never a second implementation of a rule.
//!
//! A host function never unwinds into native code: a `Trap` (or a panic, caught) is recorded
//! in the context and the `trapped` word is set, which the compiled code checks after the call.
//! The only `unsafe` here is turning the context pointer compiled code hands back into a
//! reference (`enter`).

use super::abi::{HostFn, NULL};
use crate::backend::wasm::abi as codes;
use crate::interp::ops::{self, Fold};
use crate::interp::{aggregate, verdict_value, Decided};
use crate::ir::{AggOp, BinOp, Program};
use crate::stdlib::{EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::Value;
use std::collections::BTreeMap;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The most handles a row may hold at once (they must fit an `i32`).
const MAX_HANDLES: usize = 1 << 30;
/// Stack a host function must have left before it runs (it grows a new segment otherwise), as
/// the interpreter's walk keeps at every step.
const HOST_RED_ZONE: usize = 128 * 1024;
const HOST_STACK: usize = 4 * 1024 * 1024;

/// One intrinsic call target of a compiled program.
pub struct IntrinsicEntry {
    pub name: String,
    pub overload: u32,
    pub arity: usize,
    /// `None` when the catalogue has no such intrinsic: the call then traps exactly as the
    /// interpreter's does (`ops::call_intrinsic`).
    pub resolved: Option<&'static Intrinsic>,
}

/// What host functions look up by index for one compiled program.
pub struct Tables {
    pub program: Program,
    /// Text constants and field names.
    pub strings: Vec<Arc<str>>,
    pub intrinsics: Vec<IntrinsicEntry>,
}

struct FoldFrame {
    fold: Fold,
    items: Arc<Vec<Value>>,
    /// The table length when the fold started: handles above it belong to one element.
    mark: usize,
    /// The index of the element being folded.
    current: usize,
}

/// The context of one row (reused for the next): its address is the first argument of every
/// compiled function and host function. `repr(C)` so that compiled code reads `trapped`,
/// `num_out` and `stack_limit` at fixed offsets.
#[repr(C)]
pub struct Ctx {
    /// Non-zero once a host function recorded a trap: compiled code returns at once.
    pub trapped: u32,
    /// The `f64` half of a Number a host function returns.
    pub num_out: f64,
    /// The lowest stack address compiled code may start a function below (`StackExhausted`).
    pub stack_limit: usize,
    /// The lowest address of the stack segment the root runs on (`0`: unknown): a host
    /// function with less than `HOST_RED_ZONE` bytes above it runs on a new segment.
    pub stack_floor: usize,
    tables: Option<Arc<Tables>>,
    table: Vec<Value>,
    inputs: Vec<Value>,
    /// The locals the driver bound for the root being evaluated.
    pub locals: Vec<Value>,
    /// The criteria decided so far (moved in for the duration of a root call).
    pub decided: Decided,
    eval: EvalCtx,
    lets: Vec<Option<Result<Value, Trap>>>,
    /// `let`s being evaluated, innermost last.
    pending_lets: Vec<u32>,
    lists: Vec<Vec<Value>>,
    records: Vec<BTreeMap<Arc<str>, Value>>,
    folds: Vec<FoldFrame>,
    /// Arguments pushed for the next intrinsic call or aggregation.
    args: Vec<Value>,
    trap: Option<Trap>,
}

pub const TRAPPED_OFFSET: i32 = offset_of!(Ctx, trapped) as i32;
pub const NUM_OUT_OFFSET: i32 = offset_of!(Ctx, num_out) as i32;
pub const STACK_LIMIT_OFFSET: i32 = offset_of!(Ctx, stack_limit) as i32;

fn type_trap(message: impl Into<String>) -> Trap {
    Trap::new(TrapKind::Type, message)
}

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx::new()
    }
}

impl Ctx {
    pub fn new() -> Ctx {
        Ctx {
            trapped: 0,
            num_out: 0.0,
            stack_limit: 0,
            stack_floor: 0,
            tables: None,
            table: vec![Value::Null; NULL as usize + 1],
            inputs: Vec::new(),
            locals: Vec::new(),
            decided: Decided::default(),
            eval: EvalCtx::new(),
            lets: Vec::new(),
            pending_lets: Vec::new(),
            lists: Vec::new(),
            records: Vec::new(),
            folds: Vec::new(),
            args: Vec::new(),
            trap: None,
        }
    }

    /// Start a row of the program of `tables`: forget everything of the previous row.
    pub fn begin_row(&mut self, tables: &Arc<Tables>, inputs: &[Value]) {
        self.inputs.clear();
        self.inputs.extend_from_slice(inputs);
        self.eval = EvalCtx::new();
        self.lets.clear();
        self.lets.resize(tables.program.lets.len(), None);
        self.tables = Some(tables.clone());
        self.begin_root();
    }

    /// After a row: drop what it held (the context waits for the next row in a thread-local).
    pub fn end_row(&mut self) {
        self.begin_root();
        self.inputs.clear();
        self.locals.clear();
        self.lets.clear();
        self.eval = EvalCtx::new();
        self.decided = Decided::default();
        self.tables = None;
    }

    /// Before and after each root call: an empty table (a root's result is taken out as a
    /// value), no literal, fold, argument or `let` in progress, no trap.
    pub fn begin_root(&mut self) {
        self.table.truncate(NULL as usize + 1);
        self.lists.clear();
        self.records.clear();
        self.folds.clear();
        self.args.clear();
        self.pending_lets.clear();
        self.trap = None;
        self.trapped = 0;
    }

    /// The trap a failed root call recorded.
    pub fn take_trap(&mut self) -> Trap {
        self.trapped = 0;
        self.trap.take().unwrap_or_else(|| type_trap("the JIT's compiled code stopped without a trap"))
    }

    /// After a failed root call: the `let`s it was evaluating fail with the same trap, as in
    /// the interpreter, which caches a `let`'s error too.
    pub fn fail_pending_lets(&mut self, t: &Trap) {
        for i in std::mem::take(&mut self.pending_lets) {
            if let Some(slot) = self.lets.get_mut(i as usize) {
                *slot = Some(Err(t.clone()));
            }
        }
    }

    fn tables(&self) -> Result<&Tables, Trap> {
        self.tables.as_deref().ok_or_else(|| type_trap("no program is bound to the JIT context"))
    }

    fn string(&self, i: i32) -> Result<Arc<str>, Trap> {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.tables().ok()?.strings.get(i).cloned())
            .ok_or_else(|| type_trap(format!("unknown string constant {i}")))
    }

    /// A new handle for `v`. `null` is always `NULL`.
    fn reg(&mut self, v: Value) -> Result<i32, Trap> {
        if matches!(v, Value::Null) {
            return Ok(NULL);
        }
        if self.table.len() >= MAX_HANDLES {
            return Err(Trap::new(TrapKind::Limit, "memory limit: the row holds too many values at once"));
        }
        self.table.push(v);
        Ok((self.table.len() - 1) as i32)
    }

    pub fn get(&self, h: i32) -> Result<&Value, Trap> {
        usize::try_from(h)
            .ok()
            .filter(|i| *i >= NULL as usize)
            .and_then(|i| self.table.get(i))
            .ok_or_else(|| type_trap(format!("invalid value handle {h}")))
    }

    fn num_value(&self, f: f64, h: i32) -> Result<Value, Trap> {
        if h == 0 {
            Ok(Value::Number(f))
        } else {
            self.get(h).cloned()
        }
    }

    fn bool_value(&self, b: i32) -> Result<Value, Trap> {
        match b {
            0 => Ok(Value::Bool(false)),
            1 => Ok(Value::Bool(true)),
            h => self.get(h).cloned(),
        }
    }

    /// `v` as a Number: the `i32` half returned, the `f64` half in `num_out`.
    fn num_repr(&mut self, v: Value) -> Result<i32, Trap> {
        match v {
            Value::Number(n) => {
                self.num_out = n;
                Ok(0)
            }
            other => {
                self.num_out = 0.0;
                self.reg(other)
            }
        }
    }

    /// `v` as a Bool: 0, 1, or a handle to a value that is not a boolean.
    fn bool_repr(&mut self, v: Value) -> Result<i32, Trap> {
        match v {
            Value::Bool(b) => Ok(b as i32),
            other => self.reg(other),
        }
    }

    fn let_get(&mut self, i: i32) -> Result<i32, Trap> {
        let slot = usize::try_from(i).ok().and_then(|i| self.lets.get(i)).ok_or_else(|| type_trap("unknown let"))?;
        match slot.clone() {
            None => {
                self.pending_lets.push(i as u32);
                Ok(0)
            }
            Some(Ok(v)) => self.reg(v),
            Some(Err(t)) => Err(t),
        }
    }

    fn let_set(&mut self, i: i32, h: i32) -> Result<(), Trap> {
        let v = self.get(h)?.clone();
        let slot =
            usize::try_from(i).ok().and_then(|i| self.lets.get_mut(i)).ok_or_else(|| type_trap("unknown let"))?;
        *slot = Some(Ok(v));
        if let Some(pos) = self.pending_lets.iter().rposition(|p| *p as i32 == i) {
            self.pending_lets.remove(pos);
        }
        Ok(())
    }

    fn list_push(&mut self, h: i32) -> Result<(), Trap> {
        let v = self.get(h)?.clone();
        self.lists.last_mut().ok_or_else(|| type_trap("no list literal in progress"))?.push(v);
        Ok(())
    }

    fn list_end(&mut self) -> Result<i32, Trap> {
        let l = self.lists.pop().ok_or_else(|| type_trap("no list literal in progress"))?;
        self.reg(Value::list(l))
    }

    fn record_put(&mut self, name: i32, h: i32) -> Result<(), Trap> {
        let name = self.string(name)?;
        let v = self.get(h)?.clone();
        self.records.last_mut().ok_or_else(|| type_trap("no record literal in progress"))?.insert(name, v);
        Ok(())
    }

    fn record_end(&mut self) -> Result<i32, Trap> {
        let r = self.records.pop().ok_or_else(|| type_trap("no record literal in progress"))?;
        self.reg(Value::Record(Arc::new(r)))
    }

    fn arith(&mut self, op: i32, a: Value, b: Value) -> Result<Value, Trap> {
        let op = codes::from_code(&codes::BINARY_OPS, op).ok_or_else(|| type_trap("unknown operator"))?;
        ops::arith(op, a, b)
    }

    fn compare(&mut self, op: i32, a: &Value, b: &Value) -> Result<i32, Trap> {
        let op = codes::from_code(&codes::CMP_OPS, op).ok_or_else(|| type_trap("unknown comparison"))?;
        let v = ops::compare(op, a, b)?;
        self.bool_repr(v)
    }

    fn fold_begin(&mut self, op: i32, l: i32) -> Result<i32, Trap> {
        let op = codes::from_code(&codes::HIGHER_ORDER_OPS, op).ok_or_else(|| type_trap("unknown fold"))?;
        match ops::iteration_list(self.get(l)?.clone())? {
            Ok(items) => {
                let n = i32::try_from(items.len())
                    .map_err(|_| Trap::new(TrapKind::Limit, "memory limit: a list too long to iterate"))?;
                let mark = self.table.len();
                self.folds.push(FoldFrame { fold: Fold::new(op), items, mark, current: 0 });
                Ok(n)
            }
            Err(_) => Ok(-1),
        }
    }

    /// Move the innermost fold to element `i` and return it (what the previous element's body
    /// built is released).
    fn fold_item(&mut self, i: i32) -> Result<&Value, Trap> {
        let frame = self.folds.last_mut().ok_or_else(|| type_trap("no fold in progress"))?;
        frame.current = usize::try_from(i)
            .ok()
            .filter(|i| *i < frame.items.len())
            .ok_or_else(|| type_trap(format!("fold element {i} out of range")))?;
        // What the previous element's body built is garbage now.
        if self.table.len() > frame.mark {
            self.table.truncate(frame.mark);
        }
        Ok(&frame.items[frame.current])
    }

    fn fold_step(&mut self, v: Value) -> Result<i32, Trap> {
        let frame = self.folds.last_mut().ok_or_else(|| type_trap("no fold in progress"))?;
        let item = frame.items.get(frame.current).ok_or_else(|| type_trap("no fold element"))?;
        match frame.fold.step(item, v)? {
            None => Ok(0),
            Some(result) => {
                self.pop_fold();
                self.reg(result)
            }
        }
    }

    fn pop_fold(&mut self) -> Option<Fold> {
        let frame = self.folds.pop()?;
        self.table.truncate(frame.mark);
        Some(frame.fold)
    }

    fn fold_end(&mut self) -> Result<i32, Trap> {
        let fold = self.pop_fold().ok_or_else(|| type_trap("no fold in progress"))?;
        self.reg(fold.finish())
    }

    /// The last `n` pushed arguments, in push order.
    fn pop_args(&mut self, n: usize) -> Result<Vec<Value>, Trap> {
        let at = self.args.len().checked_sub(n).ok_or_else(|| type_trap("missing call arguments"))?;
        Ok(self.args.split_off(at))
    }

    fn intrinsic(&mut self, i: i32) -> Result<i32, Trap> {
        let tables = self.tables.clone().ok_or_else(|| type_trap("no program is bound to the JIT context"))?;
        let entry = usize::try_from(i)
            .ok()
            .and_then(|i| tables.intrinsics.get(i))
            .ok_or_else(|| type_trap(format!("unknown intrinsic entry {i}")))?;
        let args = self.pop_args(entry.arity)?;
        let v = match entry.resolved {
            Some(intr) => ops::call_resolved(intr, &args, &mut self.eval)?,
            None => ops::call_intrinsic(&entry.name, entry.overload, &args, &mut self.eval)?,
        };
        self.reg(v)
    }

    fn aggregate(&mut self, op: i32, set: i32, policy: i32, n: i32) -> Result<i32, Trap> {
        let op = codes::from_code(AggOp::ALL, op).ok_or_else(|| type_trap("unknown aggregation"))?;
        let policy = codes::from_code(&codes::POLICIES, policy).ok_or_else(|| type_trap("unknown policy"))?;
        let set = u32::try_from(set).map_err(|_| type_trap("unknown set"))?;
        let args = self.pop_args(usize::try_from(n).map_err(|_| type_trap("bad argument count"))?)?;
        let v = aggregate(&self.tables()?.program, &self.decided, op, set, policy, &args)?;
        self.reg(v)
    }
}

/// Run a host function on the context compiled code passed in: on a trap or a panic, record
/// it, set `trapped` and return `on_trap` (the compiled code then returns at once).
fn enter<R>(ctx: *mut Ctx, on_trap: R, f: impl FnOnce(&mut Ctx) -> Result<R, Trap>) -> R {
    // SAFETY: `enter` and the host functions that call it are private to this module; outside
    // it they exist only as the addresses `address` hands to compiled code, which passes on the
    // pointer the engine gave the root it called (`runtime::call_root`): a live `Ctx` that the
    // engine borrows exclusively for the whole call and does not touch until the root returns
    // (this module's own tests pass a live local `Ctx` the same way). Host functions never
    // call back into compiled code, so this is the only reference to it while `f` runs.
    let ctx = unsafe { &mut *ctx };
    if ctx.trapped != 0 {
        return on_trap;
    }
    // The stack left, from the floor the engine recorded (cheaper than asking `stacker`).
    let marker = 0u8;
    let left = (std::ptr::addr_of!(marker) as usize).wrapping_sub(ctx.stack_floor);
    let low = ctx.stack_floor != 0 && left < HOST_RED_ZONE;
    let run = || catch_unwind(AssertUnwindSafe(|| f(&mut *ctx)));
    let r = if low { stacker::grow(HOST_STACK, run) } else { run() };
    let trap = match r {
        Ok(Ok(v)) => return v,
        Ok(Err(t)) => t,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            type_trap(format!("internal error in the JIT host: {what}"))
        }
    };
    ctx.trap = Some(trap);
    ctx.trapped = 1;
    on_trap
}

extern "C" fn box_num(ctx: *mut Ctx, x: f64, h: i32) -> i32 {
    enter(ctx, 0, |c| if h != 0 { Ok(h) } else { c.reg(Value::Number(x)) })
}

extern "C" fn box_bool(ctx: *mut Ctx, b: i32) -> i32 {
    enter(ctx, 0, |c| match b {
        0 | 1 => c.reg(Value::Bool(b == 1)),
        h => Ok(h),
    })
}

extern "C" fn unbox_num(ctx: *mut Ctx, h: i32) -> i32 {
    enter(ctx, 0, |c| {
        let (n, out) = match c.get(h)? {
            Value::Number(n) => (*n, 0),
            _ => (0.0, h),
        };
        c.num_out = n;
        Ok(out)
    })
}

extern "C" fn unbox_bool(ctx: *mut Ctx, h: i32) -> i32 {
    enter(ctx, 0, |c| {
        Ok(match c.get(h)? {
            Value::Bool(b) => *b as i32,
            _ => h,
        })
    })
}

extern "C" fn text(ctx: *mut Ctx, s: i32) -> i32 {
    enter(ctx, 0, |c| {
        let t = c.string(s)?;
        c.reg(Value::Text(t))
    })
}

extern "C" fn input(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| {
        let v = usize::try_from(i).ok().and_then(|i| c.inputs.get(i)).cloned().unwrap_or(Value::Null);
        c.reg(v)
    })
}

extern "C" fn local(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| {
        let v = usize::try_from(i).ok().and_then(|i| c.locals.get(i)).cloned().unwrap_or(Value::Null);
        c.reg(v)
    })
}

extern "C" fn let_get(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.let_get(i))
}

extern "C" fn let_set(ctx: *mut Ctx, i: i32, h: i32) {
    enter(ctx, (), |c| c.let_set(i, h))
}

extern "C" fn criterion(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| {
        let i = u32::try_from(i).map_err(|_| type_trap("unknown criterion"))?;
        let v = verdict_value(&c.decided, i);
        c.reg(v)
    })
}

extern "C" fn list_begin(ctx: *mut Ctx) {
    enter(ctx, (), |c| {
        c.lists.push(Vec::new());
        Ok(())
    })
}

extern "C" fn list_push(ctx: *mut Ctx, h: i32) {
    enter(ctx, (), |c| c.list_push(h))
}

extern "C" fn list_end(ctx: *mut Ctx) -> i32 {
    enter(ctx, 0, |c| c.list_end())
}

extern "C" fn record_begin(ctx: *mut Ctx) {
    enter(ctx, (), |c| {
        c.records.push(BTreeMap::new());
        Ok(())
    })
}

extern "C" fn record_put(ctx: *mut Ctx, name: i32, h: i32) {
    enter(ctx, (), |c| c.record_put(name, h))
}

extern "C" fn record_end(ctx: *mut Ctx) -> i32 {
    enter(ctx, 0, |c| c.record_end())
}

extern "C" fn field(ctx: *mut Ctx, base: i32, name: i32) -> i32 {
    enter(ctx, 0, |c| {
        let name = c.string(name)?;
        let v = ops::field(c.get(base)?.clone(), &name)?;
        c.reg(v)
    })
}

extern "C" fn index(ctx: *mut Ctx, base: i32, i: i32) -> i32 {
    enter(ctx, 0, |c| {
        let v = ops::index(c.get(base)?.clone(), c.get(i)?.clone())?;
        c.reg(v)
    })
}

extern "C" fn unary(ctx: *mut Ctx, op: i32, h: i32) -> i32 {
    enter(ctx, 0, |c| {
        let op = codes::from_code(&codes::UNARY_OPS, op).ok_or_else(|| type_trap("unknown operator"))?;
        let v = ops::unary(op, c.get(h)?.clone())?;
        c.reg(v)
    })
}

extern "C" fn arith(ctx: *mut Ctx, op: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| {
        let (a, b) = (c.get(a)?.clone(), c.get(b)?.clone());
        let v = c.arith(op, a, b)?;
        c.reg(v)
    })
}

extern "C" fn arith_num(ctx: *mut Ctx, op: i32, xf: f64, xh: i32, yf: f64, yh: i32) -> i32 {
    enter(ctx, 0, |c| {
        let (a, b) = (c.num_value(xf, xh)?, c.num_value(yf, yh)?);
        let v = c.arith(op, a, b)?;
        c.num_repr(v)
    })
}

extern "C" fn kleene(ctx: *mut Ctx, op: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| {
        let (a, b) = (c.bool_value(a)?, c.bool_value(b)?);
        let v = match codes::from_code(&codes::BINARY_OPS, op) {
            Some(BinOp::And) => ops::and(a, b),
            Some(BinOp::Or) => ops::or(a, b),
            _ => return Err(type_trap("unknown logical operator")),
        };
        c.bool_repr(v)
    })
}

extern "C" fn compare(ctx: *mut Ctx, op: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| {
        let (a, b) = (c.get(a)?.clone(), c.get(b)?.clone());
        c.compare(op, &a, &b)
    })
}

extern "C" fn compare_num(ctx: *mut Ctx, op: i32, xf: f64, xh: i32, yf: f64, yh: i32) -> i32 {
    enter(ctx, 0, |c| {
        let (a, b) = (c.num_value(xf, xh)?, c.num_value(yf, yh)?);
        c.compare(op, &a, &b)
    })
}

extern "C" fn cond(ctx: *mut Ctx, b: i32) -> i32 {
    enter(ctx, 0, |c| match ops::condition(c.bool_value(b)?)? {
        Err(unscored) => c.reg(unscored),
        Ok(_) => Err(type_trap("a plain condition reached the host")),
    })
}

extern "C" fn fold_begin(ctx: *mut Ctx, op: i32, l: i32) -> i32 {
    enter(ctx, 0, |c| c.fold_begin(op, l))
}

extern "C" fn fold_item(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| {
        let v = c.fold_item(i)?.clone();
        c.reg(v)
    })
}

extern "C" fn fold_item_num(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| match c.fold_item(i)? {
        Value::Number(n) => {
            c.num_out = *n;
            Ok(0)
        }
        other => {
            let v = other.clone();
            c.num_repr(v)
        }
    })
}

extern "C" fn fold_item_bool(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| match c.fold_item(i)? {
        Value::Bool(b) => Ok(*b as i32),
        other => {
            let v = other.clone();
            c.reg(v)
        }
    })
}

extern "C" fn fold_step(ctx: *mut Ctx, h: i32) -> i32 {
    enter(ctx, 0, |c| {
        let v = c.get(h)?.clone();
        c.fold_step(v)
    })
}

extern "C" fn fold_step_bool(ctx: *mut Ctx, b: i32) -> i32 {
    enter(ctx, 0, |c| {
        let v = c.bool_value(b)?;
        c.fold_step(v)
    })
}

extern "C" fn fold_end(ctx: *mut Ctx) -> i32 {
    enter(ctx, 0, |c| c.fold_end())
}

extern "C" fn arg(ctx: *mut Ctx, h: i32) {
    enter(ctx, (), |c| {
        let v = c.get(h)?.clone();
        c.args.push(v);
        Ok(())
    })
}

extern "C" fn intrinsic(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic(i))
}

extern "C" fn aggregate_fn(ctx: *mut Ctx, op: i32, set: i32, policy: i32, n: i32) -> i32 {
    enter(ctx, 0, |c| c.aggregate(op, set, policy, n))
}

extern "C" fn stack_exhausted(ctx: *mut Ctx) {
    enter(ctx, (), |_| {
        Err(Trap::new(TrapKind::Limit, "stack limit: the row's function calls nest too deeply for the native stack"))
    })
}

type H0 = extern "C" fn(*mut Ctx);
type H0r = extern "C" fn(*mut Ctx) -> i32;
type H1 = extern "C" fn(*mut Ctx, i32);
type H1r = extern "C" fn(*mut Ctx, i32) -> i32;
type H2 = extern "C" fn(*mut Ctx, i32, i32);
type H2r = extern "C" fn(*mut Ctx, i32, i32) -> i32;
type H3r = extern "C" fn(*mut Ctx, i32, i32, i32) -> i32;
type H4r = extern "C" fn(*mut Ctx, i32, i32, i32, i32) -> i32;
type HNum = extern "C" fn(*mut Ctx, i32, f64, i32, f64, i32) -> i32;

/// The Rust function behind each host function; its type is the one `HostFn::signature` gives.
pub fn address(f: HostFn) -> *const u8 {
    match f {
        HostFn::BoxNum => box_num as extern "C" fn(*mut Ctx, f64, i32) -> i32 as *const u8,
        HostFn::BoxBool => box_bool as H1r as *const u8,
        HostFn::UnboxNum => unbox_num as H1r as *const u8,
        HostFn::UnboxBool => unbox_bool as H1r as *const u8,
        HostFn::Text => text as H1r as *const u8,
        HostFn::Input => input as H1r as *const u8,
        HostFn::Local => local as H1r as *const u8,
        HostFn::LetGet => let_get as H1r as *const u8,
        HostFn::LetSet => let_set as H2 as *const u8,
        HostFn::Criterion => criterion as H1r as *const u8,
        HostFn::ListBegin => list_begin as H0 as *const u8,
        HostFn::ListPush => list_push as H1 as *const u8,
        HostFn::ListEnd => list_end as H0r as *const u8,
        HostFn::RecordBegin => record_begin as H0 as *const u8,
        HostFn::RecordPut => record_put as H2 as *const u8,
        HostFn::RecordEnd => record_end as H0r as *const u8,
        HostFn::Field => field as H2r as *const u8,
        HostFn::Index => index as H2r as *const u8,
        HostFn::Unary => unary as H2r as *const u8,
        HostFn::Arith => arith as H3r as *const u8,
        HostFn::ArithNum => arith_num as HNum as *const u8,
        HostFn::Kleene => kleene as H3r as *const u8,
        HostFn::Compare => compare as H3r as *const u8,
        HostFn::CompareNum => compare_num as HNum as *const u8,
        HostFn::Cond => cond as H1r as *const u8,
        HostFn::FoldBegin => fold_begin as H2r as *const u8,
        HostFn::FoldItem => fold_item as H1r as *const u8,
        HostFn::FoldItemNum => fold_item_num as H1r as *const u8,
        HostFn::FoldItemBool => fold_item_bool as H1r as *const u8,
        HostFn::FoldStep => fold_step as H1r as *const u8,
        HostFn::FoldStepBool => fold_step_bool as H1r as *const u8,
        HostFn::FoldEnd => fold_end as H0r as *const u8,
        HostFn::Arg => arg as H1 as *const u8,
        HostFn::Intrinsic => intrinsic as H1r as *const u8,
        HostFn::Aggregate => aggregate_fn as H4r as *const u8,
        HostFn::StackExhausted => stack_exhausted as H0 as *const u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_a_host_function_becomes_a_trap() {
        let mut ctx = Ctx::new();
        let p: *mut Ctx = &mut ctx;
        let r = enter(p, -1, |_| -> Result<i32, Trap> { panic!("boom") });
        assert_eq!(r, -1);
        assert_eq!(ctx.trapped, 1);
        let t = ctx.take_trap();
        assert_eq!(t.kind, TrapKind::Type);
        assert!(t.message.contains("boom"), "{}", t.message);
        // Once trapped, a host function does nothing until the next root.
        ctx.trapped = 1;
        let p: *mut Ctx = &mut ctx;
        assert_eq!(enter(p, 7, |_| Ok(1)), 7);
    }

    #[test]
    fn a_trap_is_recorded_and_null_is_always_the_null_handle() {
        let mut ctx = Ctx::new();
        let p: *mut Ctx = &mut ctx;
        assert_eq!(box_num(p, 1.5, 0), NULL + 1);
        assert_eq!(unbox_num(p, NULL + 1), 0);
        assert_eq!(ctx.num_out, 1.5);
        let p: *mut Ctx = &mut ctx;
        assert_eq!(unbox_num(p, NULL), NULL);
        assert_eq!(ctx.reg(Value::Null), Ok(NULL));
        let p: *mut Ctx = &mut ctx;
        assert_eq!(arith_num(p, codes::code_of(&codes::BINARY_OPS, &BinOp::Div), 1.0, 0, 0.0, 0), 0);
        assert_eq!(ctx.trapped, 1);
        let t = ctx.take_trap();
        assert_eq!((t.kind, t.message.as_str()), (TrapKind::DivisionByZero, "1 / 0"));
    }
}
