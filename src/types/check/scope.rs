//! Stage 3, names: what a root-level name denotes (`Global`), where an expression is checked
//! and so which names it sees (`Place`), the numbered locals of parameters, lambdas and `each`
//! variables (`Scope`), and the checker's one table of root-level names with the lookups the
//! other concerns use (inputs, judges, module aliases).

use super::{diagnostics, Checker};
use crate::ir::Type;
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::Duplicate;
use std::collections::HashSet;

/// What a top-level name denotes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Global {
    Input(u32),
    Let(u32),
    Criterion(u32),
    Set(u32),
    Judge(u32),
    Fn(u32),
    Module(usize),
}

impl Global {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Global::Input(_) => "an input",
            Global::Let(_) => "a `let` value",
            Global::Criterion(_) => "a criterion",
            Global::Set(_) => "a set of criteria",
            Global::Judge(_) => "a judge",
            Global::Fn(_) => "a function",
            Global::Module(_) => "a module",
        }
    }
}

/// Where an expression is checked: decides which names are visible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Place {
    /// A function body in module `m`: parameters, functions and intrinsics only.
    Function,
    /// A gate, check or criterion attribute at step `n`: criteria declared before it.
    Step(usize),
    /// `score`: everything.
    Score,
    /// Input defaults, `let`s and example bindings: constants, inputs (lets only) and earlier lets.
    Constant,
}

/// The locals in scope, innermost last; `max_local` is how many the IR must reserve.
pub(super) struct Scope {
    pub(super) locals: Vec<(String, u32, Type)>,
    next_local: u32,
    pub(super) max_local: u32,
    pub(super) place: Place,
    /// In the `value` of a criterion made of sub-checks: their set, which `passed`, `failed` and
    /// `total` count.
    pub(super) checks: Option<(u32, Span)>,
}

impl Scope {
    pub(super) fn new(place: Place) -> Scope {
        Scope { locals: vec![], next_local: 0, max_local: 0, place, checks: None }
    }

    pub(super) fn push(&mut self, name: &str, ty: Type) -> u32 {
        let id = self.next_local;
        self.next_local += 1;
        self.max_local = self.max_local.max(self.next_local);
        self.locals.push((name.to_string(), id, ty));
        id
    }

    pub(super) fn pop(&mut self) {
        self.locals.pop();
    }

    pub(super) fn lookup(&self, name: &str) -> Option<(u32, Type)> {
        self.locals.iter().rev().find(|(n, _, _)| n == name).map(|(_, i, t)| (*i, t.clone()))
    }
}

impl Checker<'_> {
    /// Enter a root-level name; a second definition is reported and leaves the first.
    pub(super) fn define(&mut self, name: &str, g: Global, span: Span) {
        if let Some((prev, prev_span)) = self.globals.get(name).copied() {
            let first = (prev_span != Span::default()).then_some(prev_span);
            self.report(diagnostics::resolve_duplicate(span, Duplicate::Name { name, was: prev.describe(), first }));
            return;
        }
        self.globals.insert(name.to_string(), (g, span));
    }

    /// What a root-level name denotes.
    pub(super) fn global(&self, name: &str) -> Option<Global> {
        self.globals.get(name).map(|g| g.0)
    }

    /// What a root-level name denotes, and where it was defined.
    pub(super) fn global_at(&self, name: &str) -> Option<(Global, Span)> {
        self.globals.get(name).copied()
    }

    /// The module that `name` is an import alias of, in the module being checked.
    pub(super) fn module_alias(&self, name: &str) -> Option<usize> {
        self.module_aliases[self.current_module].get(name).copied()
    }

    /// The input `n` names; anything else is reported as `unknown_input`.
    pub(super) fn input_named(&mut self, n: &ast::Name) -> Option<u32> {
        match self.global(&n.text) {
            Some(Global::Input(i)) => Some(i),
            _ => {
                self.unknown_input(n);
                None
            }
        }
    }

    /// Report `n` as an unknown input (unless its declaration failed to parse).
    pub(super) fn unknown_input(&mut self, n: &ast::Name) {
        if self.broken.contains(&n.text) {
            return;
        }
        let candidates: Vec<String> = self.p.inputs.iter().map(|i| i.name.clone()).collect();
        self.report(diagnostics::resolve_unknown_input(n, candidates.iter().map(String::as_str)));
    }

    /// The judge `n` names; anything else is reported as `unknown_judge`.
    pub(super) fn lookup_judge(&mut self, n: &ast::Name) -> Option<u32> {
        match self.global(&n.text) {
            Some(Global::Judge(j)) => Some(j),
            None if self.broken.contains(&n.text) => None,
            other => {
                let candidates: Vec<String> = self.p.judges.iter().map(|j| j.name.clone()).collect();
                let found = other.map(Global::describe);
                self.report(diagnostics::resolve_unknown_judge(n, found, candidates.iter().map(String::as_str)));
                None
            }
        }
    }
}

/// Every criterion id declared in a file, at any depth.
pub(super) fn criterion_ids(file: &ast::File) -> HashSet<String> {
    fn group(g: &ast::Group, out: &mut HashSet<String>) {
        for m in &g.members {
            match m {
                ast::GroupMember::Criterion(c) => out.extend(c.id.as_ref().map(|n| n.text.clone())),
                ast::GroupMember::Group(sub) => group(sub, out),
            }
        }
    }
    let mut out = HashSet::new();
    for item in &file.items {
        match item {
            ast::Item::Criterion(c) => out.extend(c.id.as_ref().map(|n| n.text.clone())),
            ast::Item::Tier(t) => out.extend(t.criteria.iter().filter_map(|c| c.id.as_ref().map(|n| n.text.clone()))),
            ast::Item::Criteria(b) => {
                if let ast::CriteriaBody::Static(cs) = &b.body {
                    out.extend(cs.iter().filter_map(|c| c.id.as_ref().map(|n| n.text.clone())));
                }
            }
            ast::Item::Group(g) => group(g, &mut out),
            _ => {}
        }
    }
    out
}
