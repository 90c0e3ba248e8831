//! The checker proper: scopes, name binding, type checking and elaboration into the IR.

use super::sig::{intrinsic_sig, lower_type};
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::{
    self, assignable, join, subst, template_slots, unify, AggOp, Bindings, Const, Expr, ExprKind, HigherOrder, Policy,
    Program, Type,
};
use crate::resolve::Module;
use crate::source::{SourceMap, Span};
use crate::stdlib;
use crate::syntax::ast;
use std::collections::HashMap;

/// What a top-level name denotes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Global {
    Input(u32),
    Let(u32),
    Criterion(u32),
    Set(u32),
    Judge(u32),
    Fn(u32),
    Module(usize),
}

impl Global {
    fn describe(self) -> &'static str {
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
enum Place {
    /// A function body in module `m`: parameters, functions and intrinsics only.
    Function,
    /// A gate, check or criterion attribute at step `n`: criteria declared before it.
    Step(usize),
    /// `score`: everything.
    Score,
    /// Input defaults, `let`s and example bindings: constants, inputs (lets only) and earlier lets.
    Constant,
}

struct Scope {
    locals: Vec<(String, u32, Type)>,
    next_local: u32,
    max_local: u32,
    place: Place,
}

impl Scope {
    fn new(place: Place) -> Scope {
        Scope { locals: vec![], next_local: 0, max_local: 0, place }
    }

    fn push(&mut self, name: &str, ty: Type) -> u32 {
        let id = self.next_local;
        self.next_local += 1;
        self.max_local = self.max_local.max(self.next_local);
        self.locals.push((name.to_string(), id, ty));
        id
    }

    fn pop(&mut self) {
        self.locals.pop();
    }

    fn lookup(&self, name: &str) -> Option<(u32, Type)> {
        self.locals.iter().rev().find(|(n, _, _)| n == name).map(|(_, i, t)| (*i, t.clone()))
    }
}

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
    score_seen: Option<Span>,
    /// Ids of every criterion of the root file, to tell "declared later" from "unknown".
    all_criterion_ids: std::collections::HashSet<String>,
    /// Names whose declarations failed to parse (already reported).
    broken: std::collections::HashSet<String>,
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

pub(super) fn check_modules(sources: &SourceMap, modules: &[Module]) -> (Program, Vec<Diagnostic>) {
    let root = modules.last().expect("root module");
    let (name, version, title) = match &root.ast.header {
        Some(h) if h.kind == ast::HeaderKind::Rubric => (
            h.name.text.clone(),
            h.version.as_ref().map(|v| v.value.clone()).unwrap_or_default(),
            h.title.as_ref().map(|t| t.value.clone()),
        ),
        _ => (String::new(), String::new(), None),
    };
    let mut c = Checker {
        sources,
        diags: vec![],
        p: Program {
            ir_version: ir::IR_VERSION,
            rubric: ir::RubricInfo { name, version, title },
            inputs: vec![],
            judges: vec![],
            functions: vec![],
            lets: vec![],
            steps: vec![],
            criteria: vec![],
            sets: vec![ir::SetDecl { name: "all".into(), kind: ir::SetKind::All, weight: None, members: vec![] }],
            score: Expr::constant(Const::Null),
            reward: None,
            examples: vec![],
            sites: vec![],
        },
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
        score_seen: None,
        all_criterion_ids: criterion_ids(&root.ast),
        broken: root.ast.broken.iter().cloned().collect(),
    };
    c.globals.insert("all".into(), (Global::Set(0), Span::default()));
    match &root.ast.header {
        Some(h) if h.kind == ast::HeaderKind::Module => c.diags.push(
            Diagnostic::error("rubric::resolve::not_a_rubric", format!("`{}` is a module, not a rubric", h.name.text))
                .with_label(h.name.span, "declared as a module here")
                .with_help("run a file that starts with `rubric NAME @ VERSION`; modules are imported by rubrics"),
        ),
        None if root.ast.broken.iter().any(|b| b == crate::syntax::BROKEN_HEADER) => {}
        None if !root.ast.items.is_empty() || root.ast.span.end > 0 => c.diags.push(
            Diagnostic::error("rubric::resolve::missing_header", "a rubric must start with `rubric NAME @ VERSION`")
                .with_label(Span::new(root.file, 0, 0), "expected here")
                .with_help("for example: `rubric my.rubric @ 1.0.0 \"What it grades\"`"),
        ),
        _ => {}
    }
    // Functions of every module: signatures first (so order does not matter), then bodies.
    for (mi, m) in modules.iter().enumerate() {
        c.current_module = mi;
        for (alias_idx, pos) in &m.imports {
            if let ast::Item::Import(imp) = &m.ast.items[*pos] {
                let alias = imp
                    .alias
                    .as_ref()
                    .map(|a| a.text.clone())
                    .unwrap_or_else(|| imp.path.text.rsplit('.').next().unwrap_or("").to_string());
                c.module_aliases[mi].insert(alias.clone(), *alias_idx);
                if mi == modules.len() - 1 {
                    c.define(&alias, Global::Module(*alias_idx), imp.path.span);
                }
            }
        }
        for item in &m.ast.items {
            if let ast::Item::Fn(f) = item {
                c.declare_fn(mi, f);
            }
        }
    }
    let mut fn_index = 0usize;
    for (mi, m) in modules.iter().enumerate() {
        c.current_module = mi;
        for item in &m.ast.items {
            if let ast::Item::Fn(f) = item {
                c.check_fn_body(fn_index as u32, f);
                fn_index += 1;
            }
        }
        if mi + 1 < modules.len() {
            for item in &m.ast.items {
                match item {
                    ast::Item::Fn(_) | ast::Item::Import(_) => {}
                    other => c.diags.push(
                        Diagnostic::error(
                            "rubric::resolve::module_item",
                            format!("module `{}` may only contain `import` and `fn` declarations", m.name),
                        )
                        .with_label(other.span(), "not allowed in a module"),
                    ),
                }
            }
        }
    }
    c.check_recursion();
    c.current_module = modules.len() - 1;
    c.check_root(&root.ast);
    if !root.ast.broken.is_empty() {
        c.diags.retain(|d| !CASCADE_CODES.contains(&d.code));
    }
    (c.p, c.diags)
}

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

fn cmpop(op: ast::CmpOp) -> ir::CmpOp {
    match op {
        ast::CmpOp::Eq => ir::CmpOp::Eq,
        ast::CmpOp::Ne => ir::CmpOp::Ne,
        ast::CmpOp::Lt => ir::CmpOp::Lt,
        ast::CmpOp::Le => ir::CmpOp::Le,
        ast::CmpOp::Gt => ir::CmpOp::Gt,
        ast::CmpOp::Ge => ir::CmpOp::Ge,
    }
}

impl<'a> Checker<'a> {
    fn err(&mut self, code: &'static str, span: Span, message: impl Into<String>, label: &str) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(code, message).with_label(span, label));
        self.diags.last_mut().unwrap()
    }

    fn site(&mut self, span: Span) -> ir::SiteId {
        let file = if span.file.0 == u32::MAX {
            String::new()
        } else {
            let f = self.sources.get(span.file);
            f.module.clone().unwrap_or_else(|| f.name.clone())
        };
        self.p.sites.push(ir::Site { file, start: span.start, end: span.end });
        (self.p.sites.len() - 1) as u32
    }

    fn define(&mut self, name: &str, g: Global, span: Span) {
        if let Some((prev, prev_span)) = self.globals.get(name).copied() {
            let d = Diagnostic::error("rubric::resolve::duplicate", format!("`{name}` is defined twice"))
                .with_label(span, "defined again here")
                .with_help(format!("`{name}` is already {}; every top-level name must be unique", prev.describe()));
            let d = if prev_span != Span::default() { d.with_label(prev_span, "first defined here") } else { d };
            self.diags.push(d);
            return;
        }
        self.globals.insert(name.to_string(), (g, span));
    }

    fn ty(&mut self, t: &ast::TypeExpr) -> Type {
        match lower_type(t, false) {
            Ok(t) => t,
            Err((span, msg)) => {
                let written = self.sources.slice(span).to_string();
                let h = did_you_mean(&written, super::sig::TYPE_NAMES.iter().copied());
                self.err("rubric::type::unknown_type", span, msg, "unknown type").help = Some(h.unwrap_or_else(|| {
                    "types are Text, Number, Bool, Json, Conversation, Message, List[T], {field: T} and T?".into()
                }));
                Type::Any
            }
        }
    }

    // ------------------------------------------------------------------ functions

    fn declare_fn(&mut self, module: usize, f: &ast::FnDef) {
        let idx = self.fn_sigs.len() as u32;
        let mut params = Vec::new();
        let mut scope = Scope::new(Place::Constant);
        for p in &f.params {
            let ty = self.ty(&p.ty);
            if params.iter().any(|(n, _, _): &(String, Type, Option<Expr>)| *n == p.name.text) {
                self.err(
                    "rubric::resolve::duplicate",
                    p.name.span,
                    format!("parameter `{}` is declared twice", p.name.text),
                    "again here",
                );
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
            self.err(
                "rubric::resolve::duplicate",
                f.name.span,
                format!("function `{}` is defined twice", f.name.text),
                "again here",
            );
        }
        self.module_fns[module].insert(f.name.text.clone(), idx);
        if module + 1 == self.module_fns.len() {
            self.define(&f.name.text, Global::Fn(idx), f.name.span);
        }
        self.fn_sigs.push(FnSig { name: f.name.text.clone(), params, ret, span: f.name.span, module });
        self.calls.push(vec![]);
    }

    fn check_fn_body(&mut self, idx: u32, f: &ast::FnDef) {
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

    fn check_recursion(&mut self) {
        // Depth-first search for a cycle in the call graph.
        let n = self.calls.len();
        let mut state = vec![0u8; n];
        fn visit(i: usize, calls: &[Vec<u32>], state: &mut [u8]) -> Option<usize> {
            state[i] = 1;
            for &j in &calls[i] {
                let j = j as usize;
                if state[j] == 1 {
                    return Some(j);
                }
                if state[j] == 0 {
                    if let Some(c) = visit(j, calls, state) {
                        return Some(c);
                    }
                }
            }
            state[i] = 2;
            None
        }
        for i in 0..n {
            if state[i] == 0 {
                if let Some(c) = visit(i, &self.calls, &mut state) {
                    let span = self.fn_sigs[c].span;
                    let name = self.fn_sigs[c].name.clone();
                    self.err("rubric::type::recursion", span, format!("function `{name}` calls itself"), "part of a call cycle")
                        .help = Some("rubric functions cannot recurse, so every rubric terminates; use list functions like `map` and `count` instead".into());
                    return;
                }
            }
        }
    }

    // ------------------------------------------------------------------ root items

    fn check_root(&mut self, file: &ast::File) {
        // Pass 1: inputs and judges can be referenced from anywhere.
        for item in &file.items {
            match item {
                ast::Item::Input(i) => self.input(i),
                ast::Item::Judge(j) => self.judge(j),
                _ => {}
            }
        }
        // Pass 2: everything else in order.
        for item in &file.items {
            match item {
                ast::Item::Let(l) => self.let_item(l),
                ast::Item::Gate(g) => self.gate(g),
                ast::Item::Criterion(c) => {
                    self.static_criterion(c, &[], None);
                }
                ast::Item::Criteria(b) => self.criteria_block(b),
                ast::Item::Tier(t) => {
                    let set = self.new_set(&t.name, ir::SetKind::Tier, None);
                    for c in &t.criteria {
                        if let Some(ci) = self.static_criterion(c, &[set], t.default_judge.as_ref()) {
                            self.p.sets[set as usize].members.push(ir::Member::Criterion(ci));
                        }
                    }
                }
                ast::Item::Group(g) => {
                    self.group(g, &[], None);
                }
                _ => {}
            }
        }
        // The score reads every criterion, wherever it is declared: check it last.
        for item in &file.items {
            if let ast::Item::Score(s) = item {
                if let Some(prev) = self.score_seen {
                    self.diags.push(
                        Diagnostic::error("rubric::resolve::duplicate", "the score is defined twice")
                            .with_label(s.span, "defined again here")
                            .with_label(prev, "first defined here"),
                    );
                    continue;
                }
                self.score_seen = Some(s.span);
                let mut scope = Scope::new(Place::Score);
                let e = self.expr(&s.expr, &mut scope, Some(&Type::Number));
                self.expect_type(&e.ty, &Type::Number, s.expr.span, "the score");
                self.p.score = e;
            }
        }
        if self.score_seen.is_none() {
            // Documented default: the weighted mean of every criterion, unscored propagates.
            self.p.score = Expr {
                kind: ExprKind::Aggregate {
                    op: AggOp::WeightedMean,
                    set: 0,
                    policy: Policy::Propagate,
                    args: vec![],
                    site: u32::MAX,
                },
                ty: Type::Number,
            };
            let site = self.site(file.header.as_ref().map_or(file.span, |h| h.span));
            if let ExprKind::Aggregate { site: s, .. } = &mut self.p.score.kind {
                *s = site;
            }
        }
        let mut reward_seen: Option<Span> = None;
        for item in &file.items {
            if let ast::Item::Reward(r) = item {
                if let Some(prev) = reward_seen {
                    self.diags.push(
                        Diagnostic::error("rubric::resolve::duplicate", "the reward is declared twice")
                            .with_label(r.span, "declared again here")
                            .with_label(prev, "first declared here"),
                    );
                    continue;
                }
                reward_seen = Some(r.span);
                self.reward(r);
            }
        }
        // `all` holds every static criterion and every per-instance block.
        let mut all = Vec::new();
        for (i, step) in self.p.steps.iter().enumerate() {
            match step {
                ir::Step::Criterion(c) => all.push(ir::Member::Criterion(*c)),
                ir::Step::Each(_) => all.push(ir::Member::Each(i as u32)),
                ir::Step::Gate(_) => {}
            }
        }
        self.p.sets[0].members = all;
        for item in &file.items {
            if let ast::Item::Example(e) = item {
                self.example(e);
            }
        }
    }

    fn input(&mut self, i: &ast::Input) {
        let ty = self.ty(&i.ty);
        let default = i.default.as_ref().map(|d| {
            let mut scope = Scope::new(Place::Constant);
            let e = coerce(self.expr(d, &mut scope, Some(&ty)), &ty);
            self.expect_type(&e.ty, &ty, d.span, "the default");
            e
        });
        let idx = self.p.inputs.len() as u32;
        self.p.inputs.push(ir::InputDecl { name: i.name.text.clone(), ty, default });
        self.define(&i.name.text, Global::Input(idx), i.name.span);
    }

    /// `reward { ... }`: each setting at most once, names from their closed lists, a penalty
    /// that is a `Number` and may read anything the score reads.
    fn reward(&mut self, r: &ast::RewardDef) {
        use ast::RewardSettingKind as K;
        let site = self.site(r.span);
        let mut d = ir::RewardDecl {
            advantage: ir::AdvantageForm::Zscore,
            epsilon: 1e-6,
            clip: None,
            penalty: None,
            unscored: ir::RewardUnscored::Exclude,
            uncovered: ir::Uncovered::Zero,
            site,
        };
        let mut seen: HashMap<&'static str, Span> = HashMap::new();
        for s in &r.settings {
            let word = match &s.kind {
                K::Advantage(_) => "advantage",
                K::Epsilon(_) => "epsilon",
                K::Clip(..) => "clip",
                K::Penalty(_) => "penalty",
                K::Unscored(_) => "unscored",
                K::Uncovered(_) => "uncovered",
            };
            if let Some(prev) = seen.insert(word, s.span) {
                self.diags.push(
                    Diagnostic::error("rubric::reward::duplicate_setting", format!("`{word}` is set twice"))
                        .with_label(s.span, "set again here")
                        .with_label(prev, "first set here"),
                );
                continue;
            }
            fn pick<T: Copy>(all: &[(&str, T)], n: &ast::Name) -> Option<T> {
                all.iter().find(|(w, _)| *w == n.text).map(|(_, v)| *v)
            }
            let unknown = |what: &str, n: &ast::Name, all: &[&str]| {
                Diagnostic::error("rubric::reward::unknown_value", format!("unknown {what} `{}`", n.text))
                    .with_label(n.span, "not one of the known values")
                    .with_help(format!(
                        "use one of {}",
                        all.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
                    ))
            };
            match &s.kind {
                K::Advantage(n) => match pick(ir::AdvantageForm::ALL, n) {
                    Some(v) => d.advantage = v,
                    None => {
                        let names: Vec<&str> = ir::AdvantageForm::ALL.iter().map(|x| x.0).collect();
                        self.diags.push(unknown("advantage form", n, &names));
                    }
                },
                K::Unscored(n) => match pick(ir::RewardUnscored::ALL, n) {
                    Some(v) => d.unscored = v,
                    None => {
                        let names: Vec<&str> = ir::RewardUnscored::ALL.iter().map(|x| x.0).collect();
                        self.diags.push(unknown("unscored rule", n, &names));
                    }
                },
                K::Uncovered(n) => match pick(ir::Uncovered::ALL, n) {
                    Some(v) => d.uncovered = v,
                    None => {
                        let names: Vec<&str> = ir::Uncovered::ALL.iter().map(|x| x.0).collect();
                        self.diags.push(unknown("credit for uncovered tokens", n, &names));
                    }
                },
                K::Epsilon(e) => {
                    if *e <= 0.0 {
                        self.diags.push(
                            Diagnostic::error("rubric::reward::bad_number", "`epsilon` must be above 0")
                                .with_label(s.span, format!("{e} is not above 0")),
                        );
                    }
                    d.epsilon = *e;
                }
                K::Clip(lo, hi) => {
                    if lo >= hi {
                        self.diags.push(
                            Diagnostic::error(
                                "rubric::reward::bad_number",
                                "`clip` needs its low bound below its high bound",
                            )
                            .with_label(s.span, format!("{lo} is not below {hi}")),
                        );
                    }
                    d.clip = Some((*lo, *hi));
                }
                K::Penalty(e) => {
                    let mut scope = Scope::new(Place::Score);
                    let x = self.expr(e, &mut scope, Some(&Type::Number));
                    self.expect_type(&x.ty, &Type::Number, e.span, "the penalty");
                    d.penalty = Some(x);
                }
            }
        }
        self.p.reward = Some(d);
    }

    fn let_item(&mut self, l: &ast::Let) {
        let declared = l.ty.as_ref().map(|t| self.ty(t));
        let mut scope = Scope::new(Place::Step(self.p.steps.len()));
        let e = self.expr(&l.value, &mut scope, declared.as_ref());
        let ty = match declared {
            Some(t) => {
                self.expect_type(&e.ty, &t, l.value.span, "this value");
                t
            }
            None => e.ty.clone(),
        };
        let idx = self.p.lets.len() as u32;
        self.p.lets.push(ir::LetDecl { name: l.name.text.clone(), ty, value: e });
        self.define(&l.name.text, Global::Let(idx), l.name.span);
    }

    fn judge(&mut self, j: &ast::Judge) {
        use ast::JudgeSettingKind as K;
        let mut d = ir::JudgeDecl {
            name: j.name.text.clone(),
            model: None,
            temperature: None,
            top_p: None,
            max_tokens: None,
            seed: None,
            samples: 1,
            vote: ir::Vote::Majority,
            sees: vec![],
            returns: "verdict".into(),
            reply_fields: vec![],
            evidence_from: None,
            template: None,
            system: None,
            scoring: ir::Scoring::Label,
            per_call: 1,
            local: None,
        };
        let mut seen: Vec<(std::mem::Discriminant<K>, Span)> = Vec::new();
        let mut evidence_span = None;
        let mut template_span = None;
        // Settings a local judge cannot honour, with where they were given.
        let mut not_local: Vec<(Span, &'static str)> = Vec::new();
        let mut local_span = None;
        for s in &j.settings {
            let disc = std::mem::discriminant(&s.kind);
            if let Some((_, prev)) = seen.iter().find(|(d, _)| *d == disc) {
                let prev = *prev;
                self.diags.push(
                    Diagnostic::error("rubric::judge::duplicate_setting", "this judge setting is given twice")
                        .with_label(s.span, "again here")
                        .with_label(prev, "first given here"),
                );
                continue;
            }
            seen.push((disc, s.span));
            match &s.kind {
                K::Model(m) => d.model = Some(m.value.clone()),
                K::Temperature(t) => {
                    if !(0.0..=2.0).contains(t) {
                        self.err(
                            "rubric::judge::invalid_setting",
                            s.span,
                            format!("temperature {t} is outside [0, 2]"),
                            "here",
                        );
                    }
                    d.temperature = Some(*t)
                }
                K::TopP(t) => {
                    if !(0.0..=1.0).contains(t) {
                        self.err(
                            "rubric::judge::invalid_setting",
                            s.span,
                            format!("top_p {t} is outside [0, 1]"),
                            "here",
                        );
                    }
                    d.top_p = Some(*t)
                }
                K::MaxTokens(n) => d.max_tokens = Some(self.positive_int(*n, s.span, "max_tokens")),
                K::Seed(n) => d.seed = Some(self.positive_int(*n, s.span, "seed") as u64),
                K::Samples(n) => {
                    d.samples = self.positive_int(*n, s.span, "samples").max(1);
                    // Each sample is a request per criterion; a bundle reader refuses more.
                    if d.samples > ir::validate::MAX_SAMPLES {
                        self.err(
                            "rubric::judge::invalid_setting",
                            s.span,
                            format!("`samples` is at most {}, found {}", ir::validate::MAX_SAMPLES, d.samples),
                            "here",
                        );
                    }
                    if d.samples > 1 {
                        not_local.push((s.span, "`samples` above 1 (a local judge's answer is deterministic)"));
                    }
                }
                K::PerCall(n) => {
                    d.per_call = self.positive_int(*n, s.span, "per_call").max(1);
                    if d.per_call > 1 {
                        not_local
                            .push((s.span, "`per_call` above 1 (a local judge asks about one criterion at a time)"));
                    }
                }
                K::Local(dir) => {
                    local_span = Some(s.span);
                    if dir.value.trim().is_empty() {
                        self.err("rubric::judge::invalid_setting", s.span, "`local` needs a model directory", "empty");
                    }
                    d.local = Some(dir.value.clone());
                }
                K::Vote(v) => {
                    d.vote = match v.text.as_str() {
                        "majority" => ir::Vote::Majority,
                        "mean" => ir::Vote::Mean,
                        "unanimous" => ir::Vote::Unanimous,
                        other => {
                            let h = did_you_mean(other, ["majority", "mean", "unanimous"]);
                            self.err(
                                "rubric::judge::invalid_setting",
                                v.span,
                                format!("unknown vote `{other}`"),
                                "here",
                            )
                            .help = Some(h.unwrap_or_else(|| "votes are `majority`, `mean` and `unanimous`".into()));
                            ir::Vote::Majority
                        }
                    }
                }
                K::Scoring(v) => {
                    if v.text == "label" {
                        not_local.push((s.span, "`scoring label` (a local judge scores by P(yes))"));
                    }
                    d.scoring = match v.text.as_str() {
                        "label" => ir::Scoring::Label,
                        "logprob" => ir::Scoring::Logprob,
                        other => {
                            self.err(
                                "rubric::judge::invalid_setting",
                                v.span,
                                format!("unknown scoring `{other}`"),
                                "here",
                            )
                            .help = Some("scoring is `label` or `logprob`".into());
                            ir::Scoring::Label
                        }
                    }
                }
                K::Sees(names) => {
                    for n in names {
                        match self.globals.get(&n.text).map(|g| g.0) {
                            Some(Global::Input(i)) => {
                                if !d.sees.contains(&i) {
                                    d.sees.push(i)
                                }
                            }
                            _ => self.unknown_input(n),
                        }
                    }
                }
                K::Returns { kind, fields } => {
                    if !["verdict", "level", "label", "value", "extract"].contains(&kind.text.as_str()) {
                        let h = did_you_mean(&kind.text, ["verdict", "level", "label", "value", "extract"]);
                        self.err(
                            "rubric::judge::invalid_setting",
                            kind.span,
                            format!("unknown reply kind `{}`", kind.text),
                            "here",
                        )
                        .help = Some(h.unwrap_or_else(|| {
                            "a judge returns `verdict`, `level`, `label`, `value` or `extract`".into()
                        }));
                    }
                    d.returns = kind.text.clone();
                    for f in fields {
                        let ty = if let ast::TypeExprKind::Named(n) = &f.ty.kind {
                            if n.text == "Quote" {
                                Type::Text
                            } else {
                                self.ty(&f.ty)
                            }
                        } else {
                            self.ty(&f.ty)
                        };
                        d.reply_fields.push((f.name.text.clone(), ty));
                    }
                }
                K::EvidenceQuote(n) => {
                    not_local.push((s.span, "an evidence rule (a local judge quotes nothing)"));
                    evidence_span = Some(n.span);
                    match self.globals.get(&n.text).map(|g| g.0) {
                        Some(Global::Input(i)) => d.evidence_from = Some(i),
                        _ => self.unknown_input(n),
                    }
                }
                K::Template(t) => {
                    template_span = Some(t.span);
                    d.template = Some(t.value.clone())
                }
                K::System(t) => d.system = Some(t.value.clone()),
            }
        }
        if let Some(local) = local_span {
            for (span, what) in not_local {
                self.diags.push(
                    Diagnostic::error(
                        "rubric::judge::local_setting",
                        format!("judge `{}` is a local model, which cannot take {what}", j.name.text),
                    )
                    .with_label(span, "not for a local judge")
                    .with_label(local, "a local model")
                    .with_help("remove the setting, or drop `local` to call the judge over HTTP"),
                );
            }
            // A local judge always scores by P(yes) / (P(yes) + P(no)).
            d.scoring = ir::Scoring::Logprob;
        }
        if let (Some(i), Some(span)) = (d.evidence_from, evidence_span) {
            if !d.sees.contains(&i) {
                let name = self.p.inputs[i as usize].name.clone();
                self.err(
                    "rubric::judge::hidden_input",
                    span,
                    format!("evidence must quote `{name}`, but judge `{}` does not see `{name}`", j.name.text),
                    "quoted input not shown to the judge",
                )
                .help = Some(format!("add `{name}` to the judge's `sees` list"));
            }
        }
        if let (Some(t), Some(span)) = (&d.template, template_span) {
            for slot in template_slots(t) {
                if ["criterion", "levels", "labels", "criteria"].contains(&slot.as_str()) {
                    continue;
                }
                match self.p.input_index(&slot) {
                    Some(i) if d.sees.contains(&(i as u32)) => {}
                    Some(_) => {
                        self.err(
                            "rubric::judge::hidden_input",
                            span,
                            format!("the template of judge `{}` renders `{slot}`, which the judge does not see", j.name.text),
                            "template",
                        )
                        .help = Some(format!("add `{slot}` to `sees` if the judge may see it; inputs a judge does not see never reach its prompt"));
                    }
                    None => {
                        self.err(
                            "rubric::judge::unknown_slot",
                            span,
                            format!("the template of judge `{}` has a slot `{{{{{slot}}}}}` that is not an input", j.name.text),
                            "template",
                        )
                        .help = Some("slots are `{{INPUT}}` for inputs the judge sees, and `{{criterion}}`, `{{criteria}}`, `{{levels}}`, `{{labels}}`".into());
                    }
                }
            }
        }
        let idx = self.p.judges.len() as u32;
        self.p.judges.push(d);
        self.define(&j.name.text, Global::Judge(idx), j.name.span);
    }

    fn positive_int(&mut self, n: f64, span: Span, what: &str) -> u32 {
        if n.fract() != 0.0 || n < 0.0 || n > u32::MAX as f64 {
            self.err(
                "rubric::judge::invalid_setting",
                span,
                format!("`{what}` must be a whole number, found {n}"),
                "here",
            );
            return 1;
        }
        n as u32
    }

    fn unknown_input(&mut self, n: &ast::Name) {
        if self.broken.contains(&n.text) {
            return;
        }
        let candidates: Vec<String> = self.p.inputs.iter().map(|i| i.name.clone()).collect();
        let h = did_you_mean(&n.text, candidates.iter().map(String::as_str));
        self.err("rubric::resolve::unknown_input", n.span, format!("no input named `{}`", n.text), "not an input")
            .help = Some(h.unwrap_or_else(|| "declare it with `input NAME: Type`".into()));
    }

    fn lookup_judge(&mut self, n: &ast::Name) -> Option<u32> {
        match self.globals.get(&n.text).map(|g| g.0) {
            Some(Global::Judge(j)) => Some(j),
            None if self.broken.contains(&n.text) => None,
            other => {
                let candidates: Vec<String> = self.p.judges.iter().map(|j| j.name.clone()).collect();
                let h = did_you_mean(&n.text, candidates.iter().map(String::as_str));
                let msg = match other {
                    Some(g) => format!("`{}` is {}, not a judge", n.text, g.describe()),
                    None => format!("no judge named `{}`", n.text),
                };
                self.err("rubric::resolve::unknown_judge", n.span, msg, "expected a judge").help =
                    Some(h.unwrap_or_else(|| "declare it with `judge NAME { model \"...\" }`".into()));
                None
            }
        }
    }

    fn gate(&mut self, g: &ast::Gate) {
        let step = self.p.steps.len();
        let mut scope = Scope::new(Place::Step(step));
        let cond = self.expr(&g.cond, &mut scope, Some(&Type::Bool));
        self.expect_type(&cond.ty, &Type::Bool, g.cond.span, "a gate condition");
        let (action, value_ast) = match &g.action {
            ast::GateAction::Score(e) => (ir::GateAction::Score, e),
            ast::GateAction::Cap(e) => (ir::GateAction::Cap, e),
        };
        let value = self.expr(value_ast, &mut scope, Some(&Type::Number));
        self.expect_type(&value.ty, &Type::Number, value_ast.span, "a gate's score");
        let site = self.site(g.span);
        self.p.steps.push(ir::Step::Gate(Box::new(ir::GateDecl {
            name: g.name.text.clone(),
            cond,
            action,
            value,
            reason: g.reason.as_ref().map(|r| r.value.clone()),
            site,
        })));
        // Gates are named for reports; the name must not clash with others.
        if let Some((_, prev)) = self.globals.get(&g.name.text).copied() {
            self.diags.push(
                Diagnostic::error("rubric::resolve::duplicate", format!("`{}` is defined twice", g.name.text))
                    .with_label(g.name.span, "gate named here")
                    .with_label(prev, "first defined here"),
            );
        }
    }

    fn new_set(&mut self, name: &ast::Name, kind: ir::SetKind, weight: Option<f64>) -> u32 {
        let idx = self.p.sets.len() as u32;
        self.p.sets.push(ir::SetDecl { name: name.text.clone(), kind, weight, members: vec![] });
        self.define(&name.text, Global::Set(idx), name.span);
        idx
    }

    fn criteria_block(&mut self, b: &ast::CriteriaBlock) {
        match &b.body {
            ast::CriteriaBody::Static(crits) => {
                let set = self.new_set(&b.name, ir::SetKind::Block, None);
                for c in crits {
                    if let Some(ci) = self.static_criterion(c, &[set], b.default_judge.as_ref()) {
                        self.p.sets[set as usize].members.push(ir::Member::Criterion(ci));
                    }
                }
            }
            ast::CriteriaBody::Each { var, list, template } => {
                let set = self.new_set(&b.name, ir::SetKind::Each, None);
                let step = self.p.steps.len();
                let mut scope = Scope::new(Place::Step(step));
                let list_e = self.expr(list, &mut scope, None);
                let elem = match list_e.ty.clone() {
                    Type::List(t) => *t,
                    Type::Any => Type::Any,
                    other => {
                        self.err(
                            "rubric::type::mismatch",
                            list.span,
                            format!("`criteria ... each` needs a list, found `{other}`"),
                            "not a list",
                        );
                        Type::Any
                    }
                };
                let local = scope.push(&var.text, elem);
                let decl = self.criterion_decl(template, &b.name.text, &mut scope, b.default_judge.as_ref(), vec![set]);
                scope.pop();
                if let Some(decl) = decl {
                    self.each_sets.insert(set, step);
                    self.p.steps.push(ir::Step::Each(Box::new(ir::EachDecl {
                        set,
                        list: list_e,
                        local,
                        locals: scope.max_local,
                        template: decl,
                    })));
                    self.p.sets[set as usize].members.push(ir::Member::Each(step as u32));
                }
            }
        }
    }

    fn group(&mut self, g: &ast::Group, parents: &[u32], default_judge: Option<&ast::Name>) -> Option<u32> {
        let weight = g.weight.as_ref().map(|w| self.constant_number(w, "a group weight"));
        if let (Some(x), Some(w)) = (weight, &g.weight) {
            // NaN: not a literal, already reported as `not_constant`.
            if !x.is_nan() && (x <= 0.0 || !x.is_finite()) {
                self.err(
                    "rubric::facts::weight",
                    w.span,
                    format!("group `{}` has weight {x}; weights must be positive", g.name.text),
                    "this weight",
                )
                .help = Some(
                    "a node's score is the weighted mean of its children; weights scale, they cannot be 0 or negative"
                        .into(),
                );
            }
        }
        let set = self.new_set(&g.name, ir::SetKind::Group, weight);
        let mut chain = vec![set];
        chain.extend_from_slice(parents);
        let judge = g.default_judge.as_ref().or(default_judge);
        for m in &g.members {
            match m {
                ast::GroupMember::Criterion(c) => {
                    if let Some(ci) = self.static_criterion(c, &chain, judge) {
                        self.p.sets[set as usize].members.push(ir::Member::Criterion(ci));
                    }
                }
                ast::GroupMember::Group(sub) => {
                    if let Some(si) = self.group(sub, &chain, judge) {
                        self.p.sets[set as usize].members.push(ir::Member::Set(si));
                    }
                }
            }
        }
        if g.members.is_empty() {
            self.err(
                "rubric::facts::empty_group",
                g.name.span,
                format!("group `{}` is empty", g.name.text),
                "no members",
            )
            .help = Some("a group's score is the weighted mean of its children; give it at least one".into());
        }
        Some(set)
    }

    fn constant_number(&mut self, e: &ast::Expr, what: &str) -> f64 {
        match &e.kind {
            ast::ExprKind::Number(n) => *n,
            ast::ExprKind::Unary(ast::UnOp::Neg, inner) => -self.constant_number(inner, what),
            _ => {
                self.err(
                    "rubric::type::not_constant",
                    e.span,
                    format!("{what} must be a number literal"),
                    "not a literal",
                );
                f64::NAN
            }
        }
    }

    /// A criterion with an id. Returns its index.
    fn static_criterion(&mut self, c: &ast::Criterion, sets: &[u32], default_judge: Option<&ast::Name>) -> Option<u32> {
        let id = c.id.as_ref()?;
        let step = self.p.steps.len();
        let mut scope = Scope::new(Place::Step(step));
        let decl = self.criterion_decl(c, &id.text, &mut scope, default_judge, sets.to_vec())?;
        let idx = self.p.criteria.len() as u32;
        self.p.criteria.push(decl);
        self.criterion_step.push(step);
        self.p.steps.push(ir::Step::Criterion(idx));
        self.define(&id.text, Global::Criterion(idx), id.span);
        Some(idx)
    }

    fn criterion_decl(
        &mut self,
        c: &ast::Criterion,
        id: &str,
        scope: &mut Scope,
        default_judge: Option<&ast::Name>,
        sets: Vec<u32>,
    ) -> Option<ir::CriterionDecl> {
        let text = match &c.text {
            Some(t) => {
                let e = self.expr(t, scope, Some(&Type::Text));
                self.expect_type(&e.ty, &Type::Text, t.span, "criterion text");
                e
            }
            None => Expr::constant(Const::Null),
        };
        let mut kind = ir::CriterionKind::Binary;
        let mut kind_span: Option<Span> = None;
        let mut points = None;
        let mut weight = None;
        let mut axis = None;
        let mut tags = None;
        let mut pass = None;
        for a in &c.attrs {
            let mut set_kind = |this: &mut Self, k: ir::CriterionKind| {
                if let Some(prev) = kind_span {
                    this.diags.push(
                        Diagnostic::error("rubric::type::criterion_kind", "a criterion has one kind")
                            .with_label(a.span, "second kind")
                            .with_label(prev, "first kind")
                            .with_help(
                                "choose one of binary (the default), `ordinal [...]`, `nominal {...}` or `continuous`",
                            ),
                    );
                }
                kind_span = Some(a.span);
                kind = k;
            };
            match &a.kind {
                ast::AttrKind::Points(e) => {
                    let x = self.expr(e, scope, Some(&Type::Number));
                    self.expect_type(&x.ty, &Type::Number, e.span, "points");
                    points = Some(x);
                }
                ast::AttrKind::Weight(e) => {
                    let x = self.expr(e, scope, Some(&Type::Number));
                    self.expect_type(&x.ty, &Type::Number, e.span, "a weight");
                    weight = Some(x);
                }
                ast::AttrKind::Pass(e) => {
                    let x = self.expr(e, scope, Some(&Type::Number));
                    self.expect_type(&x.ty, &Type::Number, e.span, "a pass threshold");
                    pass = Some(x);
                }
                ast::AttrKind::Tags(e) => {
                    let want = Type::List(Box::new(Type::Text));
                    let x = self.expr(e, scope, Some(&want));
                    self.expect_type(&x.ty, &want, e.span, "tags");
                    tags = Some(x);
                }
                ast::AttrKind::Axis(s) => axis = Some(s.value.clone()),
                ast::AttrKind::Continuous => set_kind(self, ir::CriterionKind::Continuous),
                ast::AttrKind::Ordinal(levels) => {
                    let mut lv: Vec<(f64, String)> = Vec::new();
                    for l in levels {
                        if lv.iter().any(|(v, _)| *v == l.value) {
                            self.err(
                                "rubric::type::criterion_kind",
                                l.span,
                                format!("level {} is listed twice", l.value),
                                "again here",
                            );
                        }
                        lv.push((l.value, l.descriptor.value.clone()));
                    }
                    if lv.len() < 2 {
                        self.err(
                            "rubric::type::criterion_kind",
                            a.span,
                            "an ordinal criterion needs at least two levels",
                            "here",
                        );
                    }
                    if lv.windows(2).any(|w| w[0].0 >= w[1].0) {
                        self.err(
                            "rubric::type::criterion_kind",
                            a.span,
                            "ordinal levels must be listed in increasing order",
                            "here",
                        );
                    }
                    set_kind(self, ir::CriterionKind::Ordinal { levels: lv });
                }
                ast::AttrKind::Nominal(labels) => {
                    let mut lb: Vec<(String, f64)> = Vec::new();
                    for l in labels {
                        if lb.iter().any(|(n, _)| *n == l.name.value) {
                            self.err(
                                "rubric::type::criterion_kind",
                                l.span,
                                format!("label `{}` is listed twice", l.name.value),
                                "again here",
                            );
                        }
                        if !(0.0..=1.0).contains(&l.value) {
                            self.err(
                                "rubric::facts::value_range",
                                l.span,
                                format!("label value {} is outside [0, 1]", l.value),
                                "here",
                            )
                            .help = Some("nominal labels map to values in [0, 1]; use `points` to scale".into());
                        }
                        lb.push((l.name.value.clone(), l.value));
                    }
                    set_kind(self, ir::CriterionKind::Nominal { labels: lb });
                }
            }
        }
        let verifier = match &c.verifier {
            Some(v) => match &v.kind {
                ast::VerifierKind::Judge(j) => ir::Verifier::Judge { judge: self.lookup_judge(j)? },
                ast::VerifierKind::Check(e) => {
                    if kind_span.is_some() && !matches!(kind, ir::CriterionKind::Binary) {
                        self.err(
                            "rubric::type::criterion_kind",
                            v.span,
                            "a `check` decides a binary criterion",
                            "check",
                        )
                        .help = Some("use `value EXPR` for a continuous criterion computed deterministically".into());
                    }
                    let x = self.expr(e, scope, Some(&Type::Bool));
                    self.expect_type(&x.ty, &Type::Bool, e.span, "a check");
                    ir::Verifier::Check { expr: x }
                }
                ast::VerifierKind::Value(e) => {
                    if kind_span.is_none() {
                        kind = ir::CriterionKind::Continuous;
                    } else if !matches!(kind, ir::CriterionKind::Continuous) {
                        self.err(
                            "rubric::type::criterion_kind",
                            v.span,
                            "`value` computes a continuous criterion",
                            "value",
                        );
                    }
                    let x = self.expr(e, scope, Some(&Type::Number));
                    self.expect_type(&x.ty, &Type::Number, e.span, "a value");
                    ir::Verifier::Value { expr: x }
                }
                ast::VerifierKind::Extract { var, ty, from, judge, check } => {
                    let judge = self.lookup_judge(judge)?;
                    let from_idx = match self.globals.get(&from.text).map(|g| g.0) {
                        Some(Global::Input(i)) => i,
                        _ => {
                            self.unknown_input(from);
                            return None;
                        }
                    };
                    if !self.p.judges[judge as usize].sees.contains(&from_idx) {
                        let jn = self.p.judges[judge as usize].name.clone();
                        self.err(
                            "rubric::judge::hidden_input",
                            from.span,
                            format!("judge `{jn}` extracts from `{}` but does not see it", from.text),
                            "not shown to the judge",
                        )
                        .help = Some(format!("add `{}` to the judge's `sees` list", from.text));
                    }
                    let t = self.ty(ty);
                    if !matches!(t, Type::Number | Type::Text | Type::Bool | Type::Any) {
                        self.err(
                            "rubric::type::mismatch",
                            ty.span,
                            format!("an extracted value is Number, Text or Bool, not `{t}`"),
                            "here",
                        );
                    }
                    let local = scope.push(&var.text, t.clone());
                    let x = self.expr(check, scope, Some(&Type::Bool));
                    scope.pop();
                    self.expect_type(&x.ty, &Type::Bool, check.span, "a check");
                    ir::Verifier::Extract { judge, from: from_idx, ty: t, local, check: x }
                }
            },
            None => match default_judge {
                Some(j) => ir::Verifier::Judge { judge: self.lookup_judge(j)? },
                None => {
                    self.err(
                        "rubric::resolve::no_verifier",
                        c.span,
                        format!("criterion `{id}` has no verifier"),
                        "how is this decided?",
                    )
                    .help = Some(
                        "add `by JUDGE`, `check EXPR` or `value EXPR`, or put it in a block with `by JUDGE`".into(),
                    );
                    return None;
                }
            },
        };
        if let ir::Verifier::Judge { judge } | ir::Verifier::Extract { judge, .. } = &verifier {
            let j = &self.p.judges[*judge as usize];
            if j.local.is_some() {
                let what = match (&verifier, &kind) {
                    (ir::Verifier::Extract { .. }, _) => Some("extract values"),
                    (_, ir::CriterionKind::Ordinal { .. }) => Some("score an ordinal criterion"),
                    (_, ir::CriterionKind::Nominal { .. }) => Some("score a nominal criterion"),
                    _ => None,
                };
                if let Some(what) = what {
                    let name = j.name.clone();
                    let span = c.verifier.as_ref().map_or(c.span, |v| v.span);
                    self.err(
                        "rubric::judge::local_kind",
                        span,
                        format!("judge `{name}` is a local model, which cannot {what}"),
                        "decided by a local judge",
                    )
                    .help = Some(
                        "a local judge scores binary and continuous criteria by P(yes); make the criterion binary or \
                         continuous, or give it a judge with a `model`"
                            .into(),
                    );
                }
            }
        }
        let site = self.site(c.span);
        Some(ir::CriterionDecl {
            id: id.to_string(),
            text,
            kind,
            points,
            weight,
            axis,
            tags,
            pass,
            verifier,
            sets,
            site,
        })
    }

    // ------------------------------------------------------------------ examples

    fn example(&mut self, e: &ast::Example) {
        let mut bindings: Vec<(u32, Expr)> = Vec::new();
        let mut verdicts: Vec<(String, serde_json::Value)> = Vec::new();
        let mut expects = Vec::new();
        for s in &e.stmts {
            match &s.kind {
                ast::ExampleStmtKind::Bind { input, value } => match self.globals.get(&input.text).map(|g| g.0) {
                    Some(Global::Input(i)) => {
                        let ty = self.p.inputs[i as usize].ty.clone();
                        let mut scope = Scope::new(Place::Constant);
                        let v = coerce(self.expr(value, &mut scope, Some(&ty)), &ty);
                        self.expect_type(&v.ty, &ty, value.span, "this example value");
                        if bindings.iter().any(|(j, _)| *j == i) {
                            self.err(
                                "rubric::example::duplicate",
                                input.span,
                                format!("`{}` is bound twice", input.text),
                                "again here",
                            );
                        }
                        bindings.push((i, v));
                    }
                    _ => self.unknown_input(input),
                },
                ast::ExampleStmtKind::Judge { judge, verdicts: vs } => {
                    let Some(j) = self.lookup_judge(judge) else { continue };
                    for (key, lit) in vs {
                        let Some(cid) = self.example_criterion(key, Some(j)) else { continue };
                        let mut v = verdict_json(&lit.kind);
                        if let Some(e) = &lit.evidence {
                            // The quote belongs to every sample of a sample list.
                            v = match &lit.kind {
                                ast::VerdictLitKind::Samples(xs) => serde_json::json!({
                                    "samples": xs.iter().map(|x| serde_json::json!({ "verdict": verdict_json(&x.kind), "evidence": e.value })).collect::<Vec<_>>()
                                }),
                                _ => serde_json::json!({ "verdict": v, "evidence": e.value }),
                            };
                        }
                        verdicts.push((cid, v));
                    }
                }
                ast::ExampleStmtKind::ExpectScore { value, within } => {
                    let site = self.site(s.span);
                    expects.push(ir::Expect::Score { value: *value, within: within.unwrap_or(1e-9), site });
                }
                ast::ExampleStmtKind::ExpectFailure(class) => {
                    let site = self.site(s.span);
                    expects.push(ir::Expect::Failure { class: class.as_ref().map(|c| c.value.clone()), site });
                }
                ast::ExampleStmtKind::ExpectGroup { group, value, within } => {
                    match self.globals.get(&group.text).map(|g| g.0) {
                        Some(Global::Set(s)) if self.p.sets[s as usize].kind == ir::SetKind::Group => {}
                        _ => {
                            let groups: Vec<String> = self
                                .p
                                .sets
                                .iter()
                                .filter(|s| s.kind == ir::SetKind::Group)
                                .map(|s| s.name.clone())
                                .collect();
                            let h = did_you_mean(&group.text, groups.iter().map(String::as_str));
                            self.err(
                                "rubric::resolve::unknown_set",
                                group.span,
                                format!("no group named `{}`", group.text),
                                "not a group",
                            )
                            .help = Some(
                                h.unwrap_or_else(|| "`expect group` names a `group NAME weight W { ... }`".into()),
                            );
                        }
                    }
                    let site = self.site(s.span);
                    expects.push(ir::Expect::Group {
                        name: group.text.clone(),
                        value: *value,
                        within: within.unwrap_or(1e-9),
                        site,
                    });
                }
                ast::ExampleStmtKind::ExpectCriterion { key, verdict } => {
                    let Some(cid) = self.example_criterion(key, None) else { continue };
                    let site = self.site(s.span);
                    expects.push(ir::Expect::Criterion { id: cid, verdict: verdict_json(&verdict.kind), site });
                }
            }
        }
        for (i, input) in self.p.inputs.iter().enumerate() {
            let bound = bindings.iter().any(|(j, _)| *j as usize == i);
            if !bound && input.default.is_none() && !input.ty.is_optional() {
                let name = input.name.clone();
                self.diags.push(
                    Diagnostic::error(
                        "rubric::example::missing_input",
                        format!("example `{}` does not bind input `{name}`", e.name.value),
                    )
                    .with_label(e.name.span, "this example")
                    .with_help(format!("add a line `{name} VALUE` to the example")),
                );
            }
        }
        if expects.is_empty() {
            self.diags.push(
                Diagnostic::warning(
                    "rubric::example::no_expectation",
                    format!("example `{}` expects nothing", e.name.value),
                )
                .with_label(e.name.span, "this example")
                .with_help(
                    "add `expect score N` or `expect CRITERION = met`: an example without expectations tests nothing",
                ),
            );
        }
        let site = self.site(e.span);
        self.p.examples.push(ir::Example { name: e.name.value.clone(), bindings, verdicts, expects, site });
    }

    /// Resolve an example's criterion key to a criterion id. With `judge`, the criterion must
    /// be decided by that judge.
    fn example_criterion(&mut self, key: &ast::CriterionKey, judge: Option<u32>) -> Option<String> {
        let g = self.globals.get(&key.name.text).map(|g| g.0);
        let uses = |v: &ir::Verifier| match v {
            ir::Verifier::Judge { judge: j } | ir::Verifier::Extract { judge: j, .. } => Some(*j),
            _ => None,
        };
        match (g, key.index) {
            (Some(Global::Criterion(c)), None) => {
                if let Some(j) = judge {
                    if uses(&self.p.criteria[c as usize].verifier) != Some(j) {
                        let jn = self.p.judges[j as usize].name.clone();
                        self.err(
                            "rubric::example::not_judged",
                            key.span,
                            format!("criterion `{}` is not decided by judge `{jn}`", key.name.text),
                            "here",
                        );
                        return None;
                    }
                }
                Some(key.id())
            }
            (Some(Global::Set(s)), Some(_)) if self.each_sets.contains_key(&s) => {
                if let Some(j) = judge {
                    let step = self.each_sets[&s];
                    if let ir::Step::Each(e) = &self.p.steps[step] {
                        if uses(&e.template.verifier) != Some(j) {
                            let jn = self.p.judges[j as usize].name.clone();
                            self.err(
                                "rubric::example::not_judged",
                                key.span,
                                format!("criteria `{}` are not decided by judge `{jn}`", key.name.text),
                                "here",
                            );
                            return None;
                        }
                    }
                }
                Some(key.id())
            }
            (Some(Global::Set(_)), None)
                if self.each_sets.contains_key(&match g {
                    Some(Global::Set(s)) => s,
                    _ => u32::MAX,
                }) =>
            {
                self.err(
                    "rubric::example::index_needed",
                    key.span,
                    format!("`{}` holds per-instance criteria; name one as `{}[i]`", key.name.text, key.name.text),
                    "here",
                );
                None
            }
            _ => {
                let candidates: Vec<String> = self.p.criteria.iter().map(|c| c.id.clone()).collect();
                let h = did_you_mean(&key.name.text, candidates.iter().map(String::as_str));
                self.err(
                    "rubric::resolve::unknown_criterion",
                    key.span,
                    format!("no criterion named `{}`", key.id()),
                    "here",
                )
                .help = h;
                None
            }
        }
    }

    // ------------------------------------------------------------------ expressions

    fn expect_type(&mut self, found: &Type, want: &Type, span: Span, what: &str) {
        if !assignable(found, want) {
            let mut d =
                Diagnostic::error("rubric::type::mismatch", format!("{what} must be `{want}`, found `{found}`"))
                    .with_label(span, format!("this is `{found}`"));
            if let Type::Optional(inner) = found {
                if assignable(inner, want) {
                    d = d.with_help("this value may be null: give a fallback with `??`, e.g. `x ?? 0`");
                }
            } else if *found == Type::Verdict && (*want == Type::Bool || *want == Type::Number) {
                d = d.with_help("a criterion is a verdict: use `.met` (Bool) or `.value` (Number)");
            } else if *found == Type::Bool && *want == Type::Number {
                d = d.with_help("turn a condition into a number with `if COND then 1 else 0`");
            }
            self.diags.push(d);
        }
    }

    fn bad(&self) -> Expr {
        Expr { kind: ExprKind::Const(Const::Null), ty: Type::Any }
    }

    fn expr(&mut self, e: &ast::Expr, scope: &mut Scope, expected: Option<&Type>) -> Expr {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.expr_inner(e, scope, expected))
    }

    fn expr_inner(&mut self, e: &ast::Expr, scope: &mut Scope, expected: Option<&Type>) -> Expr {
        use ast::ExprKind as A;
        match &e.kind {
            A::Number(n) => Expr::constant(Const::Number(*n)),
            A::Str(s) => Expr::constant(Const::Text(s.clone())),
            A::Bool(b) => Expr::constant(Const::Bool(*b)),
            A::Null => Expr::constant(Const::Null),
            A::List(items) => {
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
                            self.err(
                                "rubric::type::mismatch",
                                it.span,
                                format!("list elements must share a type: `{elem}` and `{}`", x.ty),
                                "this element",
                            );
                        }
                    }
                    out.push(x);
                }
                if let (Type::Any, Some(w)) = (&elem, &want_elem) {
                    elem = w.clone();
                }
                Expr { kind: ExprKind::List(out), ty: Type::List(Box::new(elem)) }
            }
            A::Record(fields) => {
                let want: Option<Vec<(String, Type)>> = match expected.map(Type::strip_optional) {
                    Some(Type::Record(f)) => Some(f.clone()),
                    _ => None,
                };
                let mut out: Vec<(String, Expr)> = Vec::new();
                for (n, v) in fields {
                    if out.iter().any(|(m, _)| *m == n.text) {
                        self.err(
                            "rubric::type::duplicate_field",
                            n.span,
                            format!("field `{}` is given twice", n.text),
                            "again here",
                        );
                        continue;
                    }
                    let wf = want.as_ref().and_then(|w| w.iter().find(|(m, _)| *m == n.text).map(|(_, t)| t.clone()));
                    let x = self.expr(v, scope, wf.as_ref());
                    out.push((n.text.clone(), x));
                }
                // Optional fields the expected record type has and the literal leaves out are null.
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
            A::Var(n) => self.var(n, scope),
            A::Field(base, name) => {
                if let A::Var(m) = &base.kind {
                    if scope.lookup(&m.text).is_none() {
                        if let Some(target) = self.module_alias(&m.text) {
                            self.err(
                                "rubric::type::not_a_value",
                                e.span,
                                format!(
                                    "`{}.{}` is a function of module `{}`; call it",
                                    m.text, name.text, self.module_names[target]
                                ),
                                "not called",
                            );
                            return self.bad();
                        }
                    }
                }
                let b = self.expr(base, scope, None);
                self.field(b, name, e.span)
            }
            A::Index(base, index) => {
                let b = self.expr(base, scope, None);
                let i = self.expr(index, scope, Some(&Type::Number));
                self.expect_type(&i.ty, &Type::Number, index.span, "an index");
                let ty = match &b.ty {
                    Type::List(t) => (**t).clone(),
                    Type::Any => Type::Any,
                    other => {
                        self.err(
                            "rubric::type::mismatch",
                            base.span,
                            format!("only lists can be indexed, found `{other}`"),
                            "not a list",
                        )
                        .help = Some("for JSON use `json_get(value, \"a.b[0]\")`".into());
                        Type::Any
                    }
                };
                let site = self.site(e.span);
                Expr { kind: ExprKind::Index { base: Box::new(b), index: Box::new(i), site }, ty }
            }
            A::Call { callee, args } => match &callee.kind {
                A::Var(n) if scope.lookup(&n.text).is_none() => self.call(None, n, args, e.span, scope),
                A::Field(m, n) => match &m.kind {
                    A::Var(mn) if scope.lookup(&mn.text).is_none() && self.module_alias(&mn.text).is_some() => {
                        let target = self.module_alias(&mn.text);
                        self.call(target, n, args, e.span, scope)
                    }
                    _ => {
                        self.err(
                            "rubric::type::not_callable",
                            callee.span,
                            "only functions can be called",
                            "not a function",
                        );
                        self.bad()
                    }
                },
                _ => {
                    self.err(
                        "rubric::type::not_callable",
                        callee.span,
                        "only functions can be called",
                        "not a function",
                    );
                    self.bad()
                }
            },
            A::Method { receiver, method, args } => {
                if let A::Var(mn) = &receiver.kind {
                    if scope.lookup(&mn.text).is_none() {
                        if let Some(target) = self.module_alias(&mn.text) {
                            return self.call(Some(target), method, args, e.span, scope);
                        }
                    }
                }
                let mut all = vec![ast::Arg { name: None, value: (**receiver).clone() }];
                all.extend(args.iter().cloned());
                self.call(None, method, &all, e.span, scope)
            }
            A::Unary(op, arg) => {
                let (want, irop) = match op {
                    ast::UnOp::Neg => (Type::Number, ir::UnOp::Neg),
                    ast::UnOp::Not => (Type::Bool, ir::UnOp::Not),
                };
                let x = self.expr(arg, scope, Some(&want));
                self.expect_type(
                    &x.ty,
                    &want,
                    arg.span,
                    if irop == ir::UnOp::Neg { "the operand of `-`" } else { "the operand of `not`" },
                );
                Expr { kind: ExprKind::Unary { op: irop, arg: Box::new(x) }, ty: want }
            }
            A::Binary(op, l, r) => self.binary(*op, l, r, e.span, scope, expected),
            A::Compare(first, rest) => {
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
                        let d = Diagnostic::error(
                            "rubric::type::mismatch",
                            format!("cannot compare `{prev_ty}` with `{}` using `{}`", x.ty, op.symbol()),
                        )
                        .with_label(operand.span, format!("this is `{}`", x.ty))
                        .with_label(prev_span, format!("this is `{prev_ty}`"));
                        let d = if prev_ty.is_optional() || x.ty.is_optional() {
                            d.with_help("a value that may be null must get a fallback first: `x ?? 0`")
                        } else if prev_ty == Type::Verdict || x.ty == Type::Verdict {
                            d.with_help("compare a criterion's `.met` or `.value`")
                        } else {
                            d
                        };
                        self.diags.push(d);
                    }
                    prev_ty = x.ty.clone();
                    prev_span = operand.span;
                    out.push((cmpop(*op), x));
                }
                Expr { kind: ExprKind::Compare { first: Box::new(f), rest: out }, ty: Type::Bool }
            }
            A::If(c, t, f) => {
                let cond = self.expr(c, scope, Some(&Type::Bool));
                self.expect_type(&cond.ty, &Type::Bool, c.span, "a condition");
                let a = self.expr(t, scope, expected);
                let b = self.expr(f, scope, expected.or(Some(&a.ty)));
                let ty = match join(&a.ty, &b.ty) {
                    Some(t) => t,
                    None => {
                        self.diags.push(
                            Diagnostic::error(
                                "rubric::type::mismatch",
                                format!("the branches of `if` have different types: `{}` and `{}`", a.ty, b.ty),
                            )
                            .with_label(t.span, format!("`{}`", a.ty))
                            .with_label(f.span, format!("`{}`", b.ty)),
                        );
                        Type::Any
                    }
                };
                Expr { kind: ExprKind::If { cond: Box::new(cond), then: Box::new(a), els: Box::new(b) }, ty }
            }
            A::Lambda(..) => {
                self.err(
                    "rubric::type::lambda_position",
                    e.span,
                    "a lambda `x => ...` may only be the last argument of `map`, `filter`, `all`, `any` or `count`",
                    "lambda here",
                );
                self.bad()
            }
        }
    }

    fn module_alias(&self, name: &str) -> Option<usize> {
        self.module_aliases[self.current_module].get(name).copied()
    }

    fn var(&mut self, n: &ast::Name, scope: &mut Scope) -> Expr {
        if let Some((i, t)) = scope.lookup(&n.text) {
            return Expr { kind: ExprKind::Local(i), ty: t };
        }
        let place = scope.place;
        let global = if place == Place::Function { None } else { self.globals.get(&n.text).copied() };
        match global {
            Some((Global::Input(i), _)) => {
                if place == Place::Constant {
                    self.err(
                        "rubric::type::not_constant",
                        n.span,
                        format!("`{}` is an input; this value must be a constant", n.text),
                        "input",
                    );
                    return self.bad();
                }
                Expr { kind: ExprKind::Input(i), ty: self.p.inputs[i as usize].ty.clone() }
            }
            Some((Global::Let(i), _)) => Expr { kind: ExprKind::Let(i), ty: self.p.lets[i as usize].ty.clone() },
            Some((Global::Criterion(c), _)) => {
                if let Place::Step(step) = place {
                    if self.criterion_step[c as usize] >= step {
                        self.err(
                            "rubric::resolve::forward_criterion",
                            n.span,
                            format!("criterion `{}` is evaluated after this point", n.text),
                            "not yet evaluated here",
                        )
                        .help = Some("a gate or check can read only criteria declared before it; move it below".into());
                        return self.bad();
                    }
                } else if place == Place::Constant {
                    self.err(
                        "rubric::type::not_constant",
                        n.span,
                        format!("criterion `{}` is not a constant", n.text),
                        "here",
                    );
                    return self.bad();
                }
                Expr { kind: ExprKind::Criterion(c), ty: Type::Verdict }
            }
            Some((Global::Set(_), _)) => {
                self.err("rubric::type::set_as_value", n.span, format!("`{}` is a set of criteria, not a value", n.text), "a set")
                    .help = Some(format!(
                    "aggregate it: `fraction({0})`, `weighted_mean({0})`, `points_ratio({0})`, `all({0})`, `tree({0})`...",
                    n.text
                ));
                self.bad()
            }
            Some((g, _)) => {
                self.err(
                    "rubric::type::not_a_value",
                    n.span,
                    format!("`{}` is {}, not a value", n.text, g.describe()),
                    "here",
                );
                self.bad()
            }
            None if self.broken.contains(&n.text) => self.bad(),
            None if place != Place::Function && self.all_criterion_ids.contains(&n.text) => {
                self.err(
                    "rubric::resolve::forward_criterion",
                    n.span,
                    format!("criterion `{}` is evaluated after this point", n.text),
                    "not yet evaluated here",
                )
                .help = Some(
                    "a gate, check or `let` can read only criteria declared before it; move it below the criterion"
                        .into(),
                );
                self.bad()
            }
            None => {
                let mut candidates: Vec<String> = scope.locals.iter().map(|l| l.0.clone()).collect();
                if place != Place::Function {
                    candidates.extend(self.globals.keys().cloned());
                }
                let h = did_you_mean(&n.text, candidates.iter().map(String::as_str));
                let msg = if place == Place::Function && self.globals.contains_key(&n.text) {
                    format!("`{}` is not visible inside a function", n.text)
                } else {
                    format!("unknown name `{}`", n.text)
                };
                self.err("rubric::resolve::unknown_name", n.span, msg, "not found").help =
                    Some(h.unwrap_or_else(|| {
                        if place == Place::Function {
                            "a function sees only its parameters; pass inputs in as arguments".into()
                        } else {
                            "declare it with `input`, `let` or `criterion`".into()
                        }
                    }));
                self.bad()
            }
        }
    }

    fn field(&mut self, b: Expr, name: &ast::Name, span: Span) -> Expr {
        let ty = match &b.ty {
            Type::Any => Type::Any,
            Type::Record(fields) => match fields.iter().find(|(n, _)| *n == name.text) {
                Some((_, t)) => t.clone(),
                None => {
                    let h = did_you_mean(&name.text, fields.iter().map(|(n, _)| n.as_str()));
                    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
                    self.err(
                        "rubric::type::unknown_field",
                        name.span,
                        format!("no field `{}` in `{}`", name.text, b.ty),
                        "unknown field",
                    )
                    .help = Some(h.unwrap_or_else(|| format!("the fields are: {}", names.join(", "))));
                    Type::Any
                }
            },
            Type::Verdict => match name.text.as_str() {
                "met" | "unscored" => Type::Bool,
                "value" | "points" | "weight" => Type::Number,
                other => {
                    let h = did_you_mean(other, ["met", "value", "points", "weight", "unscored"]);
                    self.err(
                        "rubric::type::unknown_field",
                        name.span,
                        format!("a verdict has no field `{other}`"),
                        "unknown field",
                    )
                    .help =
                        Some(h.unwrap_or_else(|| {
                            "a verdict has `met`, `value`, `points`, `weight` and `unscored`".into()
                        }));
                    Type::Any
                }
            },
            Type::Optional(_) => {
                self.err(
                    "rubric::type::maybe_null",
                    span,
                    format!("`{}` may be null, so `.{}` cannot be read directly", b.ty, name.text),
                    "may be null",
                )
                .help = Some("give a fallback first: `(x ?? {...}).field`".into());
                Type::Any
            }
            Type::Json => {
                self.err(
                    "rubric::type::unknown_field",
                    span,
                    "fields of `Json` values are read with `json_get`",
                    "Json",
                )
                .help = Some(format!("json_get(value, \"{}\")", name.text));
                Type::Any
            }
            other => {
                self.err("rubric::type::unknown_field", span, format!("`{other}` has no fields"), "no fields");
                Type::Any
            }
        };
        let site = self.site(span);
        Expr { kind: ExprKind::Field { base: Box::new(b), name: name.text.clone(), site }, ty }
    }

    fn binary(
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
                let b = self.expr(r, scope, Some(&Type::Bool));
                self.expect_type(&a.ty, &Type::Bool, l.span, &format!("an operand of `{}`", op.symbol()));
                self.expect_type(&b.ty, &Type::Bool, r.span, &format!("an operand of `{}`", op.symbol()));
                Expr {
                    kind: ExprKind::Binary { op: binop(op), lhs: Box::new(a), rhs: Box::new(b), site },
                    ty: Type::Bool,
                }
            }
            ast::BinOp::Coalesce => {
                let a = self.expr(l, scope, expected.map(|t| Type::optional(t.clone())).as_ref());
                let inner = a.ty.strip_optional().clone();
                let b = self.expr(r, scope, Some(&inner));
                if !a.ty.is_optional() && a.ty != Type::Any {
                    self.diags.push(
                        Diagnostic::warning("rubric::type::needless_coalesce", format!("`{}` is never null", a.ty))
                            .with_label(l.span, "never null")
                            .with_help("remove the `??` fallback"),
                    );
                }
                let ty = match join(&inner, &b.ty) {
                    Some(t) if inner == Type::Null => t,
                    Some(_) if assignable(&b.ty, &inner) => inner.clone(),
                    Some(t) => t,
                    None => {
                        self.err(
                            "rubric::type::mismatch",
                            r.span,
                            format!("the fallback must be `{inner}`, found `{}`", b.ty),
                            "fallback",
                        );
                        Type::Any
                    }
                };
                Expr {
                    kind: ExprKind::Binary { op: ir::BinOp::Coalesce, lhs: Box::new(a), rhs: Box::new(b), site },
                    ty,
                }
            }
            _ => {
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
                        let d = Diagnostic::error(
                            "rubric::type::mismatch",
                            format!(
                                "`{}` needs two numbers{}, found `{}` and `{}`",
                                op.symbol(),
                                if op == ast::BinOp::Add { " or two texts" } else { "" },
                                a.ty,
                                b.ty
                            ),
                        )
                        .with_label(l.span, format!("`{}`", a.ty))
                        .with_label(r.span, format!("`{}`", b.ty));
                        let d = if a.ty.is_optional() || b.ty.is_optional() {
                            d.with_help("a value that may be null must get a fallback first: `x ?? 0`")
                        } else if a.ty == Type::Verdict || b.ty == Type::Verdict {
                            d.with_help("use a criterion's `.value` (Number) in arithmetic")
                        } else if a.ty == Type::Bool || b.ty == Type::Bool {
                            d.with_help("turn a condition into a number with `if COND then 1 else 0`")
                        } else {
                            d
                        };
                        self.diags.push(d);
                        (binop(op), Type::Any)
                    }
                };
                Expr { kind: ExprKind::Binary { op: irop, lhs: Box::new(a), rhs: Box::new(b), site }, ty }
            }
        }
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
        // Aggregations over a set of criteria: the first argument names a set.
        if module.is_none() && scope.place != Place::Function {
            if let Some(agg) = AggOp::from_name(&name.text) {
                if let Some(ast::Arg { name: None, value }) = args.first() {
                    if let ast::ExprKind::Var(v) = &value.kind {
                        if scope.lookup(&v.text).is_none() {
                            if let Some((Global::Set(set), _)) = self.globals.get(&v.text).copied() {
                                return self.aggregate(agg, set, v, &args[1..], span, scope);
                            }
                            // A set whose declaration failed to parse: already reported.
                            if self.broken.contains(&v.text) {
                                return self.bad();
                            }
                        }
                    }
                }
                if agg == AggOp::Tree {
                    let at = args.first().map_or(span, |a| a.value.span);
                    self.err("rubric::type::mismatch", at, "`tree` takes a group", "not a group").help =
                        Some("declare `group NAME weight W { ... }` and write `tree(NAME)`".into());
                    return self.bad();
                }
            }
            // Higher-order list functions with a lambda as last argument.
            if let Some(ho) = match name.text.as_str() {
                "map" => Some(HigherOrder::Map),
                "filter" => Some(HigherOrder::Filter),
                "all" => Some(HigherOrder::All),
                "any" => Some(HigherOrder::Any),
                "count" => Some(HigherOrder::Count),
                _ => None,
            } {
                if args.len() == 2 && matches!(args[1].value.kind, ast::ExprKind::Lambda(..)) {
                    return self.higher_order(ho, &args[0].value, &args[1].value, scope);
                }
            }
        } else if module.is_none() {
            if let Some(ho) = match name.text.as_str() {
                "map" => Some(HigherOrder::Map),
                "filter" => Some(HigherOrder::Filter),
                "all" => Some(HigherOrder::All),
                "any" => Some(HigherOrder::Any),
                "count" => Some(HigherOrder::Count),
                _ => None,
            } {
                if args.len() == 2 && matches!(args[1].value.kind, ast::ExprKind::Lambda(..)) {
                    return self.higher_order(ho, &args[0].value, &args[1].value, scope);
                }
            }
        }
        // User functions: the current module's own, then (unqualified) nothing else; imported
        // functions are called through their module alias.
        let target_module = module.unwrap_or(self.current_module);
        if let Some(&f) = self.module_fns[target_module].get(&name.text) {
            if let Some(cur) = self.current_fn {
                self.calls[cur as usize].push(f);
            }
            let params: Vec<(String, Type, Option<Expr>)> = self.fn_sigs[f as usize].params.clone();
            let ret = self.fn_sigs[f as usize].ret.clone();
            let fname = self.fn_sigs[f as usize].name.clone();
            let Some(bound) = self.bind_args(&fname, &params, args, span, scope) else { return self.bad() };
            let site = self.site(span);
            return Expr { kind: ExprKind::Call { func: f, args: bound, site }, ty: ret };
        }
        if module.is_none() {
            // Functions of imported modules are visible unqualified when only one module has them.
            let mut found: Vec<usize> = self.module_aliases[self.current_module]
                .values()
                .copied()
                .filter(|m| self.module_fns[*m].contains_key(&name.text))
                .collect();
            found.sort_by(|a, b| self.module_names[*a].cmp(&self.module_names[*b]));
            found.dedup();
            match found.as_slice() {
                [m] => return self.call(Some(*m), name, args, span, scope),
                [] => {}
                many => {
                    let mods: Vec<String> = many.iter().map(|m| format!("`{}`", self.module_names[*m])).collect();
                    self.err(
                        "rubric::resolve::ambiguous",
                        name.span,
                        format!("`{}` is defined in several imported modules: {}", name.text, mods.join(", ")),
                        "ambiguous",
                    )
                    .help = Some("qualify the call with the module's alias, e.g. `text.f(x)`".into());
                    return self.bad();
                }
            }
        }
        if let Some(m) = module {
            let names: Vec<String> = self.module_fns[m].keys().cloned().collect();
            let h = did_you_mean(&name.text, names.iter().map(String::as_str));
            self.err(
                "rubric::resolve::unknown_function",
                name.span,
                format!("module `{}` has no function `{}`", self.module_names[m], name.text),
                "not found",
            )
            .help = h;
            return self.bad();
        }
        self.intrinsic_call(name, args, span, scope)
    }

    fn intrinsic_call(&mut self, name: &ast::Name, args: &[ast::Arg], span: Span, scope: &mut Scope) -> Expr {
        let overloads: Vec<(usize, &'static stdlib::Intrinsic)> = stdlib::lookup(&name.text).collect();
        if overloads.is_empty() {
            let mut names: Vec<&str> = stdlib::intrinsics().iter().map(|i| i.name).collect();
            names.extend(AggOp::ALL.iter().map(|a| a.name()));
            names.extend(["map", "filter", "all", "any", "count"]);
            let own: Vec<String> = self.module_fns[self.current_module].keys().cloned().collect();
            names.extend(own.iter().map(String::as_str));
            let h = did_you_mean(&name.text, names.iter().copied());
            if let Some((g, _)) = self.globals.get(&name.text).copied() {
                self.err(
                    "rubric::type::not_callable",
                    name.span,
                    format!("`{}` is {}, not a function", name.text, g.describe()),
                    "not a function",
                );
                return self.bad();
            }
            if AggOp::ALL.iter().any(|a| a.name() == name.text) {
                // an aggregation whose first argument is not a set (e.g. a single criterion)
                self.err(
                    "rubric::resolve::unknown_function",
                    name.span,
                    format!("`{}` is an aggregation, and its first argument is not a set of criteria", name.text),
                    "not a set",
                )
                .help = Some(format!(
                    "the first argument of `{}` must be `all` or the name of a `criteria`, `each`, `tier` or \
                     `group` block; to use one criterion, put it in a block",
                    name.text
                ));
                return self.bad();
            }
            self.err(
                "rubric::resolve::unknown_function",
                name.span,
                format!("unknown function `{}`", name.text),
                "not found",
            )
            .help = Some(h.unwrap_or_else(|| "see docs/stdlib.md for the standard library".into()));
            return self.bad();
        }
        // Check arguments once without expectations, then pick the first overload they fit.
        let mut arg_exprs = Vec::new();
        for a in args {
            if matches!(a.value.kind, ast::ExprKind::Lambda(..)) {
                self.err(
                    "rubric::type::lambda_position",
                    a.value.span,
                    format!("`{}` does not take a lambda", name.text),
                    "lambda here",
                );
                return self.bad();
            }
            // A literal list argument takes its element type from the first overload.
            arg_exprs.push((a.name.as_ref(), self.expr(&a.value, scope, None), a.value.span));
        }
        let mut errors = Vec::new();
        for (k, (index, _)) in overloads.iter().enumerate() {
            let Some(sig) = intrinsic_sig(*index) else { continue };
            match match_sig(sig, &arg_exprs) {
                Ok((bound, ret)) => {
                    // A constant regular expression is compiled now, not at the first row.
                    if let Some(sig) = intrinsic_sig(*index) {
                        for (pi, ((pname, _, _), arg)) in sig.params.iter().zip(&bound).enumerate() {
                            if pname != "pattern" {
                                continue;
                            }
                            let Some(p) = arg.as_text() else { continue };
                            if let Err(e) = regex::Regex::new(p) {
                                // The argument written for `pattern`: by name, else by position.
                                let at = args
                                    .iter()
                                    .find(|a| a.name.as_ref().is_some_and(|n| n.text == "pattern"))
                                    .or_else(|| args.iter().filter(|a| a.name.is_none()).nth(pi))
                                    .map_or(span, |a| a.value.span);
                                let msg = e.to_string();
                                let last = msg.lines().last().unwrap_or("").trim();
                                let last = last.strip_prefix("error: ").unwrap_or(last).to_string();
                                self.err(
                                    "rubric::type::bad_regex",
                                    at,
                                    format!("`{p}` is not a valid regular expression"),
                                    "here",
                                )
                                .help = Some(last);
                            }
                        }
                    }
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
        let (msg_span, msg) = errors.into_iter().next().unwrap_or((span, "no matching signature".into()));
        self.err(
            "rubric::type::bad_arguments",
            msg_span,
            format!("wrong arguments to `{}`: {msg}", name.text),
            "here",
        )
        .help = Some(format!("signature{}: {}", if sigs.len() > 1 { "s" } else { "" }, sigs.join("; ")));
        self.bad()
    }

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
                        let h = did_you_mean(&n.text, params.iter().map(|(p, _, _)| p.as_str()));
                        self.err(
                            "rubric::type::bad_arguments",
                            n.span,
                            format!("`{fname}` has no parameter `{}`", n.text),
                            "unknown parameter",
                        )
                        .help = h;
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
                self.err(
                    "rubric::type::bad_arguments",
                    a.value.span,
                    format!("`{fname}` takes {} arguments", params.len()),
                    "extra argument",
                );
                ok = false;
                continue;
            }
            let want = params[idx].1.clone();
            let x = coerce(self.expr(&a.value, scope, Some(&want)), &want);
            self.expect_type(&x.ty, &want, a.value.span, &format!("argument `{}` of `{fname}`", params[idx].0));
            if slots[idx].is_some() {
                self.err(
                    "rubric::type::bad_arguments",
                    a.value.span,
                    format!("argument `{}` is given twice", params[idx].0),
                    "again",
                );
                ok = false;
            }
            slots[idx] = Some(x);
        }
        let mut out = Vec::new();
        for (i, s) in slots.into_iter().enumerate() {
            match s {
                Some(x) => out.push(x),
                None => match &params[i].2 {
                    Some(d) => out.push(inline_default(d, scope)),
                    None => {
                        self.err(
                            "rubric::type::bad_arguments",
                            span,
                            format!("missing argument `{}` of `{fname}`", params[i].0),
                            "in this call",
                        );
                        ok = false;
                    }
                },
            }
        }
        ok.then_some(out)
    }

    fn aggregate(
        &mut self,
        op: AggOp,
        set: u32,
        set_name: &ast::Name,
        rest: &[ast::Arg],
        span: Span,
        scope: &mut Scope,
    ) -> Expr {
        let mut policy = Policy::Propagate;
        let mut extra = Vec::new();
        for a in rest {
            match &a.name {
                Some(n) if n.text == "unscored" => {
                    policy = match &a.value.kind {
                        ast::ExprKind::Var(v) => match v.text.as_str() {
                            "skip" => Policy::Skip,
                            "unmet" => Policy::Unmet,
                            "propagate" => Policy::Propagate,
                            other => {
                                let h = did_you_mean(other, ["skip", "unmet", "propagate"]);
                                self.err(
                                    "rubric::type::bad_policy",
                                    v.span,
                                    format!("unknown unscored policy `{other}`"),
                                    "here",
                                )
                                .help = Some(h.unwrap_or_else(|| "a policy is `skip`, `unmet` or `propagate`".into()));
                                Policy::Propagate
                            }
                        },
                        _ => {
                            self.err(
                                "rubric::type::bad_policy",
                                a.value.span,
                                "an unscored policy is `skip`, `unmet` or `propagate`",
                                "here",
                            );
                            Policy::Propagate
                        }
                    }
                }
                Some(n) => {
                    self.err(
                        "rubric::type::bad_arguments",
                        n.span,
                        format!("`{}` has no parameter `{}`", op.name(), n.text),
                        "here",
                    )
                    .help = Some(
                        "aggregations take a set, `unscored: skip|unmet|propagate` and, for `at_least`, a count".into(),
                    );
                }
                None => {
                    let x = self.expr(&a.value, scope, Some(&Type::Number));
                    self.expect_type(&x.ty, &Type::Number, a.value.span, "the count");
                    extra.push(x);
                }
            }
        }
        let want = usize::from(op == AggOp::AtLeast);
        if extra.len() != want {
            self.err(
                "rubric::type::bad_arguments",
                span,
                if want == 1 {
                    format!("`at_least` needs a count: `at_least({}, K)`", set_name.text)
                } else {
                    format!("`{}` takes one set", op.name())
                },
                "here",
            );
        }
        if op == AggOp::Tree && self.p.sets[set as usize].kind != ir::SetKind::Group {
            self.err(
                "rubric::type::mismatch",
                set_name.span,
                format!("`tree` takes a group; `{}` is not a group", set_name.text),
                "not a group",
            )
            .help = Some("declare `group NAME weight W { ... }`".into());
        }
        let site = self.site(span);
        Expr { kind: ExprKind::Aggregate { op, set, policy, args: extra, site }, ty: op.result_type() }
    }

    fn higher_order(&mut self, op: HigherOrder, list: &ast::Expr, lambda: &ast::Expr, scope: &mut Scope) -> Expr {
        let l = self.expr(list, scope, None);
        let elem = match &l.ty {
            Type::List(t) => (**t).clone(),
            Type::Any => Type::Any,
            other => {
                self.err(
                    "rubric::type::mismatch",
                    list.span,
                    format!("expected a list, found `{other}`"),
                    "not a list",
                );
                Type::Any
            }
        };
        let ast::ExprKind::Lambda(var, body) = &lambda.kind else { unreachable!("checked by caller") };
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

/// Match checked arguments against an intrinsic signature; returns the arguments in
/// parameter order (defaults filled) and the return type with type variables bound.
fn match_sig(
    sig: &super::IntrinsicSig,
    args: &[(Option<&ast::Name>, Expr, Span)],
) -> Result<(Vec<Expr>, Type), (Span, String)> {
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
                    "; it may be null: give a fallback with `??`"
                }
                _ => "",
            };
            return Err((
                *span,
                format!(
                    "`{}` must be `{}`, found `{}`{hint}",
                    sig.params[idx].0,
                    subst(&sig.params[idx].1, &bindings),
                    e.ty
                ),
            ));
        }
        slots[idx] = Some(e.clone());
    }
    let mut out = Vec::new();
    for (i, s) in slots.into_iter().enumerate() {
        match s {
            Some(x) => out.push(x),
            None => match &sig.params[i].2 {
                Some(c) => {
                    let mut d = Expr::constant(c.clone());
                    if matches!(c, Const::Null) {
                        d.ty = subst(&sig.params[i].1, &bindings);
                    }
                    out.push(d)
                }
                None => {
                    let at = args.last().map_or(Span::default(), |a| a.2);
                    return Err((at, format!("missing argument `{}`", sig.params[i].0)));
                }
            },
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
            ExprKind::Field { base, .. } | ExprKind::Unary { arg: base, .. } => rebase(base, scope, renamed),
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

/// Every criterion id declared in a file, at any depth.
fn criterion_ids(file: &ast::File) -> std::collections::HashSet<String> {
    fn group(g: &ast::Group, out: &mut std::collections::HashSet<String>) {
        for m in &g.members {
            match m {
                ast::GroupMember::Criterion(c) => out.extend(c.id.as_ref().map(|n| n.text.clone())),
                ast::GroupMember::Group(sub) => group(sub, out),
            }
        }
    }
    let mut out = std::collections::HashSet::new();
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

/// The JSON form of a recorded verdict, as in `--verdicts` files.
pub fn verdict_json(v: &ast::VerdictLitKind) -> serde_json::Value {
    use ast::VerdictLitKind as V;
    match v {
        V::Met => "met".into(),
        V::Unmet => "unmet".into(),
        V::Unscored(r) => serde_json::json!({ "unscored": r.clone().unwrap_or_else(|| "unscored".into()) }),
        V::Number(n) => crate::value::number_to_json(*n),
        V::Label(l) => serde_json::Value::String(l.clone()),
        V::Bool(b) => serde_json::Value::Bool(*b),
        V::Samples(xs) => {
            serde_json::json!({ "samples": xs.iter().map(|x| verdict_json(&x.kind)).collect::<Vec<_>>() })
        }
    }
}

/// Implicit conversions at binding sites: a `Text` where a `Conversation` is expected is one
/// user turn (as rows may give it).
fn coerce(e: Expr, want: &Type) -> Expr {
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
