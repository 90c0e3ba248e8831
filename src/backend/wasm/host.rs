//! The host side of the Wasm engine: glue from every `abi::HostFn` import to the shared host
//! core (`backend::host`), which holds the per-row value table behind every handle and adapts
//! each operation to the interpreter's semantics and the intrinsics. The glue reads string
//! constants from the module's memory, moves the fuel host work spent into the store, and
//! turns every failure into a recorded `Trap` that unwinds the Wasm call.

use super::abi::{self, HostFn};
use crate::backend::host::{type_trap, HostCore};
use crate::ir::Program;
use crate::stdlib::{Budget, Intrinsic, Trap};
use crate::value::Value;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use wasmtime::{AsContextMut, Caller, FuncType, Linker, Memory, StoreLimits, Val, ValType};

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

/// The most string constants an instance caches (a module has far fewer).
const MAX_CACHED_TEXTS: usize = 1 << 16;

/// The host state of one store: the shared host core (`backend::host`) and what only the Wasm
/// engine has — the instance's memory, its store limits and the string constants already read
/// from the data segment.
pub struct Host {
    program: Arc<Program>,
    pub core: HostCore,
    pub memory: Option<Memory>,
    pub limits: StoreLimits,
    /// Text constants already read from the data segment (one `Arc` each, for every row).
    texts: HashMap<(i32, i32), Arc<str>, FxBuild>,
}

impl Host {
    pub fn new(program: Arc<Program>, limits: StoreLimits) -> Host {
        Host { program, core: HostCore::new(), memory: None, limits, texts: HashMap::default() }
    }

    /// Forget everything of the previous row; the row spends from `budget`.
    pub fn begin_row(&mut self, inputs: &[Value], budget: Budget) {
        self.core.begin_row(&self.program, inputs, budget);
    }
}

/// Move the fuel the host spent (intrinsics, concatenations) into the store's count, and give
/// the budget the store's fuel left: host work and Wasm instructions draw on one tank.
pub fn settle_fuel(store: &mut impl AsContextMut<Data = Host>) {
    let mut store = store.as_context_mut();
    let Ok(left) = store.get_fuel() else { return };
    let budget = &mut store.data_mut().core.eval.budget;
    let spent = budget.spent();
    let left = left.saturating_sub(spent);
    budget.take_spent(left);
    let paused = budget.take_pause();
    if spent > 0 {
        // Cannot fail: fuel is enabled, or `get_fuel` above would have.
        let _ = store.set_fuel(left);
    }
    // The row waited on something with limits of its own (an execution): the epoch deadline
    // moves with the budget's.
    if let Some(left) = paused {
        store.set_epoch_deadline(super::runtime::deadline_ticks_for(left));
    }
}

/// Record `t` and unwind the Wasm call.
fn raise<R>(host: &mut Host, r: Result<R, Trap>) -> wasmtime::Result<R> {
    match r {
        Ok(v) => Ok(v),
        Err(t) => {
            host.core.trap = Some(t);
            Err(wasmtime::Error::msg("rubric trap"))
        }
    }
}

/// Run a core operation, recording its trap.
fn core<R>(c: &mut Caller<'_, Host>, f: impl FnOnce(&mut HostCore) -> Result<R, Trap>) -> wasmtime::Result<R> {
    let host = c.data_mut();
    let r = f(&mut host.core);
    raise(host, r)
}

/// A string constant of the module's memory (read and checked once per instance, then
/// cached by its position).
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

/// Run a core operation on a string constant.
fn with_str<R>(
    c: &mut Caller<'_, Host>,
    off: i32,
    len: i32,
    f: impl FnOnce(Arc<str>, &mut HostCore) -> Result<R, Trap>,
) -> wasmtime::Result<R> {
    let text = constant(c, off, len);
    let host = c.data_mut();
    let r = text.and_then(|t| f(t, &mut host.core));
    raise(host, r)
}

/// Define every import of `abi` in `linker`; intrinsic imports are defined for the names in
/// `intrinsics` (the module's imports), each calling the one Rust implementation.
pub fn link(linker: &mut Linker<Host>, intrinsics: &[String]) -> Result<(), String> {
    let e = |r: wasmtime::Result<&mut Linker<Host>>| r.map(|_| ()).map_err(|e| e.to_string());
    let m = abi::HOST_MODULE;
    for f in HostFn::ALL {
        let name = f.name();
        type C<'a> = Caller<'a, Host>;
        match f {
            HostFn::BoxNum => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, x: f64, h: i32| core(&mut c, |k| k.box_num(x, h))))?
            }
            HostFn::BoxBool => e(linker.func_wrap(m, name, |mut c: C<'_>, b: i32| core(&mut c, |k| k.box_bool(b))))?,
            HostFn::UnboxNum => e(linker.func_wrap(m, name, |mut c: C<'_>, h: i32| core(&mut c, |k| k.unbox_num(h))))?,
            HostFn::UnboxBool => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, h: i32| core(&mut c, |k| k.unbox_bool(h))))?
            }
            HostFn::Text => e(linker
                .func_wrap(m, name, |mut c: C<'_>, off: i32, len: i32| with_str(&mut c, off, len, |t, k| k.text(t))))?,
            HostFn::Input => e(linker.func_wrap(m, name, |mut c: C<'_>, i: i32| core(&mut c, |k| k.input(i))))?,
            HostFn::Local => e(linker.func_wrap(m, name, |mut c: C<'_>, i: i32| core(&mut c, |k| k.local(i))))?,
            HostFn::LetGet => e(linker.func_wrap(m, name, |mut c: C<'_>, i: i32| core(&mut c, |k| k.let_get(i))))?,
            HostFn::LetSet => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, i: i32, h: i32| core(&mut c, |k| k.let_set(i, h))))?
            }
            HostFn::Criterion => e(linker.func_wrap(m, name, |mut c: C<'_>, i: i32| core(&mut c, |k| k.criterion(i))))?,
            HostFn::ListBegin => e(linker.func_wrap(m, name, |mut c: C<'_>| c.data_mut().core.list_begin()))?,
            HostFn::ListPush => e(linker.func_wrap(m, name, |mut c: C<'_>, h: i32| core(&mut c, |k| k.list_push(h))))?,
            HostFn::ListEnd => e(linker.func_wrap(m, name, |mut c: C<'_>| core(&mut c, |k| k.list_end())))?,
            HostFn::RecordBegin => e(linker.func_wrap(m, name, |mut c: C<'_>| c.data_mut().core.record_begin()))?,
            HostFn::RecordPut => e(linker.func_wrap(m, name, |mut c: C<'_>, off: i32, len: i32, h: i32| {
                with_str(&mut c, off, len, |s, k| k.record_put(s, h))
            }))?,
            HostFn::RecordEnd => e(linker.func_wrap(m, name, |mut c: C<'_>| core(&mut c, |k| k.record_end())))?,
            HostFn::Field => e(linker.func_wrap(m, name, |mut c: C<'_>, base: i32, off: i32, len: i32| {
                with_str(&mut c, off, len, |s, k| k.field(base, &s))
            }))?,
            HostFn::Index => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, base: i32, i: i32| core(&mut c, |k| k.index(base, i))))?
            }
            HostFn::Unary => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, op: i32, h: i32| core(&mut c, |k| k.unary(op, h))))?
            }
            HostFn::Arith => {
                e(linker
                    .func_wrap(m, name, |mut c: C<'_>, op: i32, a: i32, b: i32| core(&mut c, |k| k.arith(op, a, b))))?
            }
            HostFn::ArithNum => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, op: i32, xf: f64, xh: i32, yf: f64, yh: i32| {
                    core(&mut c, |k| k.arith_num(op, xf, xh, yf, yh))
                }))?
            }
            HostFn::Kleene => {
                e(linker
                    .func_wrap(m, name, |mut c: C<'_>, op: i32, a: i32, b: i32| core(&mut c, |k| k.kleene(op, a, b))))?
            }
            HostFn::Compare => e(linker
                .func_wrap(m, name, |mut c: C<'_>, op: i32, a: i32, b: i32| core(&mut c, |k| k.compare(op, a, b))))?,
            HostFn::CompareNum => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, op: i32, xf: f64, xh: i32, yf: f64, yh: i32| {
                    core(&mut c, |k| k.compare_num(op, xf, xh, yf, yh))
                }))?
            }
            HostFn::Cond => e(linker.func_wrap(m, name, |mut c: C<'_>, b: i32| core(&mut c, |k| k.cond(b))))?,
            HostFn::FoldBegin => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, op: i32, l: i32| core(&mut c, |k| k.fold_begin(op, l))))?
            }
            HostFn::FoldItem => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, i: i32| core(&mut c, |k| k.fold_item_handle(i))))?
            }
            HostFn::FoldStep => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, h: i32| core(&mut c, |k| k.fold_step_handle(h))))?
            }
            HostFn::FoldStepBool => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, b: i32| core(&mut c, |k| k.fold_step_bool(b))))?
            }
            HostFn::FoldEnd => e(linker.func_wrap(m, name, |mut c: C<'_>| core(&mut c, |k| k.fold_end())))?,
            HostFn::Aggregate => {
                e(linker.func_wrap(m, name, |mut c: C<'_>, op: i32, set: i32, policy: i32, arg: i32| {
                    core(&mut c, |k| {
                        let args = if arg == 0 { vec![] } else { k.values(&[arg])? };
                        k.aggregate(op, set, policy, &args)
                    })
                }))?
            }
        }
    }
    for import in intrinsics {
        let (name, overload, arity) =
            abi::parse_intrinsic_import(import).ok_or_else(|| format!("malformed intrinsic import `{import}`"))?;
        let intr = crate::interp::ops::resolve_intrinsic(name, overload)
            .map_err(|_| format!("the module imports an unknown intrinsic `{name}`#{overload}"))?;
        let im = abi::INTRINSIC_MODULE;
        // Statically typed wrappers for the usual arities; a dynamic one beyond.
        match arity {
            0 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>| call_intrinsic(&mut c, intr, &[])))?,
            1 => {
                e(linker
                    .func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32| call_intrinsic(&mut c, intr, &[a])))?
            }
            2 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32, b: i32| {
                call_intrinsic(&mut c, intr, &[a, b])
            }))?,
            3 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32, b: i32, d: i32| {
                call_intrinsic(&mut c, intr, &[a, b, d])
            }))?,
            4 => e(linker.func_wrap(im, import, move |mut c: Caller<'_, Host>, a: i32, b: i32, d: i32, f: i32| {
                call_intrinsic(&mut c, intr, &[a, b, d, f])
            }))?,
            _ => {
                let ty = FuncType::new(linker.engine(), vec![ValType::I32; arity], [ValType::I32]);
                let f = move |mut c: Caller<'_, Host>, params: &[Val], results: &mut [Val]| -> wasmtime::Result<()> {
                    let handles: Vec<i32> = params.iter().map(|p| p.i32().unwrap_or(0)).collect();
                    results[0] = Val::I32(call_intrinsic(&mut c, intr, &handles)?);
                    Ok(())
                };
                e(linker.func_new(im, import, ty, f))?
            }
        }
    }
    Ok(())
}

/// An intrinsic import: the argument values, the core's call (the one implementation, its
/// work charged to the row's budget), the result's handle; then the fuel it spent leaves the
/// store.
fn call_intrinsic(c: &mut Caller<'_, Host>, intr: &'static Intrinsic, handles: &[i32]) -> wasmtime::Result<i32> {
    settle_fuel(c);
    let r = core(c, |k| {
        let args = k.values(handles)?;
        k.intrinsic(Some(intr), intr.name, 0, &args)
    });
    settle_fuel(c);
    r
}
