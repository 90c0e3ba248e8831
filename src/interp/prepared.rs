//! What the engines compute once per program and share across its rows: each criterion's
//! result metadata as interned strings (its id, its source, the names of its sets, a constant
//! text: every row's result points at them instead of copying or counting them), the scan plan
//! of the constant patterns and repeated intrinsic calls of the program (`stdlib::scan`, made
//! when an engine that scans first asks for it: the JIT and Wasm engines' host), and
//! the text switches of its `if` chains ([`TextSwitch`]).
//!
//! Pipeline position: built from an `ir::Program` on first use ([`prepared`], kept in the
//! program's `prepared` slot) by the first row any engine evaluates; read by `driver` and, as
//! the plan of each row's `stdlib::EvalCtx`, by the intrinsics. It is never serialised and never
//! part of a program's bytes or hash; a clone of a program starts with an empty slot.

use crate::engine::{intern_names, Name};
use crate::ir::{walk, CriterionDecl, Expr, ExprKind, Program, Step, Verifier};
use crate::stdlib::scan::{PlannedCall, ScanPlan};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// A criterion's result metadata, interned (`engine::intern`): shared by every row's result.
#[derive(Debug, Clone)]
pub struct CriterionMeta {
    pub id: Name,
    /// `check`, `value`, `judge:NAME` or `extract:NAME`.
    pub source: Name,
    pub sets: &'static [Name],
    /// The criterion's text when it is a constant (most are).
    pub text: Option<Name>,
    /// Its points and weight when each is a constant or absent (most are): what evaluating them
    /// gives (`None` points, weight 1 for absent or non-number ones).
    pub numbers: Option<(Option<f64>, f64)>,
    /// Its axis when it has no tags (an `axis:NAME` tag may name one otherwise): the declared one.
    pub axis: Option<Option<Name>>,
}

impl CriterionMeta {
    pub fn of(p: &Program, d: &CriterionDecl) -> CriterionMeta {
        let judge_name = |j: u32| p.judges.get(j as usize).map_or("?", |j| j.name.as_str());
        let source = match &d.verifier {
            Verifier::Judge { judge } => format!("judge:{}", judge_name(*judge)),
            Verifier::Extract { judge, .. } => format!("extract:{}", judge_name(*judge)),
            Verifier::Check { .. } => "check".into(),
            Verifier::Value { .. } => "value".into(),
        };
        let sets: Vec<Name> =
            d.sets.iter().filter_map(|s| p.sets.get(*s as usize)).map(|s| Name::interned(&s.name)).collect();
        CriterionMeta {
            id: Name::interned(&d.id),
            source: Name::interned(&source),
            sets: intern_names(&sets),
            text: match &d.text.kind {
                ExprKind::Const(crate::ir::Const::Text(t)) => Some(Name::interned(t)),
                _ => None,
            },
            numbers: match (constant_number(&d.points), constant_number(&d.weight)) {
                (Some(points), Some(weight)) => Some((points, weight.unwrap_or(1.0))),
                _ => None,
            },
            axis: d.tags.is_none().then(|| d.axis.as_deref().map(Name::interned)),
        }
    }
}

/// What an optional number attribute evaluates to when it is absent or a constant (`Some(None)`
/// for an absent or non-number one); `None` when it must be evaluated per row.
fn constant_number(e: &Option<Expr>) -> Option<Option<f64>> {
    match e.as_ref().map(|e| &e.kind) {
        None => Some(None),
        Some(ExprKind::Const(crate::ir::Const::Number(n))) => Some(Some(*n)),
        Some(ExprKind::Const(_)) => Some(None),
        Some(_) => None,
    }
}

/// The per-program facts of one program.
pub struct Prepared {
    /// By static criterion index.
    pub criteria: Vec<CriterionMeta>,
    /// By step index: the template of each `each` step (instances get ids of their own).
    pub each: Vec<Option<CriterionMeta>>,
    /// The scan plan, made the first time an engine that scans asks for it ([`Prepared::scan`]):
    /// the interpreter computes every call as written and never does.
    scan: std::sync::OnceLock<Arc<ScanPlan>>,
    /// The program's `if` chains that dispatch on a text ([`TextSwitch`]), by the address of
    /// the head's condition (a boxed node of the program, which stays where it is while the
    /// program lives, wherever the program itself is moved).
    pub switches: FxHashMap<usize, TextSwitch>,
}

impl Prepared {
    /// The scan plan of `p` (whose facts these are), made on first use.
    pub fn scan(&self, p: &Program) -> &Arc<ScanPlan> {
        self.scan.get_or_init(|| Arc::new(scan_plan(p)))
    }

    pub fn of(p: &Program) -> Prepared {
        Prepared {
            criteria: p.criteria.iter().map(|d| CriterionMeta::of(p, d)).collect(),
            each: p
                .steps
                .iter()
                .map(|s| match s {
                    Step::Each(e) => Some(CriterionMeta::of(p, &e.template)),
                    _ => None,
                })
                .collect(),
            scan: std::sync::OnceLock::new(),
            switches: text_switches(p),
        }
    }
}

/// The prepared facts of `p`, computed on its first use.
pub fn prepared(p: &Program) -> &Prepared {
    let any = p.prepared.get_or_init(|| Arc::new(Prepared::of(p)));
    match any.downcast_ref::<Prepared>() {
        Some(prepared) => prepared,
        None => unreachable!("a program's prepared slot holds only `Prepared`"),
    }
}

/// Whether `e` is a leaf, or a field, list or intrinsic call of a few small expressions, at
/// most three levels deep (so that deciding it is cheap however deep `e` is).
fn small(e: &Expr, depth: u32) -> bool {
    if depth > 3 {
        return false;
    }
    match &e.kind {
        ExprKind::Const(_) | ExprKind::Input(_) | ExprKind::Local(_) | ExprKind::Let(_) => true,
        ExprKind::Field { base, .. } | ExprKind::Narrowed(base) => small(base, depth + 1),
        ExprKind::Intrinsic { args, .. } | ExprKind::List(args) => {
            args.len() <= 4 && args.iter().all(|a| small(a, depth + 1))
        }
        _ => false,
    }
}

/// Visit every expression of `p`: its roots, `let` values and function bodies.
fn walk_program(p: &Program, visit: &mut dyn FnMut(&Expr)) {
    for (_, e) in super::roots(p) {
        walk(e, visit);
    }
    for l in &p.lets {
        walk(&l.value, visit);
    }
    for f in &p.functions {
        walk(&f.body, visit);
    }
}

/// Every intrinsic call of `p` (every root, `let` and function body), as the scan plan reads
/// them: its constant second argument, and its arguments' form (calls of one intrinsic on equal
/// forms are what the memo serves).
fn scan_plan(p: &Program) -> ScanPlan {
    let mut calls = Vec::new();
    let mut visit = |e: &Expr| {
        let ExprKind::Intrinsic { name, overload, args, .. } = &e.kind else { return };
        let needle = match args.get(1).map(|a| &a.kind) {
            Some(ExprKind::Const(crate::ir::Const::Text(t))) => Some(t.clone()),
            _ => None,
        };
        // Only calls on small arguments get a form (the memo is for `f(response)`, not for a
        // call on a deep expression, whose form would cost its whole subtree to write).
        let form = if args.iter().all(|a| small(a, 0)) {
            serde_json::to_string(args).unwrap_or_default()
        } else {
            String::new()
        };
        calls.push(PlannedCall { name: name.clone(), overload: *overload, needle, form });
    };
    walk_program(p, &mut visit);
    ScanPlan::new(&calls)
}

/// A chain `if P == "a" then A else if P == "b" then B ... else Z` whose conditions all
/// compare one place `P` (an input, a local, a field of one) with a text constant: what
/// standard-library functions that dispatch on an id look like (`std.ifeval.follows_by_id`).
/// The interpreter finds the branch a text takes in this table instead of testing the
/// conditions one by one, and charges the work testing them would have (`interp::Walk`).
#[derive(Debug, Default)]
pub struct TextSwitch {
    /// For each constant, the level (0: the head) of the first condition that compares with it.
    pub levels: FxHashMap<Box<str>, u32>,
    /// The number of conditions in the chain (the level of its final `else`).
    pub len: u32,
}

/// Chains shorter than this are tested one by one (a lookup would not pay for itself).
const SWITCH_MIN: u32 = 4;

/// `P == "text"` or `"text" == P` with `P` a place: the place and the text.
pub fn text_test(cond: &Expr) -> Option<(&Expr, &str)> {
    let ExprKind::Compare { first, rest } = &cond.kind else { return None };
    let [(crate::ir::CmpOp::Eq, second)] = rest.as_slice() else { return None };
    let (place, text) = match (&first.kind, &second.kind) {
        (ExprKind::Const(crate::ir::Const::Text(t)), _) => (second, t),
        (_, ExprKind::Const(crate::ir::Const::Text(t))) => (&**first, t),
        _ => return None,
    };
    is_place(place).then_some((place, &**text))
}

/// An input, a local, or a field of one (narrowed or not): what reads the same value at every
/// condition of a chain.
fn is_place(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Input(_) | ExprKind::Local(_) => true,
        ExprKind::Narrowed(base) | ExprKind::Field { base, .. } => is_place(base),
        _ => false,
    }
}

/// Whether two places are the same place.
fn same_place(a: &Expr, b: &Expr) -> bool {
    match (&a.kind, &b.kind) {
        (ExprKind::Input(x), ExprKind::Input(y)) | (ExprKind::Local(x), ExprKind::Local(y)) => x == y,
        (ExprKind::Narrowed(x), ExprKind::Narrowed(y)) => same_place(x, y),
        (ExprKind::Field { base: x, name: m, .. }, ExprKind::Field { base: y, name: n, .. }) => {
            m == n && same_place(x, y)
        }
        _ => false,
    }
}

/// Every `if` chain of `p` of at least [`SWITCH_MIN`] text tests of one place, from its head
/// (the conditions inside a chain are not heads of their own).
fn text_switches(p: &Program) -> FxHashMap<usize, TextSwitch> {
    let mut switches = FxHashMap::default();
    let mut inside = FxHashSet::default();
    let mut visit = |e: &Expr| {
        let ExprKind::If { cond, els, .. } = &e.kind else { return };
        let key = &**cond as *const Expr as usize;
        let Some((place, text)) = text_test(cond) else { return };
        if inside.contains(&key) {
            return;
        }
        let mut switch = TextSwitch::default();
        switch.levels.insert(text.into(), 0);
        let mut next = &**els;
        let mut len = 1;
        while let ExprKind::If { cond, els, .. } = &next.kind {
            let Some((_, text)) = text_test(cond).filter(|(p2, _)| same_place(place, p2)) else { break };
            switch.levels.entry(text.into()).or_insert(len);
            inside.insert(&**cond as *const Expr as usize);
            len += 1;
            next = els;
        }
        switch.len = len;
        if len >= SWITCH_MIN {
            switches.insert(key, switch);
        }
    };
    walk_program(p, &mut visit);
    switches
}
