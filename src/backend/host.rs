//! The host core of both compiled engines: the per-row state that compiled code reaches through
//! handles — the value table, the inputs, the driver's locals and decided criteria, the `let`
//! cache, list and record literals, folds and call arguments in progress — and every host
//! operation on it, each a thin adapter from handles to the interpreter's shared semantics
//! (`interp::ops`, `interp::aggregate`, `interp::verdict_value`) and the intrinsics
//! (`stdlib`), never a second implementation of a rule.
//!
//! Pipeline position: `backend::wasm::host` (wasmtime imports) and `backend::jit::host`
//! (`extern "C"` functions) are glue over this core: they turn their calling convention's
//! arguments into core calls and the core's `Result`s into their way of trapping. The engines
//! differ only in the row's `stdlib::Budget`: the Wasm engine's carries the sandbox's limits,
//! which the core checks as values are made (memory) and intrinsics check as they work (fuel,
//! time, memory); the JIT's is unlimited, which makes every check a no-op.
//!
//! Handles: `NULL` (`lower::NULL`) is `null`, `0` and `1` are never handles, every other value
//! a row's expressions make lives in the table until the root returns (a fold releases what
//! one element's body made before the next element).

use super::lower::{self, NULL};
use crate::interp::ops::{self, Fold};
use crate::interp::{aggregate, verdict_value, Decided};
use crate::ir::{AggOp, BinOp, Program};
use crate::stdlib::{Budget, EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The most handles a row may hold at once (they must fit an `i32`).
const MAX_HANDLES: usize = 1 << 28;

struct FoldFrame {
    fold: Fold,
    items: Arc<Vec<Value>>,
    /// The table length when the fold started: handles above it belong to one element.
    mark: usize,
    /// The index of the element being folded.
    current: usize,
}

pub fn type_trap(message: impl Into<String>) -> Trap {
    Trap::new(TrapKind::Type, message)
}

fn too_many_values() -> Trap {
    Trap::new(TrapKind::Limit, "memory limit: the row holds too many values at once")
}

/// The state of one row of one program, reused for the next row.
pub struct HostCore {
    program: Option<Arc<Program>>,
    table: Vec<Value>,
    inputs: Vec<Value>,
    /// The locals the driver bound for the root being evaluated.
    pub locals: Vec<Value>,
    /// The criteria decided so far (moved in for the duration of a root call).
    pub decided: Decided,
    /// The intrinsics' per-row context, with the row's budget.
    pub eval: EvalCtx,
    lets: Vec<Option<Result<Value, Trap>>>,
    /// `let`s being evaluated, innermost last.
    pending_lets: Vec<u32>,
    lists: Vec<Vec<Value>>,
    records: Vec<BTreeMap<Arc<str>, Value>>,
    folds: Vec<FoldFrame>,
    /// Arguments pushed for the next intrinsic call or aggregation.
    args: Vec<Value>,
    /// The trap a host operation raised, read by the engine when the root call fails.
    pub trap: Option<Trap>,
}

impl Default for HostCore {
    fn default() -> HostCore {
        HostCore::new()
    }
}

impl HostCore {
    pub fn new() -> HostCore {
        HostCore {
            program: None,
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

    /// Start a row of `program`: forget everything of the previous row.
    pub fn begin_row(&mut self, program: &Arc<Program>, inputs: &[Value], budget: Budget) {
        self.inputs.clear();
        self.inputs.extend_from_slice(inputs);
        self.eval.reset_for_row(budget, Some(crate::interp::prepared(program).scan(program)));
        self.lets.clear();
        self.lets.resize(program.lets.len(), None);
        if !self.program.as_ref().is_some_and(|p| Arc::ptr_eq(p, program)) {
            self.program = Some(program.clone());
        }
        self.begin_root();
    }

    /// After a row: drop what it held (the state waits for the next row).
    pub fn end_row(&mut self) {
        self.begin_root();
        self.inputs.clear();
        self.locals.clear();
        self.lets.clear();
        self.eval.reset_for_row(Budget::unlimited(), None);
        self.decided = Decided::default();
    }

    /// Before and after each root call: an empty table (a root's result is taken out as a
    /// value), no literal, fold, argument or `let` in progress, no trap.
    #[inline]
    pub fn begin_root(&mut self) {
        // Most roots leave nothing behind (a check whose calls all return numbers or booleans):
        // one test of the tables' lengths, and nothing to drop.
        let used = (self.table.len() > NULL as usize + 1)
            | !self.lists.is_empty()
            | !self.records.is_empty()
            | !self.folds.is_empty()
            | !self.args.is_empty()
            | !self.pending_lets.is_empty()
            | self.trap.is_some();
        if used {
            self.clear_root();
        }
    }

    #[cold]
    fn clear_root(&mut self) {
        self.table.truncate(NULL as usize + 1);
        self.lists.clear();
        self.records.clear();
        self.folds.clear();
        self.args.clear();
        self.pending_lets.clear();
        self.trap = None;
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

    fn program(&self) -> Result<&Program, Trap> {
        self.program.as_deref().ok_or_else(|| type_trap("no program is bound to the host"))
    }

    // ------------------------------------------------------------ handles

    /// A new handle for `v`. `null` is always `NULL`.
    pub fn reg(&mut self, v: Value) -> Result<i32, Trap> {
        if matches!(v, Value::Null) {
            return Ok(NULL);
        }
        if self.table.len() >= MAX_HANDLES {
            return Err(too_many_values());
        }
        self.eval.budget.check_memory()?;
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

    fn value(&self, h: i32) -> Result<Value, Trap> {
        self.get(h).cloned()
    }

    /// The value of a Number `(f, h)`.
    pub fn num_value(&self, f: f64, h: i32) -> Result<Value, Trap> {
        if h == 0 {
            Ok(Value::Number(f))
        } else {
            self.value(h)
        }
    }

    /// The value of a Bool `b`.
    pub fn bool_value(&self, b: i32) -> Result<Value, Trap> {
        match b {
            0 => Ok(Value::Bool(false)),
            1 => Ok(Value::Bool(true)),
            h => self.value(h),
        }
    }

    /// `v` as a Number: plain, or a handle to a value that is not a number.
    pub fn num_repr(&mut self, v: Value) -> Result<(f64, i32), Trap> {
        match v {
            Value::Number(n) => Ok((n, 0)),
            other => Ok((0.0, self.reg(other)?)),
        }
    }

    /// `v` as a Bool: 0, 1, or a handle to a value that is not a boolean.
    pub fn bool_repr(&mut self, v: Value) -> Result<i32, Trap> {
        match v {
            Value::Bool(b) => Ok(b as i32),
            other => self.reg(other),
        }
    }

    // ------------------------------------------------------------ representations

    pub fn box_num(&mut self, x: f64, h: i32) -> Result<i32, Trap> {
        if h != 0 {
            return Ok(h);
        }
        self.reg(Value::Number(x))
    }

    pub fn box_bool(&mut self, b: i32) -> Result<i32, Trap> {
        match b {
            0 | 1 => self.reg(Value::Bool(b == 1)),
            h => Ok(h),
        }
    }

    pub fn unbox_num(&self, h: i32) -> Result<(f64, i32), Trap> {
        Ok(match self.get(h)? {
            Value::Number(n) => (*n, 0),
            _ => (0.0, h),
        })
    }

    pub fn unbox_bool(&self, h: i32) -> Result<i32, Trap> {
        Ok(match self.get(h)? {
            Value::Bool(b) => *b as i32,
            _ => h,
        })
    }

    // ------------------------------------------------------------ names

    pub fn text(&mut self, t: Arc<str>) -> Result<i32, Trap> {
        self.reg(Value::Text(t))
    }

    pub fn input(&mut self, i: i32) -> Result<i32, Trap> {
        let v = self.input_value(i);
        self.reg(v)
    }

    /// Input `i` (null when there is none).
    pub fn input_value(&self, i: i32) -> Value {
        usize::try_from(i).ok().and_then(|i| self.inputs.get(i)).cloned().unwrap_or(Value::Null)
    }

    pub fn local(&mut self, i: i32) -> Result<i32, Trap> {
        let v = usize::try_from(i).ok().and_then(|i| self.locals.get(i)).cloned().unwrap_or(Value::Null);
        self.reg(v)
    }

    /// The cached value of a `let`, or `0` when the compiled code must evaluate it now.
    pub fn let_get(&mut self, i: i32) -> Result<i32, Trap> {
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

    pub fn let_set(&mut self, i: i32, h: i32) -> Result<(), Trap> {
        let v = self.value(h)?;
        let slot =
            usize::try_from(i).ok().and_then(|i| self.lets.get_mut(i)).ok_or_else(|| type_trap("unknown let"))?;
        *slot = Some(Ok(v));
        if let Some(pos) = self.pending_lets.iter().rposition(|p| *p as i32 == i) {
            self.pending_lets.remove(pos);
        }
        Ok(())
    }

    /// A static criterion as a value (`er.met`...).
    pub fn criterion(&mut self, i: i32) -> Result<i32, Trap> {
        let i = u32::try_from(i).map_err(|_| type_trap("unknown criterion"))?;
        let v = verdict_value(&self.decided, i);
        self.reg(v)
    }

    // ------------------------------------------------------------ literals

    pub fn list_begin(&mut self) {
        self.lists.push(Vec::new());
    }

    pub fn list_push(&mut self, h: i32) -> Result<(), Trap> {
        let v = self.value(h)?;
        self.eval.budget.check_memory()?;
        self.lists.last_mut().ok_or_else(|| type_trap("no list literal in progress"))?.push(v);
        Ok(())
    }

    pub fn list_end(&mut self) -> Result<i32, Trap> {
        let l = self.lists.pop().ok_or_else(|| type_trap("no list literal in progress"))?;
        self.reg(Value::list(l))
    }

    pub fn record_begin(&mut self) {
        self.records.push(BTreeMap::new());
    }

    pub fn record_put(&mut self, name: Arc<str>, h: i32) -> Result<(), Trap> {
        let v = self.value(h)?;
        self.eval.budget.check_memory()?;
        self.records.last_mut().ok_or_else(|| type_trap("no record literal in progress"))?.insert(name, v);
        Ok(())
    }

    pub fn record_end(&mut self) -> Result<i32, Trap> {
        let r = self.records.pop().ok_or_else(|| type_trap("no record literal in progress"))?;
        self.reg(Value::Record(Arc::new(r)))
    }

    // ------------------------------------------------------------ operators

    pub fn field(&mut self, base: i32, name: &str) -> Result<i32, Trap> {
        let v = ops::field(self.value(base)?, name)?;
        self.reg(v)
    }

    pub fn index(&mut self, base: i32, i: i32) -> Result<i32, Trap> {
        let v = ops::index(self.value(base)?, self.value(i)?)?;
        self.reg(v)
    }

    pub fn unary(&mut self, op: i32, h: i32) -> Result<i32, Trap> {
        let op = lower::from_code(&lower::UNARY_OPS, op).ok_or_else(|| type_trap("unknown operator"))?;
        let v = ops::unary(op, self.value(h)?)?;
        self.reg(v)
    }

    fn binary(&mut self, op: i32, a: Value, b: Value) -> Result<Value, Trap> {
        let op = lower::from_code(&lower::BINARY_OPS, op).ok_or_else(|| type_trap("unknown operator"))?;
        // A concatenation is work in proportion to its result, checked before it is built.
        if let (Value::Text(x), Value::Text(y)) = (&a, &b) {
            let len = x.len().saturating_add(y.len());
            self.eval.reserve(len)?;
            self.eval.work(len)?;
        }
        ops::arith(op, a, b)
    }

    /// A strict binary operator on two handles.
    pub fn arith(&mut self, op: i32, a: i32, b: i32) -> Result<i32, Trap> {
        let (a, b) = (self.value(a)?, self.value(b)?);
        let v = self.binary(op, a, b)?;
        self.reg(v)
    }

    /// A strict binary operator on two Numbers the compiled code did not compute itself.
    pub fn arith_num(&mut self, op: i32, xf: f64, xh: i32, yf: f64, yh: i32) -> Result<(f64, i32), Trap> {
        let (a, b) = (self.num_value(xf, xh)?, self.num_value(yf, yh)?);
        let v = self.binary(op, a, b)?;
        self.num_repr(v)
    }

    /// Kleene `and`/`or` of two Bools, one of them not a plain boolean.
    pub fn kleene(&mut self, op: i32, a: i32, b: i32) -> Result<i32, Trap> {
        let (a, b) = (self.bool_value(a)?, self.bool_value(b)?);
        let v = match lower::from_code(&lower::BINARY_OPS, op) {
            Some(BinOp::And) => ops::and(a, b),
            Some(BinOp::Or) => ops::or(a, b),
            _ => return Err(type_trap("unknown logical operator")),
        };
        self.bool_repr(v)
    }

    fn compare_values(&mut self, op: i32, a: &Value, b: &Value) -> Result<i32, Trap> {
        let op = lower::from_code(&lower::CMP_OPS, op).ok_or_else(|| type_trap("unknown comparison"))?;
        let v = ops::compare(op, a, b)?;
        self.bool_repr(v)
    }

    /// A comparison of two handles, as a Bool.
    pub fn compare(&mut self, op: i32, a: i32, b: i32) -> Result<i32, Trap> {
        let (a, b) = (self.value(a)?, self.value(b)?);
        self.compare_values(op, &a, &b)
    }

    /// A comparison of two Numbers, one of them not plain.
    pub fn compare_num(&mut self, op: i32, xf: f64, xh: i32, yf: f64, yh: i32) -> Result<i32, Trap> {
        let (a, b) = (self.num_value(xf, xh)?, self.num_value(yf, yh)?);
        self.compare_values(op, &a, &b)
    }

    /// An `if` condition that is not a plain boolean: its value when unscored (the `if`'s
    /// result), a trap otherwise.
    pub fn cond(&mut self, b: i32) -> Result<i32, Trap> {
        match ops::condition(self.bool_value(b)?)? {
            Err(unscored) => self.reg(unscored),
            Ok(_) => Err(type_trap("a plain condition reached the host")),
        }
    }

    // ------------------------------------------------------------ folds

    /// Start a fold over the list `l`: its length, or `-1` when the list is unscored.
    pub fn fold_begin(&mut self, op: i32, l: i32) -> Result<i32, Trap> {
        let op = lower::from_code(&lower::HIGHER_ORDER_OPS, op).ok_or_else(|| type_trap("unknown fold"))?;
        match ops::iteration_list(self.value(l)?)? {
            Ok(items) => {
                let n = i32::try_from(items.len()).map_err(|_| too_many_values())?;
                let mark = self.table.len();
                self.folds.push(FoldFrame { fold: Fold::new(op), items, mark, current: 0 });
                Ok(n)
            }
            Err(_) => Ok(-1),
        }
    }

    /// Move the innermost fold to element `i` and return it (what the previous element's body
    /// built is released).
    pub fn fold_item(&mut self, i: i32) -> Result<&Value, Trap> {
        let frame = self.folds.last_mut().ok_or_else(|| type_trap("no fold in progress"))?;
        frame.current = usize::try_from(i)
            .ok()
            .filter(|i| *i < frame.items.len())
            .ok_or_else(|| type_trap(format!("fold element {i} out of range")))?;
        // What the previous element's body built is garbage now.
        self.table.truncate(frame.mark);
        Ok(&frame.items[frame.current])
    }

    /// [`HostCore::fold_item`] as a handle.
    pub fn fold_item_handle(&mut self, i: i32) -> Result<i32, Trap> {
        let v = self.fold_item(i)?.clone();
        self.reg(v)
    }

    /// Feed the body's value for the current element: `0`, or the result's handle when it is
    /// decided now (the fold is then finished).
    pub fn fold_step(&mut self, v: Value) -> Result<i32, Trap> {
        let frame = self.folds.last_mut().ok_or_else(|| type_trap("no fold in progress"))?;
        let item = frame.items.get(frame.current).ok_or_else(|| type_trap("no fold element"))?;
        match frame.fold.step(item, v)? {
            None => {
                self.eval.budget.check_memory()?;
                Ok(0)
            }
            Some(result) => {
                self.pop_fold();
                self.reg(result)
            }
        }
    }

    pub fn fold_step_handle(&mut self, h: i32) -> Result<i32, Trap> {
        let v = self.value(h)?;
        self.fold_step(v)
    }

    pub fn fold_step_bool(&mut self, b: i32) -> Result<i32, Trap> {
        let v = self.bool_value(b)?;
        self.fold_step(v)
    }

    fn pop_fold(&mut self) -> Option<Fold> {
        let frame = self.folds.pop()?;
        self.table.truncate(frame.mark);
        Some(frame.fold)
    }

    /// Finish the innermost fold and return its result.
    pub fn fold_end(&mut self) -> Result<i32, Trap> {
        let fold = self.pop_fold().ok_or_else(|| type_trap("no fold in progress"))?;
        self.reg(fold.finish())
    }

    // ------------------------------------------------------------ calls

    /// Push an argument of the next intrinsic call or aggregation.
    pub fn arg(&mut self, h: i32) -> Result<(), Trap> {
        let v = self.value(h)?;
        self.args.push(v);
        Ok(())
    }

    /// The values of `handles`, in order.
    pub fn values(&self, handles: &[i32]) -> Result<Vec<Value>, Trap> {
        handles.iter().map(|h| self.value(*h)).collect()
    }

    /// The last `n` pushed arguments, in push order (inline up to four: no allocation per call).
    pub fn pop_args(&mut self, n: usize) -> Result<smallvec::SmallVec<[Value; 4]>, Trap> {
        let at = self.args.len().checked_sub(n).ok_or_else(|| type_trap("missing call arguments"))?;
        Ok(self.args.drain(at..).collect())
    }

    /// An intrinsic on `args`: the one implementation (`resolved`, else looked up by name as
    /// the interpreter does, so an unknown one traps the same way), unscored arguments
    /// short-circuited, its work charged to the row's budget.
    pub fn intrinsic(
        &mut self,
        resolved: Option<&'static Intrinsic>,
        name: &str,
        overload: u32,
        args: &[Value],
    ) -> Result<i32, Trap> {
        let v = self.intrinsic_value(resolved, name, overload, args)?;
        self.reg(v)
    }

    /// [`HostCore::intrinsic`]'s value, not yet in the table.
    pub fn intrinsic_value(
        &mut self,
        resolved: Option<&'static Intrinsic>,
        name: &str,
        overload: u32,
        args: &[Value],
    ) -> Result<Value, Trap> {
        match resolved {
            Some(intr) => ops::call_resolved(intr, args, &mut self.eval),
            None => ops::call_intrinsic(name, overload, args, &mut self.eval),
        }
    }

    /// [`HostCore::intrinsic_value`] of a resolved intrinsic whose caller keeps the result
    /// for the rest of the row (`ops::call_resolved_once`: no memo entry).
    pub fn intrinsic_value_once(&mut self, intr: &'static Intrinsic, args: &[Value]) -> Result<Value, Trap> {
        ops::call_resolved_once(intr, args, &mut self.eval)
    }

    /// A Number value as compiled code holds one: `(n, 0)`, or `(0, handle)` for anything else
    /// (unscored, null), which goes into the table.
    pub fn num_word(&mut self, v: Value) -> Result<(f64, i32), Trap> {
        match v {
            Value::Number(n) => Ok((n, 0)),
            other => Ok((0.0, self.reg(other)?)),
        }
    }

    /// An aggregation over a set of the decided criteria.
    pub fn aggregate(&mut self, op: i32, set: i32, policy: i32, args: &[Value]) -> Result<i32, Trap> {
        let op = lower::from_code(AggOp::ALL, op).ok_or_else(|| type_trap("unknown aggregation"))?;
        let policy = lower::from_code(&lower::POLICIES, policy).ok_or_else(|| type_trap("unknown policy"))?;
        let set = u32::try_from(set).map_err(|_| type_trap("unknown set"))?;
        let v = aggregate(self.program()?, &self.decided, op, set, policy, args)?;
        self.reg(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_always_the_null_handle_and_numbers_box() {
        let mut core = HostCore::new();
        assert_eq!(core.reg(Value::Null), Ok(NULL));
        let h = core.box_num(1.5, 0).unwrap();
        assert_eq!(h, NULL + 1);
        assert_eq!(core.unbox_num(h), Ok((1.5, 0)));
        assert_eq!(core.unbox_num(NULL), Ok((0.0, NULL)));
        assert!(core.get(0).is_err() && core.get(1).is_err());
    }

    #[test]
    fn a_division_by_zero_traps_with_the_interpreters_message() {
        let mut core = HostCore::new();
        let div = lower::code_of(&lower::BINARY_OPS, &BinOp::Div);
        let t = core.arith_num(div, 1.0, 0, 0.0, 0).unwrap_err();
        assert_eq!((t.kind, t.message.as_str()), (TrapKind::DivisionByZero, "1 / 0"));
    }

    #[test]
    fn a_concatenation_over_the_memory_limit_is_refused_before_it_is_built() {
        let mut core = HostCore::new();
        let limits = crate::stdlib::Limits { heap_bytes: 1000, ..crate::stdlib::Limits::DEFAULT };
        core.eval = EvalCtx::with_budget(Budget::new(limits));
        let a = core.text("x".repeat(600).into()).unwrap();
        let concat = lower::code_of(&lower::BINARY_OPS, &BinOp::Concat);
        let t = core.arith(concat, a, a).unwrap_err();
        assert_eq!(t.kind, TrapKind::Limit, "{t}");
        assert!(t.message.starts_with("memory limit"), "{t}");
    }
}
