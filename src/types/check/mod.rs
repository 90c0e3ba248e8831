//! Stage 3, the checker proper: binds every name, type-checks every expression and elaborates
//! the loaded modules straight into an `ir::Program` (decision record 0001). This file holds
//! the checker's state and its entry point, `check_modules`; each sibling file adds the
//! `impl Checker` block of one concern:
//!
//! - `scope.rs`: what names denote, local scopes, and the name table with its lookups;
//! - `functions.rs`: function signatures, bodies and the recursion check;
//! - `decls.rs`: inputs, `let`s and the `reward` block;
//! - `judges.rs`: judges and their settings;
//! - `items.rs`: the root file in order: gates, criteria blocks, tiers, groups, the score;
//! - `criteria.rs`: one criterion: text, kind, attributes, verifier;
//! - `examples.rs`: `example` blocks;
//! - `exprs.rs`: expressions: literals, names, fields, indexes, `if`;
//! - `operators.rs`: unary, binary and comparison operators;
//! - `calls.rs`: calls of functions and intrinsics (overload resolution), higher-order list
//!   functions;
//! - `aggregate.rs`: aggregations over sets of criteria;
//! - `unify.rs`: the type algebra (assignability, joins, unification, coercion);
//! - `diagnostics.rs`: one constructor per diagnostic code the checker reports.

mod aggregate;
mod calls;
mod criteria;
mod decls;
mod diagnostics;
mod examples;
mod exprs;
mod functions;
mod items;
mod judges;
mod narrow;
mod operators;
mod scope;
mod unify;

use super::sig::lower_type;
use crate::diag::Diagnostic;
use crate::ir::{self, Const, Expr, Program, SiteTable, Type};
use crate::resolve::Module;
use crate::source::{SourceMap, Span};
use crate::syntax::ast;
use scope::Global;
use std::collections::{HashMap, HashSet};

/// A user function's signature, declared before any body is checked.
struct FnSig {
    name: String,
    params: Vec<(String, Type, Option<Expr>)>,
    ret: Type,
    span: Span,
    module: usize,
}

pub(super) struct Checker<'a> {
    sources: &'a SourceMap,
    diags: Vec<Diagnostic>,
    p: Program,
    /// Where each site of `p` lies: beside the program, never in it.
    sites: SiteTable,
    /// Root-level names.
    globals: HashMap<String, (Global, Span)>,
    /// Per module: its own functions and the modules it imports by alias.
    module_fns: Vec<HashMap<String, u32>>,
    module_aliases: Vec<HashMap<String, usize>>,
    module_names: Vec<String>,
    fn_sigs: Vec<FnSig>,
    current_module: usize,
    /// Calls between user functions, for the recursion check.
    calls: Vec<Vec<u32>>,
    current_fn: Option<u32>,
    /// Step index at which each static criterion is evaluated.
    criterion_step: Vec<usize>,
    /// Each steps: (set index, step index, judge used by its template if any).
    each_sets: HashMap<u32, usize>,
    /// Per judge name, the names `criteria ... each ... shows` blocks show it (template slots
    /// it may have besides the inputs it sees), gathered before judges are checked.
    shown_slots: HashMap<String, Vec<String>>,
    score_seen: Option<Span>,
    /// Ids of every criterion of the root file, to tell "declared later" from "unknown".
    all_criterion_ids: HashSet<String>,
    /// Names whose declarations failed to parse (already reported).
    broken: HashSet<String>,
    /// Paths proven not null where the checker is (`narrow.rs`), innermost last.
    narrowed: Vec<String>,
    /// The root rubric's directory: what a judge's `calibration "FILE"` is relative to.
    root_dir: Option<std::path::PathBuf>,
    /// Judges with a calibration, and where it was named (its maps' criteria are checked
    /// once every criterion is known).
    calibrations: Vec<(u32, Span)>,
}

/// Diagnostics that only repeat an earlier syntax error when a declaration failed to parse:
/// a name it declared (or one inside it) is unknown to everything after it.
const CASCADE_CODES: &[&str] = &[
    "rubric::resolve::unknown_name",
    "rubric::resolve::unknown_judge",
    "rubric::resolve::unknown_criterion",
    "rubric::resolve::unknown_set",
    "rubric::resolve::unknown_function",
    "rubric::resolve::unknown_input",
    "rubric::example::no_expectation",
    "rubric::facts::unused_criterion",
];

/// Check the loaded modules (in dependency order, the root rubric last) and elaborate them into
/// one program and the table of where its sites lie. The program is complete only when there
/// are no errors among the diagnostics.
pub(super) fn check_modules(sources: &SourceMap, modules: &[Module]) -> (Program, SiteTable, Vec<Diagnostic>) {
    let Some(root) = modules.last() else {
        // `types::check_loaded` never calls with no module; an empty program is the answer.
        let info = ir::RubricInfo { name: String::new(), version: String::new(), title: None };
        return (empty_program(info), SiteTable::default(), vec![]);
    };
    let mut c = Checker::new(sources, modules, &root.ast);
    c.root_dir = {
        let name = std::path::Path::new(&sources.get(root.file).name);
        name.is_file().then(|| name.parent().map(std::path::Path::to_path_buf).unwrap_or_default())
    };
    c.check_header(root);
    c.declare_modules(modules);
    c.check_module_bodies(modules);
    c.check_recursion();
    c.current_module = modules.len() - 1;
    c.check_root(&root.ast);
    if !root.ast.broken.is_empty() {
        c.diags.retain(|d| !CASCADE_CODES.contains(&d.code));
    }
    c.p.site_count = c.sites.len() as u32;
    (c.p, c.sites, c.diags)
}

/// `rubric::input::none` for a root rubric `p` that declares no input. Asked only of a program
/// without errors: a file cut short (an unclosed comment) has lost its inputs, and its error
/// says why.
pub(super) fn no_inputs(modules: &[Module], p: &Program) -> Option<Diagnostic> {
    let h = modules.last()?.ast.header.as_ref().filter(|h| h.kind == ast::HeaderKind::Rubric)?;
    p.inputs.is_empty().then(|| diagnostics::input_none(&h.name))
}

/// A program with nothing in it but the built-in set `all` and a null score.
fn empty_program(rubric: ir::RubricInfo) -> Program {
    Program {
        ir_version: ir::IR_VERSION,
        rubric,
        inputs: vec![],
        judges: vec![],
        functions: vec![],
        lets: vec![],
        steps: vec![],
        criteria: vec![],
        sets: vec![ir::SetDecl { name: "all".into(), kind: ir::SetKind::All, weight: None, members: vec![] }],
        score: Expr::constant(Const::Null),
        reward: None,
        scores: vec![],
        stats: vec![],
        generators: vec![],
        examples: vec![],
        site_count: 0,
        prepared: Default::default(),
    }
}

impl<'a> Checker<'a> {
    fn new(sources: &'a SourceMap, modules: &[Module], root: &ast::File) -> Checker<'a> {
        let rubric = match &root.header {
            Some(h) if h.kind == ast::HeaderKind::Rubric => ir::RubricInfo {
                name: h.name.text.clone(),
                version: h.version.as_ref().map(|v| v.value.clone()).unwrap_or_default(),
                title: h.title.as_ref().map(|t| t.value.clone()),
            },
            _ => ir::RubricInfo { name: String::new(), version: String::new(), title: None },
        };
        let mut c = Checker {
            sources,
            diags: vec![],
            p: empty_program(rubric),
            sites: SiteTable::default(),
            globals: HashMap::new(),
            module_fns: vec![HashMap::new(); modules.len()],
            module_aliases: vec![HashMap::new(); modules.len()],
            module_names: modules.iter().map(|m| m.name.clone()).collect(),
            fn_sigs: vec![],
            current_module: 0,
            calls: vec![],
            current_fn: None,
            criterion_step: vec![],
            each_sets: HashMap::new(),
            shown_slots: HashMap::new(),
            score_seen: None,
            all_criterion_ids: scope::criterion_ids(root),
            broken: root.broken.iter().cloned().collect(),
            narrowed: vec![],
            root_dir: None,
            calibrations: vec![],
        };
        c.globals.insert("all".into(), (Global::Set(0), Span::default()));
        c
    }

    /// Record a diagnostic (built by a `diagnostics` constructor).
    fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// A new site for `span`. Site ids number the nodes that can fail at run time in the order
    /// the checker meets them, which depends on what the rubric says, not on its layout: the
    /// span itself goes into the site table beside the program, never into the program.
    fn site(&mut self, span: Span) -> ir::SiteId {
        let file = if span.file.0 == u32::MAX {
            String::new()
        } else {
            let f = self.sources.get(span.file);
            f.module.clone().unwrap_or_else(|| f.name.clone())
        };
        self.sites.push(ir::Site { file, start: span.start, end: span.end })
    }

    /// A written type; an unknown one is reported and becomes `Any`.
    fn ty(&mut self, t: &ast::TypeExpr) -> Type {
        match lower_type(t, false) {
            Ok(t) => t,
            Err((span, message)) => {
                let written = self.sources.slice(span).to_string();
                self.report(diagnostics::type_unknown_type(span, message, &written));
                Type::Any
            }
        }
    }

    /// The root file must be a rubric with a header.
    fn check_header(&mut self, module: &Module) {
        let root = &module.ast;
        match &root.header {
            Some(h) if h.kind == ast::HeaderKind::Module => self.report(diagnostics::resolve_not_a_rubric(&h.name)),
            None if root.broken.iter().any(|b| b == crate::syntax::BROKEN_HEADER) => {}
            None if !root.items.is_empty() || root.span.end > 0 => {
                self.report(diagnostics::resolve_missing_header(Span::new(module.file, 0, 0)))
            }
            _ => {}
        }
    }

    /// The imports and function signatures of every module, so that order does not matter.
    fn declare_modules(&mut self, modules: &[Module]) {
        for (mi, m) in modules.iter().enumerate() {
            self.current_module = mi;
            for (alias_idx, pos) in &m.imports {
                if let ast::Item::Import(imp) = &m.ast.items[*pos] {
                    let alias = imp
                        .alias
                        .as_ref()
                        .map(|a| a.text.clone())
                        .unwrap_or_else(|| imp.path.text.rsplit('.').next().unwrap_or("").to_string());
                    self.module_aliases[mi].insert(alias.clone(), *alias_idx);
                    if mi == modules.len() - 1 {
                        self.define(&alias, Global::Module(*alias_idx), imp.path.span);
                    }
                }
            }
            for item in &m.ast.items {
                if let ast::Item::Fn(f) = item {
                    self.declare_fn(mi, f);
                }
            }
        }
    }

    /// The function bodies of every module; a module other than the root may hold nothing but
    /// imports and functions.
    fn check_module_bodies(&mut self, modules: &[Module]) {
        let mut fn_index = 0u32;
        for (mi, m) in modules.iter().enumerate() {
            self.current_module = mi;
            for item in &m.ast.items {
                if let ast::Item::Fn(f) = item {
                    self.check_fn_body(fn_index, f);
                    fn_index += 1;
                }
            }
            if mi + 1 < modules.len() {
                for item in &m.ast.items {
                    if !matches!(item, ast::Item::Fn(_) | ast::Item::Import(_)) {
                        self.report(diagnostics::resolve_module_item(&m.name, item.span()));
                    }
                }
            }
        }
    }
}
