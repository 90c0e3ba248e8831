//! Stage 3, user functions: every module's signatures are declared before any body is
//! checked (so declaration order does not matter), bodies are checked in their module with
//! only their parameters in scope, and a depth-first search over the call graph rejects
//! recursion, so that every rubric terminates.

use super::scope::{Global, Place, Scope};
use super::{diagnostics, Checker, FnSig};
use crate::ir::{self, Expr, Type};
use crate::syntax::ast;
use diagnostics::Duplicate;

impl Checker<'_> {
    /// Declare function `f` of module `module`: its parameters, defaults and return type.
    pub(super) fn declare_fn(&mut self, module: usize, f: &ast::FnDef) {
        let idx = self.fn_sigs.len() as u32;
        let mut params: Vec<(String, Type, Option<Expr>)> = Vec::new();
        let mut scope = Scope::new(Place::Constant);
        for p in &f.params {
            let ty = self.ty(&p.ty);
            if params.iter().any(|(n, _, _)| *n == p.name.text) {
                self.report(diagnostics::resolve_duplicate(p.name.span, Duplicate::Parameter(&p.name.text)));
            }
            let default = p.default.as_ref().map(|d| {
                let e = self.expr(d, &mut scope, Some(&ty));
                self.expect_type(&e.ty, &ty, d.span, "this default");
                e
            });
            params.push((p.name.text.clone(), ty, default));
        }
        let ret = self.ty(&f.ret);
        if self.module_fns[module].contains_key(&f.name.text) {
            self.report(diagnostics::resolve_duplicate(f.name.span, Duplicate::Function(&f.name.text)));
        }
        self.module_fns[module].insert(f.name.text.clone(), idx);
        if module + 1 == self.module_fns.len() {
            self.define(&f.name.text, Global::Fn(idx), f.name.span);
        }
        self.fn_sigs.push(FnSig { name: f.name.text.clone(), params, ret, span: f.name.span, module });
        self.calls.push(vec![]);
    }

    /// Check the body of function number `idx` and add it to the program.
    pub(super) fn check_fn_body(&mut self, idx: u32, f: &ast::FnDef) {
        let mut scope = Scope::new(Place::Function);
        let params: Vec<(String, Type)> =
            self.fn_sigs[idx as usize].params.iter().map(|(n, t, _)| (n.clone(), t.clone())).collect();
        for (n, t) in &params {
            scope.push(n, t.clone());
        }
        let ret = self.fn_sigs[idx as usize].ret.clone();
        self.current_fn = Some(idx);
        let body = self.expr(&f.body, &mut scope, Some(&ret));
        self.current_fn = None;
        self.expect_type(&body.ty, &ret, f.body.span, "the function body");
        let name = match self.module_names[self.fn_sigs[idx as usize].module].as_str() {
            "main" => f.name.text.clone(),
            m => format!("{m}.{}", f.name.text),
        };
        self.p.functions.push(ir::Function { name, params, ret, locals: scope.max_local, body });
    }

    /// Report the first function found on a call cycle.
    pub(super) fn check_recursion(&mut self) {
        let n = self.calls.len();
        let mut state = vec![0u8; n];
        for i in 0..n {
            if state[i] == 0 {
                if let Some(c) = find_cycle(i, &self.calls, &mut state) {
                    let span = self.fn_sigs[c].span;
                    let name = self.fn_sigs[c].name.clone();
                    self.report(diagnostics::type_recursion(&name, span));
                    return;
                }
            }
        }
    }
}

/// Depth-first search from `i` for a cycle in the call graph; `state` is 0 for unvisited, 1 on
/// the current path and 2 when done. Returns a function on the cycle.
fn find_cycle(i: usize, calls: &[Vec<u32>], state: &mut [u8]) -> Option<usize> {
    state[i] = 1;
    for &j in &calls[i] {
        let j = j as usize;
        if state[j] == 1 {
            return Some(j);
        }
        if state[j] == 0 {
            if let Some(c) = find_cycle(j, calls, state) {
                return Some(c);
            }
        }
    }
    state[i] = 2;
    None
}
