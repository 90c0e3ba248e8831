//! Stage 3, null narrowing: where a condition proves that an optional value is not null, that
//! value has its non-optional type. A *path* (an input, a `let`, a local, or a field of one of
//! these: values that cannot change while a row is evaluated) compared with `null` is proven
//! not null
//!
//! - on the right of `and` after `PATH != null`, on the right of `or` after `PATH == null`,
//! - in the `then` branch of `if PATH != null` (the `else` branch of `if PATH == null`),
//! - in every step after a `score` gate whose condition is `PATH != null` (and in the score),
//!
//! through `not`, `and` and `or` of such conditions. Each use of a proven path is elaborated as
//! `ExprKind::Narrowed` around it, which every engine implements (decision record 0010).
//!
//! Why it is sound under Kleene logic: `not_null_unless(c, true)` lists the paths that are not
//! null whenever `c` is *not false* (true, unscored or undecided), and `not_null_unless(c,
//! false)` those that are not null whenever `c` is not true. The right side of `and` runs only
//! when its left side is not false, the right of `or` only when its left is not true, a branch
//! of `if` only when the condition is exactly true or false, and a step after a `score` gate
//! only when the gate's condition was exactly true (a false one fires it, an undecided one stops
//! evaluation). A `cap` gate lets evaluation go on when it fires, so it proves nothing; neither
//! do gates for `let`s (evaluated lazily, perhaps by the reward's penalty after a gate fired).

use super::Checker;
use crate::ir::{BinOp, CmpOp, Const, Expr, ExprKind, Type, UnOp};

/// The key of a path: the same for every use of the same value (`in3.answer`, `loc1`).
pub(super) fn path(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Input(i) => Some(format!("in{i}")),
        ExprKind::Let(i) => Some(format!("let{i}")),
        ExprKind::Local(i) => Some(format!("loc{i}")),
        ExprKind::Field { base, name, .. } => path(base).map(|b| format!("{b}.{name}")),
        ExprKind::Narrowed(arg) => path(arg),
        _ => None,
    }
}

/// Whether a path depends on a local (which a later step does not see).
pub(super) fn is_local(key: &str) -> bool {
    key.starts_with("loc")
}

fn is_null(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Const(Const::Null))
}

/// The paths that are not null whenever `cond` is not `!truth` (see the module comment).
pub(super) fn not_null_unless(cond: &Expr, truth: bool) -> Vec<String> {
    match &cond.kind {
        ExprKind::Compare { first, rest } if rest.len() == 1 => {
            let (op, second) = &rest[0];
            let proves = matches!((op, truth), (CmpOp::Ne, true) | (CmpOp::Eq, false));
            let p = if is_null(second) {
                path(first)
            } else if is_null(first) {
                path(second)
            } else {
                None
            };
            p.filter(|_| proves).into_iter().collect()
        }
        ExprKind::Unary { op: UnOp::Not, arg } => not_null_unless(arg, !truth),
        ExprKind::Binary { op: op @ (BinOp::And | BinOp::Or), lhs, rhs, .. } => {
            let a = not_null_unless(lhs, truth);
            let b = not_null_unless(rhs, truth);
            // `a and b` is not false only when neither is; `a or b` when either is not.
            if (*op == BinOp::And) == truth {
                let mut u = a;
                for k in b {
                    if !u.contains(&k) {
                        u.push(k);
                    }
                }
                u
            } else {
                a.into_iter().filter(|k| b.contains(k)).collect()
            }
        }
        _ => vec![],
    }
}

impl Checker<'_> {
    /// `e` as its non-optional type when it is a path proven not null here.
    pub(super) fn narrow(&self, e: Expr) -> Expr {
        let Type::Optional(inner) = &e.ty else { return e };
        match path(&e) {
            Some(k) if self.narrowed.contains(&k) => {
                let ty = (**inner).clone();
                Expr { kind: ExprKind::Narrowed(Box::new(e)), ty }
            }
            _ => e,
        }
    }

    /// Check `f` with the paths `facts` proven not null.
    pub(super) fn narrowed_by<T>(&mut self, facts: Vec<String>, f: impl FnOnce(&mut Self) -> T) -> T {
        let before = self.narrowed.len();
        self.narrowed.extend(facts);
        let out = f(self);
        self.narrowed.truncate(before);
        out
    }

    /// Check `f` with no path proven not null (a `let`, the reward, the examples).
    pub(super) fn unnarrowed<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = std::mem::take(&mut self.narrowed);
        let out = f(self);
        self.narrowed = saved;
        out
    }

    /// After a `score` gate with condition `cond`: what it proves holds for every later step.
    pub(super) fn narrow_after_gate(&mut self, cond: &Expr) {
        let facts = not_null_unless(cond, true);
        self.narrowed.extend(facts.into_iter().filter(|k| !is_local(k)));
    }
}
