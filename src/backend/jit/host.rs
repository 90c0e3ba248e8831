//! The host side of the JIT engine: the per-row context (`Ctx`) that compiled code carries in
//! its first argument — the words compiled code reads at fixed offsets (`trapped`, `num_out`,
//! the stack limit), the compiled program's tables, and the shared host core
//! (`backend::host`) with the value table behind every handle — and every `abi::HostFn` as an
//! `extern "C"` function, glue from the C calling convention to one core operation.
//!
//! A host function never unwinds into native code: a `Trap` (or a panic, caught) is recorded
//! in the context and the `trapped` word is set, which the compiled code checks after the call.
//! The only `unsafe` here is turning the context pointer compiled code hands back into a
//! reference (`enter`).

#![expect(
    unsafe_code,
    reason = "the JIT call boundary: host functions turn the context pointer compiled code passes back into a reference (`enter`)"
)]

use super::abi::{HostFn, DERIVED_WORD, STRING_WORD};
use crate::backend::host::{type_trap, HostCore};
use crate::ir::Program;
use crate::stdlib::scan::{Answer, ScanPlan};
use crate::stdlib::{Budget, Intrinsic, Trap, TrapKind};
use crate::value::Value;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

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
    pub program: Arc<Program>,
    /// Text constants and field names.
    pub strings: Vec<Arc<str>>,
    pub intrinsics: Vec<IntrinsicEntry>,
    /// The calls that have a row slot, by slot.
    pub slots: Vec<SlotCall>,
    /// The derived arguments of intrinsic calls (`abi::DERIVED_WORD`), by index: each an
    /// intrinsic the scan plan memoises and its argument words (inputs and text constants).
    pub derived: Vec<(i32, smallvec::SmallVec<[i32; 3]>)>,
    /// Slots answered by one pass over one input (`SlotCall::group`).
    pub groups: Vec<Vec<u32>>,
}

/// A call that has a row slot, called on inputs, text constants, `null` and derived arguments
/// only (memoised calls on inputs and text constants, `abi::DERIVED_WORD`): an intrinsic the
/// program's scan plan memoises (`stdlib::scan`), so that every call of it in a row has equal
/// arguments and, by the memo's own rule, the same result; or a check on an input that one of
/// the plan's passes answers (`scan::Answer`: the needle or pattern is the plan's). Its
/// argument words are those of the `Intrinsic*` calls (inputs `-i - 1`, text constants below
/// `STRING_WORD`, derived arguments below `DERIVED_WORD`, `null` the `NULL` handle).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SlotCall {
    pub intrinsic: i32,
    pub args: smallvec::SmallVec<[i32; 3]>,
    /// A Bool result (`false`: a Number).
    pub bool: bool,
    /// For a check a pass answers: which, and the needle's place in that pass.
    pub answer: Option<(Answer, u32)>,
    /// The slots of the checks the same pass over the same input answers (an index into
    /// `Tables::groups`): when one of them calls the host, which runs the pass, the host fills
    /// them all from it, so the others need no call at all.
    pub group: Option<u32>,
}

/// A row slot: the plain result of a [`SlotCall`] once the row computed it. `epoch` is the
/// context's row number when it was filled, so a slot of an earlier row is simply stale and no
/// row has to clear them. `repr(C)`: compiled code reads the three fields at fixed offsets.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot {
    pub epoch: u32,
    /// A Bool's `0` or `1`, or a Number's `0` word.
    pub word: i32,
    pub num: f64,
}

pub const SLOT_SIZE: i32 = std::mem::size_of::<Slot>() as i32;
pub const SLOT_EPOCH_OFFSET: i32 = offset_of!(Slot, epoch) as i32;
pub const SLOT_WORD_OFFSET: i32 = offset_of!(Slot, word) as i32;
pub const SLOT_NUM_OFFSET: i32 = offset_of!(Slot, num) as i32;

/// The context of one row (reused for the next): its address is the first argument of every
/// compiled function and host function. `repr(C)` so that compiled code reads `trapped`,
/// `num_out`, `stack_limit`, `epoch` and `slots` at fixed offsets.
#[repr(C)]
pub struct Ctx {
    /// Non-zero once a host function recorded a trap: compiled code returns at once.
    pub trapped: u32,
    /// The row's number (from 1, per context): a [`Slot`] with this epoch is filled.
    pub epoch: u32,
    /// The address of `slot_store`'s first slot, for compiled code, which reads slot `k` only
    /// for `k < tables.slots.len()`: `begin_row` makes `slot_store` that long before the row's
    /// first root and nothing resizes it until the next row's `begin_row`.
    slots: usize,
    /// The `f64` half of a Number a host function returns.
    pub num_out: f64,
    /// The lowest stack address compiled code may start a function below (`StackExhausted`).
    pub stack_limit: usize,
    /// The lowest address of the stack segment the root runs on (`0`: unknown): a host
    /// function with less than `HOST_RED_ZONE` bytes above it runs on a new segment.
    pub stack_floor: usize,
    tables: Option<Arc<Tables>>,
    /// One slot per [`SlotCall`] of the program; resized only between rows.
    slot_store: Vec<Slot>,
    /// The row's value of each derived argument (`Tables::derived`, by index), once an
    /// intrinsic call needed it: the same for every call of the row (its arguments are inputs
    /// and text constants, and the scan plan memoises it), so it is computed once per row and
    /// then read here. Emptied after each row.
    derived_store: Vec<Option<Value>>,
    pub core: HostCore,
}

pub const TRAPPED_OFFSET: i32 = offset_of!(Ctx, trapped) as i32;
pub const EPOCH_OFFSET: i32 = offset_of!(Ctx, epoch) as i32;
pub const SLOTS_OFFSET: i32 = offset_of!(Ctx, slots) as i32;
pub const NUM_OUT_OFFSET: i32 = offset_of!(Ctx, num_out) as i32;
pub const STACK_LIMIT_OFFSET: i32 = offset_of!(Ctx, stack_limit) as i32;

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx::new()
    }
}

impl Ctx {
    pub fn new() -> Ctx {
        Ctx {
            trapped: 0,
            epoch: 0,
            slots: 0,
            num_out: 0.0,
            stack_limit: 0,
            stack_floor: 0,
            tables: None,
            slot_store: Vec::new(),
            derived_store: Vec::new(),
            core: HostCore::new(),
        }
    }

    /// Start a row of the program of `tables`: forget everything of the previous row. Trusted
    /// code: the row's budget is unlimited.
    pub fn begin_row(&mut self, tables: &Arc<Tables>, inputs: &[Value]) {
        self.core.begin_row(&tables.program, inputs, Budget::unlimited());
        // Rows of one program on one thread keep its tables, as the core keeps the program: no
        // reference count touched per row (a count every thread of a batch would share).
        if !self.tables.as_ref().is_some_and(|t| Arc::ptr_eq(t, tables)) {
            self.tables = Some(tables.clone());
        }
        self.trapped = 0;
        // A new row number makes every slot stale; only when the number wraps are the slots
        // cleared, so that one filled 2^32 rows ago cannot pass for this row's.
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.slot_store.fill(Slot::default());
            self.epoch = 1;
        }
        if self.slot_store.len() != tables.slots.len() {
            self.slot_store.resize(tables.slots.len(), Slot::default());
        }
        self.slots = self.slot_store.as_mut_ptr() as usize;
        self.derived_store.clear();
        self.derived_store.resize(tables.derived.len(), None);
    }

    /// After a row: drop what it held (the context waits for the next row in a thread-local,
    /// holding on to its program's tables, as the core holds on to the program).
    pub fn end_row(&mut self) {
        self.core.end_row();
        self.derived_store.clear();
        self.trapped = 0;
    }

    /// Before and after each root call: no trap, and the core's `begin_root`.
    #[inline]
    pub fn begin_root(&mut self) {
        self.core.begin_root();
        self.trapped = 0;
    }

    /// The trap a failed root call recorded.
    pub fn take_trap(&mut self) -> Trap {
        self.trapped = 0;
        self.core.trap.take().unwrap_or_else(|| type_trap("the JIT's compiled code stopped without a trap"))
    }

    fn string(&self, i: i32) -> Result<Arc<str>, Trap> {
        table_string(self.tables.as_deref(), i)
    }

    /// `f` with the program's tables beside the context: taken out for the call and put back
    /// (no reference count touched, nothing of them copied).
    fn with_tables<R>(&mut self, f: impl FnOnce(&mut Ctx, &Tables) -> Result<R, Trap>) -> Result<R, Trap> {
        let tables = self.tables.take().ok_or_else(|| type_trap("no program is bound to the JIT context"))?;
        let r = f(self, &tables);
        self.tables = Some(tables);
        r
    }

    /// A Number result: the `i32` half returned, the `f64` half in `num_out`.
    fn num_out(&mut self, (f, h): (f64, i32)) -> i32 {
        self.num_out = f;
        h
    }

    fn intrinsic(&mut self, i: i32) -> Result<i32, Trap> {
        self.with_tables(|c, tables| {
            let entry = table_intrinsic(tables, i)?;
            let args = c.core.pop_args(entry.arity)?;
            c.core.intrinsic(entry.resolved, &entry.name, entry.overload, &args)
        })
    }

    /// An intrinsic on the values of `handles`, passed directly.
    fn intrinsic_of(&mut self, i: i32, handles: &[i32]) -> Result<i32, Trap> {
        let v = self.intrinsic_value(i, handles)?;
        self.core.reg(v)
    }

    /// [`Ctx::intrinsic_of`] for a Number result: the number in `num_out`, the word returned.
    fn intrinsic_num_of(&mut self, i: i32, handles: &[i32]) -> Result<i32, Trap> {
        let v = self.intrinsic_value(i, handles)?;
        let word = self.core.num_word(v)?;
        Ok(self.num_out(word))
    }

    /// The call of row slot `k`: its result as `IntrinsicNum*` or `IntrinsicBool*` return
    /// it, kept in the slot when it is plain (a handle lives only as long as its root).
    fn intrinsic_slot(&mut self, k: i32) -> Result<i32, Trap> {
        self.with_tables(|c, tables| c.intrinsic_slot_of(tables, k))
    }

    fn intrinsic_slot_of(&mut self, tables: &Tables, k: i32) -> Result<i32, Trap> {
        let call = usize::try_from(k)
            .ok()
            .and_then(|k| tables.slots.get(k))
            .ok_or_else(|| type_trap(format!("unknown row slot {k}")))?;
        // The slot keeps the result for the rest of the row: no memo entry for it (its
        // derived arguments, which other slots share, are memoised).
        let args = self.arg_values_of(tables, &call.args)?;
        let entry = table_intrinsic(tables, call.intrinsic)?;
        let v = match entry.resolved {
            Some(intr) => self.core.intrinsic_value_once(intr, &args)?,
            None => self.core.intrinsic_value(None, &entry.name, entry.overload, &args)?,
        };
        drop(args);
        let (word, num) = if call.bool {
            (self.core.bool_repr(v)?, 0.0)
        } else {
            let (num, word) = self.core.num_word(v)?;
            self.num_out = num;
            (word, num)
        };
        let plain = if call.bool { word == 0 || word == 1 } else { word == 0 };
        if plain {
            self.fill_slot(k as usize, word, num);
            if let Some(g) = call.group {
                self.fill_group_of(tables, g, call.args[0]);
            }
        }
        Ok(word)
    }

    fn fill_slot(&mut self, k: usize, word: i32, num: f64) {
        if let Some(slot) = self.slot_store.get_mut(k) {
            *slot = Slot { epoch: self.epoch, word, num };
        }
    }

    /// After a call of group `g` on input word `input` ran its pass: every slot of the group
    /// not yet filled gets its answer from that pass (exactly what its call would return:
    /// `ScanPlan::read` is the intrinsic's own planned answer).
    fn fill_group_of(&mut self, tables: &Tables, g: u32, input: i32) {
        let Some(members) = tables.groups.get(g as usize) else { return };
        let Value::Text(text) = self.core.input_value(-(input + 1)) else { return };
        // The text's scans, looked up once for the whole group.
        let Some(scans) = self.core.eval.scans_of_text(&text) else { return };
        for &j in members {
            let (Some(call), Some(slot)) = (tables.slots.get(j as usize), self.slot_store.get_mut(j as usize)) else {
                continue;
            };
            if slot.epoch == self.epoch {
                continue;
            }
            let Some((answer, place)) = call.answer else { continue };
            match ScanPlan::read(scans, answer, place) {
                Some(Value::Bool(b)) => *slot = Slot { epoch: self.epoch, word: i32::from(b), num: 0.0 },
                Some(Value::Number(n)) => *slot = Slot { epoch: self.epoch, word: 0, num: n },
                _ => {}
            }
        }
    }

    /// [`Ctx::intrinsic_of`] for a Bool result: `0`, `1` or a handle, returned.
    fn intrinsic_bool_of(&mut self, i: i32, handles: &[i32]) -> Result<i32, Trap> {
        let v = self.intrinsic_value(i, handles)?;
        self.core.bool_repr(v)
    }

    fn intrinsic_value(&mut self, i: i32, handles: &[i32]) -> Result<Value, Trap> {
        self.with_tables(|c, tables| c.intrinsic_value_of(tables, i, handles))
    }

    fn intrinsic_value_of(&mut self, tables: &Tables, i: i32, handles: &[i32]) -> Result<Value, Trap> {
        let args = self.arg_values_of(tables, handles)?;
        let entry = table_intrinsic(tables, i)?;
        self.core.intrinsic_value(entry.resolved, &entry.name, entry.overload, &args)
    }

    /// The values of an intrinsic call's argument words.
    fn arg_values_of(&mut self, tables: &Tables, handles: &[i32]) -> Result<smallvec::SmallVec<[Value; 4]>, Trap> {
        let mut args: smallvec::SmallVec<[Value; 4]> = smallvec::SmallVec::new();
        for &h in handles {
            // A negative word is input `-w - 1`, below `STRING_WORD` text constant
            // `STRING_WORD - w`, read in place (no `Input` or `Str` call, no handle), and below
            // `DERIVED_WORD` derived argument `DERIVED_WORD - w`, computed here.
            args.push(if i64::from(h) <= DERIVED_WORD {
                self.derived_value_of(tables, h)?
            } else if i64::from(h) <= STRING_WORD {
                Value::Text(table_string(Some(tables), (STRING_WORD - i64::from(h)) as i32)?)
            } else if h < 0 {
                self.core.input_value(-(h + 1))
            } else {
                self.core.get(h)?.clone()
            });
        }
        Ok(args)
    }

    /// Derived argument word `h` (below `DERIVED_WORD`): computed by its first use in the row,
    /// then read from `derived_store`.
    fn derived_value_of(&mut self, tables: &Tables, h: i32) -> Result<Value, Trap> {
        let j = usize::try_from(DERIVED_WORD - i64::from(h))
            .map_err(|_| type_trap(format!("unknown derived argument {h}")))?;
        if let Some(Some(v)) = self.derived_store.get(j) {
            return Ok(v.clone());
        }
        let (i, words) = tables.derived.get(j).ok_or_else(|| type_trap(format!("unknown derived argument {h}")))?;
        // Its own words are inputs and text constants only (`codegen` makes them so): it
        // never recurses further.
        if words.iter().any(|w| i64::from(*w) <= DERIVED_WORD) {
            return Err(type_trap(format!("derived argument {h} has a derived argument")));
        }
        let v = self.intrinsic_value_of(tables, *i, words)?;
        if let Some(slot) = self.derived_store.get_mut(j) {
            *slot = Some(v.clone());
        }
        Ok(v)
    }

    fn aggregate(&mut self, op: i32, set: i32, policy: i32, n: i32) -> Result<i32, Trap> {
        let args = self.core.pop_args(usize::try_from(n).map_err(|_| type_trap("bad argument count"))?)?;
        self.core.aggregate(op, set, policy, &args)
    }
}

/// Text constant `i` of the program's tables.
fn table_string(tables: Option<&Tables>, i: i32) -> Result<Arc<str>, Trap> {
    usize::try_from(i)
        .ok()
        .and_then(|i| tables?.strings.get(i).cloned())
        .ok_or_else(|| type_trap(format!("unknown string constant {i}")))
}

/// Entry `i` of the program's intrinsic table.
fn table_intrinsic(tables: &Tables, i: i32) -> Result<&IntrinsicEntry, Trap> {
    usize::try_from(i)
        .ok()
        .and_then(|i| tables.intrinsics.get(i))
        .ok_or_else(|| type_trap(format!("unknown intrinsic entry {i}")))
}

/// Run a host function on the context compiled code passed in: on a trap or a panic, record
/// it, set `trapped` and return `on_trap` (the compiled code then returns at once).
fn enter<R>(ctx: *mut Ctx, on_trap: R, f: impl FnOnce(&mut Ctx) -> Result<R, Trap>) -> R {
    // SAFETY: `enter` and the host functions that call it are private to this module; outside
    // it they exist only as the addresses `address` hands to compiled code, which passes on the
    // pointer the engine gave the root it called (`runtime::call`): a live `Ctx` that the
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
    ctx.core.trap = Some(trap);
    ctx.trapped = 1;
    on_trap
}

extern "C" fn box_num(ctx: *mut Ctx, x: f64, h: i32) -> i32 {
    enter(ctx, 0, |c| c.core.box_num(x, h))
}

extern "C" fn box_bool(ctx: *mut Ctx, b: i32) -> i32 {
    enter(ctx, 0, |c| c.core.box_bool(b))
}

extern "C" fn unbox_num(ctx: *mut Ctx, h: i32) -> i32 {
    enter(ctx, 0, |c| {
        let n = c.core.unbox_num(h)?;
        Ok(c.num_out(n))
    })
}

extern "C" fn unbox_bool(ctx: *mut Ctx, h: i32) -> i32 {
    enter(ctx, 0, |c| c.core.unbox_bool(h))
}

extern "C" fn text(ctx: *mut Ctx, s: i32) -> i32 {
    enter(ctx, 0, |c| {
        let t = c.string(s)?;
        c.core.text(t)
    })
}

extern "C" fn input(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.core.input(i))
}

extern "C" fn local(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.core.local(i))
}

extern "C" fn let_get(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.core.let_get(i))
}

extern "C" fn let_set(ctx: *mut Ctx, i: i32, h: i32) {
    enter(ctx, (), |c| c.core.let_set(i, h))
}

extern "C" fn criterion(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.core.criterion(i))
}

extern "C" fn list_begin(ctx: *mut Ctx) {
    enter(ctx, (), |c| {
        c.core.list_begin();
        Ok(())
    })
}

extern "C" fn list_push(ctx: *mut Ctx, h: i32) {
    enter(ctx, (), |c| c.core.list_push(h))
}

extern "C" fn list_end(ctx: *mut Ctx) -> i32 {
    enter(ctx, 0, |c| c.core.list_end())
}

extern "C" fn record_begin(ctx: *mut Ctx) {
    enter(ctx, (), |c| {
        c.core.record_begin();
        Ok(())
    })
}

extern "C" fn record_put(ctx: *mut Ctx, name: i32, h: i32) {
    enter(ctx, (), |c| {
        let name = c.string(name)?;
        c.core.record_put(name, h)
    })
}

extern "C" fn record_end(ctx: *mut Ctx) -> i32 {
    enter(ctx, 0, |c| c.core.record_end())
}

extern "C" fn field(ctx: *mut Ctx, base: i32, name: i32) -> i32 {
    enter(ctx, 0, |c| {
        let name = c.string(name)?;
        c.core.field(base, &name)
    })
}

extern "C" fn index(ctx: *mut Ctx, base: i32, i: i32) -> i32 {
    enter(ctx, 0, |c| c.core.index(base, i))
}

extern "C" fn unary(ctx: *mut Ctx, op: i32, h: i32) -> i32 {
    enter(ctx, 0, |c| c.core.unary(op, h))
}

extern "C" fn arith(ctx: *mut Ctx, op: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| c.core.arith(op, a, b))
}

extern "C" fn arith_num(ctx: *mut Ctx, op: i32, xf: f64, xh: i32, yf: f64, yh: i32) -> i32 {
    enter(ctx, 0, |c| {
        let n = c.core.arith_num(op, xf, xh, yf, yh)?;
        Ok(c.num_out(n))
    })
}

extern "C" fn kleene(ctx: *mut Ctx, op: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| c.core.kleene(op, a, b))
}

extern "C" fn compare(ctx: *mut Ctx, op: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| c.core.compare(op, a, b))
}

extern "C" fn compare_num(ctx: *mut Ctx, op: i32, xf: f64, xh: i32, yf: f64, yh: i32) -> i32 {
    enter(ctx, 0, |c| c.core.compare_num(op, xf, xh, yf, yh))
}

extern "C" fn cond(ctx: *mut Ctx, b: i32) -> i32 {
    enter(ctx, 0, |c| c.core.cond(b))
}

extern "C" fn fold_begin(ctx: *mut Ctx, op: i32, l: i32) -> i32 {
    enter(ctx, 0, |c| c.core.fold_begin(op, l))
}

extern "C" fn fold_item(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.core.fold_item_handle(i))
}

/// `fold_item` as a Number, for a lambda that reads its parameter only as one: a plain number
/// is not put in the table at all.
extern "C" fn fold_item_num(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| {
        let n = match c.core.fold_item(i)? {
            Value::Number(n) => (*n, 0),
            other => {
                let v = other.clone();
                c.core.num_repr(v)?
            }
        };
        Ok(c.num_out(n))
    })
}

/// `fold_item` as a Bool, for a lambda that reads its parameter only as one.
extern "C" fn fold_item_bool(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| match c.core.fold_item(i)? {
        Value::Bool(b) => Ok(*b as i32),
        other => {
            let v = other.clone();
            c.core.reg(v)
        }
    })
}

extern "C" fn fold_step(ctx: *mut Ctx, h: i32) -> i32 {
    enter(ctx, 0, |c| c.core.fold_step_handle(h))
}

extern "C" fn fold_step_bool(ctx: *mut Ctx, b: i32) -> i32 {
    enter(ctx, 0, |c| c.core.fold_step_bool(b))
}

extern "C" fn fold_end(ctx: *mut Ctx) -> i32 {
    enter(ctx, 0, |c| c.core.fold_end())
}

extern "C" fn arg(ctx: *mut Ctx, h: i32) {
    enter(ctx, (), |c| c.core.arg(h))
}

extern "C" fn intrinsic(ctx: *mut Ctx, i: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic(i))
}

extern "C" fn intrinsic1(ctx: *mut Ctx, i: i32, a: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_of(i, &[a]))
}

extern "C" fn intrinsic2(ctx: *mut Ctx, i: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_of(i, &[a, b]))
}

extern "C" fn intrinsic3(ctx: *mut Ctx, i: i32, a: i32, b: i32, c3: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_of(i, &[a, b, c3]))
}

extern "C" fn intrinsic_num1(ctx: *mut Ctx, i: i32, a: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_num_of(i, &[a]))
}

extern "C" fn intrinsic_num2(ctx: *mut Ctx, i: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_num_of(i, &[a, b]))
}

extern "C" fn intrinsic_num3(ctx: *mut Ctx, i: i32, a: i32, b: i32, c3: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_num_of(i, &[a, b, c3]))
}

extern "C" fn intrinsic_bool1(ctx: *mut Ctx, i: i32, a: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_bool_of(i, &[a]))
}

extern "C" fn intrinsic_bool2(ctx: *mut Ctx, i: i32, a: i32, b: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_bool_of(i, &[a, b]))
}

extern "C" fn intrinsic_bool3(ctx: *mut Ctx, i: i32, a: i32, b: i32, c3: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_bool_of(i, &[a, b, c3]))
}

extern "C" fn intrinsic_slot(ctx: *mut Ctx, k: i32) -> i32 {
    enter(ctx, 0, |c| c.intrinsic_slot(k))
}

/// `max` of two plain numbers: the intrinsic's own function (`stdlib::larger`), which cannot
/// fail or panic, so it needs neither the context nor `enter`'s guard.
extern "C" fn num_max(_ctx: *mut Ctx, a: f64, b: f64) -> f64 {
    crate::stdlib::larger(a, b)
}

/// `min` of two plain numbers (`stdlib::smaller`), as [`num_max`].
extern "C" fn num_min(_ctx: *mut Ctx, a: f64, b: f64) -> f64 {
    crate::stdlib::smaller(a, b)
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
type HF2 = extern "C" fn(*mut Ctx, f64, f64) -> f64;

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
        HostFn::Intrinsic1 => intrinsic1 as H2r as *const u8,
        HostFn::Intrinsic2 => intrinsic2 as H3r as *const u8,
        HostFn::Intrinsic3 => intrinsic3 as H4r as *const u8,
        HostFn::IntrinsicNum1 => intrinsic_num1 as H2r as *const u8,
        HostFn::IntrinsicNum2 => intrinsic_num2 as H3r as *const u8,
        HostFn::IntrinsicNum3 => intrinsic_num3 as H4r as *const u8,
        HostFn::IntrinsicBool1 => intrinsic_bool1 as H2r as *const u8,
        HostFn::IntrinsicBool2 => intrinsic_bool2 as H3r as *const u8,
        HostFn::IntrinsicBool3 => intrinsic_bool3 as H4r as *const u8,
        HostFn::NumMax => num_max as HF2 as *const u8,
        HostFn::NumMin => num_min as HF2 as *const u8,
        HostFn::IntrinsicSlot => intrinsic_slot as H1r as *const u8,
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
    fn a_trap_is_recorded_and_numbers_come_back_through_num_out() {
        use crate::backend::lower::{self, NULL};
        let mut ctx = Ctx::new();
        let p: *mut Ctx = &mut ctx;
        assert_eq!(box_num(p, 1.5, 0), NULL + 1);
        assert_eq!(unbox_num(p, NULL + 1), 0);
        assert_eq!(ctx.num_out, 1.5);
        let p: *mut Ctx = &mut ctx;
        assert_eq!(unbox_num(p, NULL), NULL);
        let div = lower::code_of(&lower::BINARY_OPS, &crate::ir::BinOp::Div);
        assert_eq!(arith_num(p, div, 1.0, 0, 0.0, 0), 0);
        assert_eq!(ctx.trapped, 1);
        let t = ctx.take_trap();
        assert_eq!((t.kind, t.message.as_str()), (TrapKind::DivisionByZero, "1 / 0"));
    }
}
