//! `rubric import openai-grader`: an OpenAI grader (JSON, as the graders API and reinforcement
//! fine-tuning take it) becomes a rubric whose score is the grader's. `string_check` is a
//! check, `text_similarity` a continuous value from a similarity intrinsic, `score_model` a
//! continuous and `label_model` a nominal criterion decided by a judge, and `multi` one
//! criterion per grader with `calculate_output` as the score. Rows are the dataset items (their
//! fields at the top level) with the sampled output as `output_text`. Templates may read
//! `{{ item.FIELD }}` and `{{ sample.output_text }}`; anything else, and every metric without an
//! implementation here, is refused.

use super::{check_keys, comment, quote, sanitize_package, ImportError, Imported};
use crate::syntax::printer::is_ident;
use serde_json::{Map, Value as Json};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// One grader once its criterion is written: the expression of its score, and the expression
/// of its pass (when it has a `pass_threshold`).
struct Lowered {
    score: String,
    passes: Option<String>,
}

#[derive(Default)]
struct Out {
    /// Item fields read by templates.
    fields: BTreeSet<String>,
    judges: String,
    criteria: String,
    notes: Vec<String>,
}

pub fn import(grader: &Json, name: &str) -> Result<Imported, ImportError> {
    let mut out = Out::default();
    let kind = kind_of(grader, "the grader")?;
    let (score, passes) = if kind == "multi" {
        check_keys(grader, "the `multi` grader", &["type", "name", "graders", "calculate_output"])?;
        let graders =
            grader.get("graders").and_then(Json::as_object).ok_or("the `multi` grader has no `graders` object")?;
        let mut ids = Map::new();
        for (key, g) in graders {
            let lowered = lower(g, key, &mut out)?;
            ids.insert(key.clone(), Json::String(lowered.score));
        }
        let formula = grader
            .get("calculate_output")
            .and_then(Json::as_str)
            .ok_or("the `multi` grader has no `calculate_output`")?;
        (formula_expr(formula, &ids)?, None)
    } else {
        let named = grader.get("name").and_then(Json::as_str).unwrap_or("grader");
        let key =
            if crate::syntax::printer::is_field_name(named) { named.to_string() } else { sanitize_package(named) };
        let lowered = lower(grader, &key, &mut out)?;
        (lowered.score, lowered.passes)
    };
    let title = grader.get("name").and_then(Json::as_str).unwrap_or("OpenAI grader");
    let mut src = String::new();
    let _ = writeln!(src, "rubric openai.{} @ 1.0.0 {}\n", sanitize_package(name), quote(title));
    comment(
        &mut src,
        "Imported from an OpenAI grader by `rubric import openai-grader`. Each row is one dataset\n\
         item (its fields at the top level) with the model's output as `output_text`; the score is\n\
         the grader's score (a `multi` grader's `calculate_output`), and the report-only score `pass`\n\
         is its pass (score >= `pass_threshold`) where it has one.",
    );
    src.push('\n');
    src.push_str("input output_text: Text  // {{ sample.output_text }}\n");
    for f in &out.fields {
        let _ = writeln!(src, "input item_{f}: Text from {}  // {{{{ item.{f} }}}}", quote(f));
    }
    src.push('\n');
    src.push_str(&out.judges);
    src.push_str(&out.criteria);
    let _ = writeln!(src, "\nscore = {score}");
    if let Some(p) = passes {
        let _ = writeln!(src, "score pass = if {p} then 1 else 0");
    }
    Ok(Imported { source: src, rows: None, notes: out.notes })
}

fn kind_of<'a>(g: &'a Json, what: &str) -> Result<&'a str, ImportError> {
    g.get("type").and_then(Json::as_str).ok_or_else(|| ImportError::malformed(format!("{what} has no `type`")))
}

/// A grader's key as a criterion id.
fn ident(key: &str) -> Result<String, ImportError> {
    if !crate::syntax::printer::is_field_name(key) {
        return Err(ImportError::unsupported(
            format!("the grader name `{key}`"),
            "name graders with letters, digits and `_`",
        ));
    }
    Ok(if is_ident(key) { key.to_string() } else { format!("{key}_") })
}

fn text_field<'a>(g: &'a Json, field: &str, what: &str) -> Result<&'a str, ImportError> {
    g.get(field).and_then(Json::as_str).ok_or_else(|| ImportError::malformed(format!("{what} has no string `{field}`")))
}

fn lower(g: &Json, key: &str, out: &mut Out) -> Result<Lowered, ImportError> {
    let what = format!("grader `{key}`");
    let id = ident(key)?;
    let kind = kind_of(g, &what)?;
    let threshold = g.get("pass_threshold").and_then(Json::as_f64);
    match kind {
        "string_check" => {
            check_keys(g, &what, &["type", "name", "operation", "input", "reference"])?;
            let a = template_expr(text_field(g, "input", &what)?, out, &what)?;
            let b = template_expr(text_field(g, "reference", &what)?, out, &what)?;
            let op = text_field(g, "operation", &what)?;
            let cond = match op {
                "eq" => format!("{a} == {b}"),
                "ne" => format!("{a} != {b}"),
                "like" => format!("contains({a}, {b})"),
                "ilike" => format!("contains_ci({a}, {b})"),
                other => {
                    return Err(ImportError::unsupported(
                        format!("{what}: the operation `{other}`"),
                        "OpenAI documents `eq`, `ne`, `like` and `ilike`",
                    ))
                }
            };
            let _ = writeln!(out.criteria, "criterion {id} {} check {cond}", quote(&format!("string_check {op}")));
            Ok(Lowered { score: format!("{id}.value"), passes: None })
        }
        "text_similarity" => {
            check_keys(g, &what, &["type", "name", "input", "reference", "evaluation_metric", "pass_threshold"])?;
            let a = template_expr(text_field(g, "input", &what)?, out, &what)?;
            let b = template_expr(text_field(g, "reference", &what)?, out, &what)?;
            let metric = text_field(g, "evaluation_metric", &what)?;
            let value = match metric {
                "bleu" => format!("bleu({a}, [{b}])"),
                m if m.starts_with("rouge_") => {
                    let n = &m["rouge_".len()..];
                    let kind = match n {
                        "1" | "2" | "3" | "4" | "5" => format!("rouge{n}"),
                        "l" => "rougeL".to_string(),
                        _ => return Err(ImportError::unsupported(format!("{what}: the metric `{m}`"), "OpenAI documents rouge_1 to rouge_5 and rouge_l")),
                    };
                    format!("rouge({a}, {b}, {})", quote(&kind))
                }
                "fuzzy_match" => {
                    return Err(ImportError::unsupported(
                        format!("{what}: the metric `fuzzy_match`"),
                        "OpenAI documents it only as \"using rapidfuzz\", without the scorer or the preprocessing, so its scores cannot be reproduced exactly; \
                         compute an explicit metric instead (`edit_similarity` is rapidfuzz's Levenshtein normalized similarity)",
                    ))
                }
                "gleu" | "meteor" | "cosine" => {
                    return Err(ImportError::unsupported(
                        format!("{what}: the metric `{metric}`"),
                        "the rubric has no implementation of it (cosine needs OpenAI's text-embedding-3-large); use bleu or a rouge metric",
                    ))
                }
                other => return Err(ImportError::unsupported(format!("{what}: the metric `{other}`"), "OpenAI documents fuzzy_match, bleu, gleu, meteor, cosine and rouge_*")),
            };
            out.notes.push(format!(
                "{what}: OpenAI documents `{metric}` without naming its implementation; the rubric computes {}",
                if metric == "bleu" {
                    "sacreBLEU's sentence BLEU (13a tokenisation, exponential smoothing) / 100"
                } else {
                    "rouge-score's F-measure (default tokeniser, no stemming)"
                }
            ));
            let t = threshold.ok_or_else(|| ImportError::malformed(format!("{what} has no `pass_threshold`")))?;
            let _ = writeln!(
                out.criteria,
                "criterion {id} {} value {value} pass {t}",
                quote(&format!("text_similarity {metric}"))
            );
            Ok(Lowered { score: format!("{id}.value"), passes: Some(format!("{id}.met")) })
        }
        "score_model" | "label_model" => {
            let allowed: &[&str] = if kind == "score_model" {
                &["type", "name", "input", "model", "range", "pass_threshold", "sampling_params"]
            } else {
                &["type", "name", "input", "model", "labels", "passing_labels", "sampling_params"]
            };
            check_keys(g, &what, allowed)?;
            let judge = format!("{id}_model");
            write_judge(g, &judge, out, &what)?;
            if kind == "score_model" {
                let (lo, hi) = match g.get("range").and_then(Json::as_array) {
                    None => (0.0, 1.0),
                    Some(r) => match (r.first().and_then(Json::as_f64), r.get(1).and_then(Json::as_f64), r.len()) {
                        (Some(lo), Some(hi), 2) if lo < hi => (lo, hi),
                        _ => return Err(ImportError::malformed(format!("{what}: `range` is not [low, high]"))),
                    },
                };
                let score = if (lo, hi) == (0.0, 1.0) {
                    format!("{id}.value")
                } else {
                    format!("({lo} + {} * {id}.value)", hi - lo)
                };
                let pass = threshold.map(|t| (t - lo) / (hi - lo));
                let pass_attr = pass.map(|p| format!(" pass {p}")).unwrap_or_default();
                if (lo, hi) != (0.0, 1.0) {
                    out.notes.push(format!(
                        "{what}: the judge answers the score scaled from [{lo}, {hi}] to [0, 1] (its criterion's value); the rubric scales it back"
                    ));
                }
                let _ = writeln!(
                    out.criteria,
                    "criterion {id} {} continuous{pass_attr} by {judge}",
                    quote(&format!("score_model {key}"))
                );
                Ok(Lowered { passes: threshold.map(|_| format!("{id}.met")), score })
            } else {
                let labels: Vec<&str> = g
                    .get("labels")
                    .and_then(Json::as_array)
                    .map(|l| l.iter().filter_map(Json::as_str).collect())
                    .unwrap_or_default();
                let passing: Vec<&str> = g
                    .get("passing_labels")
                    .and_then(Json::as_array)
                    .map(|l| l.iter().filter_map(Json::as_str).collect())
                    .unwrap_or_default();
                if labels.is_empty() || passing.iter().any(|p| !labels.contains(p)) {
                    return Err(ImportError::malformed(format!("{what}: `labels` is empty or misses a passing label")));
                }
                let map: Vec<String> = labels
                    .iter()
                    .map(|l| format!("{}: {}", quote(l), if passing.contains(l) { 1 } else { 0 }))
                    .collect();
                let _ = writeln!(
                    out.criteria,
                    "criterion {id} {} nominal {{{}}} by {judge}",
                    quote(&format!("label_model {key}")),
                    map.join(", ")
                );
                Ok(Lowered { score: format!("{id}.value"), passes: Some(format!("{id}.met")) })
            }
        }
        "multi" => Err(ImportError::unsupported(
            format!("{what}: a `multi` grader inside a `multi` grader"),
            "flatten the graders into one `multi`",
        )),
        "python" => Err(ImportError::unsupported(
            format!("{what}: a `python` grader"),
            "its code runs in OpenAI's sandbox: port it to a rubric check or an `exec` criterion by hand",
        )),
        other => Err(ImportError::unsupported(
            format!("{what}: the grader type `{other}`"),
            "the importer reads string_check, text_similarity, score_model, label_model and multi",
        )),
    }
}

/// A judge for a model grader: its model and sampling, its messages as system prompt and template.
fn write_judge(g: &Json, judge: &str, out: &mut Out, what: &str) -> Result<(), ImportError> {
    let model = text_field(g, "model", what)?;
    let messages = g
        .get("input")
        .and_then(Json::as_array)
        .ok_or_else(|| ImportError::malformed(format!("{what}: `input` is not a list of messages")))?;
    let (mut system, mut user) = (None, None);
    for m in messages {
        let role = m.get("role").and_then(Json::as_str).unwrap_or("");
        let content = m.get("content").and_then(Json::as_str).ok_or_else(|| {
            ImportError::unsupported(
                format!("{what}: a message whose content is not text"),
                "give each message's content as a string",
            )
        })?;
        let slot = match role {
            "system" | "developer" => &mut system,
            "user" => &mut user,
            _ => {
                return Err(ImportError::unsupported(
                    format!("{what}: a `{role}` message"),
                    "the judge takes one system (or developer) and one user message",
                ))
            }
        };
        if slot.is_some() {
            return Err(ImportError::unsupported(
                format!("{what}: a second `{role}` message"),
                "the judge takes one system (or developer) and one user message",
            ));
        }
        *slot = Some(judge_template(content, out, what)?);
    }
    let user = user.ok_or_else(|| ImportError::malformed(format!("{what}: no `user` message")))?;
    let mut sees: Vec<String> = Vec::new();
    for t in system.iter().chain(std::iter::once(&user)) {
        for s in slots_of(t) {
            if !sees.contains(&s) {
                sees.push(s);
            }
        }
    }
    let _ = writeln!(out.judges, "judge {judge} {{\n  model {}", quote(model));
    if let Some(p) = g.get("sampling_params") {
        let p = p
            .as_object()
            .ok_or_else(|| ImportError::malformed(format!("{what}: `sampling_params` is not an object")))?;
        for (k, v) in p {
            let setting = match k.as_str() {
                "temperature" => "temperature",
                "top_p" => "top_p",
                "seed" => "seed",
                "max_completions_tokens" | "max_tokens" => "max_tokens",
                "reasoning_effort" => {
                    let e = v
                        .as_str()
                        .ok_or_else(|| ImportError::malformed(format!("{what}: `reasoning_effort` is not text")))?;
                    let _ = writeln!(out.judges, "  reasoning_effort {e}");
                    continue;
                }
                other => {
                    return Err(ImportError::unsupported(
                        format!("{what}: the sampling parameter `{other}`"),
                        "the judge takes temperature, top_p, seed, max tokens and reasoning_effort",
                    ))
                }
            };
            let n = v.as_f64().ok_or_else(|| ImportError::malformed(format!("{what}: `{k}` is not a number")))?;
            let _ = writeln!(out.judges, "  {setting} {n}");
        }
    }
    if sees.is_empty() {
        sees.push("output_text".into());
    }
    let _ = writeln!(out.judges, "  sees {}", sees.join(", "));
    if let Some(s) = &system {
        let _ = writeln!(out.judges, "  system {}", quote(s));
    }
    let _ = writeln!(out.judges, "  template {}\n}}\n", quote(&user));
    Ok(())
}

/// A template cut at its slots: the texts around them (one more than the slots) and each slot's
/// (namespace, variable).
type Slots = (Vec<String>, Vec<(String, String)>);

/// The `{{ ns.var }}` slots of a template, in order.
fn parse_slots(t: &str, what: &str) -> Result<Slots, ImportError> {
    let (mut texts, mut slots) = (Vec::new(), Vec::new());
    let mut rest = t;
    while let Some(open) = rest.find("{{") {
        texts.push(rest[..open].to_string());
        let close = rest[open..]
            .find("}}")
            .ok_or_else(|| ImportError::malformed(format!("{what}: an unclosed `{{{{` in `{t}`")))?;
        let inner = rest[open + 2..open + close].trim();
        let (ns, var) = inner.split_once('.').unwrap_or(("", inner));
        match (ns, var) {
            ("sample", "output_text") => {}
            ("item", f) if crate::syntax::printer::is_field_name(f) && f != "output_text" => {}
            _ => {
                return Err(ImportError::unsupported(
                    format!("{what}: the template variable `{{{{ {inner} }}}}`"),
                    "the importer reads `{{ sample.output_text }}` and top-level `{{ item.FIELD }}` (no nested paths, output_json or output_tools)",
                ))
            }
        }
        slots.push((ns.to_string(), var.to_string()));
        rest = &rest[open + close + 2..];
    }
    texts.push(rest.to_string());
    Ok((texts, slots))
}

fn input_name(ns: &str, var: &str) -> String {
    if ns == "sample" {
        "output_text".into()
    } else {
        format!("item_{var}")
    }
}

/// A template as a `Text` expression: literals joined with `+` to the inputs.
fn template_expr(t: &str, out: &mut Out, what: &str) -> Result<String, ImportError> {
    let (texts, slots) = parse_slots(t, what)?;
    let mut parts = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        if !text.is_empty() {
            parts.push(quote(text));
        }
        if let Some((ns, var)) = slots.get(i) {
            if ns == "item" {
                out.fields.insert(var.clone());
            }
            parts.push(input_name(ns, var));
        }
    }
    Ok(if parts.is_empty() { "\"\"".into() } else { parts.join(" + ") })
}

/// A message as a judge template: `{{ item.x }}` → `{{item_x}}`, `{{ sample.output_text }}` →
/// `{{output_text}}`.
fn judge_template(t: &str, out: &mut Out, what: &str) -> Result<String, ImportError> {
    let (texts, slots) = parse_slots(t, what)?;
    let mut s = String::new();
    for (i, text) in texts.iter().enumerate() {
        s.push_str(text);
        if let Some((ns, var)) = slots.get(i) {
            if ns == "item" {
                out.fields.insert(var.clone());
            }
            let _ = write!(s, "{{{{{}}}}}", input_name(ns, var));
        }
    }
    Ok(s)
}

fn slots_of(t: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else { break };
        v.push(rest[open + 2..open + close].trim().to_string());
        rest = &rest[open + close + 2..];
    }
    v
}

/// `calculate_output` as a rubric expression: numbers, grader names, `+ - * /`, parentheses,
/// and `min`, `max`, `abs`, `floor`, `ceil`; anything else is refused.
fn formula_expr(f: &str, graders: &Map<String, Json>) -> Result<String, ImportError> {
    let refuse = |what: String| {
        ImportError::unsupported(
            format!("`calculate_output` `{f}`: {what}"),
            "the importer reads numbers, grader names, + - * /, parentheses, min, max, abs, floor and ceil",
        )
    };
    let mut out = String::new();
    let cs: Vec<char> = f.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_digit() || cs[i] == '.') {
                i += 1;
            }
            let n: String = cs[start..i].iter().collect();
            n.parse::<f64>().map_err(|_| refuse(format!("the number `{n}`")))?;
            out.push_str(&n);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            let w: String = cs[start..i].iter().collect();
            if let Some(Json::String(e)) = graders.get(&w) {
                out.push_str(e);
            } else if ["min", "max", "abs", "floor", "ceil"].contains(&w.as_str()) {
                out.push_str(&w);
            } else {
                return Err(refuse(format!("`{w}` names no grader or function the importer reads")));
            }
        } else if "+-*/(),".contains(c) {
            if c == '*' && cs.get(i + 1) == Some(&'*') {
                return Err(refuse("the power operator".into()));
            }
            out.push_str(match c {
                ',' => ", ",
                '(' => "(",
                ')' => ")",
                _ => "",
            });
            if "+-*/".contains(c) {
                let _ = write!(out, " {c} ");
            }
            i += 1;
        } else {
            return Err(refuse(format!("the character `{c}`")));
        }
    }
    Ok(out)
}
