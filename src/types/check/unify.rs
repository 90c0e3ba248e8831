//! Stage 3, the checker's type algebra: whether a type can be used where another is expected
//! (`assignable`), the least type two branches or list elements share (`join`), unification
//! of intrinsic signatures with type variables (`unify`, `subst`), and the one implicit
//! conversion at binding sites (`coerce`). The first four are `ir::typing`'s, which the IR
//! validator applies too: one copy, so the checker and the validator cannot disagree about
//! what a well-typed program is.

pub(super) use crate::ir::{assignable, join, subst, unify, Bindings};
use crate::ir::{Const, Expr, ExprKind, Type};

/// Implicit conversions at binding sites: a `Text` where a `Conversation` is expected is one
/// user turn (as rows may give it).
pub(super) fn coerce(e: Expr, want: &Type) -> Expr {
    if e.ty == Type::Text && *want.strip_optional() == Type::conversation() {
        let record = Expr {
            kind: ExprKind::Record(vec![
                ("content".into(), e),
                ("role".into(), Expr::constant(Const::Text("user".into()))),
            ]),
            ty: Type::message(),
        };
        return Expr { kind: ExprKind::List(vec![record]), ty: Type::conversation() };
    }
    e
}
