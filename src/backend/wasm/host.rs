//! The host side of the Wasm engine: the per-row value table behind every handle, and the
//! implementation of every `abi::HostFn` import, each a thin adapter from handles to the
//! interpreter's shared semantics (`interp::ops`, `interp::aggregate`, `interp::verdict_value`)
//! and the intrinsics (`stdlib`). The host also meters the memory its values take (the row's
//! heap limit) and turns every failure into a recorded `Trap` that unwinds the Wasm call.

use super::abi::{self, HostFn, NULL};
use crate::interp::ops::{self, Fold};
use crate::interp::{aggregate, verdict_value, Decided};
use crate::ir::{AggOp, Program};
use crate::stdlib::{EvalCtx, Trap, TrapKind};
use crate::value::Value;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use wasmtime::{Caller, FuncType, Linker, Memory, StoreLimits, Val, ValType};

/// The multiply-rotate hash of rustc (`FxHasher`), for the small keys looked up on every call
/// (roots, string constants).
#[derive(Default)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
}

/// A `HashMap` hasher for small keys.
pub type FxBuild = BuildHasherDefault<FxHasher>;

/// Bytes charged for one value in the table or in a list under construction.
const VALUE_BYTES: usize = std::mem::size_of::<Value>();
/// Bytes charged for one record field beyond its value.
const FIELD_BYTES: usize = 32;
/// The most handles a row may hold at once (they must fit an `i32`).
const MAX_HANDLES: usize = 1 << 28;
/// The most string constants an instance caches (a module has far fewer).
const MAX_CACHED_TEXTS: usize = 1 << 16;

struct FoldFrame {
    fold: Fold,
    items: Arc<Vec<Value>>,
    /// The table length when the fold started: handles above it belong to one element.
    mark: usize,
    item: Value,
    /// Bytes charged for the values the fold collected.
    charged: usize,
}

/// The host state of one store: everything a host import reads or writes.
pub struct Host {
    program: Arc<Program>,
    table: Vec<Value>,
    sizes: Vec<usize>,
    heap: usize,
    pub heap_cap: usize,
    pub inputs: Vec<Value>,
    /// The locals the driver bound for the root being evaluated.
    pub locals: Vec<Value>,
    /// The criteria decided so far (moved in for the duration of a root call).
    pub decided: Decided,
    ctx: EvalCtx,
    lets: Vec<Option<Result<Value, Trap>>>,
    /// `let`s being evaluated, innermost last.
    pending_lets: Vec<u32>,
    lists: Vec<(Vec<Value>, usize)>,
    records: Vec<(BTreeMap<Arc<str>, Value>, usize)>,
    folds: Vec<FoldFrame>,
    /// The trap a host import raised, read by the engine when the call fails.
    pub trap: Option<Trap>,
    pub memory: Option<Memory>,
    pub limits: StoreLimits,
    /// Text constants already read from the data segment (one `Arc` each, for every row).
    texts: HashMap<(i32, i32), Arc<str>, FxBuild>,
}

fn type_trap(message: impl Into<String>) -> Trap {
    Trap::new(TrapKind::Type, message)
}

/// A rough size of the memory a freshly built value owns.
fn payload(v: &Value) -> usize {
    match v {
        Value::Text(t) | Value::Unscored(t) => t.len(),
        Value::List(l) => l.len() * VALUE_BYTES,
        Value::Record(r) => r.keys().map(|k| k.len() + VALUE_BYTES + FIELD_BYTES).sum(),
        _ => 0,
    }
}

impl Host {
    pub fn new(program: Arc<Program>, heap_cap: usize, limits: StoreLimits) -> Host {
        let lets = vec![None; program.lets.len()];
        let decided = Decided::new(&program);
        Host {
            program,
            table: vec![Value::Null; NULL as usize + 1],
            sizes: vec![0; NULL as usize + 1],
            heap: 0,
            heap_cap,
            inputs: Vec::new(),
            locals: Vec::new(),
            decided,
            ctx: EvalCtx::new(),
            lets,
            pending_lets: Vec::new(),
            lists: Vec::new(),
            records: Vec::new(),
            folds: Vec::new(),
            trap: None,
            memory: None,
            limits,
            texts: HashMap::default(),
        }
    }

    /// Forget everything of the previous row.
    pub fn begin_row(&mut self, inputs: &[Value], heap_cap: usize) {
        self.inputs = inputs.to_vec();
        self.ctx = EvalCtx::new();
        self.lets = vec![None; self.program.lets.len()];
        self.heap_cap = heap_cap;
        self.begin_root();
    }

    /// Before each root call: an empty table (root results were taken out as values) and no
    /// literal, fold or `let` in progress.
    pub fn begin_root(&mut self) {
        self.truncate(NULL as usize + 1);
        self.heap = 0;
        self.lists.clear();
        self.records.clear();
        self.folds.clear();
        self.pending_lets.clear();
        self.trap = None;
    }

    /// After a failed root call: the `let`s it was evaluating fail with the same trap, as
    /// in the interpreter, which caches a `let`'s error too.
    pub fn fail_pending_lets(&mut self, t: &Trap) {
        for i in std::mem::take(&mut self.pending_lets) {
            if let Some(slot) = self.lets.get_mut(i as usize) {
                *slot = Some(Err(t.clone()));
            }
        }
    }

    fn limit_trap(&self) -> Trap {
        Trap::new(TrapKind::Limit, format!("memory limit: the row's values need more than {} bytes", self.heap_cap))
    }

    fn charge(&mut self, bytes: usize) -> Result<(), Trap> {
        self.heap = self.heap.saturating_add(bytes);
        if self.heap > self.heap_cap {
            return Err(self.limit_trap());
        }
        Ok(())
    }

    fn uncharge(&mut self, bytes: usize) {
        self.heap = self.heap.saturating_sub(bytes);
    }

    fn truncate(&mut self, len: usize) {
        while self.table.len() > len {
            self.table.pop();
            let s = self.sizes.pop().unwrap_or(0);
            self.uncharge(s);
        }
    }

    /// A new handle for `v`, charging `extra` bytes for what it owns. `null` is always `NULL`.
    fn reg(&mut self, v: Value, extra: usize) -> Result<i32, Trap> {
        if matches!(v, Value::Null) {
            return Ok(NULL);
        }
        if self.table.len() >= MAX_HANDLES {
            return Err(self.limit_trap());
        }
        let size = VALUE_BYTES + extra;
        self.charge(size)?;
        self.table.push(v);
        self.sizes.push(size);
        Ok((self.table.len() - 1) as i32)
    }

    /// A handle for a freshly built value (charged for what it owns).
    fn reg_new(&mut self, v: Value) -> Result<i32, Trap> {
        let extra = payload(&v);
        self.reg(v, extra)
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

    /// `v` as a Wasm Number: plain, or a handle to a value that is not a number.
    fn num_repr(&mut self, v: Value) -> Result<(f64, i32), Trap> {
        match v {
            Value::Number(n) => Ok((n, 0)),
            other => Ok((0.0, self.reg_new(other)?)),
        }
    }

    /// `v` as a Wasm Bool: 0, 1, or a handle to a value that is not a boolean.
    fn bool_repr(&mut self, v: Value) -> Result<i32, Trap> {
        match v {
            Value::Bool(b) => Ok(b as i32),
            other => self.reg_new(other),
        }
    }

    fn let_get(&mut self, i: i32) -> Result<i32, Trap> {
        let slot = usize::try_from(i).ok().and_then(|i| self.lets.get(i)).ok_or_else(|| type_trap("unknown let"))?;
        match slot.clone() {
            None => {
                self.pending_lets.push(i as u32);
                Ok(0)
            }
            Some(Ok(v)) => self.reg(v, 0),
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
        self.charge(VALUE_BYTES)?;
        let (l, charged) = self.lists.last_mut().ok_or_else(|| type_trap("no list literal in progress"))?;
        l.push(v);
        *charged += VALUE_BYTES;
        Ok(())
    }

    fn list_end(&mut self) -> Result<i32, Trap> {
        let (l, charged) = self.lists.pop().ok_or_else(|| type_trap("no list literal in progress"))?;
        self.uncharge(charged);
        self.reg(Value::list(l), charged)
    }

    fn record_put(&mut self, name: Arc<str>, h: i32) -> Result<(), Trap> {
        let v = self.get(h)?.clone();
        let bytes = name.len() + VALUE_BYTES + FIELD_BYTES;
        self.charge(bytes)?;
        let (r, charged) = self.records.last_mut().ok_or_else(|| type_trap("no record literal in progress"))?;
        r.insert(name, v);
        *charged += bytes;
        Ok(())
    }

    fn record_end(&mut self) -> Result<i32, Trap> {
        let (r, charged) = self.records.pop().ok_or_else(|| type_trap("no record literal in progress"))?;
        self.uncharge(charged);
        self.reg(Value::Record(Arc::new(r)), charged)
    }

    fn arith(&mut self, op: i32, a: Value, b: Value) -> Result<Value, Trap> {
        let op = abi::from_code(&abi::BINARY_OPS, op).ok_or_else(|| type_trap("unknown operator"))?;
        // A concatenation is checked against the heap limit before it is built.
        if let (Value::Text(x), Value::Text(y)) = (&a, &b) {
            if self.heap.saturating_add(x.len() + y.len()) > self.heap_cap {
                return Err(self.limit_trap());
            }
        }
        ops::arith(op, a, b)
    }

    fn compare(&mut self, op: i32, a: &Value, b: &Value) -> Result<i32, Trap> {
        let op = abi::from_code(&abi::CMP_OPS, op).ok_or_else(|| type_trap("unknown comparison"))?;
        let v = ops::compare(op, a, b)?;
        self.bool_repr(v)
    }

    fn fold_begin(&mut self, op: i32, l: i32) -> Result<i32, Trap> {
        let op = abi::from_code(&abi::HIGHER_ORDER_OPS, op).ok_or_else(|| type_trap("unknown fold"))?;
        match ops::iteration_list(self.get(l)?.clone())? {
            Ok(items) => {
                let n = i32::try_from(items.len()).map_err(|_| self.limit_trap())?;
                let mark = self.table.len();
                self.folds.push(FoldFrame { fold: Fold::new(op), items, mark, item: Value::Null, charged: 0 });
                Ok(n)
            }
            Err(_) => Ok(-1),
        }
    }

    fn fold_item(&mut self, i: i32) -> Result<i32, Trap> {
        let frame = self.folds.last().ok_or_else(|| type_trap("no fold in progress"))?;
        let mark = frame.mark;
        let item = usize::try_from(i)
            .ok()
            .and_then(|i| frame.items.get(i))
            .cloned()
            .ok_or_else(|| type_trap(format!("fold element {i} out of range")))?;
        // What the previous element's body built is garbage now.
        self.truncate(mark);
        if let Some(f) = self.folds.last_mut() {
            f.item = item.clone();
        }
        self.reg(item, 0)
    }

    fn fold_step(&mut self, v: Value) -> Result<i32, Trap> {
        let frame = self.folds.last_mut().ok_or_else(|| type_trap("no fold in progress"))?;
        let before = frame.fold.len();
        let item = frame.item.clone();
        match frame.fold.step(&item, v)? {
            None => {
                let grown = frame.fold.len().saturating_sub(before) * VALUE_BYTES;
                frame.charged += grown;
                self.charge(grown)?;
                Ok(0)
            }
            Some(result) => {
                self.pop_fold();
                self.reg_new(result)
            }
        }
    }

    fn pop_fold(&mut self) -> Option<Fold> {
        let frame = self.folds.pop()?;
        self.uncharge(frame.charged);
        self.truncate(frame.mark);
        Some(frame.fold)
    }

    fn fold_end(&mut self) -> Result<i32, Trap> {
        let fold = self.pop_fold().ok_or_else(|| type_trap("no fold in progress"))?;
        self.reg_new(fold.finish())
    }

    fn aggregate(&mut self, op: i32, set: i32, policy: i32, arg: i32) -> Result<i32, Trap> {
        let op = abi::from_code(AggOp::ALL, op).ok_or_else(|| type_trap("unknown aggregation"))?;
        let policy = abi::from_code(&abi::POLICIES, policy).ok_or_else(|| type_trap("unknown policy"))?;
        let set = u32::try_from(set).map_err(|_| type_trap("unknown set"))?;
        let args = if arg == 0 { vec![] } else { vec![self.get(arg)?.clone()] };
        let v = aggregate(&self.program, &self.decided, op, set, policy, &args)?;
        self.reg_new(v)
    }
}

/// Record `t` and unwind the Wasm call.
fn raise<R>(host: &mut Host, r: Result<R, Trap>) -> wasmtime::Result<R> {
    match r {
        Ok(v) => Ok(v),
        Err(t) => {
            host.trap = Some(t);
            Err(wasmtime::Error::msg("rubric trap"))
        }
    }
}

/// A string constant of the module's memory (read and checked once per instance, then
/// cached by its position), with the host state.
fn constant(caller: &mut Caller<'_, Host>, off: i32, len: i32) -> Result<Arc<str>, Trap> {
    if let Some(t) = caller.data().texts.get(&(off, len)) {
        return Ok(t.clone());
    }
    let memory = caller.data().memory.ok_or_else(|| type_trap("the module exports no memory"))?;
    let data = memory.data(&*caller);
    let text: Arc<str> = usize::try_from(off)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(off, len)| data.get(off..off.checked_add(len)?))
        .ok_or_else(|| type_trap("string constant out of bounds"))
        .and_then(|bytes| std::str::from_utf8(bytes).map_err(|_| type_trap("string constant is not UTF-8")))?
        .into();
    let texts = &mut caller.data_mut().texts;
    if texts.len() < MAX_CACHED_TEXTS {
        texts.insert((off, len), text.clone());
    }
    Ok(text)
}

/// Call `f` with a string constant and the host state.
fn with_str<R>(
    caller: &mut Caller<'_, Host>,
    off: i32,
    len: i32,
    f: impl FnOnce(Arc<str>, &mut Host) -> Result<R, Trap>,
) -> wasmtime::Result<R> {
    let text = constant(caller, off, len);
    let host = caller.data_mut();
    let r = text.and_then(|t| f(t, host));
    raise(host, r)
}

/// Define every import of `abi` in `linker`; intrinsic imports are defined for the names in
/// `intrinsics` (the module's imports), each calling the one Rust implementation.
pub fn link(linker: &mut Linker<Host>, intrinsics: &[String]) -> Result<(), String> {
    let e = |r: wasmtime::Result<&mut Linker<Host>>| r.map(|_| ()).map_err(|e| e.to_string());
    let m = abi::HOST_MODULE;
    for f in HostFn::ALL {
        let name = f.name();
        match f {
            HostFn::BoxNum => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, x: f64, h: i32| {
                let host = c.data_mut();
                if h != 0 {
                    return Ok(h);
                }
                let r = host.reg(Value::Number(x), 0);
                raise(host, r)
            }))?,
            HostFn::BoxBool => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, b: i32| {
                let host = c.data_mut();
                let r = match b {
                    0 | 1 => host.reg(Value::Bool(b == 1), 0),
                    h => Ok(h),
                };
                raise(host, r)
            }))?,
            HostFn::UnboxNum => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, h: i32| {
                let host = c.data_mut();
                let r = host.get(h).map(|v| match v {
                    Value::Number(n) => (*n, 0),
                    _ => (0.0, h),
                });
                raise(host, r)
            }))?,
            HostFn::UnboxBool => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, h: i32| {
                let host = c.data_mut();
                let r = host.get(h).map(|v| match v {
                    Value::Bool(b) => *b as i32,
                    _ => h,
                });
                raise(host, r)
            }))?,
            HostFn::Text => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, off: i32, len: i32| {
                with_str(&mut c, off, len, |t, host| host.reg_new(Value::Text(t)))
            }))?,
            HostFn::Input => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, i: i32| {
                let host = c.data_mut();
                let v = usize::try_from(i).ok().and_then(|i| host.inputs.get(i)).cloned().unwrap_or(Value::Null);
                let r = host.reg(v, 0);
                raise(host, r)
            }))?,
            HostFn::Local => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, i: i32| {
                let host = c.data_mut();
                let v = usize::try_from(i).ok().and_then(|i| host.locals.get(i)).cloned().unwrap_or(Value::Null);
                let r = host.reg(v, 0);
                raise(host, r)
            }))?,
            HostFn::LetGet => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, i: i32| {
                let host = c.data_mut();
                let r = host.let_get(i);
                raise(host, r)
            }))?,
            HostFn::LetSet => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, i: i32, h: i32| {
                let host = c.data_mut();
                let r = host.let_set(i, h);
                raise(host, r)
            }))?,
            HostFn::Criterion => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, i: i32| {
                let host = c.data_mut();
                let r = u32::try_from(i)
                    .map_err(|_| type_trap("unknown criterion"))
                    .and_then(|i| host.reg_new(verdict_value(&host.decided, i)));
                raise(host, r)
            }))?,
            HostFn::ListBegin => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>| {
                c.data_mut().lists.push((Vec::new(), 0));
            }))?,
            HostFn::ListPush => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, h: i32| {
                let host = c.data_mut();
                let r = host.list_push(h);
                raise(host, r)
            }))?,
            HostFn::ListEnd => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>| {
                let host = c.data_mut();
                let r = host.list_end();
                raise(host, r)
            }))?,
            HostFn::RecordBegin => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>| {
                c.data_mut().records.push((BTreeMap::new(), 0));
            }))?,
            HostFn::RecordPut => {
                e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, off: i32, len: i32, h: i32| {
                    with_str(&mut c, off, len, |s, host| host.record_put(s, h))
                }))?
            }
            HostFn::RecordEnd => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>| {
                let host = c.data_mut();
                let r = host.record_end();
                raise(host, r)
            }))?,
            HostFn::Field => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, base: i32, off: i32, len: i32| {
                with_str(&mut c, off, len, |s, host| {
                    let v = ops::field(host.get(base)?.clone(), &s)?;
                    host.reg(v, 0)
                })
            }))?,
            HostFn::Index => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, base: i32, i: i32| {
                let host = c.data_mut();
                let r = (|| {
                    let v = ops::index(host.get(base)?.clone(), host.get(i)?.clone())?;
                    host.reg(v, 0)
                })();
                raise(host, r)
            }))?,
            HostFn::Unary => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, h: i32| {
                let host = c.data_mut();
                let r = (|| {
                    let op = abi::from_code(&abi::UNARY_OPS, op).ok_or_else(|| type_trap("unknown operator"))?;
                    let v = ops::unary(op, host.get(h)?.clone())?;
                    host.reg(v, 0)
                })();
                raise(host, r)
            }))?,
            HostFn::Arith => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, a: i32, b: i32| {
                let host = c.data_mut();
                let r = (|| {
                    let (a, b) = (host.get(a)?.clone(), host.get(b)?.clone());
                    let v = host.arith(op, a, b)?;
                    host.reg_new(v)
                })();
                raise(host, r)
            }))?,
            HostFn::ArithNum => {
                e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, xf: f64, xh: i32, yf: f64, yh: i32| {
                    let host = c.data_mut();
                    let r = (|| {
                        let (a, b) = (host.num_value(xf, xh)?, host.num_value(yf, yh)?);
                        let v = host.arith(op, a, b)?;
                        host.num_repr(v)
                    })();
                    raise(host, r)
                }))?
            }
            HostFn::Kleene => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, a: i32, b: i32| {
                let host = c.data_mut();
                let r = (|| {
                    let (a, b) = (host.bool_value(a)?, host.bool_value(b)?);
                    let v = match abi::from_code(&abi::BINARY_OPS, op) {
                        Some(crate::ir::BinOp::And) => ops::and(a, b),
                        Some(crate::ir::BinOp::Or) => ops::or(a, b),
                        _ => return Err(type_trap("unknown logical operator")),
                    };
                    host.bool_repr(v)
                })();
                raise(host, r)
            }))?,
            HostFn::Compare => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, a: i32, b: i32| {
                let host = c.data_mut();
                let r = (|| {
                    let (a, b) = (host.get(a)?.clone(), host.get(b)?.clone());
                    host.compare(op, &a, &b)
                })();
                raise(host, r)
            }))?,
            HostFn::CompareNum => {
                e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, xf: f64, xh: i32, yf: f64, yh: i32| {
                    let host = c.data_mut();
                    let r = (|| {
                        let (a, b) = (host.num_value(xf, xh)?, host.num_value(yf, yh)?);
                        host.compare(op, &a, &b)
                    })();
                    raise(host, r)
                }))?
            }
            HostFn::Cond => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, b: i32| {
                let host = c.data_mut();
                let r = (|| match ops::condition(host.bool_value(b)?)? {
                    Err(unscored) => host.reg(unscored, 0),
                    Ok(_) => Err(type_trap("a plain condition reached the host")),
                })();
                raise(host, r)
            }))?,
            HostFn::FoldBegin => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, l: i32| {
                let host = c.data_mut();
                let r = host.fold_begin(op, l);
                raise(host, r)
            }))?,
            HostFn::FoldItem => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, i: i32| {
                let host = c.data_mut();
                let r = host.fold_item(i);
                raise(host, r)
            }))?,
            HostFn::FoldStep => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, h: i32| {
                let host = c.data_mut();
                let r = host.get(h).cloned().and_then(|v| host.fold_step(v));
                raise(host, r)
            }))?,
            HostFn::FoldStepBool => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, b: i32| {
                let host = c.data_mut();
                let r = host.bool_value(b).and_then(|v| host.fold_step(v));
                raise(host, r)
            }))?,
            HostFn::FoldEnd => e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>| {
                let host = c.data_mut();
                let r = host.fold_end();
                raise(host, r)
            }))?,
            HostFn::Aggregate => {
                e(linker.func_wrap(m, name, |mut c: Caller<'_, Host>, op: i32, set: i32, policy: i32, arg: i32| {
                    let host = c.data_mut();
                    let r = host.aggregate(op, set, policy, arg);
                    raise(host, r)
                }))?
            }
        }
    }
    for import in intrinsics {
        let (name, overload, arity) =
            abi::parse_intrinsic_import(import).ok_or_else(|| format!("malformed intrinsic import `{import}`"))?;
        if crate::stdlib::lookup(name).nth(overload as usize).is_none() {
            return Err(format!("the module imports an unknown intrinsic `{name}`#{overload}"));
        }
        let name: Arc<str> = Arc::from(name);
        let im = abi::INTRINSIC_MODULE;
        // Statically typed wrappers for the usual arities; a dynamic one beyond.
        match arity {
            0 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>| {
                call_intrinsic(c.data_mut(), &name, overload, &[])
            }))?,
            1 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32| {
                call_intrinsic(c.data_mut(), &name, overload, &[a])
            }))?,
            2 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32, b: i32| {
                call_intrinsic(c.data_mut(), &name, overload, &[a, b])
            }))?,
            3 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32, b: i32, d: i32| {
                call_intrinsic(c.data_mut(), &name, overload, &[a, b, d])
            }))?,
            4 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32, b: i32, d: i32, f: i32| {
                call_intrinsic(c.data_mut(), &name, overload, &[a, b, d, f])
            }))?,
            _ => {
                let ty = FuncType::new(linker.engine(), vec![ValType::I32; arity], [ValType::I32]);
                let f = move |mut c: Caller<'_, Host>, params: &[Val], results: &mut [Val]| -> wasmtime::Result<()> {
                    let handles: Vec<i32> = params.iter().map(|p| p.i32().unwrap_or(0)).collect();
                    results[0] = Val::I32(call_intrinsic(c.data_mut(), &name, overload, &handles)?);
                    Ok(())
                };
                e(linker.func_new(im, import, ty, f))?
            }
        }
    }
    Ok(())
}

/// An intrinsic import: the argument values, `ops::call_intrinsic` (the one implementation,
/// unscored arguments short-circuited), the result's handle.
fn call_intrinsic(host: &mut Host, name: &str, overload: u32, handles: &[i32]) -> wasmtime::Result<i32> {
    let r = (|| {
        let mut args = Vec::with_capacity(handles.len());
        for h in handles {
            args.push(host.get(*h)?.clone());
        }
        let v = ops::call_intrinsic(name, overload, &args, &mut host.ctx)?;
        host.reg_new(v)
    })();
    raise(host, r)
}
