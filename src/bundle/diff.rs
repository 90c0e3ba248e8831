//! `rubric diff`'s structural half: what changed between two versions of a rubric, criterion by
//! criterion, gate by gate and judge by judge, computed on two `Description`s (names, not
//! indices, and no source sites), so that moving or re-indenting a declaration is not a change.

use super::describe::{CriterionView, Description, GateView, InputView, JudgeView, NamedExpr, SetView};
use serde::Serialize;

/// One change from version A to version B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `rubric`, `input`, `judge`, `gate`, `criterion`, `set`, `let`, `function`, `score` or
    /// `example`.
    pub scope: &'static str,
    /// The thing's name (a criterion's id; a per-instance block as `name[]`).
    pub name: String,
    /// `added`, `removed`, `renamed`, or the aspect that changed: `reworded`, `points`,
    /// `sign`, `weight`, `kind`, `scale`, `pass`, `axis`, `tags`, `moved`, `verifier`,
    /// `condition`, `action`, `value`, `reason`, `order`, `model`, `sampling`, `sees`,
    /// `template`, `system`, `returns`, `evidence`, `scoring`, `per_call`, `local`, `calibration`, `order`, `jury`, `type`, `default`,
    /// `weight`, `kind`, `members`, `expression`, `version`, `title`.
    pub change: &'static str,
    pub from: Option<String>,
    pub to: Option<String>,
}

struct Out(Vec<Change>);

impl Out {
    fn push(
        &mut self,
        scope: &'static str,
        name: &str,
        change: &'static str,
        from: Option<String>,
        to: Option<String>,
    ) {
        self.0.push(Change { scope, name: name.to_string(), change, from, to });
    }

    /// Record a change of one aspect when the two values differ.
    fn cmp<T: PartialEq + ToString>(&mut self, scope: &'static str, name: &str, change: &'static str, a: &T, b: &T) {
        if a != b {
            self.push(scope, name, change, Some(a.to_string()), Some(b.to_string()));
        }
    }

    fn cmp_opt(
        &mut self,
        scope: &'static str,
        name: &str,
        change: &'static str,
        a: &Option<String>,
        b: &Option<String>,
    ) {
        if a != b {
            self.push(scope, name, change, a.clone(), b.clone());
        }
    }
}

/// Every change from `a` to `b`, in a stable order: rubric, inputs, judges, gates, criteria,
/// sets, lets, functions, score, examples.
pub fn diff(a: &Description, b: &Description) -> Vec<Change> {
    let mut out = Out(Vec::new());
    out.cmp("rubric", &b.rubric.name, "renamed", &a.rubric.name, &b.rubric.name);
    out.cmp("rubric", &b.rubric.name, "version", &a.rubric.version, &b.rubric.version);
    out.cmp_opt("rubric", &b.rubric.name, "title", &a.rubric.title, &b.rubric.title);
    keyed(&mut out, "input", &a.inputs, &b.inputs, |i| &i.name, inputs);
    keyed(&mut out, "judge", &a.judges, &b.judges, |j| &j.name, judges);
    keyed(&mut out, "gate", &a.gates, &b.gates, |g| &g.name, gates);
    order(&mut out, "gate", a.gates.iter().map(|g| &g.name), b.gates.iter().map(|g| &g.name));
    criteria(&mut out, &a.criteria, &b.criteria);
    keyed(&mut out, "set", &a.sets, &b.sets, |s| &s.name, sets);
    keyed(&mut out, "let", &a.lets, &b.lets, |l| &l.name, |o, x, y| named(o, "let", x, y));
    keyed(&mut out, "function", &a.functions, &b.functions, |f| &f.name, |o, x, y| named(o, "function", x, y));
    if a.score != b.score {
        out.push("score", "score", "expression", Some(a.score.clone()), Some(b.score.clone()));
    }
    keyed(&mut out, "score", &a.scores, &b.scores, |s| &s.name, |o, x, y| named(o, "score", x, y));
    keyed(&mut out, "stat", &a.stats, &b.stats, |s| &s.name, |o, x, y| named(o, "stat", x, y));
    for e in &a.examples {
        if !b.examples.contains(e) {
            out.push("example", e, "removed", None, None);
        }
    }
    for e in &b.examples {
        if !a.examples.contains(e) {
            out.push("example", e, "added", None, None);
        }
    }
    out.0
}

/// Match items by name: removed ones, then for each item of `b` either `added` or its aspect
/// changes.
fn keyed<T>(
    out: &mut Out,
    scope: &'static str,
    a: &[T],
    b: &[T],
    key: impl Fn(&T) -> &String,
    aspects: impl Fn(&mut Out, &T, &T),
) {
    for x in a {
        if !b.iter().any(|y| key(y) == key(x)) {
            out.push(scope, key(x), "removed", None, None);
        }
    }
    for y in b {
        match a.iter().find(|x| key(x) == key(y)) {
            Some(x) => aspects(out, x, y),
            None => out.push(scope, key(y), "added", None, None),
        }
    }
}

/// The relative order of the items both versions have.
fn order<'a>(
    out: &mut Out,
    scope: &'static str,
    a: impl Iterator<Item = &'a String>,
    b: impl Iterator<Item = &'a String>,
) {
    let a: Vec<&String> = a.collect();
    let b: Vec<&String> = b.collect();
    let common_a: Vec<&String> = a.iter().copied().filter(|x| b.contains(x)).collect();
    let common_b: Vec<&String> = b.iter().copied().filter(|x| a.contains(x)).collect();
    if common_a != common_b {
        let join = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        out.push(scope, "*", "order", Some(join(&common_a)), Some(join(&common_b)));
    }
}

fn inputs(out: &mut Out, a: &InputView, b: &InputView) {
    out.cmp("input", &b.name, "type", &a.ty, &b.ty);
    out.cmp_opt("input", &b.name, "default", &a.default, &b.default);
    out.cmp_opt("input", &b.name, "field", &a.field, &b.field);
}

fn sampling(j: &JudgeView) -> String {
    let mut parts = Vec::new();
    if let Some(t) = j.temperature {
        parts.push(format!("temperature {}", super::describe::num(t)));
    }
    if let Some(t) = j.top_p {
        parts.push(format!("top_p {}", super::describe::num(t)));
    }
    if let Some(t) = j.max_tokens {
        parts.push(format!("max_tokens {t}"));
    }
    if let Some(e) = &j.reasoning_effort {
        parts.push(format!("reasoning_effort {e}"));
    }
    if let Some(t) = j.seed {
        parts.push(format!("seed {t}"));
    }
    parts.push(format!("samples {}", j.samples));
    parts.push(format!("vote {}", j.vote));
    parts.join(" ")
}

/// `verdict(met: Bool, evidence: Quote)`.
pub fn returns(j: &JudgeView) -> String {
    let f: Vec<String> = j.reply_fields.iter().map(|(n, t)| format!("{n}: {t}")).collect();
    format!("{}({})", j.returns, f.join(", "))
}

fn judges(out: &mut Out, a: &JudgeView, b: &JudgeView) {
    let n = &b.name;
    out.cmp_opt("judge", n, "model", &a.model, &b.model);
    out.cmp("judge", n, "sampling", &sampling(a), &sampling(b));
    out.cmp("judge", n, "sees", &a.sees.join(", "), &b.sees.join(", "));
    out.cmp_opt("judge", n, "template", &a.template, &b.template);
    out.cmp_opt("judge", n, "system", &a.system, &b.system);
    out.cmp("judge", n, "returns", &returns(a), &returns(b));
    out.cmp_opt("judge", n, "evidence", &a.evidence_from, &b.evidence_from);
    out.cmp("judge", n, "scoring", &a.scoring, &b.scoring);
    out.cmp("judge", n, "per_call", &a.per_call, &b.per_call);
    out.cmp_opt("judge", n, "local", &a.local, &b.local);
    out.cmp_opt("judge", n, "calibration", &a.calibration, &b.calibration);
    out.cmp_opt("judge", n, "order", &a.order, &b.order);
    out.cmp_opt("judge", n, "jury", &a.jury, &b.jury);
    out.cmp_opt("judge", n, "cascade", &a.cascade, &b.cascade);
    out.cmp_opt("judge", n, "compares", &a.compares, &b.compares);
    out.cmp_opt("judge", n, "rollouts", &a.rollouts, &b.rollouts);
}

fn gates(out: &mut Out, a: &GateView, b: &GateView) {
    let n = &b.name;
    out.cmp("gate", n, "condition", &a.condition, &b.condition);
    out.cmp("gate", n, "action", &a.action, &b.action);
    out.cmp("gate", n, "value", &a.value, &b.value);
    out.cmp_opt("gate", n, "reason", &a.reason, &b.reason);
}

fn sets(out: &mut Out, a: &SetView, b: &SetView) {
    out.cmp("set", &b.name, "kind", &a.kind, &b.kind);
    let w = |s: &SetView| s.weight.map(super::describe::num);
    out.cmp_opt("set", &b.name, "weight", &w(a), &w(b));
}

fn named(out: &mut Out, scope: &'static str, a: &NamedExpr, b: &NamedExpr) {
    out.cmp(scope, &b.name, "type", &a.ty, &b.ty);
    out.cmp(scope, &b.name, "expression", &a.value, &b.value);
}

fn sign(points: &Option<String>) -> Option<bool> {
    points.as_deref().and_then(|p| p.parse::<f64>().ok()).filter(|p| *p != 0.0).map(|p| p < 0.0)
}

/// Criteria: a removed and an added criterion with the same text are one renamed criterion.
fn criteria(out: &mut Out, a: &[CriterionView], b: &[CriterionView]) {
    let mut renamed: Vec<(&CriterionView, &CriterionView)> = Vec::new();
    let removed: Vec<&CriterionView> = a.iter().filter(|x| !b.iter().any(|y| y.id == x.id)).collect();
    let added: Vec<&CriterionView> = b.iter().filter(|y| !a.iter().any(|x| x.id == y.id)).collect();
    for x in &removed {
        if let Some(y) = added.iter().find(|y| y.text == x.text && !renamed.iter().any(|(_, r)| r.id == y.id)) {
            renamed.push((x, y));
        }
    }
    for x in &removed {
        if !renamed.iter().any(|(r, _)| r.id == x.id) {
            out.push("criterion", &x.id, "removed", Some(x.text.clone()), None);
        }
    }
    for y in b {
        if let Some(x) = a.iter().find(|x| x.id == y.id) {
            criterion(out, x, y);
        } else if let Some((x, _)) = renamed.iter().find(|(_, r)| r.id == y.id) {
            out.push("criterion", &y.id, "renamed", Some(x.id.clone()), Some(y.id.clone()));
            criterion(out, x, y);
        } else {
            out.push("criterion", &y.id, "added", None, Some(y.text.clone()));
        }
    }
}

fn criterion(out: &mut Out, a: &CriterionView, b: &CriterionView) {
    let n = &b.id;
    out.cmp("criterion", n, "reworded", &a.text, &b.text);
    if sign(&a.points).is_some() && sign(&b.points).is_some() && sign(&a.points) != sign(&b.points) {
        out.cmp_opt("criterion", n, "sign", &a.points, &b.points);
    } else {
        out.cmp_opt("criterion", n, "points", &a.points, &b.points);
    }
    out.cmp_opt("criterion", n, "weight", &a.weight, &b.weight);
    out.cmp("criterion", n, "kind", &a.kind, &b.kind);
    if a.kind == b.kind {
        out.cmp_opt("criterion", n, "scale", &a.scale, &b.scale);
    }
    out.cmp_opt("criterion", n, "pass", &a.pass, &b.pass);
    out.cmp_opt("criterion", n, "axis", &a.axis, &b.axis);
    out.cmp_opt("criterion", n, "tags", &a.tags, &b.tags);
    let sets = |c: &CriterionView| if c.sets.is_empty() { "no set".to_string() } else { c.sets.join(" < ") };
    out.cmp("criterion", n, "moved", &sets(a), &sets(b));
    let v = |c: &CriterionView| format!("{} {}", c.verifier, c.verifier_detail);
    out.cmp("criterion", n, "verifier", &v(a), &v(b));
}
