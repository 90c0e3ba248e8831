//! Stage 3, the root file in order: inputs and judges first (visible everywhere), then lets,
//! gates, criteria, blocks, tiers and groups as steps **in declaration order**, each checked at
//! its `Place::Step(n)` so that it sees only the criteria declared before it; then the score
//! (which sees everything), the reward, the built-in set `all`, and the examples.

use super::scope::{Global, Place, Scope};
use super::{diagnostics, Checker};
use crate::ir::{self, AggOp, Expr, ExprKind, Policy, Type};
use crate::syntax::ast;
use diagnostics::{BadShows, Duplicate, Mismatch, NotConstant};

impl Checker<'_> {
    pub(super) fn check_root(&mut self, file: &ast::File) {
        // What `shows` blocks show each judge: slots its template may name.
        for item in &file.items {
            if let ast::Item::Criteria(b) = item {
                if let ast::CriteriaBody::Each { template, shows, .. } = &b.body {
                    let judge = match template.verifier.as_ref().map(|v| &v.kind) {
                        Some(ast::VerifierKind::Judge(j)) => Some(j),
                        None => b.default_judge.as_ref(),
                        Some(_) => None,
                    };
                    if let Some(j) = judge {
                        let names = self.shown_slots.entry(j.text.clone()).or_default();
                        names.extend(shows.iter().map(|s| s.name.text.clone()));
                    }
                }
            }
        }
        // Pass 1: inputs and judges can be referenced from anywhere.
        for item in &file.items {
            match item {
                ast::Item::Input(i) => self.input(i),
                ast::Item::Judge(j) => self.judge(j),
                _ => {}
            }
        }
        for item in &file.items {
            if let ast::Item::Generator(g) = item {
                self.generator(g);
            }
        }
        // Pass 2: everything else in order.
        for item in &file.items {
            match item {
                ast::Item::Let(l) => self.unnarrowed(|c| c.let_item(l)),
                ast::Item::Gate(g) => self.gate(g),
                ast::Item::Criterion(c) => {
                    self.static_criterion(c, &[], None);
                }
                ast::Item::Criteria(b) => self.criteria_block(b),
                ast::Item::Tier(t) => self.tier(t),
                ast::Item::Group(g) => {
                    self.group(g, &[], None);
                }
                _ => {}
            }
        }
        // The score reads every criterion, wherever it is declared: check it last. It runs only
        // when no `score` gate fired, so what those gates proved holds in it; not in the reward
        // (whose penalty may run after a gate fired) or the examples.
        self.score(file);
        self.narrowed.clear();
        let mut reward_seen = None;
        for item in &file.items {
            if let ast::Item::Reward(r) = item {
                if let Some(first) = reward_seen {
                    self.report(diagnostics::resolve_duplicate(r.span, Duplicate::Reward { first }));
                    continue;
                }
                reward_seen = Some(r.span);
                self.reward(r);
            }
        }
        self.fill_set_all();
        self.stats(file);
        self.calibration_criteria();
        for item in &file.items {
            if let ast::Item::Example(e) = item {
                self.example(e);
            }
        }
    }

    /// The score: the one `score = ...` of the file, else the weighted mean of every criterion.
    fn score(&mut self, file: &ast::File) {
        let mut named: std::collections::HashMap<&str, crate::source::Span> = std::collections::HashMap::new();
        for item in &file.items {
            if let ast::Item::Score(ast::ScoreDef { name: Some(n), expr, span }) = item {
                if let Some(first) = named.get(n.text.as_str()) {
                    let d = Duplicate::NamedScore { name: &n.text, first: *first };
                    self.report(diagnostics::resolve_duplicate(n.span, d));
                    continue;
                }
                named.insert(&n.text, n.span);
                let site = self.site(*span);
                let mut scope = Scope::new(Place::Score);
                let e = self.expr(expr, &mut scope, Some(&Type::Number));
                self.expect_type(&e.ty, &Type::Number, expr.span, "a score");
                self.p.scores.push(ir::NamedScore { name: n.text.clone(), expr: e, site });
                continue;
            }
            if let ast::Item::Score(s) = item {
                if let Some(first) = self.score_seen {
                    self.report(diagnostics::resolve_duplicate(s.span, Duplicate::Score { first }));
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
            let site = self.site(file.header.as_ref().map_or(file.span, |h| h.span));
            self.p.score = Expr {
                kind: ExprKind::Aggregate {
                    op: AggOp::WeightedMean,
                    set: 0,
                    policy: Policy::Propagate,
                    args: vec![],
                    site,
                },
                ty: Type::Number,
            };
        }
    }

    /// Every map of a judge's calibration names `*` or a criterion the judge decides (a
    /// per-instance block as `NAME[]`).
    fn calibration_criteria(&mut self) {
        for (j, span) in std::mem::take(&mut self.calibrations) {
            let decided_by = |v: &ir::Verifier| matches!(v, ir::Verifier::Judge { judge } if *judge == j);
            let mut keys: Vec<String> =
                self.p.criteria.iter().filter(|c| decided_by(&c.verifier)).map(|c| c.id.clone()).collect();
            for step in &self.p.steps {
                if let ir::Step::Each(e) = step {
                    if decided_by(&e.template.verifier) {
                        keys.push(format!("{}[]", e.template.id));
                    }
                }
            }
            let Some(cal) = self.p.judges.get(j as usize).and_then(|d| d.calibration.clone()) else { continue };
            for m in cal.maps.iter().filter(|m| m.criteria != "*" && !keys.contains(&m.criteria)) {
                let why = format!(
                    "a map is for `{}`, which judge `{}` does not decide",
                    m.criteria, self.p.judges[j as usize].name
                );
                let known = if keys.is_empty() { "none".to_string() } else { keys.join(", ") };
                let help = format!("maps name `*` or a criterion of the judge (`NAME[]` for a block): {known}");
                self.report(diagnostics::judge_bad_calibration(span, &cal.file, &why, &help));
            }
        }
    }

    /// `all` holds every static criterion and every per-instance block, in step order.
    fn fill_set_all(&mut self) {
        let mut all = Vec::new();
        let sub_check = |p: &ir::Program, c: u32| {
            p.criteria
                .get(c as usize)
                .is_some_and(|d| d.sets.iter().any(|s| p.sets[*s as usize].kind == ir::SetKind::Checks))
        };
        for (i, step) in self.p.steps.iter().enumerate() {
            match step {
                // Sub-checks count through their criterion, not on their own.
                ir::Step::Criterion(c) if sub_check(&self.p, *c) => {}
                ir::Step::Criterion(c) => all.push(ir::Member::Criterion(*c)),
                ir::Step::Each(_) => all.push(ir::Member::Each(i as u32)),
                ir::Step::Gate(_) => {}
            }
        }
        self.p.sets[0].members = all;
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
        if action == ir::GateAction::Score {
            self.narrow_after_gate(&cond);
        }
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
        if let Some((_, first)) = self.global_at(&g.name.text) {
            self.report(diagnostics::resolve_duplicate(g.name.span, Duplicate::Gate { name: &g.name.text, first }));
        }
    }

    fn new_set(&mut self, name: &ast::Name, kind: ir::SetKind, weight: Option<f64>) -> u32 {
        let idx = self.p.sets.len() as u32;
        self.p.sets.push(ir::SetDecl { name: name.text.clone(), kind, weight, members: vec![] });
        self.define(&name.text, Global::Set(idx), name.span);
        idx
    }

    /// Add `criteria` to `set`, each a member of `set` and of its enclosing sets.
    fn set_of_criteria(&mut self, set: u32, criteria: &[ast::Criterion], default_judge: Option<&ast::Name>) {
        for c in criteria {
            if let Some(ci) = self.static_criterion(c, &[set], default_judge) {
                self.p.sets[set as usize].members.push(ir::Member::Criterion(ci));
            }
        }
    }

    fn tier(&mut self, t: &ast::Tier) {
        let set = self.new_set(&t.name, ir::SetKind::Tier, None);
        self.set_of_criteria(set, &t.criteria, t.default_judge.as_ref());
    }

    fn criteria_block(&mut self, b: &ast::CriteriaBlock) {
        match &b.body {
            ast::CriteriaBody::Static(crits) => {
                let set = self.new_set(&b.name, ir::SetKind::Block, None);
                self.set_of_criteria(set, crits, b.default_judge.as_ref());
            }
            ast::CriteriaBody::Each { var, list, template, shows } => self.each_block(b, var, list, template, shows),
        }
    }

    /// `criteria NAME each VAR in LIST { TEMPLATE }`: one step that expands the template.
    fn each_block(
        &mut self,
        b: &ast::CriteriaBlock,
        var: &ast::Name,
        list: &ast::Expr,
        template: &ast::Criterion,
        shows: &[ast::ShownItem],
    ) {
        let set = self.new_set(&b.name, ir::SetKind::Each, None);
        let step = self.p.steps.len();
        let mut scope = Scope::new(Place::Step(step));
        let list_e = self.expr(list, &mut scope, None);
        let elem = match list_e.ty.clone() {
            Type::List(t) => *t,
            Type::Any => Type::Any,
            other => {
                self.report(diagnostics::type_mismatch(Mismatch::EachList { found: &other, at: list.span }));
                Type::Any
            }
        };
        let local = scope.push(&var.text, elem);
        let decl = self.criterion_decl(template, &b.name.text, &mut scope, b.default_judge.as_ref(), vec![set]);
        let shown = self.shows(shows, decl.as_ref(), &mut scope);
        scope.pop();
        if let Some(decl) = &decl {
            self.group_judged_instances(template, decl);
        }
        if let Some(decl) = decl {
            self.each_sets.insert(set, step);
            self.p.steps.push(ir::Step::Each(Box::new(ir::EachDecl {
                set,
                list: list_e,
                local,
                locals: scope.max_local,
                template: decl,
                shows: shown,
            })));
            self.p.sets[set as usize].members.push(ir::Member::Each(step as u32));
        }
    }

    /// A block's `shows`: what its judge is shown of each instance, each item checked in the
    /// block's scope (a name alone reads the element, a `let` or an input). The block must be
    /// decided by a judge that judges one row at a time, and each fence name must be new to the
    /// request: not shown twice, not a template keyword, not an input the judge sees.
    fn shows(
        &mut self,
        shows: &[ast::ShownItem],
        decl: Option<&ir::CriterionDecl>,
        scope: &mut Scope,
    ) -> Vec<ir::ShownDecl> {
        let mut out: Vec<ir::ShownDecl> = Vec::new();
        let Some(first) = shows.first() else { return out };
        let judge = match decl.map(|d| &d.verifier) {
            Some(ir::Verifier::Judge { judge }) => self.p.judges.get(*judge as usize).cloned(),
            Some(_) => {
                self.report(diagnostics::judge_bad_shows(first.span, BadShows::NoJudge));
                return out;
            }
            // The template failed to check: already reported.
            None => None,
        };
        if let Some(j) = &judge {
            if j.rollouts.is_some() || j.compares.is_some() {
                self.report(diagnostics::judge_bad_shows(first.span, BadShows::Judge(&j.name)));
                return out;
            }
        }
        for item in shows {
            let name = item.name.text.as_str();
            let clash = if out.iter().any(|s| s.name == name) {
                Some(BadShows::Twice(name))
            } else if ir::validate::TEMPLATE_KEYWORDS.contains(&name) {
                Some(BadShows::Keyword(name))
            } else {
                judge
                    .as_ref()
                    .filter(|j| self.p.input_index(name).is_some_and(|i| j.sees.contains(&(i as u32))))
                    .map(|j| BadShows::Seen { name, judge: &j.name })
            };
            if let Some(why) = clash {
                self.report(diagnostics::judge_bad_shows(item.name.span, why));
                continue;
            }
            let var;
            let e = match &item.expr {
                Some(e) => e,
                None => {
                    var = ast::Expr { kind: ast::ExprKind::Var(item.name.clone()), span: item.name.span };
                    &var
                }
            };
            let expr = self.expr(e, scope, None);
            out.push(ir::ShownDecl { name: name.to_string(), expr });
        }
        out
    }

    /// A group of `parents` (innermost first): its weight, then its members in order.
    fn group(&mut self, g: &ast::Group, parents: &[u32], default_judge: Option<&ast::Name>) -> Option<u32> {
        let weight = g.weight.as_ref().map(|w| self.constant_number(w, "a group weight"));
        if let (Some(x), Some(w)) = (weight, &g.weight) {
            // NaN: not a literal, already reported as `not_constant`.
            if !x.is_nan() && (x <= 0.0 || !x.is_finite()) {
                self.report(diagnostics::facts_weight(&g.name.text, x, w.span));
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
            self.report(diagnostics::facts_empty_group(&g.name));
        }
        Some(set)
    }

    /// A number literal, possibly negated; anything else is reported and gives NaN.
    fn constant_number(&mut self, e: &ast::Expr, what: &str) -> f64 {
        match &e.kind {
            ast::ExprKind::Number(n) => *n,
            ast::ExprKind::Unary(ast::UnOp::Neg, inner) => -self.constant_number(inner, what),
            _ => {
                self.report(diagnostics::type_not_constant(e.span, NotConstant::Literal(what)));
                f64::NAN
            }
        }
    }

    /// The sub-checks of criterion `parent`: each a binary criterion `PARENT.NAME` of its own
    /// step, before the parent's, and a member only of the set `PARENT.*` (kind `checks`, left
    /// out of `all`). Returns the set.
    fn sub_checks(&mut self, parent: &str, checks: &[ast::SubCheck]) -> Option<u32> {
        let set = self.p.sets.len() as u32;
        // `PARENT.*`: no criterion or set can have that name (names are identifiers, sub-checks
        // `PARENT.IDENT`), so that every name still finds one thing.
        self.p.sets.push(ir::SetDecl {
            name: format!("{parent}.*"),
            kind: ir::SetKind::Checks,
            weight: None,
            members: vec![],
        });
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for c in checks {
            if !seen.insert(&c.name.text) {
                self.report(diagnostics::resolve_duplicate(c.name.span, Duplicate::SubCheck(&c.name.text)));
                continue;
            }
            let text = c.text.as_ref().map_or_else(|| c.name.text.clone(), |t| t.value.clone());
            let sub = ast::Criterion {
                id: Some(ast::Name { text: format!("{parent}.{}", c.name.text), span: c.name.span }),
                text: Some(ast::Expr {
                    kind: ast::ExprKind::Str(text),
                    span: c.text.as_ref().map_or(c.name.span, |t| t.span),
                }),
                attrs: vec![],
                verifier: Some(ast::Verifier { kind: ast::VerifierKind::Check(c.check.clone()), span: c.check.span }),
                span: c.span,
            };
            let idx = self.static_criterion(&sub, &[set], None)?;
            self.p.sets[set as usize].members.push(ir::Member::Criterion(idx));
        }
        Some(set)
    }

    /// A criterion with an id, a step of its own, a member of `sets`. Returns its index.
    pub(super) fn static_criterion(
        &mut self,
        c: &ast::Criterion,
        sets: &[u32],
        default_judge: Option<&ast::Name>,
    ) -> Option<u32> {
        let id = c.id.as_ref()?;
        let checks = match &c.verifier {
            Some(ast::Verifier { kind: ast::VerifierKind::Checks { checks, .. }, span }) => {
                Some((self.sub_checks(&id.text, checks)?, *span))
            }
            _ => None,
        };
        let step = self.p.steps.len();
        let mut scope = Scope::new(Place::Step(step));
        scope.checks = checks;
        let decl = self.criterion_decl(c, &id.text, &mut scope, default_judge, sets.to_vec())?;
        let idx = self.p.criteria.len() as u32;
        self.p.criteria.push(decl);
        self.criterion_step.push(step);
        self.p.steps.push(ir::Step::Criterion(idx));
        self.define(&id.text, Global::Criterion(idx), id.span);
        Some(idx)
    }
}
