//! `example` blocks (golden tests inside rubric files): bind the example's inputs, feed its
//! recorded verdicts to an engine and compare the result with its expectations.

use crate::engine::{Engine, RowResult, Status};
use crate::interp::eval_constant;
use crate::ir::{Expect, Program, SiteId};
use crate::value::Value;
use serde_json::Value as Json;

/// A failed expectation; `site` is the expectation's (or the example's), which the site table
/// beside the program locates in the sources.
#[derive(Debug, Clone)]
pub struct Failure {
    pub site: Option<SiteId>,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct ExampleOutcome {
    pub name: String,
    pub site: Option<SiteId>,
    pub failures: Vec<Failure>,
    pub result: Option<RowResult>,
}

impl ExampleOutcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn close(a: f64, b: f64, within: f64) -> bool {
    a == b || (a - b).abs() <= within
}

pub fn run_examples(engine: &dyn Engine, p: &Program) -> Vec<ExampleOutcome> {
    p.examples.iter().map(|ex| run_example(engine, p, ex)).collect()
}

fn run_example(engine: &dyn Engine, p: &Program, ex: &crate::ir::Example) -> ExampleOutcome {
    let site_of = |s: SiteId| p.known_site(s);
    let mut failures = Vec::new();
    let mut inputs = Vec::with_capacity(p.inputs.len());
    for (i, input) in p.inputs.iter().enumerate() {
        let bound = ex.bindings.iter().find(|(j, _)| *j as usize == i).map(|(_, e)| e).or(input.default.as_ref());
        let v = match bound {
            Some(e) => match eval_constant(p, e) {
                Ok(v) => v,
                Err(t) => {
                    failures.push(Failure {
                        site: site_of(ex.site),
                        message: format!("input `{}` failed to evaluate: {t}", input.name),
                    });
                    Value::Null
                }
            },
            None => Value::Null,
        };
        inputs.push(v);
    }
    if !failures.is_empty() {
        return ExampleOutcome { name: ex.name.clone(), site: site_of(ex.site), failures, result: None };
    }
    let result = engine.evaluate(p, &inputs, &ex.verdicts);
    for e in &ex.expects {
        match e {
            Expect::Score { value, within, site } => match (value, result.score) {
                (Some(want), Some(got)) if close(got, *want, *within) => {}
                (Some(want), Some(got)) => failures
                    .push(Failure { site: site_of(*site), message: format!("expected score {want}, got {got}") }),
                (Some(want), None) => failures.push(Failure {
                    site: site_of(*site),
                    message: format!(
                        "expected score {want}, got unscored ({})",
                        result.unscored_reason.as_deref().unwrap_or("no reason")
                    ),
                }),
                (None, Some(got)) => failures.push(Failure {
                    site: site_of(*site),
                    message: format!("expected the score to be unscored, got {got}"),
                }),
                (None, None) => {}
            },
            Expect::Failure { class, site } => {
                if result.failure_class != *class {
                    failures.push(Failure {
                        site: site_of(*site),
                        message: format!(
                            "expected failure class {}, got {}",
                            class.as_deref().map_or("null".into(), |c| format!("{c:?}")),
                            result.failure_class.as_deref().map_or("null".into(), |c| format!("{c:?}"))
                        ),
                    });
                }
            }
            Expect::Group { name, value, within, site } => match result.groups.iter().find(|(n, _)| n == name) {
                Some((_, Some(got))) if close(*got, *value, *within) => {}
                Some((_, got)) => failures.push(Failure {
                    site: site_of(*site),
                    message: format!(
                        "expected group `{name}` = {value}, got {}",
                        got.map_or("unscored".into(), |g| g.to_string())
                    ),
                }),
                None => failures.push(Failure { site: site_of(*site), message: format!("`{name}` is not a group") }),
            },
            Expect::Criterion { id, verdict, site } => {
                let Some(c) = result.criterion(id) else {
                    failures
                        .push(Failure { site: site_of(*site), message: format!("criterion `{id}` was not produced") });
                    continue;
                };
                let got = match c.status {
                    Status::Unscored => format!("unscored ({})", c.reason.as_deref().unwrap_or("")),
                    s => format!("{} (value {})", s.as_str(), c.value.unwrap_or(f64::NAN)),
                };
                let ok = match verdict {
                    Json::String(s) if s == "met" => c.status == Status::Met,
                    Json::String(s) if s == "unmet" => c.status == Status::Unmet,
                    Json::Bool(b) => c.status == if *b { Status::Met } else { Status::Unmet },
                    Json::Object(o) if o.contains_key("unscored") => {
                        let want = o["unscored"].as_str().unwrap_or("");
                        c.status == Status::Unscored
                            && (want == "unscored" || c.reason.as_deref().is_some_and(|r| r.contains(want)))
                    }
                    Json::Number(n) => {
                        let n = n.as_f64().unwrap_or(f64::NAN);
                        c.judged().level.map_or(c.value == Some(n), |l| l == n) && c.status != Status::Unscored
                    }
                    Json::String(label) => c.judged().label.as_deref() == Some(label.as_str()),
                    _ => false,
                };
                if !ok {
                    failures.push(Failure {
                        site: site_of(*site),
                        message: format!("expected `{id}` = {verdict}, got {got}"),
                    });
                }
            }
        }
    }
    ExampleOutcome { name: ex.name.clone(), site: site_of(ex.site), failures, result: Some(result) }
}
