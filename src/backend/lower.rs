//! The lowering tables both compiled engines' codegens use, so that they cannot drift apart:
//! how a value of each static type is held in machine values ([`Repr`]), the handle of `null`,
//! the operator codes host operations take, and which IR local slots an expression reads in
//! which representation.
//!
//! Pipeline position: read by `backend::wasm::codegen` and `backend::jit::codegen` (and by
//! `backend::host`, which decodes the operator codes); part of the Wasm ABI (`wasm::abi`
//! re-exports the codes, whose positions are fixed by `ABI_VERSION`).

use crate::ir::{self, BinOp, CmpOp, Expr, ExprKind, HigherOrder, Policy, Type, UnOp};
use std::collections::{BTreeMap, BTreeSet};

/// The handle of `null`; also the smallest handle (`0` and `1` are never handles, so a Bool
/// slot that holds one is unambiguous).
pub const NULL: i32 = 2;

/// How a value of a static type is held in machine values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Repr {
    /// `(f64, i32)`: the number and `0`, or a handle to a value that is not a plain number.
    Num,
    /// `i32`: 0, 1 or a handle.
    Bool,
    /// `i32` handle.
    Handle,
}

impl Repr {
    pub fn of(t: &Type) -> Repr {
        match t {
            Type::Number => Repr::Num,
            Type::Bool => Repr::Bool,
            _ => Repr::Handle,
        }
    }
}

/// Operator codes passed to the host's `unary`, `arith`, `arith_num`, `kleene`, `compare` and
/// `compare_num`, `fold_begin` and `aggregate`: the position of the operator in these lists.
pub const UNARY_OPS: [UnOp; 2] = [UnOp::Neg, UnOp::Not];
pub const BINARY_OPS: [BinOp; 9] =
    [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::Concat, BinOp::And, BinOp::Or, BinOp::Coalesce];
pub const CMP_OPS: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
pub const HIGHER_ORDER_OPS: [HigherOrder; 5] =
    [HigherOrder::Map, HigherOrder::Filter, HigherOrder::All, HigherOrder::Any, HigherOrder::Count];
pub const POLICIES: [Policy; 3] = [Policy::Skip, Policy::Unmet, Policy::Propagate];

/// The code of `x` in `table` (`-1` when it is not there).
pub fn code_of<T: PartialEq>(table: &[T], x: &T) -> i32 {
    table.iter().position(|y| y == x).map_or(-1, |i| i as i32)
}

/// The entry of `table` with code `code`.
pub fn from_code<T: Copy>(table: &[T], code: i32) -> Option<T> {
    usize::try_from(code).ok().and_then(|i| table.get(i).copied())
}

/// Every slot an expression reads, with the representations it is read in, and the slots
/// its lambdas bind.
pub fn slot_uses(e: &Expr) -> (BTreeMap<u32, BTreeSet<Repr>>, BTreeSet<u32>) {
    let mut reads: BTreeMap<u32, BTreeSet<Repr>> = BTreeMap::new();
    let mut bound = BTreeSet::new();
    ir::walk(e, &mut |x| match &x.kind {
        ExprKind::Local(i) => {
            reads.entry(*i).or_default().insert(Repr::of(&x.ty));
        }
        ExprKind::HigherOrder { local, .. } => {
            bound.insert(*local);
        }
        _ => {}
    });
    (reads, bound)
}
