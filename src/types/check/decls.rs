//! Stage 3, declarations of the root file that are not criteria: inputs (with constant
//! defaults), `let` values (checked at their step, so they see the criteria declared before
//! them) and the `reward` block.

use super::scope::{Global, Place, Scope};
use super::unify::coerce;
use super::{diagnostics, Checker};
use crate::ir::{self, Type};
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::{BadNumber, BadStat, Duplicate};
use std::collections::HashMap;

impl Checker<'_> {
    pub(super) fn input(&mut self, i: &ast::Input) {
        let ty = self.ty(&i.ty);
        let default = i.default.as_ref().map(|d| {
            let mut scope = Scope::new(Place::Constant);
            let e = coerce(self.expr(d, &mut scope, Some(&ty)), &ty);
            self.expect_type(&e.ty, &ty, d.span, "the default");
            e
        });
        let idx = self.p.inputs.len() as u32;
        let field = i.field.as_ref().map(|f| f.value.clone());
        if let Some(f) = i.field.as_ref().filter(|f| f.value.is_empty()) {
            self.report(diagnostics::input_empty_field(f.span));
        }
        self.p.inputs.push(ir::InputDecl { name: i.name.text.clone(), ty, default, field });
        self.define(&i.name.text, Global::Input(idx), i.name.span);
    }

    pub(super) fn let_item(&mut self, l: &ast::Let) {
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

    /// `reward { ... }`: each setting at most once, names from their closed lists, a penalty
    /// that is a `Number` and may read anything the score reads.
    pub(super) fn reward(&mut self, r: &ast::RewardDef) {
        let site = self.site(r.span);
        let mut d = ir::RewardDecl {
            advantage: ir::AdvantageForm::Zscore,
            epsilon: 1e-6,
            clip: None,
            penalty: None,
            unscored: ir::RewardUnscored::Exclude,
            uncovered: ir::Uncovered::Zero,
            std: ir::StdForm::Sample,
            site,
        };
        let mut seen: HashMap<&'static str, Span> = HashMap::new();
        for s in &r.settings {
            let word = setting_word(&s.kind);
            if let Some(prev) = seen.insert(word, s.span) {
                self.report(diagnostics::reward_duplicate_setting(word, s.span, prev));
                continue;
            }
            self.reward_setting(&mut d, s);
        }
        self.p.reward = Some(d);
    }

    fn reward_setting(&mut self, d: &mut ir::RewardDecl, s: &ast::RewardSetting) {
        use ast::RewardSettingKind as K;
        match &s.kind {
            K::Advantage(n) => {
                if let Some(v) = self.reward_choice(ir::AdvantageForm::ALL, n, "advantage form") {
                    d.advantage = v;
                }
            }
            K::Unscored(n) => {
                if let Some(v) = self.reward_choice(ir::RewardUnscored::ALL, n, "unscored rule") {
                    d.unscored = v;
                }
            }
            K::Uncovered(n) => {
                if let Some(v) = self.reward_choice(ir::Uncovered::ALL, n, "credit for uncovered tokens") {
                    d.uncovered = v;
                }
            }
            K::Std(n) => {
                if let Some(v) = self.reward_choice(ir::StdForm::ALL, n, "standard deviation") {
                    d.std = v;
                }
            }
            K::Epsilon(e) => {
                if *e <= 0.0 {
                    self.report(diagnostics::reward_bad_number(s.span, BadNumber::Epsilon(*e)));
                }
                d.epsilon = *e;
            }
            K::Clip(lo, hi) => {
                if lo >= hi {
                    self.report(diagnostics::reward_bad_number(s.span, BadNumber::Clip(*lo, *hi)));
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

    /// The value named `n` from a setting's closed list `all`; an unknown name is reported.
    fn reward_choice<T: Copy>(&mut self, all: &[(&'static str, T)], n: &ast::Name, what: &str) -> Option<T> {
        let found = all.iter().find(|(w, _)| *w == n.text).map(|(_, v)| *v);
        if found.is_none() {
            let names: Vec<&str> = all.iter().map(|x| x.0).collect();
            self.report(diagnostics::reward_unknown_value(what, n, &names));
        }
        found
    }
}

impl Checker<'_> {
    /// Every `stat` of the root file, after the criteria and sets they name are all known.
    pub(super) fn stats(&mut self, file: &ast::File) {
        let mut seen: HashMap<String, Span> = HashMap::new();
        for item in &file.items {
            let ast::Item::Stat(st) = item else { continue };
            if let Some(first) = seen.get(&st.name.text) {
                self.report(diagnostics::resolve_duplicate(
                    st.name.span,
                    Duplicate::Stat { name: &st.name.text, first: *first },
                ));
                continue;
            }
            seen.insert(st.name.text.clone(), st.name.span);
            if let Some(d) = self.stat(st) {
                self.p.stats.push(d);
            }
        }
    }

    fn stat(&mut self, st: &ast::StatDef) -> Option<ir::StatDecl> {
        use ast::StatMeasure as M;
        let agg = ir::StatAgg::ALL.iter().find(|(w, _)| *w == st.agg.text).map(|(_, a)| *a);
        let Some(agg) = agg else {
            let names: Vec<&str> = ir::StatAgg::ALL.iter().map(|x| x.0).collect();
            self.report(diagnostics::stat_unknown("aggregate", &st.agg, &names));
            return None;
        };
        let (measure, binary, at) = match &st.measure {
            M::Score(span) => (ir::StatMeasure::Score, false, *span),
            M::Criterion(n) if self.p.scores.iter().any(|s| s.name == n.text) => {
                (ir::StatMeasure::NamedScore { name: n.text.clone() }, false, n.span)
            }
            M::Criterion(n) => {
                let Some(c) = self.p.criteria.iter().find(|c| c.id == n.text) else {
                    let mut ids: Vec<&str> = self.p.criteria.iter().map(|c| c.id.as_str()).collect();
                    ids.extend(self.p.scores.iter().map(|s| s.name.as_str()));
                    self.report(diagnostics::stat_unknown("criterion or score", n, &ids));
                    return None;
                };
                if matches!(c.kind, ir::CriterionKind::Nominal { .. }) {
                    self.report(diagnostics::stat_bad(n.span, BadStat::NominalCriterion(&n.text)));
                    return None;
                }
                // A win share is a number in [0, 1]: an ordinal criterion with a level outside
                // it can never be one.
                if let ir::CriterionKind::Ordinal { levels } = &c.kind {
                    let outside = levels.iter().map(|l| l.0).find(|v| !(0.0..=1.0).contains(v));
                    if let (ir::StatAgg::BradleyTerry, Some(v)) = (agg, outside) {
                        self.report(diagnostics::stat_bad(n.span, BadStat::NotAWinShare(&n.text, v)));
                        return None;
                    }
                }
                let binary = c.kind == ir::CriterionKind::Binary;
                (ir::StatMeasure::Criterion { id: n.text.clone() }, binary, n.span)
            }
            M::Call { func, set } => {
                if !ir::StatMeasure::FUNCTIONS.contains(&func.text.as_str()) {
                    self.report(diagnostics::stat_unknown("statistic function", func, ir::StatMeasure::FUNCTIONS));
                    return None;
                }
                if !self.p.sets.iter().any(|s| s.name == set.text) {
                    let names: Vec<&str> = self.p.sets.iter().map(|s| s.name.as_str()).collect();
                    self.report(diagnostics::stat_unknown("set", set, &names));
                    return None;
                }
                let m = if func.text == "points_ratio" {
                    ir::StatMeasure::PointsRatio { set: set.text.clone() }
                } else {
                    ir::StatMeasure::MetRatio { set: set.text.clone() }
                };
                (m, false, func.span.to(set.span))
            }
        };
        let test = st.test.map(|(op, value, _)| ir::StatTest { op: super::operators::cmpop(op), value });
        match (agg, &st.test) {
            (ir::StatAgg::Rate, None) if !binary => {
                self.report(diagnostics::stat_bad(at, BadStat::RateNeedsTest));
                return None;
            }
            (ir::StatAgg::Mean, Some((_, _, span))) => {
                self.report(diagnostics::stat_bad(*span, BadStat::MeanWithTest));
                return None;
            }
            (ir::StatAgg::BradleyTerry, Some((_, _, span))) => {
                self.report(diagnostics::stat_bad(*span, BadStat::RankingWithTest));
                return None;
            }
            _ => {}
        }
        // `bradley_terry` ranks the systems of a pair of inputs, and only it reads a pair.
        match (agg, &st.per) {
            (ir::StatAgg::BradleyTerry, Some(ast::StatPer::Pair(..))) => {}
            (ir::StatAgg::BradleyTerry, other) => {
                let at = match other {
                    None | Some(ast::StatPer::Pair(..)) => st.agg.span,
                    Some(ast::StatPer::Tag(_, span) | ast::StatPer::Axis(span)) => *span,
                    Some(ast::StatPer::Input(n)) => n.span,
                };
                self.report(diagnostics::stat_bad(at, BadStat::RankingNeedsPair));
                return None;
            }
            (_, Some(ast::StatPer::Pair(first, second))) => {
                self.report(diagnostics::stat_bad(first.span.to(second.span), BadStat::PairNeedsRanking(&st.agg.text)));
                return None;
            }
            _ => {}
        }
        let per = match &st.per {
            None => None,
            Some(ast::StatPer::Tag(prefix, span)) => {
                if measure.set().is_none() {
                    self.report(diagnostics::stat_bad(*span, BadStat::PerNeedsSet("tag")));
                    return None;
                }
                Some(ir::StatPer::Tag { prefix: prefix.as_ref().map(|p| p.value.clone()).unwrap_or_default() })
            }
            Some(ast::StatPer::Axis(span)) => {
                if measure.set().is_none() {
                    self.report(diagnostics::stat_bad(*span, BadStat::PerNeedsSet("axis")));
                    return None;
                }
                Some(ir::StatPer::Axis)
            }
            Some(ast::StatPer::Input(n)) => {
                let Some(input) = self.p.inputs.iter().find(|i| i.name == n.text) else {
                    let names: Vec<&str> = self.p.inputs.iter().map(|i| i.name.as_str()).collect();
                    self.report(diagnostics::stat_unknown("input", n, &names));
                    return None;
                };
                let base = |t: &Type| match t {
                    Type::Optional(inner) => (**inner).clone(),
                    t => t.clone(),
                };
                let ok = match base(&input.ty) {
                    Type::Text | Type::Number | Type::Bool => true,
                    Type::List(item) => base(&item) == Type::Text,
                    _ => false,
                };
                if !ok {
                    let ty = format!("`{}`", input.ty);
                    self.report(diagnostics::stat_bad(n.span, BadStat::PerInputType(&n.text, ty)));
                    return None;
                }
                Some(ir::StatPer::Input { name: n.text.clone() })
            }
            Some(ast::StatPer::Pair(first, second)) => {
                for n in [first, second] {
                    let Some(input) = self.p.inputs.iter().find(|i| i.name == n.text) else {
                        let names: Vec<&str> = self.p.inputs.iter().map(|i| i.name.as_str()).collect();
                        self.report(diagnostics::stat_unknown("input", n, &names));
                        return None;
                    };
                    if input.ty != Type::Text {
                        let ty = format!("`{}`", input.ty);
                        self.report(diagnostics::stat_bad(n.span, BadStat::SystemInputType(&n.text, ty)));
                        return None;
                    }
                }
                if first.text == second.text {
                    self.report(diagnostics::stat_bad(second.span, BadStat::PairTwice(&first.text)));
                    return None;
                }
                Some(ir::StatPer::Pair { first: first.text.clone(), second: second.text.clone() })
            }
        };
        let clip = match st.clip {
            Some((_, _, span)) if agg == ir::StatAgg::BradleyTerry => {
                self.report(diagnostics::stat_bad(span, BadStat::RankingWithClip));
                return None;
            }
            Some((lo, hi, span)) if lo >= hi => {
                self.report(diagnostics::stat_bad(span, BadStat::Clip(lo, hi)));
                return None;
            }
            Some((lo, hi, _)) => Some((lo, hi)),
            None => None,
        };
        Some(ir::StatDecl { name: st.name.text.clone(), agg, measure, test, per, clip })
    }
}

/// The keyword of a reward setting.
fn setting_word(kind: &ast::RewardSettingKind) -> &'static str {
    use ast::RewardSettingKind as K;
    match kind {
        K::Advantage(_) => "advantage",
        K::Epsilon(_) => "epsilon",
        K::Clip(..) => "clip",
        K::Penalty(_) => "penalty",
        K::Unscored(_) => "unscored",
        K::Uncovered(_) => "uncovered",
        K::Std(_) => "std",
    }
}
