//! The contract between a compiled rubric module and its host (ABI version [`ABI_VERSION`]):
//! how values are represented, and every host import with its signature. `codegen` emits
//! imports from this table and `runtime` links the same table, so the two cannot drift.
//!
//! Values. A `Number` is two Wasm values `(f64, i32)`: the number, and `0` — or, when the
//! value is not a plain number (an `unscored`, or whatever an ill-typed program produced), a
//! handle to it, with the `f64` unused. A `Bool` is one `i32`: `0`, `1`, or a handle to a
//! value that is not a boolean. Every other value (text, lists, records, `Json`, `null`,
//! optionals) is an `i32` handle into the host's per-row value table. Handles start at
//! [`NULL`]; `0` and `1` are never handles, so a `Bool` slot is unambiguous, and every `null`
//! is the handle [`NULL`], so a null test needs no host call. Numbers are never NaN-boxed:
//! Wasm does not fix NaN payloads, and an unscored value must survive arithmetic exactly.
//!
//! Exports. Every root the step driver evaluates (`interp::Root`) is an exported function
//! `() -> i32` named by `Root::name` (`gate3.cond`, `c5.text`, `score`), returning the handle
//! of its value; the linear memory is exported as `memory`. String constants (texts, field
//! names) live in one active data segment at offset 0 and are passed to the host as
//! `(offset, length)`.
//!
//! Intrinsics are imported from module [`INTRINSIC_MODULE`] under `NAME#OVERLOAD/ARITY` with
//! signature `(i32 × ARITY) -> i32` (argument handles → result handle).

use wasm_encoder::ValType;

/// Bumped whenever an import, an export convention or a value representation changes.
pub const ABI_VERSION: u32 = 1;

/// The module every host function is imported from.
pub const HOST_MODULE: &str = "rubric";

/// The module intrinsics are imported from.
pub const INTRINSIC_MODULE: &str = "rubric:intrinsic";

pub use crate::backend::lower::NULL;

/// The name of the custom section that records the ABI version.
pub const ABI_SECTION: &str = "rubric.abi";

/// Operator codes (the position of an operator in its table) are part of this ABI: they are
/// `backend::lower`'s, shared with the JIT.
pub use crate::backend::lower::{code_of, from_code, BINARY_OPS, CMP_OPS, HIGHER_ORDER_OPS, POLICIES, UNARY_OPS};

/// Every host import. The discriminant is the import's function index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFn {
    /// `(f64, i32 h) -> handle`: a Number as a handle.
    BoxNum,
    /// `(i32 b) -> handle`: a Bool as a handle.
    BoxBool,
    /// `(handle) -> (f64, i32)`: a handle as a Number.
    UnboxNum,
    /// `(handle) -> i32`: a handle as a Bool.
    UnboxBool,
    /// `(offset, len) -> handle`: a text constant from the data segment.
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
    /// `(offset, len, handle)`: set a field of the innermost record literal.
    RecordPut,
    /// `() -> handle`: finish the innermost record literal.
    RecordEnd,
    /// `(base, offset, len) -> handle`: `base.name`.
    Field,
    /// `(base, index) -> handle`: `base[index]`.
    Index,
    /// `(op, handle) -> handle`.
    Unary,
    /// `(op, a, b) -> handle`: a strict binary operator on two handles.
    Arith,
    /// `(op, f64, i32, f64, i32) -> (f64, i32)`: a strict binary operator on two Numbers that
    /// the module did not compute itself (an operand is not a plain number, `%`, `/ 0`).
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
    /// `(handle) -> handle`: feed the body's value for the current element; `0`, or the
    /// result when it is decided now (the fold is then finished).
    FoldStep,
    /// `(i32 b) -> handle`: `FoldStep` for a Bool.
    FoldStepBool,
    /// `() -> handle`: finish the innermost fold and return its result.
    FoldEnd,
    /// `(op, set, policy, arg) -> handle`: an aggregation (`arg` 0 when it has none).
    Aggregate,
}

const I: ValType = ValType::I32;
const F: ValType = ValType::F64;

impl HostFn {
    pub const ALL: [HostFn; 31] = [
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
        HostFn::FoldStep,
        HostFn::FoldStepBool,
        HostFn::FoldEnd,
        HostFn::Aggregate,
    ];

    pub fn index(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        match self {
            HostFn::BoxNum => "box_num",
            HostFn::BoxBool => "box_bool",
            HostFn::UnboxNum => "unbox_num",
            HostFn::UnboxBool => "unbox_bool",
            HostFn::Text => "text",
            HostFn::Input => "input",
            HostFn::Local => "local",
            HostFn::LetGet => "let_get",
            HostFn::LetSet => "let_set",
            HostFn::Criterion => "criterion",
            HostFn::ListBegin => "list_begin",
            HostFn::ListPush => "list_push",
            HostFn::ListEnd => "list_end",
            HostFn::RecordBegin => "record_begin",
            HostFn::RecordPut => "record_put",
            HostFn::RecordEnd => "record_end",
            HostFn::Field => "field",
            HostFn::Index => "index",
            HostFn::Unary => "unary",
            HostFn::Arith => "arith",
            HostFn::ArithNum => "arith_num",
            HostFn::Kleene => "kleene",
            HostFn::Compare => "compare",
            HostFn::CompareNum => "compare_num",
            HostFn::Cond => "cond",
            HostFn::FoldBegin => "fold_begin",
            HostFn::FoldItem => "fold_item",
            HostFn::FoldStep => "fold_step",
            HostFn::FoldStepBool => "fold_step_bool",
            HostFn::FoldEnd => "fold_end",
            HostFn::Aggregate => "aggregate",
        }
    }

    /// `(params, results)`.
    pub fn signature(self) -> (&'static [ValType], &'static [ValType]) {
        match self {
            HostFn::BoxNum => (&[F, I], &[I]),
            HostFn::BoxBool => (&[I], &[I]),
            HostFn::UnboxNum => (&[I], &[F, I]),
            HostFn::UnboxBool => (&[I], &[I]),
            HostFn::Text => (&[I, I], &[I]),
            HostFn::Input | HostFn::Local | HostFn::LetGet | HostFn::Criterion => (&[I], &[I]),
            HostFn::LetSet => (&[I, I], &[]),
            HostFn::ListBegin | HostFn::RecordBegin => (&[], &[]),
            HostFn::ListPush => (&[I], &[]),
            HostFn::ListEnd | HostFn::RecordEnd | HostFn::FoldEnd => (&[], &[I]),
            HostFn::RecordPut => (&[I, I, I], &[]),
            HostFn::Field => (&[I, I, I], &[I]),
            HostFn::Index => (&[I, I], &[I]),
            HostFn::Unary => (&[I, I], &[I]),
            HostFn::Arith | HostFn::Kleene | HostFn::Compare => (&[I, I, I], &[I]),
            HostFn::ArithNum => (&[I, F, I, F, I], &[F, I]),
            HostFn::CompareNum => (&[I, F, I, F, I], &[I]),
            HostFn::Cond => (&[I], &[I]),
            HostFn::FoldBegin => (&[I, I], &[I]),
            HostFn::FoldItem | HostFn::FoldStep | HostFn::FoldStepBool => (&[I], &[I]),
            HostFn::Aggregate => (&[I, I, I, I], &[I]),
        }
    }
}

/// The import name of intrinsic `name`#`overload` called with `arity` arguments.
pub fn intrinsic_import(name: &str, overload: u32, arity: usize) -> String {
    format!("{name}#{overload}/{arity}")
}

/// The inverse of [`intrinsic_import`].
pub fn parse_intrinsic_import(s: &str) -> Option<(&str, u32, usize)> {
    let (name, rest) = s.split_once('#')?;
    let (overload, arity) = rest.split_once('/')?;
    Some((name, overload.parse().ok()?, arity.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_functions_are_listed_in_index_order() {
        for (i, f) in HostFn::ALL.iter().enumerate() {
            assert_eq!(f.index() as usize, i, "{f:?}");
        }
        let mut names: Vec<&str> = HostFn::ALL.iter().map(|f| f.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), HostFn::ALL.len());
    }

    #[test]
    fn intrinsic_import_names_round_trip() {
        let n = intrinsic_import("word_count", 0, 1);
        assert_eq!(n, "word_count#0/1");
        assert_eq!(parse_intrinsic_import(&n), Some(("word_count", 0, 1)));
        assert_eq!(parse_intrinsic_import("nope"), None);
    }
}
