//! Stage 3, expressions: the recursive walk that checks an expression against an expected
//! type and elaborates it into a typed `ir::Expr` (literals, names, fields, indexes, `if`),
//! handing operators to `operators.rs` and calls to `calls.rs`. A failed expression becomes
//! `Type::Any`, so that one mistake does not cascade.

use super::scope::{Global, Place, Scope};
use super::unify::{assignable, join};
use super::{diagnostics, narrow, Checker};
use crate::ir::{Const, Expr, ExprKind, Type};
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::{Mismatch, NotAValue, NotConstant, UnknownField};

impl Checker<'_> {
    /// Report a `found` value where a `want` is needed (`what` names the place).
    pub(super) fn expect_type(&mut self, found: &Type, want: &Type, span: Span, what: &str) {
        if !assignable(found, want) {
            self.report(diagnostics::type_mismatch(Mismatch::Expected { what, want, found, at: span }));
        }
    }

    /// The expression of a failed check.
    pub(super) fn bad(&self) -> Expr {
        Expr { kind: ExprKind::Const(Const::Null), ty: Type::Any }
    }

    /// Check `e` in `scope`; `expected` guides literals (empty lists, optional record fields).
    pub(super) fn expr(&mut self, e: &ast::Expr, scope: &mut Scope, expected: Option<&Type>) -> Expr {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.expr_inner(e, scope, expected))
    }

    fn expr_inner(&mut self, e: &ast::Expr, scope: &mut Scope, expected: Option<&Type>) -> Expr {
        use ast::ExprKind as A;
        match &e.kind {
            A::Number(n) => Expr::constant(Const::Number(*n)),
            A::Str(s) => Expr::constant(Const::Text(s.as_str().into())),
            A::Bool(b) => Expr::constant(Const::Bool(*b)),
            A::Null => Expr::constant(Const::Null),
            A::List(items) => self.list_literal(items, scope, expected),
            A::Record(fields) => self.record_literal(fields, scope, expected),
            A::Var(n) => self.var(n, scope),
            A::Field(base, name) => self.field_expr(base, name, e.span, scope),
            A::Index(base, index) => self.index(base, index, e.span, scope),
            A::Call { callee, args } => self.call_expr(callee, args, e.span, scope),
            A::Method { receiver, method, args } => self.method_call(receiver, method, args, e.span, scope),
            A::Unary(op, arg) => self.unary(*op, arg, scope),
            A::Binary(op, l, r) => self.binary(*op, l, r, e.span, scope, expected),
            A::Compare(first, rest) => self.compare(first, rest, scope),
            A::If(c, t, f) => self.if_expr(c, t, f, scope, expected),
            A::Lambda(..) => {
                self.report(diagnostics::type_lambda_position(e.span, None));
                self.bad()
            }
        }
    }

    /// `[a, b, ...]`: the elements share a type, or take the expected element type when empty.
    fn list_literal(&mut self, items: &[ast::Expr], scope: &mut Scope, expected: Option<&Type>) -> Expr {
        let want_elem = match expected.map(Type::strip_optional) {
            Some(Type::List(t)) => Some((**t).clone()),
            _ => None,
        };
        let mut elem = Type::Any;
        let mut out = Vec::new();
        for it in items {
            let x = self.expr(it, scope, want_elem.as_ref());
            match join(&elem, &x.ty) {
                Some(t) => elem = t,
                None => {
                    let m = Mismatch::ListElement { elem: &elem, found: &x.ty, at: it.span };
                    self.report(diagnostics::type_mismatch(m));
                }
            }
            out.push(x);
        }
        if let (Type::Any, Some(w)) = (&elem, &want_elem) {
            elem = w.clone();
        }
        Expr { kind: ExprKind::List(out), ty: Type::List(Box::new(elem)) }
    }

    /// `{a: x, ...}`: fields once each, sorted by name; optional fields the expected record
    /// type has and the literal leaves out are null.
    fn record_literal(
        &mut self,
        fields: &[(ast::Name, ast::Expr)],
        scope: &mut Scope,
        expected: Option<&Type>,
    ) -> Expr {
        let want: Option<Vec<(String, Type)>> = match expected.map(Type::strip_optional) {
            Some(Type::Record(f)) => Some(f.clone()),
            _ => None,
        };
        let mut out: Vec<(String, Expr)> = Vec::new();
        for (n, v) in fields {
            if out.iter().any(|(m, _)| *m == n.text) {
                self.report(diagnostics::type_duplicate_field(n));
                continue;
            }
            let wf = want.as_ref().and_then(|w| w.iter().find(|(m, _)| *m == n.text).map(|(_, t)| t.clone()));
            let x = self.expr(v, scope, wf.as_ref());
            out.push((n.text.clone(), x));
        }
        if let Some(w) = &want {
            for (n, t) in w {
                if t.is_optional() && !out.iter().any(|(m, _)| m == n) {
                    out.push((n.clone(), Expr { kind: ExprKind::Const(Const::Null), ty: t.clone() }));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        let ty = Type::Record(out.iter().map(|(n, x)| (n.clone(), x.ty.clone())).collect());
        Expr { kind: ExprKind::Record(out), ty }
    }

    /// `base.name`; `alias.f` without a call is an error.
    fn field_expr(&mut self, base: &ast::Expr, name: &ast::Name, span: Span, scope: &mut Scope) -> Expr {
        if let ast::ExprKind::Var(m) = &base.kind {
            if scope.lookup(&m.text).is_none() {
                if let Some(target) = self.module_alias(&m.text) {
                    let module = self.module_names[target].clone();
                    let what = NotAValue::ModuleFunction { alias: &m.text, function: &name.text, module: &module };
                    self.report(diagnostics::type_not_a_value(span, what));
                    return self.bad();
                }
            }
        }
        let b = self.expr(base, scope, None);
        self.field(b, name, span)
    }

    /// `base[index]`: lists only.
    fn index(&mut self, base: &ast::Expr, index: &ast::Expr, span: Span, scope: &mut Scope) -> Expr {
        let b = self.expr(base, scope, None);
        let i = self.expr(index, scope, Some(&Type::Number));
        self.expect_type(&i.ty, &Type::Number, index.span, "an index");
        let ty = match &b.ty {
            Type::List(t) => (**t).clone(),
            Type::Any => Type::Any,
            other => {
                self.report(diagnostics::type_mismatch(Mismatch::Indexed { found: other, at: base.span }));
                Type::Any
            }
        };
        let site = self.site(span);
        Expr { kind: ExprKind::Index { base: Box::new(b), index: Box::new(i), site }, ty }
    }

    /// `if c then a else b`: the branches join.
    fn if_expr(
        &mut self,
        c: &ast::Expr,
        t: &ast::Expr,
        f: &ast::Expr,
        scope: &mut Scope,
        expected: Option<&Type>,
    ) -> Expr {
        let cond = self.expr(c, scope, Some(&Type::Bool));
        self.expect_type(&cond.ty, &Type::Bool, c.span, "a condition");
        let a = self.narrowed_by(narrow::not_null_unless(&cond, true), |c| c.expr(t, scope, expected));
        let b = self.narrowed_by(narrow::not_null_unless(&cond, false), |c| c.expr(f, scope, expected.or(Some(&a.ty))));
        let ty = match join(&a.ty, &b.ty) {
            Some(t) => t,
            None => {
                let m = Mismatch::Branches { then: (&a.ty, t.span), els: (&b.ty, f.span) };
                self.report(diagnostics::type_mismatch(m));
                Type::Any
            }
        };
        Expr { kind: ExprKind::If { cond: Box::new(cond), then: Box::new(a), els: Box::new(b) }, ty }
    }

    /// A name: a local, else what the name table says, as far as `scope.place` may see it.
    fn var(&mut self, n: &ast::Name, scope: &mut Scope) -> Expr {
        if let Some((i, t)) = scope.lookup(&n.text) {
            return self.narrow(Expr { kind: ExprKind::Local(i), ty: t });
        }
        if let (Some((set, _)), "passed" | "failed" | "total") = (scope.checks, n.text.as_str()) {
            return self.sub_check_count(set, &n.text, n.span);
        }
        let place = scope.place;
        let global = if place == Place::Function { None } else { self.global(&n.text) };
        match global {
            Some(Global::Input(i)) => {
                if place == Place::Constant {
                    self.report(diagnostics::type_not_constant(n.span, NotConstant::Input(&n.text)));
                    return self.bad();
                }
                self.narrow(Expr { kind: ExprKind::Input(i), ty: self.p.inputs[i as usize].ty.clone() })
            }
            Some(Global::Let(i)) => {
                self.narrow(Expr { kind: ExprKind::Let(i), ty: self.p.lets[i as usize].ty.clone() })
            }
            Some(Global::Criterion(c)) => self.criterion_var(n, c, place),
            Some(Global::Set(_)) => {
                self.report(diagnostics::type_set_as_value(n));
                self.bad()
            }
            Some(g) => {
                let what = NotAValue::Declaration { name: &n.text, was: g.describe() };
                self.report(diagnostics::type_not_a_value(n.span, what));
                self.bad()
            }
            None if self.broken.contains(&n.text) => self.bad(),
            None if place != Place::Function && self.all_criterion_ids.contains(&n.text) => {
                self.report(diagnostics::resolve_forward_criterion(n, false));
                self.bad()
            }
            None => {
                let mut candidates: Vec<String> = scope.locals.iter().map(|l| l.0.clone()).collect();
                if place != Place::Function {
                    candidates.extend(self.globals.keys().cloned());
                }
                let in_function = place == Place::Function;
                let is_global = self.globals.contains_key(&n.text);
                let d =
                    diagnostics::resolve_unknown_name(n, in_function, is_global, candidates.iter().map(String::as_str));
                self.report(d);
                self.bad()
            }
        }
    }

    /// `passed`, `failed` or `total` in a sub-checked criterion's `value`: counts over its set
    /// (`count_met`, `count - count_met`, `count`; an unscored sub-check propagates).
    fn sub_check_count(&mut self, set: u32, which: &str, at: crate::source::Span) -> Expr {
        let site = self.site(at);
        let agg = |op| Expr {
            kind: ExprKind::Aggregate { op, set, policy: crate::ir::Policy::Propagate, args: vec![], site },
            ty: Type::Number,
        };
        match which {
            "passed" => agg(crate::ir::AggOp::CountMet),
            "total" => agg(crate::ir::AggOp::Count),
            _ => Expr {
                kind: ExprKind::Binary {
                    op: crate::ir::BinOp::Sub,
                    lhs: Box::new(agg(crate::ir::AggOp::Count)),
                    rhs: Box::new(agg(crate::ir::AggOp::CountMet)),
                    site,
                },
                ty: Type::Number,
            },
        }
    }

    /// Criterion `c` as a value: only criteria evaluated before `place`, and never in a constant.
    fn criterion_var(&mut self, n: &ast::Name, c: u32, place: Place) -> Expr {
        if let Place::Step(step) = place {
            if self.criterion_step[c as usize] >= step {
                self.report(diagnostics::resolve_forward_criterion(n, true));
                return self.bad();
            }
        } else if place == Place::Constant {
            self.report(diagnostics::type_not_constant(n.span, NotConstant::Criterion(&n.text)));
            return self.bad();
        }
        Expr { kind: ExprKind::Criterion(c), ty: Type::Verdict }
    }

    /// Field `name` of the checked value `b` (`span`: the whole field expression).
    pub(super) fn field(&mut self, b: Expr, name: &ast::Name, span: Span) -> Expr {
        let ty = match &b.ty {
            Type::Any => Type::Any,
            Type::Record(fields) => match fields.iter().find(|(n, _)| *n == name.text) {
                Some((_, t)) => t.clone(),
                None => {
                    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
                    let why = UnknownField::Record { record: &b.ty, fields: &names };
                    self.report(diagnostics::type_unknown_field(name, span, why));
                    Type::Any
                }
            },
            Type::Verdict => match name.text.as_str() {
                "met" | "unscored" => Type::Bool,
                "value" | "points" | "weight" | "agreement" => Type::Number,
                _ => {
                    self.report(diagnostics::type_unknown_field(name, span, UnknownField::Verdict));
                    Type::Any
                }
            },
            Type::Optional(_) => {
                self.report(diagnostics::type_maybe_null(span, &b.ty, &name.text));
                Type::Any
            }
            Type::Json => {
                self.report(diagnostics::type_unknown_field(name, span, UnknownField::Json));
                Type::Any
            }
            other => {
                self.report(diagnostics::type_unknown_field(name, span, UnknownField::NoFields(other)));
                Type::Any
            }
        };
        let site = self.site(span);
        self.narrow(Expr { kind: ExprKind::Field { base: Box::new(b), name: name.text.clone(), site }, ty })
    }
}
