//! Stage 3, one criterion (static, or the template of an `each` block): its text, its kind
//! (binary, ordinal levels, nominal labels, continuous), its attributes (points, weight,
//! tags, axis, pass mark) and its verifier (a judge, a `check`, a `value`, or an extraction
//! followed by a check), with the kinds a local judge cannot decide.

use super::scope::Scope;
use super::{diagnostics, Checker};
use crate::ir::{self, Const, Expr, Type};
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::{HiddenInput, KindError, Mismatch};

/// A criterion's attributes as checked, before its verifier.
struct Attrs {
    kind: ir::CriterionKind,
    /// Where the kind was given (binary when never).
    kind_span: Option<Span>,
    points: Option<Expr>,
    weight: Option<Expr>,
    axis: Option<String>,
    tags: Option<Expr>,
    pass: Option<Expr>,
}

impl Checker<'_> {
    /// Check criterion `c` (named `id`) in `scope`, a member of `sets`. `None` when it cannot
    /// be decided (no verifier, an unknown judge or input): the error is reported.
    pub(super) fn criterion_decl(
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
        let mut attrs = self.criterion_attrs(c, scope);
        let verifier = match &c.verifier {
            Some(v) => self.verifier(v, &mut attrs, scope)?,
            None => match default_judge {
                Some(j) => ir::Verifier::Judge { judge: self.lookup_judge(j)? },
                None => {
                    self.report(diagnostics::resolve_no_verifier(id, c.span));
                    return None;
                }
            },
        };
        self.check_local_kind(c, &verifier, &attrs.kind);
        self.compared_kind(c, &verifier, &mut attrs);
        self.grouped_kind(c, &verifier, &mut attrs);
        let site = self.site(c.span);
        let Attrs { kind, points, weight, axis, tags, pass, .. } = attrs;
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

    fn criterion_attrs(&mut self, c: &ast::Criterion, scope: &mut Scope) -> Attrs {
        let mut attrs = Attrs {
            kind: ir::CriterionKind::Binary,
            kind_span: None,
            points: None,
            weight: None,
            axis: None,
            tags: None,
            pass: None,
        };
        for a in &c.attrs {
            match &a.kind {
                ast::AttrKind::Points(e) => attrs.points = Some(self.number_attr(e, scope, "points")),
                ast::AttrKind::Weight(e) => attrs.weight = Some(self.number_attr(e, scope, "a weight")),
                ast::AttrKind::Pass(e) => attrs.pass = Some(self.number_attr(e, scope, "a pass threshold")),
                ast::AttrKind::Tags(e) => {
                    let want = Type::List(Box::new(Type::Text));
                    let x = self.expr(e, scope, Some(&want));
                    self.expect_type(&x.ty, &want, e.span, "tags");
                    attrs.tags = Some(x);
                }
                ast::AttrKind::Axis(s) => attrs.axis = Some(s.value.clone()),
                ast::AttrKind::Continuous => self.set_kind(&mut attrs, ir::CriterionKind::Continuous, a.span),
                ast::AttrKind::Ordinal(levels) => {
                    let levels = self.ordinal_levels(levels, a.span);
                    self.set_kind(&mut attrs, ir::CriterionKind::Ordinal { levels }, a.span);
                }
                ast::AttrKind::Nominal(labels) => {
                    let labels = self.nominal_labels(labels);
                    self.set_kind(&mut attrs, ir::CriterionKind::Nominal { labels }, a.span);
                }
            }
        }
        attrs
    }

    /// A `Number` attribute, `what` in the message when it is not one.
    fn number_attr(&mut self, e: &ast::Expr, scope: &mut Scope, what: &str) -> Expr {
        let x = self.expr(e, scope, Some(&Type::Number));
        self.expect_type(&x.ty, &Type::Number, e.span, what);
        x
    }

    /// The criterion's kind is `kind`, given at `at`; a second kind is an error.
    fn set_kind(&mut self, attrs: &mut Attrs, kind: ir::CriterionKind, at: Span) {
        if let Some(first) = attrs.kind_span {
            self.report(diagnostics::type_criterion_kind(at, KindError::Second { first }));
        }
        attrs.kind_span = Some(at);
        attrs.kind = kind;
    }

    /// `ordinal [...]` at `at`: distinct levels, at least two, in increasing order.
    fn ordinal_levels(&mut self, levels: &[ast::Level], at: Span) -> Vec<(f64, String)> {
        let mut lv: Vec<(f64, String)> = Vec::new();
        for l in levels {
            if lv.iter().any(|(v, _)| *v == l.value) {
                self.report(diagnostics::type_criterion_kind(l.span, KindError::LevelTwice(l.value)));
            }
            lv.push((l.value, l.descriptor.value.clone()));
        }
        if lv.len() < 2 {
            self.report(diagnostics::type_criterion_kind(at, KindError::TooFewLevels));
        }
        if lv.windows(2).any(|w| w[0].0 >= w[1].0) {
            self.report(diagnostics::type_criterion_kind(at, KindError::LevelsOutOfOrder));
        }
        lv
    }

    /// `nominal {...}`: distinct labels with values in [0, 1].
    fn nominal_labels(&mut self, labels: &[ast::Label]) -> Vec<(String, f64)> {
        let mut lb: Vec<(String, f64)> = Vec::new();
        for l in labels {
            if lb.iter().any(|(n, _)| *n == l.name.value) {
                self.report(diagnostics::type_criterion_kind(l.span, KindError::LabelTwice(&l.name.value)));
            }
            if !(0.0..=1.0).contains(&l.value) {
                self.report(diagnostics::facts_value_range(l.value, l.span));
            }
            lb.push((l.name.value.clone(), l.value));
        }
        lb
    }

    /// The written verifier; `value` makes a criterion without a kind continuous.
    fn verifier(&mut self, v: &ast::Verifier, attrs: &mut Attrs, scope: &mut Scope) -> Option<ir::Verifier> {
        Some(match &v.kind {
            ast::VerifierKind::Judge(j) => ir::Verifier::Judge { judge: self.lookup_judge(j)? },
            ast::VerifierKind::Check(e) => {
                self.binary_verifier(attrs, v.span);
                let x = self.expr(e, scope, Some(&Type::Bool));
                self.expect_type(&x.ty, &Type::Bool, e.span, "a check");
                ir::Verifier::Check { expr: x }
            }
            ast::VerifierKind::Value(e) => self.value_verifier(e, attrs, scope, v.span),
            ast::VerifierKind::Extract { var, ty, from, judge, check } => {
                self.extract(var, ty, from, judge, check, scope)?
            }
            // The sub-checks themselves are criteria of their own steps (`Checker::sub_checks`);
            // here, what the criterion's value is made of.
            ast::VerifierKind::Checks { value, .. } => {
                let Some((set, at)) = scope.checks else {
                    self.report(diagnostics::type_sub_checks_place(v.span));
                    return None;
                };
                match value {
                    None => {
                        self.binary_verifier(attrs, v.span);
                        let site = self.site(at);
                        let all = ir::ExprKind::Aggregate {
                            op: ir::AggOp::All,
                            set,
                            policy: ir::Policy::Propagate,
                            args: vec![],
                            site,
                        };
                        ir::Verifier::Check { expr: Expr { kind: all, ty: Type::Bool } }
                    }
                    Some(e) => self.value_verifier(e, attrs, scope, v.span),
                }
            }
        })
    }

    /// A verifier that decides met or unmet (`check`, sub-checks without a value): a kind
    /// given other than binary is an error at `at`.
    fn binary_verifier(&mut self, attrs: &Attrs, at: Span) {
        if attrs.kind_span.is_some() && !matches!(attrs.kind, ir::CriterionKind::Binary) {
            self.report(diagnostics::type_criterion_kind(at, KindError::CheckNotBinary));
        }
    }

    /// A `value` (written, or of sub-checks): a `Number`, which makes a criterion without a kind
    /// continuous; another kind given is an error at `at`.
    fn value_verifier(&mut self, e: &ast::Expr, attrs: &mut Attrs, scope: &mut Scope, at: Span) -> ir::Verifier {
        if attrs.kind_span.is_none() {
            attrs.kind = ir::CriterionKind::Continuous;
        } else if !matches!(attrs.kind, ir::CriterionKind::Continuous) {
            self.report(diagnostics::type_criterion_kind(at, KindError::ValueNotContinuous));
        }
        let x = self.expr(e, scope, Some(&Type::Number));
        self.expect_type(&x.ty, &Type::Number, e.span, "a value");
        ir::Verifier::Value { expr: x }
    }

    /// `extract VAR: TYPE from INPUT by JUDGE check EXPR`: the judge must see the input.
    fn extract(
        &mut self,
        var: &ast::Name,
        ty: &ast::TypeExpr,
        from: &ast::Name,
        judge: &ast::Name,
        check: &ast::Expr,
        scope: &mut Scope,
    ) -> Option<ir::Verifier> {
        let judge = self.lookup_judge(judge)?;
        let from_idx = self.input_named(from)?;
        if !self.p.judges[judge as usize].sees.contains(&from_idx) {
            let jn = self.p.judges[judge as usize].name.clone();
            self.report(diagnostics::judge_hidden_input(&jn, from.span, HiddenInput::Extract { input: &from.text }));
        }
        let t = self.ty(ty);
        if !matches!(t, Type::Number | Type::Text | Type::Bool | Type::Any) {
            self.report(diagnostics::type_mismatch(Mismatch::Extracted { found: &t, at: ty.span }));
        }
        let local = scope.push(&var.text, t.clone());
        let x = self.expr(check, scope, Some(&Type::Bool));
        scope.pop();
        self.expect_type(&x.ty, &Type::Bool, check.span, "a check");
        Some(ir::Verifier::Extract { judge, from: from_idx, ty: t, local, check: x })
    }

    /// A criterion decided by a comparing judge is a preference: it is written without a kind
    /// (not ordinal, nominal or continuous), and a comparing judge extracts nothing.
    fn compared_kind(&mut self, c: &ast::Criterion, verifier: &ir::Verifier, attrs: &mut Attrs) {
        let (ir::Verifier::Judge { judge } | ir::Verifier::Extract { judge, .. }) = verifier else { return };
        let j = &self.p.judges[*judge as usize];
        if j.compares.is_none() {
            return;
        }
        let name = j.name.clone();
        let span = c.verifier.as_ref().map_or(c.span, |v| v.span);
        if matches!(verifier, ir::Verifier::Extract { .. }) {
            let help = "extract with a judge that sees one input; a comparing judge returns a preference";
            self.report(diagnostics::judge_bad_compare(&name, span, "a comparing judge extracts nothing", help));
            return;
        }
        if attrs.kind != ir::CriterionKind::Binary {
            let help = "a criterion decided by a comparing judge is a preference between the two candidates: \
                        leave out `ordinal`, `nominal` and `continuous`";
            let why = "a comparing judge decides preferences, not this criterion's kind";
            self.report(diagnostics::judge_bad_compare(&name, attrs.kind_span.unwrap_or(span), why, help));
            return;
        }
        attrs.kind = ir::CriterionKind::Preference;
    }

    /// A criterion decided by a group judge is continuous (written so, or without a kind): its
    /// value is the member's score, or its place in the ranking; a group judge extracts nothing.
    fn grouped_kind(&mut self, c: &ast::Criterion, verifier: &ir::Verifier, attrs: &mut Attrs) {
        let (ir::Verifier::Judge { judge } | ir::Verifier::Extract { judge, .. }) = verifier else { return };
        let j = &self.p.judges[*judge as usize];
        if j.rollouts.is_none() {
            return;
        }
        let name = j.name.clone();
        let span = c.verifier.as_ref().map_or(c.span, |v| v.span);
        if matches!(verifier, ir::Verifier::Extract { .. }) {
            let help = "extract with a judge that sees one response; a group judge scores every rollout of a group";
            self.report(diagnostics::judge_bad_rollouts(&name, span, "a group judge extracts nothing", help));
            return;
        }
        match attrs.kind {
            ir::CriterionKind::Binary | ir::CriterionKind::Continuous => attrs.kind = ir::CriterionKind::Continuous,
            _ => {
                let help = "a criterion decided by a group judge is continuous (each rollout's score, or its place \
                            in the ranking, in [0, 1]): write `continuous` or no kind";
                let why = "a group judge decides continuous criteria, not this criterion's kind";
                self.report(diagnostics::judge_bad_rollouts(&name, attrs.kind_span.unwrap_or(span), why, help));
            }
        }
    }

    /// The template of an `each` block is decided by a group judge: refused, since the members
    /// of a group would each bring their own criteria.
    pub(super) fn group_judged_instances(&mut self, c: &ast::Criterion, decl: &ir::CriterionDecl) {
        let ir::Verifier::Judge { judge } = &decl.verifier else { return };
        let j = &self.p.judges[*judge as usize];
        if j.rollouts.is_some() {
            let name = j.name.clone();
            let span = c.verifier.as_ref().map_or(c.span, |v| v.span);
            let help = "a group judge asks about the same criteria for every member of a group: declare them as \
                        static criteria, outside `each`";
            let why = "a group judge cannot decide the instances of an `each` block";
            self.report(diagnostics::judge_bad_rollouts(&name, span, why, help));
        }
    }

    /// A local judge scores binary and continuous criteria only, and extracts nothing.
    fn check_local_kind(&mut self, c: &ast::Criterion, verifier: &ir::Verifier, kind: &ir::CriterionKind) {
        let (ir::Verifier::Judge { judge } | ir::Verifier::Extract { judge, .. }) = verifier else { return };
        let j = &self.p.judges[*judge as usize];
        if j.local.is_none() {
            return;
        }
        let what = match (verifier, kind) {
            (ir::Verifier::Extract { .. }, _) => "extract values",
            (_, ir::CriterionKind::Ordinal { .. }) => "score an ordinal criterion",
            (_, ir::CriterionKind::Nominal { .. }) => "score a nominal criterion",
            _ => return,
        };
        let name = j.name.clone();
        let span = c.verifier.as_ref().map_or(c.span, |v| v.span);
        self.report(diagnostics::judge_local_kind(&name, what, span));
    }
}
