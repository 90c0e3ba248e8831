//! Static facts about a checked program: the reachable score range (interval analysis),
//! division by zero, weights and signs, gates that can never fire or always fire, caps that
//! never bite, and unused criteria. Runs on the IR after type checking.

use crate::diag::Diagnostic;
use crate::ir::{
    walk, AggOp, BinOp, CmpOp, Const, Expr, ExprKind, GateAction, Member, Program, SiteTable, Step, UnOp, Verifier,
};
use crate::source::{SourceMap, Span};

/// A closed interval of reals (infinite ends allowed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
}

impl Range {
    pub const ANY: Range = Range { lo: f64::NEG_INFINITY, hi: f64::INFINITY };
    pub const UNIT: Range = Range { lo: 0.0, hi: 1.0 };

    fn point(x: f64) -> Range {
        Range { lo: x, hi: x }
    }

    fn union(self, o: Range) -> Range {
        Range { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) }
    }

    fn contains_zero(self) -> bool {
        self.lo <= 0.0 && self.hi >= 0.0
    }

    fn fmt_end(x: f64) -> String {
        if x == 0.0 {
            "0".into()
        } else if x == f64::INFINITY {
            "+inf".into()
        } else if x == f64::NEG_INFINITY {
            "-inf".into()
        } else {
            let r = (x * 1e6).round() / 1e6;
            format!("{r}")
        }
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}, {}]", Range::fmt_end(self.lo), Range::fmt_end(self.hi))
    }
}

fn mul(a: Range, b: Range) -> Range {
    let cands = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
    let c: Vec<f64> = cands.iter().map(|x| if x.is_nan() { 0.0 } else { *x }).collect();
    Range {
        lo: c.iter().cloned().fold(f64::INFINITY, f64::min),
        hi: c.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// The span of a site, from the site table beside the program.
pub fn site_span(sites: &SiteTable, sources: &SourceMap, site: u32) -> Option<Span> {
    let s = sites.get(site)?;
    let file = sources.find(&s.file)?;
    Some(Span { file, start: s.start, end: s.end })
}

struct Facts<'a> {
    p: &'a Program,
    sites: &'a SiteTable,
    sources: &'a SourceMap,
    out: Vec<Diagnostic>,
    /// The ranges of the locals of each function body being analysed at a call site, innermost
    /// last (functions are not recursive, so the stack is as deep as the calls nest).
    frames: Vec<Vec<Range>>,
}

pub fn analyse(p: &Program, sites: &SiteTable, sources: &SourceMap) -> Vec<Diagnostic> {
    let mut f = Facts { p, sites, sources, out: vec![], frames: vec![] };
    f.weights();
    let score_range = f.range(&p.score);
    f.gates(score_range);
    f.unused();
    let range = f.with_gates(score_range);
    if let Some(span) = f.score_span() {
        f.out.push(
            Diagnostic::note("rubric::facts::score_range", format!("the score lies in {range}"))
                .with_label(span, "reachable range of this score"),
        );
    }
    for c in &p.criteria {
        if let Verifier::Value { expr } = &c.verifier {
            let r = f.range(expr);
            if r.lo < 0.0 || r.hi > 1.0 {
                if let Some(span) = site_span(sites, sources, c.site) {
                    f.out.push(
                        Diagnostic::warning("rubric::facts::value_range", format!("the value of `{}` may leave [0, 1]: {r}", c.id))
                            .with_label(span, "this criterion")
                            .with_help("a value outside [0, 1] makes the criterion unscored at run time; clip it with `clip(x, 0, 1)`"),
                    );
                }
            }
        }
    }
    f.out
}

/// The reachable range of a checked program's score, gates included (what
/// `rubric::facts::score_range` reports), for tools that hold only the IR (`rubric inspect`).
pub fn score_range(p: &Program) -> Range {
    let (sites, sources) = (SiteTable::default(), SourceMap::new());
    let mut f = Facts { p, sites: &sites, sources: &sources, out: vec![], frames: vec![] };
    let score = f.range(&p.score);
    f.with_gates(score)
}

impl Facts<'_> {
    /// Widen the score's range by the gates: caps lower the top; a fired `score` gate replaces
    /// the score with its own value.
    fn with_gates(&mut self, score: Range) -> Range {
        let mut range = score;
        for step in &self.p.steps {
            if let Step::Gate(g) = step {
                let v = self.range(&g.value);
                match g.action {
                    GateAction::Score => range = range.union(v),
                    GateAction::Cap => range = Range { lo: range.lo.min(v.lo), hi: range.hi },
                }
            }
        }
        range
    }

    fn span(&self, site: u32) -> Option<Span> {
        site_span(self.sites, self.sources, site)
    }

    fn score_span(&self) -> Option<Span> {
        expr_site(&self.p.score).and_then(|s| self.span(s))
    }

    /// Static criteria of a set, recursively; `false` when it holds per-instance criteria.
    fn static_members(&self, set: u32, out: &mut Vec<u32>) -> bool {
        self.static_members_within(set, out, 0)
    }

    /// `static_members`, at most as deep as groups may nest (a set that is not a tree, or an
    /// index out of range, counts as not static: nothing is proved about it).
    fn static_members_within(&self, set: u32, out: &mut Vec<u32>, depth: usize) -> bool {
        let Some(s) = self.p.sets.get(set as usize).filter(|_| depth <= crate::ir::validate::MAX_GROUP_DEPTH) else {
            return false;
        };
        let mut all_static = true;
        for m in &s.members {
            match m {
                Member::Criterion(c) if (*c as usize) < self.p.criteria.len() => out.push(*c),
                Member::Set(s) => all_static &= self.static_members_within(*s, out, depth + 1),
                Member::Criterion(_) | Member::Each(_) => all_static = false,
            }
        }
        all_static
    }

    fn points_of(&self, c: u32) -> Option<f64> {
        match &self.p.criteria.get(c as usize)?.points {
            None => Some(0.0),
            Some(e) => e.as_number(),
        }
    }

    fn range(&mut self, e: &Expr) -> Range {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || self.range_inner(e))
    }

    fn range_inner(&mut self, e: &Expr) -> Range {
        match &e.kind {
            ExprKind::Const(Const::Number(n)) => Range::point(*n),
            ExprKind::Unary { op: UnOp::Neg, arg } => {
                let r = self.range(arg);
                Range { lo: -r.hi, hi: -r.lo }
            }
            ExprKind::Binary { op, lhs, rhs, site } => {
                let a = self.range(lhs);
                let b = self.range(rhs);
                match op {
                    BinOp::Add => Range { lo: a.lo + b.lo, hi: a.hi + b.hi },
                    BinOp::Sub => Range { lo: a.lo - b.hi, hi: a.hi - b.lo },
                    BinOp::Mul => mul(a, b),
                    BinOp::Div => {
                        if b.lo == 0.0 && b.hi == 0.0 {
                            if let Some(span) = self.span(*site) {
                                self.out.push(
                                    Diagnostic::error("rubric::facts::division_by_zero", "this always divides by zero")
                                        .with_label(span, "the divisor is always 0"),
                                );
                            }
                            Range::ANY
                        } else if b.contains_zero() {
                            if b.lo.is_finite() || b.hi.is_finite() {
                                if let Some(span) = self.span(*site) {
                                    self.out.push(
                                        Diagnostic::warning("rubric::facts::division_by_zero", format!("the divisor may be zero: it lies in {b}"))
                                            .with_label(span, "may divide by zero")
                                            .with_help("a division by zero makes the result unscored at run time; guard it with `if`"),
                                    );
                                }
                            }
                            Range::ANY
                        } else {
                            mul(a, Range { lo: 1.0 / b.hi, hi: 1.0 / b.lo })
                        }
                    }
                    BinOp::Coalesce => a.union(b),
                    _ => Range::ANY,
                }
            }
            ExprKind::If { then, els, .. } => {
                let a = self.range(then);
                let b = self.range(els);
                a.union(b)
            }
            // A function's body analysed at its call site, its parameters in the ranges of the
            // arguments. What the body says about itself (a division that may be by zero) is
            // not reported once per call: the facts of the call's value are what count here.
            ExprKind::Call { func, args, .. } => {
                let Some(f) = self.p.functions.get(*func as usize) else { return Range::ANY };
                let mut locals = vec![Range::ANY; f.locals.max(f.params.len() as u32) as usize];
                for (slot, a) in locals.iter_mut().zip(args) {
                    *slot = self.range(a);
                }
                let reported = self.out.len();
                self.frames.push(locals);
                let r = self.range(&f.body);
                self.frames.pop();
                self.out.truncate(reported);
                r
            }
            ExprKind::Narrowed(arg) => self.range(arg),
            ExprKind::Local(i) => self.frames.last().and_then(|f| f.get(*i as usize).copied()).unwrap_or(Range::ANY),
            ExprKind::Field { base, name, .. } if matches!(base.kind, ExprKind::Criterion(_)) => {
                let ExprKind::Criterion(c) = base.kind else { unreachable!() };
                match name.as_str() {
                    "value" | "agreement" => Range::UNIT,
                    "points" => self.points_of(c).map_or(Range::ANY, Range::point),
                    _ => Range::ANY,
                }
            }
            ExprKind::Intrinsic { name, args, .. } => {
                let rs: Vec<Range> = args.iter().map(|a| self.range(a)).collect();
                match (name.as_str(), rs.as_slice()) {
                    ("clip", [x, lo, hi]) => Range { lo: x.lo.max(lo.lo).min(hi.hi), hi: x.hi.min(hi.hi).max(lo.lo) },
                    ("min", [a, b]) => Range { lo: a.lo.min(b.lo), hi: a.hi.min(b.hi) },
                    ("max", [a, b]) => Range { lo: a.lo.max(b.lo), hi: a.hi.max(b.hi) },
                    (n, _) if n.ends_with("_count") || n == "len" || n == "json_len" => {
                        Range { lo: 0.0, hi: f64::INFINITY }
                    }
                    ("abs", [a]) => Range {
                        lo: if a.contains_zero() { 0.0 } else { a.lo.abs().min(a.hi.abs()) },
                        hi: a.lo.abs().max(a.hi.abs()),
                    },
                    _ => Range::ANY,
                }
            }
            ExprKind::Aggregate { op, set, site, .. } => {
                let mut members = Vec::new();
                let all_static = self.static_members(*set, &mut members);
                let n = members.len() as f64;
                match op {
                    AggOp::WeightedMean
                    | AggOp::Mean
                    | AggOp::Fraction
                    | AggOp::Tree
                    | AggOp::MinValue
                    | AggOp::MaxValue => {
                        if all_static && members.is_empty() && *op != AggOp::Tree {
                            if let Some(span) = self.span(*site) {
                                self.out.push(
                                    Diagnostic::error(
                                        "rubric::facts::division_by_zero",
                                        format!("`{}` of an empty set divides by zero", op.name()),
                                    )
                                    .with_label(span, "the set has no criteria"),
                                );
                            }
                        }
                        Range::UNIT
                    }
                    AggOp::PointsRatio | AggOp::SumPoints | AggOp::MaxPoints => {
                        if !all_static {
                            return if *op == AggOp::PointsRatio {
                                Range { lo: f64::NEG_INFINITY, hi: 1.0 }
                            } else {
                                Range::ANY
                            };
                        }
                        let pts: Vec<Option<f64>> = members.iter().map(|c| self.points_of(*c)).collect();
                        if pts.iter().any(Option::is_none) {
                            return Range::ANY;
                        }
                        let pos: f64 = pts.iter().flatten().filter(|p| **p > 0.0).sum();
                        let neg: f64 = pts.iter().flatten().filter(|p| **p < 0.0).sum();
                        match op {
                            AggOp::PointsRatio => {
                                if pos == 0.0 {
                                    if let Some(span) = self.span(*site) {
                                        self.out.push(
                                            Diagnostic::error("rubric::facts::division_by_zero", "`points_ratio` over a set without positive points always divides by zero")
                                                .with_label(span, "no criterion here has positive points")
                                                .with_help("points_ratio is Σ points of met criteria / Σ positive points"),
                                        );
                                    }
                                    Range::ANY
                                } else {
                                    Range { lo: neg / pos, hi: 1.0 }
                                }
                            }
                            AggOp::SumPoints => Range { lo: neg, hi: pos },
                            _ => Range::point(pos),
                        }
                    }
                    AggOp::Count | AggOp::CountMet => {
                        if all_static {
                            Range { lo: if *op == AggOp::Count { n } else { 0.0 }, hi: n }
                        } else {
                            Range { lo: 0.0, hi: f64::INFINITY }
                        }
                    }
                    _ => Range::ANY,
                }
            }
            _ => Range::ANY,
        }
    }

    fn weights(&mut self) {
        for c in &self.p.criteria {
            let Some(span) = self.span(c.site) else { continue };
            if let Some(w) = &c.weight {
                match w.as_number() {
                    Some(x) if x.is_nan() || x <= 0.0 || !x.is_finite() => self.out.push(
                        Diagnostic::error(
                            "rubric::facts::weight",
                            format!("criterion `{}` has weight {x}; weights must be positive", c.id),
                        )
                        .with_label(span, "this criterion")
                        .with_help("use negative `points` for penalties; weights only scale"),
                    ),
                    _ => {}
                }
            }
            if let Some(p) = &c.points {
                if p.as_number() == Some(0.0) {
                    self.out.push(
                        Diagnostic::warning(
                            "rubric::facts::zero_points",
                            format!("criterion `{}` has 0 points and never changes a points score", c.id),
                        )
                        .with_label(span, "this criterion"),
                    );
                }
            }
        }
    }

    fn gates(&mut self, score_range: Range) {
        for step in &self.p.steps {
            let Step::Gate(g) = step else { continue };
            let Some(span) = self.span(g.site) else { continue };
            let decided = fold_bool(&g.cond).or_else(|| self.decide(&g.cond));
            match decided {
                Some(true) => self.out.push(
                    Diagnostic::warning(
                        "rubric::facts::gate_never_fires",
                        format!("gate `{}` can never fire: its condition is always true", g.name),
                    )
                    .with_label(span, "this gate")
                    .with_help("remove the gate or fix its condition"),
                ),
                Some(false) => self.out.push(
                    Diagnostic::warning(
                        "rubric::facts::gate_always_fires",
                        format!("gate `{}` always fires: its condition is always false", g.name),
                    )
                    .with_label(span, "this gate")
                    .with_help("every response gets the gate's score; nothing after it is evaluated"),
                ),
                None => {}
            }
            if g.action == GateAction::Cap {
                if let Some(cap) = g.value.as_number() {
                    if cap >= score_range.hi {
                        self.out.push(
                            Diagnostic::warning(
                                "rubric::facts::cap_never_bites",
                                format!(
                                    "gate `{}` caps at {cap}, but the score never exceeds {}",
                                    g.name,
                                    Range::fmt_end(score_range.hi)
                                ),
                            )
                            .with_label(span, "this cap"),
                        );
                    }
                }
            }
        }
    }

    /// Decide a single comparison from the ranges of its operands (`word_count(r) >= 0`).
    fn decide(&mut self, e: &Expr) -> Option<bool> {
        let ExprKind::Compare { first, rest } = &e.kind else { return None };
        let [(op, rhs)] = rest.as_slice() else { return None };
        if first.ty != crate::ir::Type::Number {
            return None;
        }
        let a = self.range(first);
        let b = self.range(rhs);
        match op {
            CmpOp::Ge if a.lo >= b.hi => Some(true),
            CmpOp::Ge if a.hi < b.lo => Some(false),
            CmpOp::Gt if a.lo > b.hi => Some(true),
            CmpOp::Gt if a.hi <= b.lo => Some(false),
            CmpOp::Le if a.hi <= b.lo => Some(true),
            CmpOp::Le if a.lo > b.hi => Some(false),
            CmpOp::Lt if a.hi < b.lo => Some(true),
            CmpOp::Lt if a.lo >= b.hi => Some(false),
            _ => None,
        }
    }

    fn unused(&mut self) {
        let mut used_sets = vec![false; self.p.sets.len()];
        let mut used_crit = vec![false; self.p.criteria.len()];
        let visit = |e: &Expr, us: &mut Vec<bool>, uc: &mut Vec<bool>| {
            walk(e, &mut |x| match &x.kind {
                ExprKind::Aggregate { set, .. } => mark(us, *set),
                ExprKind::Criterion(c) => mark(uc, *c),
                _ => {}
            })
        };
        visit(&self.p.score, &mut used_sets, &mut used_crit);
        // What only a report-only score reads is used too.
        for s in &self.p.scores {
            visit(&s.expr, &mut used_sets, &mut used_crit);
        }
        for step in &self.p.steps {
            match step {
                Step::Gate(g) => {
                    visit(&g.cond, &mut used_sets, &mut used_crit);
                    visit(&g.value, &mut used_sets, &mut used_crit);
                }
                Step::Criterion(c) => {
                    if let Some(Verifier::Check { expr } | Verifier::Value { expr }) =
                        self.p.criteria.get(*c as usize).map(|c| &c.verifier)
                    {
                        visit(expr, &mut used_sets, &mut used_crit);
                    }
                }
                Step::Each(_) => {}
            }
        }
        for l in &self.p.lets {
            visit(&l.value, &mut used_sets, &mut used_crit);
        }
        // Close over membership.
        let mut changed = true;
        while changed {
            changed = false;
            for (i, s) in self.p.sets.iter().enumerate() {
                if !used_sets[i] {
                    continue;
                }
                for m in &s.members {
                    let (flags, x) = match m {
                        Member::Criterion(c) => (&mut used_crit, *c),
                        Member::Set(x) => (&mut used_sets, *x),
                        Member::Each(step) => match self.p.steps.get(*step as usize) {
                            Some(Step::Each(e)) => (&mut used_sets, e.set),
                            _ => continue,
                        },
                    };
                    if flags.get(x as usize) == Some(&false) {
                        flags[x as usize] = true;
                        changed = true;
                    }
                }
            }
        }
        for (i, c) in self.p.criteria.iter().enumerate() {
            if !used_crit[i] {
                if let Some(span) = self.span(c.site) {
                    self.out.push(
                        Diagnostic::warning(
                            "rubric::facts::unused_criterion",
                            format!("criterion `{}` does not affect the score", c.id),
                        )
                        .with_label(span, "unused")
                        .with_help("include it in a set the score aggregates, or refer to it in the score"),
                    );
                }
            }
        }
        for step in &self.p.steps {
            if let Step::Each(e) = step {
                if used_sets.get(e.set as usize) == Some(&false) {
                    if let Some(span) = self.span(e.template.site) {
                        self.out.push(
                            Diagnostic::warning(
                                "rubric::facts::unused_criterion",
                                format!("criteria `{}` do not affect the score", e.template.id),
                            )
                            .with_label(span, "unused"),
                        );
                    }
                }
            }
        }
    }
}

/// Set flag `i`, if there is one.
fn mark(flags: &mut [bool], i: u32) {
    if let Some(f) = flags.get_mut(i as usize) {
        *f = true;
    }
}

fn expr_site(e: &Expr) -> Option<u32> {
    match &e.kind {
        ExprKind::Field { site, .. }
        | ExprKind::Index { site, .. }
        | ExprKind::Binary { site, .. }
        | ExprKind::Intrinsic { site, .. }
        | ExprKind::Call { site, .. }
        | ExprKind::Aggregate { site, .. } => Some(*site),
        ExprKind::Unary { arg, .. } | ExprKind::Narrowed(arg) => expr_site(arg),
        ExprKind::If { cond, .. } => expr_site(cond),
        ExprKind::Compare { first, .. } => expr_site(first),
        _ => None,
    }
}

/// Constant-fold a Bool expression made of constants.
fn fold_bool(e: &Expr) -> Option<bool> {
    match &e.kind {
        ExprKind::Const(Const::Bool(b)) => Some(*b),
        ExprKind::Unary { op: UnOp::Not, arg } => fold_bool(arg).map(|b| !b),
        ExprKind::Binary { op: BinOp::And, lhs, rhs, .. } => match (fold_bool(lhs), fold_bool(rhs)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        ExprKind::Binary { op: BinOp::Or, lhs, rhs, .. } => match (fold_bool(lhs), fold_bool(rhs)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        ExprKind::Compare { first, rest } => {
            let mut prev = first.as_number()?;
            for (op, x) in rest {
                let v = x.as_number()?;
                let ok = match op {
                    CmpOp::Eq => prev == v,
                    CmpOp::Ne => prev != v,
                    CmpOp::Lt => prev < v,
                    CmpOp::Le => prev <= v,
                    CmpOp::Gt => prev > v,
                    CmpOp::Ge => prev >= v,
                };
                if !ok {
                    return Some(false);
                }
                prev = v;
            }
            Some(true)
        }
        _ => None,
    }
}
