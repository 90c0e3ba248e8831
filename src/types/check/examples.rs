//! Stage 3, `example` blocks (golden tests inside a rubric): constant input bindings, recorded
//! judge verdicts in the JSON forms of `--verdicts` files (each for a criterion that judge
//! decides), and expectations (score, failure class, group value, criterion result); every
//! required input must be bound and an example must expect something.

use super::scope::{Global, Place, Scope};
use super::unify::coerce;
use super::{diagnostics, Checker};
use crate::ir::{self, Expr};
use crate::syntax::ast;

/// What an example is made of, collected statement by statement.
#[derive(Default)]
struct Parts {
    bindings: Vec<(u32, Expr)>,
    verdicts: Vec<(String, serde_json::Value)>,
    expects: Vec<ir::Expect>,
}

impl Checker<'_> {
    pub(super) fn example(&mut self, e: &ast::Example) {
        let mut parts = Parts::default();
        for s in &e.stmts {
            self.example_stmt(s, &mut parts);
        }
        let unbound: Vec<String> = self
            .p
            .inputs
            .iter()
            .enumerate()
            .filter(|(i, input)| {
                let bound = parts.bindings.iter().any(|(j, _)| *j as usize == *i);
                !bound && input.default.is_none() && !input.ty.is_optional()
            })
            .map(|(_, input)| input.name.clone())
            .collect();
        for input in unbound {
            self.report(diagnostics::example_missing_input(&e.name, &input));
        }
        if parts.expects.is_empty() {
            self.report(diagnostics::example_no_expectation(&e.name));
        }
        let site = self.site(e.span);
        let Parts { bindings, verdicts, expects } = parts;
        self.p.examples.push(ir::Example { name: e.name.value.clone(), bindings, verdicts, expects, site });
    }

    fn example_stmt(&mut self, s: &ast::ExampleStmt, parts: &mut Parts) {
        match &s.kind {
            ast::ExampleStmtKind::Bind { input, value } => self.example_binding(input, value, &mut parts.bindings),
            ast::ExampleStmtKind::Judge { judge, verdicts } => {
                self.example_verdicts(judge, verdicts, &mut parts.verdicts)
            }
            ast::ExampleStmtKind::ExpectScore { value, within } => {
                let site = self.site(s.span);
                parts.expects.push(ir::Expect::Score { value: *value, within: within.unwrap_or(1e-9), site });
            }
            ast::ExampleStmtKind::ExpectFailure(class) => {
                let site = self.site(s.span);
                parts.expects.push(ir::Expect::Failure { class: class.as_ref().map(|c| c.value.clone()), site });
            }
            ast::ExampleStmtKind::ExpectGroup { group, value, within } => {
                if !matches!(self.global(&group.text), Some(Global::Set(s)) if self.p.sets[s as usize].kind == ir::SetKind::Group)
                {
                    let groups: Vec<String> =
                        self.p.sets.iter().filter(|s| s.kind == ir::SetKind::Group).map(|s| s.name.clone()).collect();
                    self.report(diagnostics::resolve_unknown_set(group, groups.iter().map(String::as_str)));
                }
                let site = self.site(s.span);
                let (name, value, within) = (group.text.clone(), *value, within.unwrap_or(1e-9));
                parts.expects.push(ir::Expect::Group { name, value, within, site });
            }
            ast::ExampleStmtKind::ExpectCriterion { key, verdict } => {
                let Some(id) = self.example_criterion(key, None) else { return };
                let site = self.site(s.span);
                parts.expects.push(ir::Expect::Criterion { id, verdict: verdict_json(&verdict.kind), site });
            }
        }
    }

    /// `INPUT VALUE`: a constant of the input's type, bound once.
    fn example_binding(&mut self, input: &ast::Name, value: &ast::Expr, bindings: &mut Vec<(u32, Expr)>) {
        let Some(i) = self.input_named(input) else { return };
        let ty = self.p.inputs[i as usize].ty.clone();
        let mut scope = Scope::new(Place::Constant);
        let v = coerce(self.expr(value, &mut scope, Some(&ty)), &ty);
        self.expect_type(&v.ty, &ty, value.span, "this example value");
        if bindings.iter().any(|(j, _)| *j == i) {
            self.report(diagnostics::example_duplicate(input));
        }
        bindings.push((i, v));
    }

    /// `judge JUDGE says KEY = VERDICT, ...`: each key a criterion that judge decides.
    fn example_verdicts(
        &mut self,
        judge: &ast::Name,
        verdicts: &[(ast::CriterionKey, ast::VerdictLit)],
        out: &mut Vec<(String, serde_json::Value)>,
    ) {
        let Some(j) = self.lookup_judge(judge) else { return };
        for (key, lit) in verdicts {
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
            out.push((cid, v));
        }
    }

    /// Resolve an example's criterion key to a criterion id. With `judge`, the criterion must
    /// be decided by that judge.
    fn example_criterion(&mut self, key: &ast::CriterionKey, judge: Option<u32>) -> Option<String> {
        let uses = |v: &ir::Verifier| match v {
            ir::Verifier::Judge { judge: j } | ir::Verifier::Extract { judge: j, .. } => Some(*j),
            _ => None,
        };
        match (self.global(&key.name.text), key.index) {
            (Some(Global::Criterion(c)), None) => {
                if let Some(j) = judge {
                    if uses(&self.p.criteria[c as usize].verifier) != Some(j) {
                        let jn = self.p.judges[j as usize].name.clone();
                        self.report(diagnostics::example_not_judged(key.span, &key.name.text, &jn, false));
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
                            self.report(diagnostics::example_not_judged(key.span, &key.name.text, &jn, true));
                            return None;
                        }
                    }
                }
                Some(key.id())
            }
            (Some(Global::Set(s)), None) if self.each_sets.contains_key(&s) => {
                self.report(diagnostics::example_index_needed(key.span, &key.name.text));
                None
            }
            _ => {
                let candidates: Vec<String> = self.p.criteria.iter().map(|c| c.id.clone()).collect();
                let d = diagnostics::resolve_unknown_criterion(
                    key.span,
                    &key.id(),
                    &key.name.text,
                    candidates.iter().map(String::as_str),
                );
                self.report(d);
                None
            }
        }
    }
}

/// The JSON form of a recorded verdict, as in `--verdicts` files.
pub(super) fn verdict_json(v: &ast::VerdictLitKind) -> serde_json::Value {
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
