//! What the engines compute once per program and share across its rows: each criterion's
//! result metadata as interned strings (its id, its source, the names of its sets, a constant
//! text: every row's result points at them instead of copying or counting them), the scan plan
//! of the constant patterns and repeated intrinsic calls of the program (`stdlib::scan`, made
//! when an engine that scans first asks for it: the JIT and Wasm engines' host),
//! the text switches of its `if` chains ([`TextSwitch`]), and the functions whose answers the
//! interpreter keeps for a row ([`Prepared::memoised`]).
//!
//! Pipeline position: built from an `ir::Program` on first use ([`prepared`], kept in the
//! program's `prepared` slot) by the first row any engine evaluates; read by `driver` and, as
//! the plan of each row's `stdlib::EvalCtx`, by the intrinsics. It is never serialised and never
//! part of a program's bytes or hash; a clone of a program starts with an empty slot.

use crate::engine::{intern_names, CriterionResult, Name, Status};
use crate::ir::{walk, CriterionDecl, CriterionKind, Expr, ExprKind, Program, Step, Verifier};
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

/// What a criterion's result starts as, before anything is decided (`unscored`, no reason):
/// its metadata and the values of its text, points, weight and axis.
#[derive(Debug, Clone)]
pub struct Undecided {
    pub id: Name,
    pub text: Option<Name>,
    /// `binary`, `ordinal`, `nominal`, `continuous` or `preference`.
    pub kind: &'static str,
    pub points: Option<f64>,
    pub weight: f64,
    pub axis: Option<Name>,
    pub source: Name,
    pub sets: &'static [Name],
}

impl Undecided {
    /// The result of a check that answered `met`, as `driver::apply_check` decides it, made
    /// from the template in place (no result made and then changed).
    #[inline(always)]
    pub fn decided(&self, met: bool) -> CriterionResult {
        let (status, value) = super::driver::check_verdict(met);
        CriterionResult { status, value, ..self.clone().into_result(Vec::new()) }
    }

    /// The result, with `tags`.
    #[inline]
    pub fn into_result(self, tags: Vec<String>) -> CriterionResult {
        CriterionResult {
            id: self.id,
            text: self.text,
            kind: self.kind,
            status: Status::Unscored,
            reason: None,
            value: None,
            judged: None,
            points: self.points,
            weight: self.weight,
            axis: self.axis,
            tags,
            source: self.source,
            step: None,
            sets: self.sets,
        }
    }
}

impl CriterionMeta {
    /// The undecided result of criterion `d` with these metadata and the attributes given.
    pub fn undecided(
        &self,
        d: &CriterionDecl,
        id: Name,
        text: Option<Name>,
        (points, weight): (Option<f64>, f64),
        axis: Option<Name>,
    ) -> Undecided {
        Undecided {
            id,
            text,
            kind: match d.kind {
                CriterionKind::Binary => "binary",
                CriterionKind::Ordinal { .. } => "ordinal",
                CriterionKind::Nominal { .. } => "nominal",
                CriterionKind::Continuous => "continuous",
                CriterionKind::Preference => "preference",
            },
            points,
            weight,
            axis,
            source: self.source.clone(),
            sets: self.sets,
        }
    }

    /// The undecided result of a static criterion whose text, points, weight and axis are all
    /// constants: the same for every row.
    fn template(&self, d: &CriterionDecl) -> Option<Undecided> {
        let (text, numbers, axis) = (self.text.clone()?, self.numbers?, self.axis.clone()?);
        Some(self.undecided(d, self.id.clone(), Some(text), numbers, axis))
    }
}

/// A run of plain criteria: consecutive `criterion` steps of criteria decided by a `check` that
/// reads only the row's inputs (`Program::reads_only_inputs`), with no `pass` and a template
/// (constant text, points, weight and axis). Nothing in a run reads another of its criteria,
/// so an engine may evaluate its checks together (`Evaluator::checks`), and the driver makes
/// each result from the criterion's template.
#[derive(Debug, Clone)]
pub struct PlainRun {
    /// The static criteria, in step order.
    pub criteria: Vec<u32>,
    /// Their templates, in the same order: a row's results are made from this slice straight
    /// into place ([`Undecided::decided`]).
    pub templates: Vec<Undecided>,
}

impl PlainRun {
    /// The check of each criterion of the run, in order, with the root it is.
    pub fn checks<'p>(&'p self, p: &'p Program) -> impl Iterator<Item = (super::Root, &'p Expr)> + 'p {
        self.criteria.iter().filter_map(move |c| match &p.criteria.get(*c as usize)?.verifier {
            Verifier::Check { expr } => {
                Some((super::Root::Criterion { owner: super::Owner::Criterion(*c), attr: super::Attr::Verifier }, expr))
            }
            _ => None,
        })
    }
}

/// The plain runs of `p` (at least two criteria long) and the step each starts at.
fn plain_runs(p: &Program, templates: &[Option<Undecided>]) -> (Vec<PlainRun>, Vec<Option<u32>>) {
    let plain = |c: u32| -> bool {
        let Some(d) = p.criteria.get(c as usize) else { return false };
        let Verifier::Check { expr } = &d.verifier else { return false };
        d.pass.is_none() && templates.get(c as usize).is_some_and(Option::is_some) && p.reads_only_inputs(expr)
    };
    let mut runs = Vec::new();
    let mut run_at = vec![None; p.steps.len()];
    let mut current: Option<(usize, Vec<u32>)> = None;
    let mut close = |current: &mut Option<(usize, Vec<u32>)>, runs: &mut Vec<PlainRun>| {
        if let Some((step, criteria)) = current.take() {
            if criteria.len() >= 2 {
                run_at[step] = Some(runs.len() as u32);
                let templates = criteria.iter().filter_map(|c| templates.get(*c as usize)?.clone()).collect();
                runs.push(PlainRun { criteria, templates });
            }
        }
    };
    for (si, step) in p.steps.iter().enumerate() {
        match step {
            Step::Criterion(c) if plain(*c) => current.get_or_insert_with(|| (si, Vec::new())).1.push(*c),
            _ => close(&mut current, &mut runs),
        }
    }
    close(&mut current, &mut runs);
    (runs, run_at)
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
    /// By static criterion index: its undecided result, where that is the same for every row
    /// ([`CriterionMeta::template`]).
    pub templates: Vec<Option<Undecided>>,
    /// The program's plain runs ([`PlainRun`]), in step order.
    pub runs: Vec<PlainRun>,
    /// By step index: the run that starts at the step.
    pub run_at: Vec<Option<u32>>,
    /// By set index: the unscored policy of each group's tree (`driver::group_policies`).
    pub group_policies: Vec<crate::ir::Policy>,
    /// The scan plan, made the first time an engine that scans asks for it ([`Prepared::scan`]):
    /// the interpreter computes every call as written and never does.
    scan: std::sync::OnceLock<Arc<ScanPlan>>,
    /// The program's `if` chains that dispatch on a text ([`TextSwitch`]), by the address of
    /// the head's condition (a boxed node of the program, which stays where it is while the
    /// program lives, wherever the program itself is moved).
    pub switches: FxHashMap<usize, TextSwitch>,
    /// By function index: whether the interpreter keeps a row's answers of the function
    /// ([`memoised_functions`]).
    pub memoised: Vec<bool>,
}

impl Prepared {
    /// The scan plan of `p` (whose facts these are), made on first use.
    pub fn scan(&self, p: &Program) -> &Arc<ScanPlan> {
        self.scan.get_or_init(|| Arc::new(scan_plan(p)))
    }

    pub fn of(p: &Program) -> Prepared {
        let criteria: Vec<CriterionMeta> = p.criteria.iter().map(|d| CriterionMeta::of(p, d)).collect();
        let templates: Vec<Option<Undecided>> = criteria.iter().zip(&p.criteria).map(|(m, d)| m.template(d)).collect();
        let (runs, run_at) = plain_runs(p, &templates);
        Prepared {
            criteria,
            templates,
            runs,
            run_at,
            group_policies: super::driver::group_policies(p),
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
            memoised: memoised_functions(p),
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

/// `e` (a small expression: see [`small`]) with its sites cleared.
fn unsite(e: &mut Expr) {
    match &mut e.kind {
        ExprKind::Field { base, site, .. } => {
            *site = 0;
            unsite(base);
        }
        ExprKind::Narrowed(base) => unsite(base),
        ExprKind::Intrinsic { args, site, .. } => {
            *site = 0;
            args.iter_mut().for_each(unsite);
        }
        ExprKind::List(args) => args.iter_mut().for_each(unsite),
        _ => {}
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

/// By function index: the functions whose answers the interpreter keeps for the rest of a row
/// (`interp::Walker`), which are those called from two places or more (IFEval's
/// `follows_instruction`, asked of a response in strict mode and of the same response again
/// as the first of its loose variants) that answer from their arguments alone: no criterion or
/// aggregation in them or in the `let`s and functions they reach (whose values depend on how
/// much of the row is decided), and no `exec` (a program run, whose answer may change from one
/// run to the next).
fn memoised_functions(p: &Program) -> Vec<bool> {
    let mut sites = vec![0u32; p.functions.len()];
    walk_program(p, &mut |e| {
        if let ExprKind::Call { func, .. } = &e.kind {
            if let Some(n) = sites.get_mut(*func as usize) {
                *n += 1;
            }
        }
    });
    let pure = |f: &crate::ir::Function| {
        let mut seen_lets = FxHashSet::default();
        let mut seen_fns = FxHashSet::default();
        let mut todo = vec![&f.body];
        let mut ok = true;
        while let Some(e) = todo.pop() {
            walk(e, &mut |x| match &x.kind {
                ExprKind::Criterion(_) | ExprKind::Aggregate { .. } => ok = false,
                ExprKind::Intrinsic { name, .. } if name == "exec" => ok = false,
                ExprKind::Let(i) if seen_lets.insert(*i) => match p.lets.get(*i as usize) {
                    Some(l) => todo.push(&l.value),
                    None => ok = false,
                },
                ExprKind::Call { func, .. } if seen_fns.insert(*func) => match p.functions.get(*func as usize) {
                    Some(g) => todo.push(&g.body),
                    None => ok = false,
                },
                _ => {}
            });
            if !ok {
                return false;
            }
        }
        true
    };
    p.functions.iter().zip(&sites).map(|(f, &n)| n >= 2 && pure(f)).collect()
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
            // Sites are where a call is, not what it computes: `len(numbers(response))` in two
            // criteria is one form.
            let mut args = args.clone();
            args.iter_mut().for_each(unsite);
            serde_json::to_string(&args).unwrap_or_default()
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
