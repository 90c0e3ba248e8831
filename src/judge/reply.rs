//! Replies: the normalised form of a chat completion (`Reply`, what the cache and transcripts
//! store), and its interpretation into the recorded-verdict JSON forms that `interp` applies
//! (`"met"`-style verdicts as `{"verdict": ..}`, `{"level": ..}`, `{"label": ..}`,
//! `{"value": ..}`, with `evidence` and `rationale`, or `{"unscored": "judge_...: ..."}`).
//! Every entry is validated against what was asked; under `scoring logprob` the value is
//! P(yes) / (P(yes) + P(no)) at the first token of the answer.

use super::prompt::{Answer, EntrySpec, Rendered, Role, Target};
use crate::ir::Type;
use crate::value::number_to_json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};

/// A chat completion, reduced to what interpretation needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The model that actually answered (the `model` of the completion).
    pub model: String,
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The tokens of the content with their log-probabilities, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
    #[serde(default)]
    pub usage: Usage,
    /// Answered through a Batch API (billed at the model's batch price).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batched: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f64,
    /// The most likely tokens at this position, with their log-probabilities.
    #[serde(default)]
    pub top: Vec<(String, f64)>,
}

/// The tokens a completion says it used. `reported` is false when the reply carried no
/// `usage` at all: its cost is then unknown, never taken as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens the provider answered from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`), billed at the cached-input price.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub reported: bool,
}

impl Default for Usage {
    fn default() -> Usage {
        Usage { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, reported: true }
    }
}

impl Usage {
    /// `prompt_tokens` in and `completion_tokens` out, nothing cached.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage { prompt_tokens, completion_tokens, ..Usage::default() }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
fn yes() -> bool {
    true
}
fn is_yes(b: &bool) -> bool {
    *b
}

impl Reply {
    /// Read a chat-completions response body.
    pub fn from_completion(body: &Json, sent_model: &str) -> Result<Reply, String> {
        let choice = body
            .get("choices")
            .and_then(Json::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| "judge_bad_response: the completion has no `choices`".to_string())?;
        let message = choice.get("message").unwrap_or(&Json::Null);
        let content = message.get("content").and_then(Json::as_str).map(str::to_string);
        let refusal = message.get("refusal").and_then(Json::as_str).filter(|r| !r.is_empty()).map(str::to_string);
        let finish_reason = choice.get("finish_reason").and_then(Json::as_str).map(str::to_string);
        let logprobs = choice.get("logprobs").and_then(|l| l.get("content")).and_then(Json::as_array).map(|toks| {
            toks.iter()
                .map(|t| TokenLogprob {
                    token: t.get("token").and_then(Json::as_str).unwrap_or("").to_string(),
                    logprob: t.get("logprob").and_then(Json::as_f64).unwrap_or(f64::NEG_INFINITY),
                    top: t
                        .get("top_logprobs")
                        .and_then(Json::as_array)
                        .map(|tops| {
                            tops.iter()
                                .filter_map(|x| {
                                    Some((x.get("token")?.as_str()?.to_string(), x.get("logprob")?.as_f64()?))
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        });
        let usage = match body.get("usage").filter(|u| u.is_object()) {
            None => Usage { reported: false, ..Usage::default() },
            Some(u) => Usage {
                prompt_tokens: u.get("prompt_tokens").and_then(Json::as_u64).unwrap_or(0),
                completion_tokens: u.get("completion_tokens").and_then(Json::as_u64).unwrap_or(0),
                cached_tokens: u.pointer("/prompt_tokens_details/cached_tokens").and_then(Json::as_u64).unwrap_or(0),
                reported: u.get("prompt_tokens").is_some_and(Json::is_u64)
                    && u.get("completion_tokens").is_some_and(Json::is_u64),
            },
        };
        let model = body.get("model").and_then(Json::as_str).filter(|m| !m.is_empty()).unwrap_or(sent_model);
        Ok(Reply { model: model.to_string(), content, refusal, finish_reason, logprobs, usage, batched: false })
    }
}

/// One sample per entry of `rendered`, in the recorded-verdict JSON forms (an entry that does
/// not validate gives `{"unscored": ...}`), and whether every entry validated.
pub fn interpret(rendered: &Rendered, reply: &Reply) -> (Vec<Json>, bool) {
    let all = |reason: String| -> (Vec<Json>, bool) {
        (rendered.entries.iter().map(|_| json!({ "unscored": reason })).collect(), false)
    };
    if let Some(r) = &reply.refusal {
        return all(format!("judge_refused: {}", excerpt(r, 200)));
    }
    // A reply cut off by the token limit is not the judge's answer, even where what came
    // before the cut happens to parse (a reasoning model may spend the limit before answering).
    if reply.finish_reason.as_deref() == Some("length") {
        return all(format!(
            "judge_truncated: the reply was cut off at the token limit after {} completion tokens; \
             raise the judge's `max_tokens` (or lower its reasoning effort)",
            reply.usage.completion_tokens
        ));
    }
    let Some(content) = reply.content.as_deref() else {
        return all("judge_unparsable: the reply has no content".into());
    };
    let text = strip_code_fence(content);
    let root: Json = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return all(format!("judge_unparsable: the reply is not JSON: {e}; it begins {:?}", excerpt(text, 80)));
        }
    };
    // Byte offsets of values in `content`, for logprob scoring.
    let offsets = if rendered.entries.iter().any(|e| e.logprob) {
        let base = text.as_ptr() as usize - content.as_ptr() as usize;
        value_offsets(text).into_iter().map(|(p, s, e)| (p, s + base, e + base)).collect()
    } else {
        Vec::new()
    };
    let mut ok = true;
    let mut out = Vec::with_capacity(rendered.entries.len());
    for (n, e) in rendered.entries.iter().enumerate() {
        let (entry, path): (Option<&Json>, Vec<String>) = match &e.key {
            Some(k) => (root.get(k), vec![k.clone(), e.answer_field().to_string()]),
            None => (Some(&root), vec![e.answer_field().to_string()]),
        };
        let v = match entry {
            None => Err(format!("judge_schema: the reply has no entry `{}`", e.key.as_deref().unwrap_or(""))),
            Some(obj) => {
                let p = if e.logprob { p_yes(reply, content, &offsets, &path, n).map(Some) } else { Ok(None) };
                p.and_then(|p| entry_verdict(e, obj, p, &reply.model))
            }
        };
        out.push(v.unwrap_or_else(|reason| {
            ok = false;
            json!({ "unscored": reason })
        }));
    }
    (out, ok)
}

/// Member `k`'s verdict (of `n` rollouts) from a group judge's verdict for the whole group: each
/// sample's score of that rollout (`{"values": [..]}`) or its place in the ranking (`{"places":
/// [..]}`, value (n − place) / (n − 1): 1 for the best, 0 for the worst) as the member's
/// `{"value": ..}`, with `rollout` (its number in the request), `of` (the rollouts shown) and,
/// for a ranking, `rank`; the sample's other fields (rationale, model) kept. A failed sample
/// stays failed for every member.
pub fn member_verdict(v: &Json, k: usize, n: usize) -> Json {
    if let Some(samples) = v.get("samples").and_then(Json::as_array) {
        return json!({ "samples": samples.iter().map(|s| member_verdict(s, k, n)).collect::<Vec<_>>() });
    }
    let Json::Object(o) = v else { return json!({"unscored": "judge_internal: a group verdict is not an object"}) };
    if o.contains_key("unscored") {
        return v.clone();
    }
    let mut m: Map<String, Json> = o
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "values" | "ranking" | "places"))
        .map(|(a, b)| (a.clone(), b.clone()))
        .collect();
    let value = if let Some(x) = o.get("values").and_then(|vs| vs.get(k)).and_then(Json::as_f64) {
        x
    } else if let Some(place) = o.get("places").and_then(|ps| ps.get(k)).and_then(Json::as_u64) {
        m.insert("rank".into(), json!(place));
        if n > 1 {
            (n as f64 - place as f64) / (n as f64 - 1.0)
        } else {
            1.0
        }
    } else {
        return json!({"unscored": format!("judge_internal: the group verdict has no answer for rollout {}", k + 1)});
    };
    m.insert("value".into(), number_to_json(value));
    m.insert("rollout".into(), json!(k + 1));
    m.insert("of".into(), json!(n));
    Json::Object(m)
}

fn excerpt(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The JSON inside a reply that wrapped it in a Markdown code fence.
fn strip_code_fence(s: &str) -> &str {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix("```") {
        if let Some((_, body)) = rest.split_once('\n') {
            return body.trim_end().strip_suffix("```").unwrap_or(body).trim();
        }
    }
    t
}

fn entry_verdict(e: &EntrySpec, obj: &Json, p_yes: Option<f64>, model: &str) -> Result<Json, String> {
    let whose = match &e.key {
        Some(k) => format!("entry `{k}`"),
        None => "the reply".to_string(),
    };
    let Json::Object(o) = obj else {
        return Err(format!("judge_schema: {whose} is not an object"));
    };
    let field = e.answer_field();
    let raw = o.get(field).ok_or_else(|| format!("judge_schema: {whose} has no `{field}`"))?;
    let bad =
        |what: &str| format!("judge_schema: `{field}` of {whose} is {}, not {what}", excerpt(&raw.to_string(), 60));
    let yes_no = |v: &Json| -> Option<bool> {
        match v {
            Json::Bool(b) => Some(*b),
            Json::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "met" | "yes" | "true" => Some(true),
                "unmet" | "no" | "false" => Some(false),
                _ => None,
            },
            _ => None,
        }
    };
    let number = |v: &Json| v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok()));
    let mut m = Map::new();
    match &e.answer {
        Answer::Verdict | Answer::Bool | Answer::YesNo => {
            let said = yes_no(raw).ok_or_else(|| {
                bad(match e.answer {
                    Answer::Verdict => "\"met\" or \"unmet\"",
                    Answer::Bool => "true or false",
                    _ => "\"yes\" or \"no\"",
                })
            })?;
            match (e.target, p_yes) {
                (Target::Continuous, Some(p)) => {
                    m.insert("value".into(), number_to_json(p));
                }
                (_, Some(p)) => {
                    m.insert("verdict".into(), json!(if p >= 0.5 { "met" } else { "unmet" }));
                    m.insert("p_yes".into(), number_to_json(p));
                }
                (_, None) => {
                    m.insert("verdict".into(), json!(if said { "met" } else { "unmet" }));
                }
            }
        }
        Answer::Level(levels) => {
            let l = number(raw).ok_or_else(|| bad("a level number"))?;
            if !levels.contains(&l) {
                let all: Vec<String> = levels.iter().map(|x| number_to_json(*x).to_string()).collect();
                return Err(bad(&format!("one of {}", all.join(", "))));
            }
            m.insert("level".into(), number_to_json(l));
            if e.shuffled {
                // The answer's position among the options as shown (1 = first).
                let at = levels.iter().position(|x| *x == l).map_or(0, |i| i + 1);
                m.insert("position".into(), json!(at));
            }
        }
        Answer::Label(labels) => {
            let s = raw.as_str().map(str::trim).ok_or_else(|| bad("a label"))?;
            let l = labels
                .iter()
                .find(|l| l.as_str() == s)
                .or_else(|| labels.iter().find(|l| l.eq_ignore_ascii_case(s)))
                .ok_or_else(|| {
                    let all: Vec<String> = labels.iter().map(|l| format!("\"{l}\"")).collect();
                    bad(&format!("one of {}", all.join(", ")))
                })?;
            if e.shuffled {
                let at = labels.iter().position(|x| x == l).map_or(0, |i| i + 1);
                m.insert("position".into(), json!(at));
            }
            m.insert("label".into(), json!(l));
        }
        Answer::Preference => {
            let s = raw.as_str().map(str::trim).ok_or_else(|| bad("\"first\", \"second\" or \"tie\""))?;
            let at = super::prompt::PREFERENCES
                .iter()
                .position(|p| p.eq_ignore_ascii_case(s))
                .ok_or_else(|| bad("\"first\", \"second\" or \"tie\""))?;
            // In candidate terms: the input preferred (or `tie`), and the one shown first.
            let [first, second] = e.shown.clone().unwrap_or_default();
            let preferred = match at {
                0 => first.clone(),
                1 => second,
                _ => "tie".to_string(),
            };
            m.insert("preference".into(), json!(preferred));
            m.insert("first".into(), json!(first));
        }
        Answer::Unit => {
            let x = number(raw).filter(|x| (0.0..=1.0).contains(x)).ok_or_else(|| bad("a number in [0, 1]"))?;
            m.insert("value".into(), number_to_json(x));
        }
        Answer::Scores(n) => {
            let want = format!("a list of {n} numbers in [0, 1]");
            let xs = raw.as_array().filter(|a| a.len() == *n).ok_or_else(|| bad(&want))?;
            let values: Vec<f64> = xs
                .iter()
                .map(|x| number(x).filter(|x| (0.0..=1.0).contains(x)))
                .collect::<Option<_>>()
                .ok_or_else(|| bad(&want))?;
            m.insert("values".into(), json!(values.iter().map(|x| number_to_json(*x)).collect::<Vec<_>>()));
        }
        Answer::Ranking(n) => {
            let want = format!("the {n} rollout numbers 1 to {n}, each once");
            let xs = raw.as_array().filter(|a| a.len() == *n).ok_or_else(|| bad(&want))?;
            let order: Vec<usize> = xs
                .iter()
                .map(|x| number(x).filter(|x| x.fract() == 0.0 && *x >= 1.0 && *x <= *n as f64).map(|x| x as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| bad(&want))?;
            let mut place = vec![0usize; *n];
            let mut taken = vec![false; *n];
            for (at, r) in order.iter().enumerate() {
                if std::mem::replace(&mut taken[r - 1], true) {
                    return Err(bad(&want));
                }
                place[r - 1] = at + 1;
            }
            m.insert("ranking".into(), json!(order));
            m.insert("places".into(), json!(place));
        }
        Answer::Generate(ty) => {
            if raw.is_null() {
                return Err(format!("judge_no_value: the generator wrote nothing for `{}`", e.criterion));
            }
            // A reply that is not of the input's type is invalid (and, like every invalid
            // reply, not cached: the next run asks again).
            fits(raw, ty, "the reply")
                .map_err(|why| format!("generator_invalid: {why} (`{}` is {ty})", e.criterion))?;
            m.insert("value".into(), raw.clone());
        }
        Answer::Extract(ty) => {
            let base = match ty {
                Type::Optional(t) => t.as_ref(),
                t => t,
            };
            let v = match (base, raw) {
                (_, Json::Null) => {
                    return Err(format!("judge_no_value: the judge found no value for `{}`", e.criterion));
                }
                (Type::Number, v) => number_to_json(number(v).ok_or_else(|| bad("a number"))?),
                (Type::Text, Json::String(s)) => json!(s),
                (Type::Bool, v) => json!(yes_no(v).ok_or_else(|| bad("true or false"))?),
                (Type::Text, _) => return Err(bad("text")),
                (_, v) => v.clone(),
            };
            m.insert("value".into(), v);
        }
    }
    for (name, role) in &e.fields {
        let Some(v) = o.get(name) else { continue };
        match role {
            Role::Evidence | Role::Rationale => match v {
                Json::String(s) if s.trim().is_empty() => {}
                Json::String(s) => {
                    let key = if *role == Role::Evidence { "evidence" } else { "rationale" };
                    m.insert(key.into(), json!(s));
                }
                Json::Null => {}
                other => {
                    return Err(format!(
                        "judge_schema: `{name}` of {whose} is {}, not text",
                        excerpt(&other.to_string(), 60)
                    ))
                }
            },
            Role::Other(_) => {
                m.entry("fields").or_insert_with(|| json!({}))[name] = v.clone();
            }
            Role::Answer => {}
        }
    }
    m.insert("model".into(), json!(model));
    Ok(Json::Object(m))
}

/// `true` for a token that says yes, `false` for one that says no.
fn token_class(tok: &str) -> Option<bool> {
    let t = tok.trim().trim_matches(|c: char| !c.is_alphanumeric()).to_ascii_lowercase();
    match t.as_str() {
        "yes" | "true" | "met" => Some(true),
        "no" | "false" | "unmet" => Some(false),
        _ => None,
    }
}

/// P(yes) / (P(yes) + P(no)) at the first token of the answer at `path`, or of the `nth`
/// yes/no token when the tokens do not spell the content.
fn p_yes(
    reply: &Reply,
    content: &str,
    offsets: &[(Vec<String>, usize, usize)],
    path: &[String],
    nth: usize,
) -> Result<f64, String> {
    let toks = reply
        .logprobs
        .as_ref()
        .filter(|t| !t.is_empty())
        .ok_or("judge_no_logprobs: the endpoint returned no token log-probabilities")?;
    let spelled: usize = toks.iter().map(|t| t.token.len()).sum();
    let at = if spelled == content.len() && toks.iter().map(|t| t.token.as_str()).collect::<String>() == content {
        let (_, start, end) = offsets
            .iter()
            .find(|(p, _, _)| p == path)
            .ok_or_else(|| format!("judge_schema: the reply has no `{}`", path.join(".")))?;
        let mut pos = 0;
        let mut found = None;
        for (i, t) in toks.iter().enumerate() {
            let (s, e) = (pos, pos + t.token.len());
            pos = e;
            if e > *start && s < *end && token_class(&t.token).is_some() {
                found = Some(i);
                break;
            }
        }
        found
    } else {
        toks.iter().enumerate().filter(|(_, t)| token_class(&t.token).is_some()).nth(nth).map(|(i, _)| i)
    };
    let t = &toks[at.ok_or("judge_unparsable: no yes/no token at the answer in the log-probabilities")?];
    let (mut py, mut pn) = (0.0f64, 0.0f64);
    let mut add = |tok: &str, lp: f64| match token_class(tok) {
        Some(true) => py += lp.exp(),
        Some(false) => pn += lp.exp(),
        None => {}
    };
    let mut seen_self = false;
    for (tok, lp) in &t.top {
        seen_self |= *tok == t.token;
        add(tok, *lp);
    }
    if !seen_self {
        add(&t.token, t.logprob);
    }
    if py + pn <= 0.0 || (py + pn).is_nan() {
        return Err("judge_unparsable: the answer token has no yes/no log-probabilities".into());
    }
    Ok(py / (py + pn))
}

/// Byte ranges of the values of a JSON text, with their object-key paths. Call only on text
/// that parses (serde's recursion limit bounds the depth).
pub fn value_offsets(s: &str) -> Vec<(Vec<String>, usize, usize)> {
    struct Scan<'a> {
        b: &'a [u8],
        i: usize,
        out: Vec<(Vec<String>, usize, usize)>,
    }
    impl Scan<'_> {
        fn ws(&mut self) {
            while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }
        fn peek(&self) -> Option<u8> {
            self.b.get(self.i).copied()
        }
        fn string(&mut self) -> Option<String> {
            let start = self.i;
            self.i += 1;
            while self.i < self.b.len() {
                match self.b[self.i] {
                    b'\\' => self.i += 2,
                    b'"' => {
                        self.i += 1;
                        return serde_json::from_slice(&self.b[start..self.i]).ok();
                    }
                    _ => self.i += 1,
                }
            }
            None
        }
        fn value(&mut self, path: &mut Vec<String>) -> Option<()> {
            self.ws();
            let start = self.i;
            match self.peek()? {
                b'{' => {
                    self.i += 1;
                    loop {
                        self.ws();
                        match self.peek()? {
                            b'}' => {
                                self.i += 1;
                                break;
                            }
                            b',' => self.i += 1,
                            b'"' => {
                                let key = self.string()?;
                                self.ws();
                                (self.peek()? == b':').then_some(())?;
                                self.i += 1;
                                path.push(key);
                                self.value(path)?;
                                path.pop();
                            }
                            _ => return None,
                        }
                    }
                }
                b'[' => {
                    self.i += 1;
                    loop {
                        self.ws();
                        match self.peek()? {
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            b',' => self.i += 1,
                            _ => self.value(path)?,
                        }
                    }
                }
                b'"' => {
                    self.string()?;
                }
                _ => {
                    while self.i < self.b.len() && !matches!(self.b[self.i], b',' | b'}' | b']') {
                        if self.b[self.i].is_ascii_whitespace() {
                            break;
                        }
                        self.i += 1;
                    }
                }
            }
            self.out.push((path.clone(), start, self.i));
            Some(())
        }
    }
    let mut scan = Scan { b: s.as_bytes(), i: 0, out: Vec::new() };
    let _ = scan.value(&mut Vec::new());
    scan.out
}

/// Whether `v` is a value of type `t` as a row's input of that type would bind (`at` names
/// where it is, for the message).
fn fits(v: &Json, t: &Type, at: &str) -> Result<(), String> {
    let found = || excerpt(&v.to_string(), 60);
    match (t, v) {
        (Type::Optional(_), Json::Null) | (Type::Json | Type::Any, _) => Ok(()),
        (Type::Optional(t), v) => fits(v, t, at),
        (Type::Text, Json::String(_)) | (Type::Number, Json::Number(_)) | (Type::Bool, Json::Bool(_)) => Ok(()),
        (Type::List(t), Json::Array(items)) => {
            items.iter().enumerate().try_for_each(|(i, x)| fits(x, t, &format!("{at}[{i}]")))
        }
        (Type::Record(fields), Json::Object(o)) => fields.iter().try_for_each(|(name, ft)| match o.get(name) {
            Some(x) => fits(x, ft, &format!("{at}.{name}")),
            None if matches!(ft, Type::Optional(_)) => Ok(()),
            None => Err(format!("{at} has no `{name}`")),
        }),
        (t, _) => Err(format!("{at} is {}, not {t}", found())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_items_must_fit_the_input_type() {
        let item = Type::Record(vec![("criterion".into(), Type::Text), ("points".into(), Type::Number)]);
        let list = Type::List(Box::new(item));
        assert_eq!(fits(&json!([{"criterion": "a", "points": 1}]), &list, "r"), Ok(()));
        assert_eq!(fits(&json!([]), &list, "r"), Ok(()));
        assert_eq!(fits(&json!([{"criterion": "a"}]), &list, "r"), Err("r[0] has no `points`".into()));
        let wrong = fits(&json!([{"criterion": "a", "points": "7"}]), &list, "r").unwrap_err();
        assert!(wrong.starts_with("r[0].points is \"7\", not Number"), "{wrong}");
        assert!(fits(&json!({"items": []}), &list, "r").is_err());
        let opt = Type::Record(vec![("tags".into(), Type::Optional(Box::new(Type::List(Box::new(Type::Text)))))]);
        assert_eq!(fits(&json!({}), &opt, "r"), Ok(()));
    }

    #[test]
    fn offsets_follow_key_paths() {
        let s = r#" {"c1": {"answer": "yes", "e": "a \"b\""}, "c2": {"answer":"no"}} "#;
        let offs = value_offsets(s);
        let find = |p: &[&str]| {
            let (_, a, b) = offs.iter().find(|(q, _, _)| q.iter().map(String::as_str).eq(p.iter().copied())).unwrap();
            &s[*a..*b]
        };
        assert_eq!(find(&["c1", "answer"]), "\"yes\"");
        assert_eq!(find(&["c2", "answer"]), "\"no\"");
        assert_eq!(find(&["c1", "e"]), r#""a \"b\"""#);
    }

    #[test]
    fn code_fences_are_stripped() {
        assert_eq!(strip_code_fence("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(strip_code_fence("  {\"a\": 1} "), "{\"a\": 1}");
    }

    #[test]
    fn token_classes() {
        assert_eq!(token_class("\"yes"), Some(true));
        assert_eq!(token_class(" No"), Some(false));
        assert_eq!(token_class("true"), Some(true));
        assert_eq!(token_class("maybe"), None);
    }
}
