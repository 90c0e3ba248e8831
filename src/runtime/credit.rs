//! Token-level credit for RL (`rubric run --groups` on rows that carry `token_offsets`): each
//! criterion's share of the row's advantage goes to the tokens of the response spans it is
//! grounded in — the text its check matched, or the evidence its judge quoted — and tokens no
//! span reaches get the row's advantage or 0, as the rubric's `reward { uncovered ... }` says.
//!
//! Spans of a check are found statically, engine-independently: the calls in the criterion's
//! check (through `fn` bodies, e.g. `std.text`'s `mentions`) of a text intrinsic on the
//! `response` input with a constant pattern (`matches`, `find_all`, `count_matches`,
//! `full_match`, `contains`, `contains_ci`, `count_occurrences`, `starts_with`, `ends_with`,
//! `keyword_count`, and `code_blocks`' fenced blocks) are searched again in the response.
//! Formulas: docs/rl.md.

use crate::ir::{Const, CriterionDecl, Expr, ExprKind, Program, Step, Verifier};
use regex::Regex;
use serde_json::Value as Json;

/// Byte spans `[start, end)` in the response, per criterion id.
pub type Spans = Vec<(usize, usize)>;

/// What the walk knows about a local: it holds the response, or a constant text.
#[derive(Clone, Debug, PartialEq)]
enum Known {
    Response,
    Text(String),
    Other,
}

struct Walk<'p> {
    p: &'p Program,
    response: u32,
    found: Vec<Regex>,
    depth: usize,
}

impl Walk<'_> {
    fn known(&self, e: &Expr, locals: &[Known]) -> Known {
        match &e.kind {
            ExprKind::Input(i) if *i == self.response => Known::Response,
            ExprKind::Const(Const::Text(t)) => Known::Text(t.to_string()),
            ExprKind::Local(l) => locals.get(*l as usize).cloned().unwrap_or(Known::Other),
            _ => Known::Other,
        }
    }

    fn pattern(name: &str, pat: &str) -> Option<String> {
        let lit = regex::escape(pat);
        Some(match name {
            "matches" | "find_all" | "count_matches" => pat.to_string(),
            "full_match" => format!("^(?:{pat})$"),
            "contains" | "count_occurrences" => lit,
            "starts_with" => format!("^{lit}"),
            "ends_with" => format!("{lit}$"),
            "contains_ci" => format!("(?i){lit}"),
            // keyword_count: whole words, case-insensitive, a phrase across any whitespace.
            "keyword_count" => {
                let words: Vec<String> = pat.split_whitespace().map(regex::escape).collect();
                format!(r"(?i)(?:^|[^\p{{L}}\p{{N}}_])({})(?:$|[^\p{{L}}\p{{N}}_])", words.join(r"\s+"))
            }
            _ => return None,
        })
    }

    fn expr(&mut self, e: &Expr, locals: &[Known]) {
        if self.depth > 64 {
            return;
        }
        crate::ir::walk(e, &mut |x| self.visit(x, locals));
    }

    fn visit(&mut self, e: &Expr, locals: &[Known]) {
        match &e.kind {
            ExprKind::Intrinsic { name, args, .. } => {
                if name == "code_blocks" && args.first().is_some_and(|a| self.known(a, locals) == Known::Response) {
                    if let Ok(r) = Regex::new(r"(?s)```.*?```") {
                        self.found.push(r);
                    }
                }
                if let (Some(a), Some(b)) = (args.first(), args.get(1)) {
                    if let (Known::Response, Known::Text(pat)) = (self.known(a, locals), self.known(b, locals)) {
                        if let Some(r) = Self::pattern(name, &pat).and_then(|p| Regex::new(&p).ok()) {
                            self.found.push(r);
                        }
                    }
                }
            }
            ExprKind::Call { func, args, .. } => {
                if let Some(f) = self.p.functions.get(*func as usize) {
                    let mut inner = vec![Known::Other; f.locals as usize];
                    for (i, a) in args.iter().enumerate().take(inner.len()) {
                        inner[i] = self.known(a, locals);
                    }
                    self.depth += 1;
                    let body = f.body.clone();
                    self.expr(&body, &inner);
                    self.depth -= 1;
                }
            }
            _ => {}
        }
    }
}

/// The check of the criterion with result id `id` (`er`, `items[3]`).
fn decl<'p>(p: &'p Program, id: &str) -> Option<&'p CriterionDecl> {
    match id.split_once('[') {
        Some((name, _)) => p.steps.iter().find_map(|s| match s {
            Step::Each(e) if p.sets[e.set as usize].name == name => Some(&e.template),
            _ => None,
        }),
        None => p.criteria.iter().find(|c| c.id == id),
    }
}

/// The spans of every criterion of a record in `response`: its check's matches, or its
/// judge's quoted evidence (found after whitespace normalisation).
pub fn spans(p: &Program, record: &Json, response: &str) -> Vec<(String, Spans)> {
    let Some(resp_input) = p.inputs.iter().position(|i| i.name == "response") else { return Vec::new() };
    let mut out = Vec::new();
    for c in record.get("criteria").and_then(Json::as_array).into_iter().flatten() {
        let id = c.get("id").and_then(Json::as_str).unwrap_or_default();
        let mut s: Spans = Vec::new();
        if let Some(q) = c.get("evidence").and_then(Json::as_str) {
            s.extend(find_quote(response, q));
        } else if let Some(d) = decl(p, id) {
            let check = match &d.verifier {
                Verifier::Check { expr } | Verifier::Value { expr } => Some(expr),
                Verifier::Extract { check, .. } => Some(check),
                Verifier::Judge { .. } => None,
            };
            if let Some(e) = check {
                let mut w = Walk { p, response: resp_input as u32, found: Vec::new(), depth: 0 };
                w.expr(e, &[]);
                for r in &w.found {
                    for caps in r.captures_iter(response) {
                        // keyword_count's pattern captures the phrase without its boundaries.
                        let m = caps.get(1).or_else(|| caps.get(0));
                        if let Some(m) = m.filter(|m| !m.is_empty()) {
                            s.push((m.start(), m.end()));
                        }
                    }
                }
            }
        }
        s.sort_unstable();
        s.dedup();
        if !s.is_empty() {
            out.push((id.to_string(), s));
        }
    }
    out
}

/// Where `quote` occurs in `text`, comparing with runs of whitespace collapsed to one space.
fn find_quote(text: &str, quote: &str) -> Option<(usize, usize)> {
    let words: Vec<String> = quote.split_whitespace().map(regex::escape).collect();
    if words.is_empty() {
        return None;
    }
    let r = Regex::new(&words.join(r"\s+")).ok()?;
    r.find(text).map(|m| (m.start(), m.end()))
}

/// Byte offset → character offset (token offsets count Unicode scalar values, as Python does).
pub fn char_offsets(text: &str) -> Vec<usize> {
    let mut map = vec![0usize; text.len() + 1];
    let mut chars = 0;
    for (b, ch) in text.char_indices() {
        for k in 0..ch.len_utf8() {
            map[b + k] = chars;
        }
        chars += 1;
    }
    map[text.len()] = chars;
    map
}

/// Per-token credit: for each token `[start, end)` (character offsets), the sum of the
/// criterion advantages of the criteria with a span that overlaps it, or `uncovered` when none.
pub fn token_credit(
    response: &str,
    tokens: &[(usize, usize)],
    spans: &[(String, Spans)],
    criterion_advantage: &dyn Fn(&str) -> Option<f64>,
    uncovered: f64,
) -> Vec<f64> {
    let map = char_offsets(response);
    let to_chars = |(s, e): (usize, usize)| (map[s.min(response.len())], map[e.min(response.len())]);
    let char_spans: Vec<(f64, Vec<(usize, usize)>)> = spans
        .iter()
        .filter_map(|(id, s)| Some((criterion_advantage(id)?, s.iter().map(|x| to_chars(*x)).collect())))
        .collect();
    tokens
        .iter()
        .map(|&(ts, te)| {
            let mut covered = false;
            let mut sum = 0.0;
            for (a, ss) in &char_spans {
                if ss.iter().any(|&(s, e)| s < te && ts < e) {
                    covered = true;
                    sum += a;
                }
            }
            if covered {
                sum
            } else {
                uncovered
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(src: &str) -> Program {
        let c = crate::types::compile_source("t.rubric", src);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        c.program.unwrap()
    }

    #[test]
    fn spans_of_checks_through_functions_and_of_quotes() {
        let p = program(
            r#"rubric t @ 1.0.0
import std.text
input response: Text
judge g { model "m" sees response returns verdict(met: Bool, evidence: Quote) evidence must quote response }
criterion cite "Cites" check matches(response, "\\[\\d+\\]")
criterion warm "Warm" check text.mentions(response, "thank you")
criterion er "ER" by g
criterion long "Long" check word_count(response) > 3
"#,
        );
        let response = "Thank  you! See [1] and [22]. Call 911 now.";
        let record = serde_json::json!({"criteria": [
            {"id": "cite"}, {"id": "warm"}, {"id": "er", "evidence": "Call 911   now"}, {"id": "long"}
        ]});
        let s = spans(&p, &record, response);
        let get = |id: &str| s.iter().find(|x| x.0 == id).map(|x| x.1.clone());
        assert_eq!(get("cite"), Some(vec![(16, 19), (24, 28)]));
        assert_eq!(get("warm"), Some(vec![(0, 10)]));
        assert_eq!(get("er"), Some(vec![(30, 42)]));
        assert_eq!(get("long"), None, "a count has no span");
    }

    #[test]
    fn credit_sums_overlapping_criteria_and_fills_the_rest() {
        // "é" is two bytes: character offsets must not drift after it.
        let response = "é ab cd";
        let spans = vec![("a".to_string(), vec![(3, 5)]), ("b".to_string(), vec![(3, 8)])];
        let adv = |id: &str| match id {
            "a" => Some(0.5),
            "b" => Some(-0.25),
            _ => None,
        };
        let tokens = [(0, 1), (2, 4), (5, 7)];
        assert_eq!(token_credit(response, &tokens, &spans, &adv, 0.1), vec![0.1, 0.25, -0.25]);
    }
}
