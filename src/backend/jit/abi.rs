//! The contract between the JIT's compiled code and its host (`host.rs`): how values are held
//! in registers, and every host function with its signature. `codegen` declares imports from
//! this table and `host::address` gives the Rust function behind each entry, so the two are
//! written against one list.
//!
//! Values, as in the Wasm engine (`backend::wasm::abi`): a `Number` is `(f64, i32)` — the
//! number and `0`, or, when the value is not a plain number (an `unscored`...), a handle to it;
//! a `Bool` is one `i32`: `0`, `1`, or a handle; every other value is an `i32` handle into the
//! host's per-row value table, where `null` is always `lower::NULL`. Handles are never `0` or `1`.
//!
//! Calls. Every compiled function takes the row's context pointer (`*mut host::Ctx`) first and
//! uses the platform's C calling convention, so roots are `extern "C" fn(*mut Ctx) -> i32`.
//! Every host function takes the context pointer first as well. A host function that fails
//! records its trap in the context and sets its `trapped` word; compiled code reads that word
//! after every call and returns at once when it is set, so nothing ever unwinds through a
//! native frame. A host function cannot return an `(f64, i32)` pair portably: it returns the
//! `i32` half and leaves the `f64` half in the context's `num_out` slot.
//!
//! Operator codes are the positions in `backend::lower`'s tables (`UNARY_OPS`, ...), shared
//! by both engines. Text constants and field names are indices into the compiled program's
//! string table; intrinsics are indices into its intrinsic table, their arguments pushed first
//! one by one (`arg`), so one host function serves every arity.

/// A value type of a host function's signature (besides the leading context pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    I32,
    F64,
}

/// Every host function compiled code may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostFn {
    /// `(f64, i32 h) -> handle`: a Number as a handle.
    BoxNum,
    /// `(i32 b) -> handle`: a Bool as a handle.
    BoxBool,
    /// `(handle) -> i32` and `num_out`: a handle as a Number.
    UnboxNum,
    /// `(handle) -> i32`: a handle as a Bool.
    UnboxBool,
    /// `(string) -> handle`: a text constant.
    Text,
    /// `(input) -> handle`.
    Input,
    /// `(slot) -> handle`: a local the driver bound for this root (an `each` element...).
    Local,
    /// `(let) -> handle`: the cached value of a `let`, or `0` when it must be evaluated now.
    LetGet,
    /// `(let, handle)`: the value of a `let` just evaluated.
    LetSet,
    /// `(criterion) -> handle`: a static criterion as a value (`er.met`...).
    Criterion,
    /// `()`: start a list literal.
    ListBegin,
    /// `(handle)`: append to the innermost list literal.
    ListPush,
    /// `() -> handle`: finish the innermost list literal.
    ListEnd,
    /// `()`: start a record literal.
    RecordBegin,
    /// `(string, handle)`: set a field of the innermost record literal.
    RecordPut,
    /// `() -> handle`: finish the innermost record literal.
    RecordEnd,
    /// `(base, string) -> handle`: `base.name`.
    Field,
    /// `(base, index) -> handle`: `base[index]`.
    Index,
    /// `(op, handle) -> handle`.
    Unary,
    /// `(op, a, b) -> handle`: a strict binary operator on two handles.
    Arith,
    /// `(op, f64, i32, f64, i32) -> i32` and `num_out`: a strict binary operator on two Numbers
    /// that the compiled code did not compute itself (an operand not plain, `%`, `/ 0`).
    ArithNum,
    /// `(op, a, b) -> i32`: Kleene `and`/`or` of two Bools, one of them not a plain boolean.
    Kleene,
    /// `(op, a, b) -> i32`: a comparison of two handles, as a Bool.
    Compare,
    /// `(op, f64, i32, f64, i32) -> i32`: a comparison of two Numbers, one of them not plain.
    CompareNum,
    /// `(i32 c) -> handle`: an `if` condition that is not a plain boolean: its value when
    /// unscored (the `if`'s result), a trap otherwise.
    Cond,
    /// `(op, list) -> i32`: start `map`/`filter`/`all`/`any`/`count` over `list`: its length,
    /// or `-1` when the list is unscored (which is then the result).
    FoldBegin,
    /// `(i) -> handle`: element `i` of the innermost fold (the values the previous element's
    /// body created are released first).
    FoldItem,
    /// `(i) -> i32` and `num_out`: `FoldItem` as a Number, for a lambda that reads its
    /// parameter only as a Number (a plain number is not put in the table at all).
    FoldItemNum,
    /// `(i) -> i32`: `FoldItem` as a Bool, for a lambda that reads its parameter only as one.
    FoldItemBool,
    /// `(handle) -> handle`: feed the body's value for the current element; `0`, or the
    /// result when it is decided now (the fold is then finished).
    FoldStep,
    /// `(i32 b) -> handle`: `FoldStep` for a Bool.
    FoldStepBool,
    /// `() -> handle`: finish the innermost fold and return its result.
    FoldEnd,
    /// `(handle)`: push an argument of the next intrinsic call or aggregation.
    Arg,
    /// `(intrinsic) -> handle`: call an intrinsic of the program's table on the arguments
    /// pushed for it.
    Intrinsic,
    /// `(op, set, policy, n) -> handle`: an aggregation on the `n` arguments pushed for it.
    Aggregate,
    /// `()`: a compiled function found the stack below its limit (always a trap).
    StackExhausted,
    /// `(intrinsic, handle) -> handle`: an intrinsic of one argument, passed directly (no
    /// `Arg` call before it). Here and in the other `Intrinsic*` calls, an argument that is
    /// an input is passed as `-i - 1` (input `i`), not as a handle.
    Intrinsic1,
    /// `(intrinsic, handle, handle) -> handle`: an intrinsic of two arguments.
    Intrinsic2,
    /// `(intrinsic, handle, handle, handle) -> handle`: an intrinsic of three arguments.
    Intrinsic3,
    /// `(intrinsic, handle) -> i32` and `num_out`: an intrinsic of one argument whose result
    /// is a Number, as `UnboxNum` gives one (no handle for a plain number).
    IntrinsicNum1,
    /// `(intrinsic, handle, handle) -> i32` and `num_out`.
    IntrinsicNum2,
    /// `(intrinsic, handle, handle, handle) -> i32` and `num_out`.
    IntrinsicNum3,
    /// `(intrinsic, handle) -> i32`: an intrinsic of one argument whose result is a Bool, as
    /// `UnboxBool` gives one (`0`, `1`, or a handle for anything else).
    IntrinsicBool1,
    /// `(intrinsic, handle, handle) -> i32`.
    IntrinsicBool2,
    /// `(intrinsic, handle, handle, handle) -> i32`.
    IntrinsicBool3,
    /// `(f64, f64) -> f64`: `max` of two plain numbers (`stdlib::larger`), called directly:
    /// it cannot fail or panic, so compiled code checks nothing after it.
    NumMax,
    /// `(f64, f64) -> f64`: `min` of two plain numbers (`stdlib::smaller`).
    NumMin,
    /// `(slot) -> i32`, and `num_out` for a Number: the call of the program's slot table
    /// entry `slot` (on inputs, text constants, `null` and derived arguments, an intrinsic the
    /// scan plan memoises or a check one of its passes answers: `host::SlotCall`), whose plain
    /// result the host also keeps in the context's row slot `slot`; compiled code reads a
    /// filled slot itself and calls this only when it is not (see `host::Slot`).
    IntrinsicSlot,
}

/// In the argument words of the `Intrinsic*` calls, text constant `k` of the program's string
/// table is `STRING_WORD - k` (read in place: no `Str` call, no handle), below every input's
/// `-i - 1`.
pub const STRING_WORD: i64 = -(1 << 24);

/// In the same words, derived argument `j` (`host::Tables::derived`: a call of an intrinsic the
/// scan plan memoises, on inputs and text constants, such as `lower(response)`) is
/// `DERIVED_WORD - j`, below every text constant's word: the host computes it on its first use
/// in a row and keeps it for the row's other calls (`host::Ctx`'s derived store), with no
/// handle in between.
pub const DERIVED_WORD: i64 = -(1 << 28);

use Ty::{F64 as F, I32 as I};

impl HostFn {
    pub const ALL: [HostFn; 48] = [
        HostFn::BoxNum,
        HostFn::BoxBool,
        HostFn::UnboxNum,
        HostFn::UnboxBool,
        HostFn::Text,
        HostFn::Input,
        HostFn::Local,
        HostFn::LetGet,
        HostFn::LetSet,
        HostFn::Criterion,
        HostFn::ListBegin,
        HostFn::ListPush,
        HostFn::ListEnd,
        HostFn::RecordBegin,
        HostFn::RecordPut,
        HostFn::RecordEnd,
        HostFn::Field,
        HostFn::Index,
        HostFn::Unary,
        HostFn::Arith,
        HostFn::ArithNum,
        HostFn::Kleene,
        HostFn::Compare,
        HostFn::CompareNum,
        HostFn::Cond,
        HostFn::FoldBegin,
        HostFn::FoldItem,
        HostFn::FoldItemNum,
        HostFn::FoldItemBool,
        HostFn::FoldStep,
        HostFn::FoldStepBool,
        HostFn::FoldEnd,
        HostFn::Arg,
        HostFn::Intrinsic,
        HostFn::Aggregate,
        HostFn::StackExhausted,
        HostFn::Intrinsic1,
        HostFn::Intrinsic2,
        HostFn::Intrinsic3,
        HostFn::IntrinsicNum1,
        HostFn::IntrinsicNum2,
        HostFn::IntrinsicNum3,
        HostFn::IntrinsicBool1,
        HostFn::IntrinsicBool2,
        HostFn::IntrinsicBool3,
        HostFn::NumMax,
        HostFn::NumMin,
        HostFn::IntrinsicSlot,
    ];

    /// The position in [`HostFn::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The symbol the JIT links the function under.
    pub fn symbol(self) -> &'static str {
        match self {
            HostFn::BoxNum => "rubric_jit_box_num",
            HostFn::BoxBool => "rubric_jit_box_bool",
            HostFn::UnboxNum => "rubric_jit_unbox_num",
            HostFn::UnboxBool => "rubric_jit_unbox_bool",
            HostFn::Text => "rubric_jit_text",
            HostFn::Input => "rubric_jit_input",
            HostFn::Local => "rubric_jit_local",
            HostFn::LetGet => "rubric_jit_let_get",
            HostFn::LetSet => "rubric_jit_let_set",
            HostFn::Criterion => "rubric_jit_criterion",
            HostFn::ListBegin => "rubric_jit_list_begin",
            HostFn::ListPush => "rubric_jit_list_push",
            HostFn::ListEnd => "rubric_jit_list_end",
            HostFn::RecordBegin => "rubric_jit_record_begin",
            HostFn::RecordPut => "rubric_jit_record_put",
            HostFn::RecordEnd => "rubric_jit_record_end",
            HostFn::Field => "rubric_jit_field",
            HostFn::Index => "rubric_jit_index",
            HostFn::Unary => "rubric_jit_unary",
            HostFn::Arith => "rubric_jit_arith",
            HostFn::ArithNum => "rubric_jit_arith_num",
            HostFn::Kleene => "rubric_jit_kleene",
            HostFn::Compare => "rubric_jit_compare",
            HostFn::CompareNum => "rubric_jit_compare_num",
            HostFn::Cond => "rubric_jit_cond",
            HostFn::FoldBegin => "rubric_jit_fold_begin",
            HostFn::FoldItem => "rubric_jit_fold_item",
            HostFn::FoldItemNum => "rubric_jit_fold_item_num",
            HostFn::FoldItemBool => "rubric_jit_fold_item_bool",
            HostFn::FoldStep => "rubric_jit_fold_step",
            HostFn::FoldStepBool => "rubric_jit_fold_step_bool",
            HostFn::FoldEnd => "rubric_jit_fold_end",
            HostFn::Arg => "rubric_jit_arg",
            HostFn::Intrinsic => "rubric_jit_intrinsic",
            HostFn::Aggregate => "rubric_jit_aggregate",
            HostFn::StackExhausted => "rubric_jit_stack_exhausted",
            HostFn::Intrinsic1 => "rubric_jit_intrinsic1",
            HostFn::Intrinsic2 => "rubric_jit_intrinsic2",
            HostFn::Intrinsic3 => "rubric_jit_intrinsic3",
            HostFn::IntrinsicNum1 => "rubric_jit_intrinsic_num1",
            HostFn::IntrinsicNum2 => "rubric_jit_intrinsic_num2",
            HostFn::IntrinsicNum3 => "rubric_jit_intrinsic_num3",
            HostFn::IntrinsicBool1 => "rubric_jit_intrinsic_bool1",
            HostFn::IntrinsicBool2 => "rubric_jit_intrinsic_bool2",
            HostFn::IntrinsicBool3 => "rubric_jit_intrinsic_bool3",
            HostFn::NumMax => "rubric_jit_num_max",
            HostFn::NumMin => "rubric_jit_num_min",
            HostFn::IntrinsicSlot => "rubric_jit_intrinsic_slot",
        }
    }

    /// `(params, results)`, after the leading context pointer.
    pub fn signature(self) -> (&'static [Ty], &'static [Ty]) {
        match self {
            HostFn::BoxNum => (&[F, I], &[I]),
            HostFn::BoxBool | HostFn::UnboxNum | HostFn::UnboxBool => (&[I], &[I]),
            HostFn::Text | HostFn::Input | HostFn::Local | HostFn::LetGet | HostFn::Criterion => (&[I], &[I]),
            HostFn::LetSet | HostFn::RecordPut => (&[I, I], &[]),
            HostFn::ListBegin | HostFn::RecordBegin | HostFn::StackExhausted => (&[], &[]),
            HostFn::ListPush | HostFn::Arg => (&[I], &[]),
            HostFn::ListEnd | HostFn::RecordEnd | HostFn::FoldEnd => (&[], &[I]),
            HostFn::Field | HostFn::Index | HostFn::Unary | HostFn::FoldBegin => (&[I, I], &[I]),
            HostFn::Arith | HostFn::Kleene | HostFn::Compare => (&[I, I, I], &[I]),
            HostFn::ArithNum | HostFn::CompareNum => (&[I, F, I, F, I], &[I]),
            HostFn::Cond | HostFn::FoldItem | HostFn::FoldItemNum | HostFn::FoldItemBool => (&[I], &[I]),
            HostFn::FoldStep | HostFn::FoldStepBool => (&[I], &[I]),
            HostFn::Intrinsic | HostFn::IntrinsicSlot => (&[I], &[I]),
            HostFn::Aggregate => (&[I, I, I, I], &[I]),
            HostFn::Intrinsic1 | HostFn::IntrinsicNum1 | HostFn::IntrinsicBool1 => (&[I, I], &[I]),
            HostFn::Intrinsic2 | HostFn::IntrinsicNum2 | HostFn::IntrinsicBool2 => (&[I, I, I], &[I]),
            HostFn::Intrinsic3 | HostFn::IntrinsicNum3 | HostFn::IntrinsicBool3 => (&[I, I, I, I], &[I]),
            HostFn::NumMax | HostFn::NumMin => (&[F, F], &[F]),
        }
    }

    /// Whether the function can fail (record a trap); compiled code checks the context's
    /// `trapped` word only after those.
    pub fn can_trap(self) -> bool {
        !matches!(self, HostFn::ListBegin | HostFn::RecordBegin | HostFn::NumMax | HostFn::NumMin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_functions_are_listed_in_index_order_with_distinct_symbols() {
        for (i, f) in HostFn::ALL.iter().enumerate() {
            assert_eq!(f.index(), i, "{f:?}");
        }
        let mut names: Vec<&str> = HostFn::ALL.iter().map(|f| f.symbol()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), HostFn::ALL.len());
    }
}
