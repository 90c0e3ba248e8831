//! Stage 3, aggregations over a set of criteria (`weighted_mean(all)`, `at_least(tier, 2)`,
//! `tree(group)`...): the set, the explicit `unscored:` policy (`propagate` by default,
//! decision record 0003) and, for `at_least`, the count.

use super::scope::Scope;
use super::{diagnostics, Checker};
use crate::ir::{self, AggOp, Expr, ExprKind, Policy, Type};
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::{BadArguments, Mismatch};

impl Checker<'_> {
    /// `op(set_name, rest...)` where `set_name` names set number `set`.
    pub(super) fn aggregate(
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
                Some(n) if n.text == "unscored" => policy = self.policy(&a.value),
                Some(n) => {
                    let what = BadArguments::AggregationParameter { name: n };
                    self.report(diagnostics::type_bad_arguments(op.name(), what));
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
            let what = BadArguments::AggregationCount { set: &set_name.text, at: span };
            self.report(diagnostics::type_bad_arguments(op.name(), what));
        }
        if op == AggOp::Tree && self.p.sets[set as usize].kind != ir::SetKind::Group {
            self.report(diagnostics::type_mismatch(Mismatch::TreeOfNonGroup { set: set_name }));
        }
        let site = self.site(span);
        Expr { kind: ExprKind::Aggregate { op, set, policy, args: extra, site }, ty: op.result_type() }
    }

    /// `unscored: skip | unmet | propagate`; anything else is reported and propagates.
    fn policy(&mut self, value: &ast::Expr) -> Policy {
        match &value.kind {
            ast::ExprKind::Var(v) => match v.text.as_str() {
                "skip" => Policy::Skip,
                "unmet" => Policy::Unmet,
                "propagate" => Policy::Propagate,
                other => {
                    self.report(diagnostics::type_bad_policy(v.span, Some(other)));
                    Policy::Propagate
                }
            },
            _ => {
                self.report(diagnostics::type_bad_policy(value.span, None));
                Policy::Propagate
            }
        }
    }
}
