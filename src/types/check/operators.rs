//! Stage 3, operators: negation and `not`, the logical operators, `??` (which warns when the
//! left side is never null), arithmetic on numbers and `+` on texts, and comparison chains
//! (ordered comparisons of numbers or texts, equality of joinable types, never of verdicts).

use super::scope::Scope;
use super::unify::{assignable, join};
use super::{diagnostics, narrow, Checker};
use crate::ir::{self, Expr, ExprKind, SiteId, Type};
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::Mismatch;

fn binop(op: ast::BinOp) -> ir::BinOp {
    match op {
        ast::BinOp::Add => ir::BinOp::Add,
        ast::BinOp::Sub => ir::BinOp::Sub,
        ast::BinOp::Mul => ir::BinOp::Mul,
        ast::BinOp::Div => ir::BinOp::Div,
        ast::BinOp::Rem => ir::BinOp::Rem,
        ast::BinOp::And => ir::BinOp::And,
        ast::BinOp::Or => ir::BinOp::Or,
        ast::BinOp::Coalesce => ir::BinOp::Coalesce,
    }
}

pub(super) fn cmpop(op: ast::CmpOp) -> ir::CmpOp {
    match op {
        ast::CmpOp::Eq => ir::CmpOp::Eq,
        ast::CmpOp::Ne => ir::CmpOp::Ne,
        ast::CmpOp::Lt => ir::CmpOp::Lt,
        ast::CmpOp::Le => ir::CmpOp::Le,
        ast::CmpOp::Gt => ir::CmpOp::Gt,
        ast::CmpOp::Ge => ir::CmpOp::Ge,
    }
}

/// A binary operation of the IR.
fn binary_expr(op: ir::BinOp, a: Expr, b: Expr, site: SiteId, ty: Type) -> Expr {
    Expr { kind: ExprKind::Binary { op, lhs: Box::new(a), rhs: Box::new(b), site }, ty }
}

impl Checker<'_> {
    /// `-x` on a number, `not x` on a condition.
    pub(super) fn unary(&mut self, op: ast::UnOp, arg: &ast::Expr, scope: &mut Scope) -> Expr {
        let (want, irop, what) = match op {
            ast::UnOp::Neg => (Type::Number, ir::UnOp::Neg, "the operand of `-`"),
            ast::UnOp::Not => (Type::Bool, ir::UnOp::Not, "the operand of `not`"),
        };
        let x = self.expr(arg, scope, Some(&want));
        self.expect_type(&x.ty, &want, arg.span, what);
        Expr { kind: ExprKind::Unary { op: irop, arg: Box::new(x) }, ty: want }
    }

    pub(super) fn binary(
        &mut self,
        op: ast::BinOp,
        l: &ast::Expr,
        r: &ast::Expr,
        span: Span,
        scope: &mut Scope,
        expected: Option<&Type>,
    ) -> Expr {
        let site = self.site(span);
        match op {
            ast::BinOp::And | ast::BinOp::Or => {
                let a = self.expr(l, scope, Some(&Type::Bool));
                // The right side runs only when the left does not decide: `and` after a left
                // side that is not false, `or` after one that is not true.
                let facts = narrow::not_null_unless(&a, op == ast::BinOp::And);
                let b = self.narrowed_by(facts, |c| c.expr(r, scope, Some(&Type::Bool)));
                self.expect_type(&a.ty, &Type::Bool, l.span, &format!("an operand of `{}`", op.symbol()));
                self.expect_type(&b.ty, &Type::Bool, r.span, &format!("an operand of `{}`", op.symbol()));
                binary_expr(binop(op), a, b, site, Type::Bool)
            }
            ast::BinOp::Coalesce => self.coalesce(l, r, site, scope, expected),
            _ => self.arithmetic(op, l, r, site, scope),
        }
    }

    /// `a ?? b`: the fallback for a value that may be null.
    fn coalesce(
        &mut self,
        l: &ast::Expr,
        r: &ast::Expr,
        site: SiteId,
        scope: &mut Scope,
        expected: Option<&Type>,
    ) -> Expr {
        let a = self.expr(l, scope, expected.map(|t| Type::optional(t.clone())).as_ref());
        let inner = a.ty.strip_optional().clone();
        let b = self.expr(r, scope, Some(&inner));
        if !a.ty.is_optional() && a.ty != Type::Any {
            let narrowed = matches!(a.kind, ExprKind::Narrowed(_));
            self.report(diagnostics::type_needless_coalesce(l.span, &a.ty, narrowed));
        }
        let ty = match join(&inner, &b.ty) {
            Some(t) if inner == Type::Null => t,
            Some(_) if assignable(&b.ty, &inner) => inner.clone(),
            Some(t) => t,
            None => {
                self.report(diagnostics::type_mismatch(Mismatch::Fallback { want: &inner, found: &b.ty, at: r.span }));
                Type::Any
            }
        };
        binary_expr(ir::BinOp::Coalesce, a, b, site, ty)
    }

    /// `+ - * / %` on numbers; `+` on texts is concatenation.
    fn arithmetic(&mut self, op: ast::BinOp, l: &ast::Expr, r: &ast::Expr, site: SiteId, scope: &mut Scope) -> Expr {
        let a = self.expr(l, scope, None);
        let b = self.expr(r, scope, Some(&a.ty));
        let (irop, ty) = match (op, &a.ty, &b.ty) {
            (_, Type::Any, _) | (_, _, Type::Any) => (
                binop(op),
                if op == ast::BinOp::Add && (a.ty == Type::Text || b.ty == Type::Text) {
                    Type::Text
                } else {
                    Type::Number
                },
            ),
            (ast::BinOp::Add, Type::Text, Type::Text) => (ir::BinOp::Concat, Type::Text),
            (_, Type::Number, Type::Number) => (binop(op), Type::Number),
            _ => {
                let m = Mismatch::Arithmetic { op, lhs: (&a.ty, l.span), rhs: (&b.ty, r.span) };
                self.report(diagnostics::type_mismatch(m));
                (binop(op), Type::Any)
            }
        };
        binary_expr(irop, a, b, site, ty)
    }

    /// `a < b <= c ...`: every operand evaluated once, left to right.
    pub(super) fn compare(&mut self, first: &ast::Expr, rest: &[(ast::CmpOp, ast::Expr)], scope: &mut Scope) -> Expr {
        let f = self.expr(first, scope, None);
        let mut prev_ty = f.ty.clone();
        let mut prev_span = first.span;
        let mut out = Vec::new();
        for (op, operand) in rest {
            let x = self.expr(operand, scope, Some(&prev_ty));
            let ordered = !matches!(op, ast::CmpOp::Eq | ast::CmpOp::Ne);
            let ok = if ordered {
                let num = |t: &Type| matches!(t, Type::Number | Type::Any);
                let txt = |t: &Type| matches!(t, Type::Text | Type::Any);
                (num(&prev_ty) && num(&x.ty)) || (txt(&prev_ty) && txt(&x.ty))
            } else {
                join(&prev_ty, &x.ty).is_some() && prev_ty != Type::Verdict && x.ty != Type::Verdict
            };
            if !ok {
                let m = Mismatch::Compare { op: op.symbol(), lhs: (&prev_ty, prev_span), rhs: (&x.ty, operand.span) };
                self.report(diagnostics::type_mismatch(m));
            }
            prev_ty = x.ty.clone();
            prev_span = operand.span;
            out.push((cmpop(*op), x));
        }
        Expr { kind: ExprKind::Compare { first: Box::new(f), rest: out }, ty: Type::Bool }
    }
}
