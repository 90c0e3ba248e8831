//! Stage 3, the checker's type algebra: whether a type can be used where another is expected
//! (`assignable`), the least type two branches or list elements share (`join`), unification
//! of intrinsic signatures with type variables (`unify`, `subst`), and the one implicit
//! conversion at binding sites (`coerce`).

use crate::ir::{Const, Expr, ExprKind, Type};
use std::collections::HashMap;

/// Can a value of type `from` be used where `to` is expected?
pub(super) fn assignable(from: &Type, to: &Type) -> bool {
    match (from, to) {
        (Type::Any, _) | (_, Type::Any) => true,
        (a, b) if a == b => true,
        (Type::Null, Type::Optional(_)) => true,
        (Type::Optional(a), Type::Optional(b)) => assignable(a, b),
        (a, Type::Optional(b)) => assignable(a, b),
        (Type::List(a), Type::List(b)) => assignable(a, b),
        (Type::Record(a), Type::Record(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|((na, ta), (nb, tb))| na == nb && assignable(ta, tb))
        }
        _ => false,
    }
}

/// The least type both can be assigned to (for `if` branches and list elements).
pub(super) fn join(a: &Type, b: &Type) -> Option<Type> {
    if assignable(a, b) && !matches!(b, Type::Any) {
        return Some(b.clone());
    }
    if assignable(b, a) {
        return Some(a.clone());
    }
    match (a, b) {
        (Type::Null, t) | (t, Type::Null) => Some(Type::optional(t.clone())),
        (Type::Optional(x), y) | (y, Type::Optional(x)) => join(x, y).map(Type::optional),
        (Type::List(x), Type::List(y)) => join(x, y).map(|t| Type::List(Box::new(t))),
        (Type::Record(x), Type::Record(y)) if x.len() == y.len() => {
            let mut fields = Vec::with_capacity(x.len());
            for ((nx, tx), (ny, ty)) in x.iter().zip(y) {
                if nx != ny {
                    return None;
                }
                fields.push((nx.clone(), join(tx, ty)?));
            }
            Some(Type::Record(fields))
        }
        _ => None,
    }
}

/// Unify a parameter type (which may hold type variables) with an argument's type, binding
/// the variables in `b`; a variable bound twice takes the join of both.
pub(super) fn unify(param: &Type, arg: &Type, b: &mut HashMap<String, Type>) -> bool {
    match (param, arg) {
        (_, Type::Any) => true,
        (Type::Var(v), a) => match b.get(v).cloned() {
            Some(bound) => match join(&bound, a) {
                Some(j) => {
                    b.insert(v.clone(), j);
                    true
                }
                None => false,
            },
            None => {
                b.insert(v.clone(), a.clone());
                true
            }
        },
        (Type::List(p), Type::List(a)) => unify(p, a, b),
        (Type::Optional(p), Type::Optional(a)) => unify(p, a, b),
        (Type::Optional(_), Type::Null) => true,
        (Type::Optional(p), a) => unify(p, a, b),
        (Type::Record(p), Type::Record(a)) => {
            p.len() == a.len() && p.iter().zip(a).all(|((pn, pt), (an, at))| pn == an && unify(pt, at, b))
        }
        (p, a) => assignable(a, p),
    }
}

/// `t` with its type variables replaced by their bindings (`_` when unbound).
pub(super) fn subst(t: &Type, b: &HashMap<String, Type>) -> Type {
    match t {
        Type::Var(v) => b.get(v).cloned().unwrap_or(Type::Any),
        Type::List(i) => Type::List(Box::new(subst(i, b))),
        Type::Optional(i) => Type::optional(subst(i, b)),
        Type::Record(f) => Type::Record(f.iter().map(|(n, t)| (n.clone(), subst(t, b))).collect()),
        other => other.clone(),
    }
}

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
