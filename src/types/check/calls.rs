//! Stage 3, calls: what a called name is (an aggregation over a set, a higher-order list
//! function with a lambda, a user function of this or an imported module, or an intrinsic),
//! argument binding by position and name with defaults, and intrinsic overload resolution
//! against the signatures of `sig.rs` (the first overload the arguments fit, type variables
//! unified), with constant regular expressions compiled here.

use super::scope::{Global, Place, Scope};
use super::unify::{coerce, subst, unify, Bindings};
use super::{diagnostics, Checker};
use crate::ir::{AggOp, Const, Expr, ExprKind, HigherOrder, Type};
use crate::source::Span;
use crate::stdlib;
use crate::syntax::ast;
use crate::types::sig::{intrinsic_sig, IntrinsicSig};
use diagnostics::{BadArguments, Mismatch, UnknownFunction};

/// An argument checked without expectations: its name if given, its expression, its span.
type CheckedArg<'e> = (Option<&'e ast::Name>, Expr, Span);

impl Checker<'_> {
    /// `callee(args)`: a function name, or `alias.f(args)` for a function of an imported module.
    pub(super) fn call_expr(&mut self, callee: &ast::Expr, args: &[ast::Arg], span: Span, scope: &mut Scope) -> Expr {
        match &callee.kind {
            ast::ExprKind::Var(n) if scope.lookup(&n.text).is_none() => return self.call(None, n, args, span, scope),
            ast::ExprKind::Field(m, n) => {
                if let ast::ExprKind::Var(mn) = &m.kind {
                    if scope.lookup(&mn.text).is_none() {
                        if let Some(target) = self.module_alias(&mn.text) {
                            return self.call(Some(target), n, args, span, scope);
                        }
                    }
                }
            }
            _ => {}
        }
        self.report(diagnostics::type_not_callable(callee.span, None));
        self.bad()
    }

    /// `receiver.method(args)`: `method(receiver, args)`, or a call through a module alias.
    pub(super) fn method_call(
        &mut self,
        receiver: &ast::Expr,
        method: &ast::Name,
        args: &[ast::Arg],
        span: Span,
        scope: &mut Scope,
    ) -> Expr {
        if let ast::ExprKind::Var(mn) = &receiver.kind {
            if scope.lookup(&mn.text).is_none() {
                if let Some(target) = self.module_alias(&mn.text) {
                    return self.call(Some(target), method, args, span, scope);
                }
            }
        }
        let mut all = vec![ast::Arg { name: None, value: receiver.clone() }];
        all.extend(args.iter().cloned());
        self.call(None, method, &all, span, scope)
    }

    /// A call to `name`, in module `module` when qualified.
    fn call(
        &mut self,
        module: Option<usize>,
        name: &ast::Name,
        args: &[ast::Arg],
        span: Span,
        scope: &mut Scope,
    ) -> Expr {
        if module.is_none() {
            // Aggregations over a set of criteria: the first argument names a set.
            if scope.place != Place::Function {
                if let Some(e) = self.try_aggregate(name, args, span, scope) {
                    return e;
                }
            }
            // Higher-order list functions with a lambda as last argument.
            if let (Some(op), [list, lambda]) = (HigherOrder::from_name(&name.text), args) {
                if let ast::ExprKind::Lambda(var, body) = &lambda.value.kind {
                    return self.higher_order(op, &list.value, var, body, scope);
                }
            }
        }
        // User functions: the current module's own, then (unqualified) nothing else; imported
        // functions are called through their module alias.
        let target_module = module.unwrap_or(self.current_module);
        if let Some(&f) = self.module_fns[target_module].get(&name.text) {
            return self.user_call(f, args, span, scope);
        }
        match module {
            None => match self.imported(name) {
                Imported::One(m) => self.call(Some(m), name, args, span, scope),
                Imported::Ambiguous => self.bad(),
                Imported::None => self.intrinsic_call(name, args, span, scope),
            },
            Some(m) => {
                let names: Vec<&str> = self.module_fns[m].keys().map(String::as_str).collect();
                let why = UnknownFunction::InModule { module: &self.module_names[m], candidates: &names };
                let d = diagnostics::resolve_unknown_function(name, why);
                self.report(d);
                self.bad()
            }
        }
    }

    /// `AGG(SET, ...)` when `name` is an aggregation: the aggregate, or a failed expression
    /// when its argument is not a set; `None` to go on as an ordinary call.
    fn try_aggregate(&mut self, name: &ast::Name, args: &[ast::Arg], span: Span, scope: &mut Scope) -> Option<Expr> {
        let agg = AggOp::from_name(&name.text)?;
        if let Some(ast::Arg { name: None, value }) = args.first() {
            if let ast::ExprKind::Var(v) = &value.kind {
                if scope.lookup(&v.text).is_none() {
                    if let Some(Global::Set(set)) = self.global(&v.text) {
                        return Some(self.aggregate(agg, set, v, &args[1..], span, scope));
                    }
                    // A set whose declaration failed to parse: already reported.
                    if self.broken.contains(&v.text) {
                        return Some(self.bad());
                    }
                }
            }
        }
        if agg == AggOp::Tree {
            let at = args.first().map_or(span, |a| a.value.span);
            self.report(diagnostics::type_mismatch(Mismatch::TreeOfNonSet { at }));
            return Some(self.bad());
        }
        None
    }

    /// A call of user function `f`.
    fn user_call(&mut self, f: u32, args: &[ast::Arg], span: Span, scope: &mut Scope) -> Expr {
        if let Some(cur) = self.current_fn {
            self.calls[cur as usize].push(f);
        }
        let params: Vec<(String, Type, Option<Expr>)> = self.fn_sigs[f as usize].params.clone();
        let ret = self.fn_sigs[f as usize].ret.clone();
        let fname = self.fn_sigs[f as usize].name.clone();
        let Some(bound) = self.bind_args(&fname, &params, args, span, scope) else { return self.bad() };
        let site = self.site(span);
        Expr { kind: ExprKind::Call { func: f, args: bound, site }, ty: ret }
    }

    /// The imported module that has a function `name`: functions of imported modules are
    /// visible unqualified when only one module has them (more is reported).
    fn imported(&mut self, name: &ast::Name) -> Imported {
        let mut found: Vec<usize> = self.module_aliases[self.current_module]
            .values()
            .copied()
            .filter(|m| self.module_fns[*m].contains_key(&name.text))
            .collect();
        found.sort_by(|a, b| self.module_names[*a].cmp(&self.module_names[*b]));
        found.dedup();
        match found.as_slice() {
            [m] => Imported::One(*m),
            [] => Imported::None,
            many => {
                let mods: Vec<&str> = many.iter().map(|m| self.module_names[*m].as_str()).collect();
                let d = diagnostics::resolve_ambiguous(name, &mods);
                self.report(d);
                Imported::Ambiguous
            }
        }
    }

    /// A call of the intrinsic `name`: the first overload the arguments fit.
    fn intrinsic_call(&mut self, name: &ast::Name, args: &[ast::Arg], span: Span, scope: &mut Scope) -> Expr {
        let overloads: Vec<(usize, &'static stdlib::Intrinsic)> = stdlib::lookup(&name.text).collect();
        if overloads.is_empty() {
            self.unknown_intrinsic(name);
            return self.bad();
        }
        stdlib::warm_up(&name.text);
        // Check arguments once without expectations, then pick the first overload they fit;
        // except that a record literal given for a record parameter of an intrinsic without
        // overloads is checked against it, so that it may leave out fields of optional type
        // (`image_width({url: u, width: 640})`), as a user function's argument may.
        let only = match overloads.as_slice() {
            [(index, _)] => intrinsic_sig(*index),
            _ => None,
        };
        let mut arg_exprs = Vec::new();
        for (position, a) in args.iter().enumerate() {
            if matches!(a.value.kind, ast::ExprKind::Lambda(..)) {
                self.report(diagnostics::type_lambda_position(a.value.span, Some(&name.text)));
                return self.bad();
            }
            let param = only.and_then(|sig| match &a.name {
                Some(n) => sig.params.iter().find(|(p, _, _)| *p == n.text),
                None => sig.params.get(position),
            });
            let want = match (&a.value.kind, param) {
                (ast::ExprKind::Record(_), Some((_, t @ Type::Record(_), _))) => Some(t),
                _ => None,
            };
            arg_exprs.push((a.name.as_ref(), self.expr(&a.value, scope, want), a.value.span));
        }
        let mut errors = Vec::new();
        for (k, (index, _)) in overloads.iter().enumerate() {
            let Some(sig) = intrinsic_sig(*index) else { continue };
            match match_sig(sig, &arg_exprs) {
                Ok((bound, ret)) => {
                    self.check_patterns(sig, &bound, args, span);
                    let site = self.site(span);
                    return Expr {
                        kind: ExprKind::Intrinsic { name: name.text.clone(), overload: k as u32, args: bound, site },
                        ty: ret,
                    };
                }
                Err(e) => errors.push(e),
            }
        }
        let sigs: Vec<String> = overloads.iter().map(|(_, i)| format!("{}{}", i.name, i.sig)).collect();
        let (at, complaint) = errors.into_iter().next().unwrap_or((span, "no matching signature".into()));
        let what = BadArguments::NoOverload { complaint: &complaint, at, signatures: &sigs };
        self.report(diagnostics::type_bad_arguments(&name.text, what));
        self.bad()
    }

    /// `name` is no function at all: a declaration of another kind, an aggregation without a
    /// set, or an unknown name (with a suggestion among every callable name).
    fn unknown_intrinsic(&mut self, name: &ast::Name) {
        if let Some(g) = self.global(&name.text) {
            self.report(diagnostics::type_not_callable(name.span, Some((&name.text, g.describe()))));
            return;
        }
        if AggOp::from_name(&name.text).is_some() {
            let why = UnknownFunction::NotASet;
            self.report(diagnostics::resolve_unknown_function(name, why));
            return;
        }
        let mut names: Vec<&str> = stdlib::intrinsics().iter().map(|i| i.name).collect();
        names.extend(AggOp::ALL.iter().map(|a| a.name()));
        names.extend(HigherOrder::ALL.iter().map(|h| h.name()));
        let own: Vec<String> = self.module_fns[self.current_module].keys().cloned().collect();
        names.extend(own.iter().map(String::as_str));
        let why = UnknownFunction::Unknown { candidates: &names };
        self.report(diagnostics::resolve_unknown_function(name, why));
    }

    /// A constant regular expression (an intrinsic's `pattern` argument) is parsed now, with
    /// the parser the regex crate compiles with (the same errors, the same messages), so that
    /// a bad pattern is a diagnostic, not a trap at the first row. It is not compiled here:
    /// the engines compile a pattern once per process when a row first needs it (a pattern
    /// too large to compile is a `regex` trap then), and many patterns of a library module
    /// are never needed by a given rubric's rows.
    fn check_patterns(&mut self, sig: &IntrinsicSig, bound: &[Expr], args: &[ast::Arg], span: Span) {
        for (pi, ((pname, _, _), arg)) in sig.params.iter().zip(bound).enumerate() {
            if pname != "pattern" {
                continue;
            }
            let Some(p) = arg.as_text() else { continue };
            if let Err(e) = regex_syntax::Parser::new().parse(p) {
                // The argument written for `pattern`: by name, else by position.
                let at = args
                    .iter()
                    .find(|a| a.name.as_ref().is_some_and(|n| n.text == "pattern"))
                    .or_else(|| args.iter().filter(|a| a.name.is_none()).nth(pi))
                    .map_or(span, |a| a.value.span);
                self.report(diagnostics::type_bad_regex(at, p, &e));
            }
        }
    }

    /// Bind the arguments of a call of user function `fname` to its `params` (by position,
    /// then by name; defaults fill the rest). `None` when they do not fit (reported).
    fn bind_args(
        &mut self,
        fname: &str,
        params: &[(String, Type, Option<Expr>)],
        args: &[ast::Arg],
        span: Span,
        scope: &mut Scope,
    ) -> Option<Vec<Expr>> {
        let mut slots: Vec<Option<Expr>> = vec![None; params.len()];
        let mut positional = 0usize;
        let mut ok = true;
        for a in args {
            let idx = match &a.name {
                Some(n) => match params.iter().position(|(p, _, _)| *p == n.text) {
                    Some(i) => i,
                    None => {
                        let names: Vec<&str> = params.iter().map(|(p, _, _)| p.as_str()).collect();
                        let what = BadArguments::NoParameter { name: n, params: &names };
                        self.report(diagnostics::type_bad_arguments(fname, what));
                        ok = false;
                        continue;
                    }
                },
                None => {
                    positional += 1;
                    positional - 1
                }
            };
            if idx >= params.len() {
                let what = BadArguments::Extra { count: params.len(), at: a.value.span };
                self.report(diagnostics::type_bad_arguments(fname, what));
                ok = false;
                continue;
            }
            let want = params[idx].1.clone();
            let x = coerce(self.expr(&a.value, scope, Some(&want)), &want);
            self.expect_type(&x.ty, &want, a.value.span, &format!("argument `{}` of `{fname}`", params[idx].0));
            if slots[idx].is_some() {
                let what = BadArguments::GivenTwice { param: &params[idx].0, at: a.value.span };
                self.report(diagnostics::type_bad_arguments(fname, what));
                ok = false;
            }
            slots[idx] = Some(x);
        }
        let mut out = Vec::new();
        for (i, s) in slots.into_iter().enumerate() {
            match (s, &params[i].2) {
                (Some(x), _) => out.push(x),
                (None, Some(d)) => out.push(inline_default(d, scope)),
                (None, None) => {
                    let what = BadArguments::Missing { param: &params[i].0, call: span };
                    self.report(diagnostics::type_bad_arguments(fname, what));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// `map`, `filter`, `all`, `any` or `count` of `list` with the lambda `var => body`.
    fn higher_order(
        &mut self,
        op: HigherOrder,
        list: &ast::Expr,
        var: &ast::Name,
        body: &ast::Expr,
        scope: &mut Scope,
    ) -> Expr {
        let l = self.expr(list, scope, None);
        let elem = match &l.ty {
            Type::List(t) => (**t).clone(),
            Type::Any => Type::Any,
            other => {
                self.report(diagnostics::type_mismatch(Mismatch::HigherOrderList { found: other, at: list.span }));
                Type::Any
            }
        };
        let local = scope.push(&var.text, elem);
        let want = match op {
            HigherOrder::Map => None,
            _ => Some(Type::Bool),
        };
        let b = self.expr(body, scope, want.as_ref());
        scope.pop();
        if let Some(w) = &want {
            self.expect_type(&b.ty, w, body.span, "the lambda's result");
        }
        let ty = match op {
            HigherOrder::Map => Type::List(Box::new(b.ty.clone())),
            HigherOrder::Filter => l.ty.clone(),
            HigherOrder::All | HigherOrder::Any => Type::Bool,
            HigherOrder::Count => Type::Number,
        };
        Expr { kind: ExprKind::HigherOrder { op, list: Box::new(l), local, body: Box::new(b) }, ty }
    }
}

/// Which imported module defines an unqualified function name.
enum Imported {
    One(usize),
    /// Several do (reported).
    Ambiguous,
    None,
}

/// Match checked arguments against an intrinsic signature; returns the arguments in
/// parameter order (defaults filled) and the return type with type variables bound.
fn match_sig(sig: &IntrinsicSig, args: &[CheckedArg<'_>]) -> Result<(Vec<Expr>, Type), (Span, String)> {
    let mut slots: Vec<Option<Expr>> = vec![None; sig.params.len()];
    let mut positional = 0usize;
    let mut bindings = Bindings::new();
    for (name, e, span) in args {
        let idx = match name {
            Some(n) => sig
                .params
                .iter()
                .position(|(p, _, _)| *p == n.text)
                .ok_or((n.span, format!("no parameter `{}`", n.text)))?,
            None => {
                positional += 1;
                positional - 1
            }
        };
        if idx >= sig.params.len() {
            return Err((*span, format!("takes at most {} arguments", sig.params.len())));
        }
        let e = &coerce(e.clone(), &sig.params[idx].1);
        if !unify(&sig.params[idx].1, &e.ty, &mut bindings) {
            let hint = match &e.ty {
                Type::Optional(inner) if unify(&sig.params[idx].1, inner, &mut bindings.clone()) => {
                    "; it may be null: test it first (`x != null and ...`) or give a fallback with `??`"
                }
                _ => "",
            };
            let (param, want) = (&sig.params[idx].0, subst(&sig.params[idx].1, &bindings));
            return Err((*span, format!("`{param}` must be `{want}`, found `{}`{hint}", e.ty)));
        }
        slots[idx] = Some(e.clone());
    }
    let mut out = Vec::new();
    for (i, s) in slots.into_iter().enumerate() {
        match (s, &sig.params[i].2) {
            (Some(x), _) => out.push(x),
            (None, Some(c)) => {
                let mut d = Expr::constant(c.clone());
                if matches!(c, Const::Null) {
                    d.ty = subst(&sig.params[i].1, &bindings);
                }
                out.push(d)
            }
            (None, None) => {
                let at = args.last().map_or(Span::default(), |a| a.2);
                return Err((at, format!("missing argument `{}`", sig.params[i].0)));
            }
        }
    }
    Ok((out, subst(&sig.ret, &bindings)))
}

/// A parameter's default (elaborated once, in its function's own scope) inlined at a call: its
/// binders (`map(xs, x => ...)`...) get fresh locals of the caller's scope, so that they
/// neither clash with the caller's locals nor fall outside the caller's local count.
fn inline_default(default: &Expr, scope: &mut Scope) -> Expr {
    fn rebase(e: &mut Expr, scope: &mut Scope, renamed: &mut Vec<(u32, u32)>) {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || match &mut e.kind {
            ExprKind::Local(l) => {
                if let Some((_, fresh)) = renamed.iter().rev().find(|(old, _)| old == l) {
                    *l = *fresh;
                }
            }
            ExprKind::HigherOrder { list, local, body, .. } => {
                rebase(list, scope, renamed);
                // A name no identifier has: the binder is visible only through `renamed`.
                let fresh = scope.push("", Type::Any);
                renamed.push((*local, fresh));
                *local = fresh;
                rebase(body, scope, renamed);
                renamed.pop();
                scope.pop();
            }
            ExprKind::Const(_) | ExprKind::Input(_) | ExprKind::Let(_) | ExprKind::Criterion(_) => {}
            ExprKind::List(xs) => xs.iter_mut().for_each(|x| rebase(x, scope, renamed)),
            ExprKind::Record(fs) => fs.iter_mut().for_each(|(_, x)| rebase(x, scope, renamed)),
            ExprKind::Field { base, .. } | ExprKind::Unary { arg: base, .. } | ExprKind::Narrowed(base) => {
                rebase(base, scope, renamed)
            }
            ExprKind::Index { base, index, .. } => {
                rebase(base, scope, renamed);
                rebase(index, scope, renamed);
            }
            ExprKind::Binary { lhs, rhs, .. } => {
                rebase(lhs, scope, renamed);
                rebase(rhs, scope, renamed);
            }
            ExprKind::Compare { first, rest } => {
                rebase(first, scope, renamed);
                rest.iter_mut().for_each(|(_, x)| rebase(x, scope, renamed));
            }
            ExprKind::If { cond, then, els } => {
                rebase(cond, scope, renamed);
                rebase(then, scope, renamed);
                rebase(els, scope, renamed);
            }
            ExprKind::Intrinsic { args, .. } | ExprKind::Call { args, .. } | ExprKind::Aggregate { args, .. } => {
                args.iter_mut().for_each(|x| rebase(x, scope, renamed))
            }
        })
    }
    let mut e = default.clone();
    rebase(&mut e, scope, &mut Vec::new());
    e
}
