//! `rubric import promptfoo`: a promptfoo test configuration (YAML or JSON) becomes one rubric
//! that reproduces promptfoo's assertion semantics, and one row per test holding that test's
//! assertions as data (per-instance criteria, as HealthBench rows carry their rubric items).
//! The rubric's score is promptfoo's test score (the weighted mean of the assertion scores) and
//! its report-only score `pass` is promptfoo's pass (score ≥ the test's `threshold` when it has
//! one, else every assertion passing). Assertion values are checked and normalised here (a
//! JavaScript regex rewritten in Rust syntax with the same meaning, `{{var}}` templates filled
//! from the test's vars, comma-separated lists split); whatever cannot be reproduced exactly is
//! refused, naming the test and the assertion.

use super::{check_keys, check_responses, comment, quote, response_text, sanitize_package, ImportError, Imported};
use serde_json::{json, Map, Value as Json};
use std::fmt::Write as _;

/// Import a configuration; `responses` (one per test, in order) fill the rows' `response`.
pub fn import(text: &str, name: &str, responses: Option<&[Json]>) -> Result<Imported, ImportError> {
    let config: Json = serde_yaml_ng::from_str(text)
        .map_err(|e| ImportError::malformed(format!("not a YAML or JSON promptfoo configuration: {e}")))?;
    let tests = match config.get("tests") {
        Some(Json::Array(t)) => t.clone(),
        Some(Json::String(s)) => {
            return Err(ImportError::unsupported(
                format!("`tests: {s}` loads the tests from another file"),
                "import a configuration whose `tests` is a list (paste the file's tests into it)",
            ))
        }
        _ => return Err(ImportError::malformed("the configuration has no `tests` list")),
    };
    let default = config.get("defaultTest").cloned().unwrap_or(Json::Object(Map::new()));
    check_keys(&default, "`defaultTest`", &["assert", "vars", "threshold", "description", "metadata", "options"])?;
    let mut notes = Vec::new();
    let model = grader_model(&default)?;
    check_responses(responses, tests.len(), "test")?;
    let mut rows = Vec::new();
    let mut judged = false;
    for (i, test) in tests.iter().enumerate() {
        let row = test_row(i, test, &default, &mut notes)?;
        judged |= row["rubrics"].as_array().is_some_and(|r| !r.is_empty());
        let mut row = row;
        if let Some(r) = responses {
            row["response"] = Json::String(response_text(&r[i], i)?);
        }
        rows.push(row);
    }
    let title = config.get("description").and_then(Json::as_str).unwrap_or("promptfoo tests");
    Ok(Imported { source: source(name, title, model.as_deref(), judged), rows: Some(rows), notes })
}

/// The grader's model, when `defaultTest.options.provider` names one.
fn grader_model(default: &Json) -> Result<Option<String>, ImportError> {
    let Some(options) = default.get("options") else { return Ok(None) };
    check_keys(options, "`defaultTest.options`", &["provider"])?;
    match options.get("provider") {
        None => Ok(None),
        Some(Json::String(p)) => Ok(Some(p.rsplit(':').next().unwrap_or(p).to_string())),
        Some(_) => Err(ImportError::unsupported(
            "`defaultTest.options.provider` is not a provider id",
            "name the grading model by its id (`openai:gpt-4.1-mini`); endpoints are configured in judges.toml",
        )),
    }
}

/// One test as a row: its id, description, vars, threshold and normalised assertions.
fn test_row(i: usize, test: &Json, default: &Json, notes: &mut Vec<String>) -> Result<Json, ImportError> {
    let at = format!("test {}", i + 1);
    check_keys(test, &format!("`{at}`"), &["description", "vars", "assert", "threshold", "metadata", "options"])?;
    if let Some(o) = test.get("options") {
        check_keys(o, &format!("`{at}.options`"), &["provider"])?;
    }
    let mut vars = default.get("vars").and_then(Json::as_object).cloned().unwrap_or_default();
    if let Some(v) = test.get("vars") {
        let v = v.as_object().ok_or_else(|| format!("{at}: `vars` is not a mapping"))?;
        vars.extend(v.clone());
    }
    let mut asserts: Vec<Json> = default.get("assert").and_then(Json::as_array).cloned().unwrap_or_default();
    if let Some(a) = test.get("assert") {
        asserts.extend(a.as_array().ok_or_else(|| format!("{at}: `assert` is not a list"))?.iter().cloned());
    }
    let threshold = match test.get("threshold").or_else(|| default.get("threshold")) {
        None | Some(Json::Null) => Json::Null,
        Some(Json::Number(n)) => Json::Number(n.clone()),
        Some(_) => return Err(ImportError::malformed(format!("{at}: `threshold` is not a number"))),
    };
    let mut checks = Vec::new();
    let mut sets = Vec::new();
    let mut rubrics = Vec::new();
    let mut total_weight = 0.0;
    for (j, a) in asserts.iter().enumerate() {
        let where_ = format!("{at}, assertion {}", j + 1);
        let kind = a.get("type").and_then(Json::as_str).ok_or_else(|| format!("{where_}: no `type`"))?;
        let weight = weight_of(a, &where_)?;
        total_weight += weight;
        match kind {
            "assert-set" => {
                check_keys(a, &format!("`{where_}`"), &["type", "assert", "weight", "threshold", "metric"])?;
                let children = a
                    .get("assert")
                    .and_then(Json::as_array)
                    .ok_or_else(|| format!("{where_}: `assert-set` has no `assert` list"))?;
                let mut inner = Vec::new();
                for (k, c) in children.iter().enumerate() {
                    let where_c = format!("{where_}, set member {}", k + 1);
                    let ckind = c.get("type").and_then(Json::as_str).ok_or_else(|| format!("{where_c}: no `type`"))?;
                    if ckind == "assert-set" || ckind.ends_with("llm-rubric") {
                        return Err(ImportError::unsupported(
                            format!("{where_c}: `{ckind}` inside an `assert-set`"),
                            "a set's members are computed inside the rubric, which can do so for deterministic assertions only: move it out of the set",
                        ));
                    }
                    inner.push(check(c, ckind, &vars, &where_c)?);
                }
                let threshold = match a.get("threshold") {
                    None | Some(Json::Null) => Json::Null,
                    Some(t) if t.is_number() => t.clone(),
                    Some(_) => return Err(ImportError::malformed(format!("{where_}: `threshold` is not a number"))),
                };
                sets.push(json!({
                    "label": format!("assert-set of {}", inner.len()),
                    "weight": weight,
                    "threshold": threshold,
                    "tags": metric(a),
                    "checks": inner,
                }));
            }
            "llm-rubric" => {
                check_keys(a, &format!("`{where_}`"), &["type", "value", "weight", "threshold", "metric"])?;
                let text = match a.get("value") {
                    Some(Json::String(s)) => render(s, &vars, &where_)?,
                    _ => {
                        return Err(ImportError::unsupported(
                            format!("{where_}: `llm-rubric` whose value is not a text"),
                            "give the rubric as a string",
                        ))
                    }
                };
                let threshold = a.get("threshold").and_then(Json::as_f64);
                if threshold.is_none() {
                    notes.push(format!(
                        "{where_}: `llm-rubric` without a `threshold` passes on the grader's own `pass` flag in promptfoo; \
                         the imported criterion is met when the judge's score is at least 0.5 (give the assertion a `threshold` to make them the same)"
                    ));
                }
                rubrics
                    .push(json!({"text": text, "weight": weight, "pass": threshold.unwrap_or(0.5), "tags": metric(a)}));
            }
            k if k == "not-llm-rubric" || k == "not-assert-set" => {
                return Err(ImportError::unsupported(
                    format!("{where_}: `{k}`"),
                    "a negated judged assertion or set has no exact meaning here: negate its members instead",
                ))
            }
            k => checks.push(check(a, k, &vars, &where_)?),
        }
    }
    let id = format!("test-{}", i + 1);
    Ok(json!({
        "id": id,
        "description": test.get("description").cloned().unwrap_or(Json::Null),
        "vars": Json::Object(vars),
        "threshold": threshold,
        "asserted": !asserts.is_empty(),
        "total_weight": total_weight,
        "checks": checks,
        "sets": sets,
        "rubrics": rubrics,
    }))
}

fn weight_of(a: &Json, at: &str) -> Result<f64, ImportError> {
    match a.get("weight") {
        None => Ok(1.0),
        Some(w) => match w.as_f64() {
            Some(w) if w >= 0.0 && w.is_finite() => Ok(w),
            _ => Err(ImportError::unsupported(format!("{at}: `weight: {w}`"), "weights are numbers of at least 0")),
        },
    }
}

/// promptfoo's named metric of an assertion, as the criterion's tag `metric:NAME`.
fn metric(a: &Json) -> Json {
    match a.get("metric").and_then(Json::as_str) {
        Some(m) => json!([format!("metric:{m}")]),
        None => json!([]),
    }
}

/// A deterministic assertion as a row record: `{label, kind, negate, text, texts, json, number,
/// weight, metric}`, with `kind` one of the kinds the rubric's `holds` function knows.
fn check(a: &Json, kind: &str, vars: &Map<String, Json>, at: &str) -> Result<Json, ImportError> {
    check_keys(a, &format!("`{at}`"), &["type", "value", "weight", "threshold", "metric"])?;
    let (negate, base) = match kind.strip_prefix("not-") {
        Some(b) => (true, b),
        None => (false, kind),
    };
    let value = match a.get("value") {
        Some(Json::String(s)) => Some(Json::String(render(s, vars, at)?)),
        Some(v) => Some(v.clone()),
        None => None,
    };
    let mut text = String::new();
    let mut texts: Vec<String> = Vec::new();
    let mut json_value = Json::Null;
    let mut number = 0.0;
    let rkind: &str = match base {
        "equals" => match &value {
            Some(Json::Object(_) | Json::Array(_) | Json::Null) => {
                json_value = value.clone().unwrap_or(Json::Null);
                "equals-json"
            }
            Some(v) => {
                text = scalar_text(v, at)?;
                "equals"
            }
            None => return Err(ImportError::malformed(format!("{at}: `equals` has no `value`"))),
        },
        "contains" | "icontains" | "starts-with" | "ends-with" => {
            text = match &value {
                Some(v @ (Json::String(_) | Json::Number(_))) => scalar_text(v, at)?,
                _ => return Err(ImportError::malformed(format!("{at}: `{base}` needs a string or number `value`"))),
            };
            if text.is_empty() {
                return Err(ImportError::malformed(format!("{at}: `{base}` with an empty value")));
            }
            base
        }
        "contains-any" | "icontains-any" | "contains-all" | "icontains-all" => {
            texts = list_value(value.as_ref(), at, base)?;
            base
        }
        "regex" => {
            let p = match &value {
                Some(Json::String(s)) if !s.is_empty() => s.clone(),
                _ => return Err(ImportError::malformed(format!("{at}: `regex` needs a string `value`"))),
            };
            text = js_regex(&p).map_err(|why| {
                ImportError::unsupported(
                    format!("{at}: the JavaScript regex `{p}` {why}"),
                    "the rubric's regexes are Rust's (no look-around or back-references); write the pattern without it",
                )
            })?;
            "regex"
        }
        "is-json" | "contains-json" => {
            json_value = match &value {
                None | Some(Json::Null) => Json::Null,
                Some(Json::String(s)) if s.is_empty() => Json::Null,
                Some(Json::String(s)) if s.starts_with("file://") => {
                    return Err(ImportError::unsupported(
                        format!("{at}: a JSON schema loaded from `{s}`"),
                        "paste the schema into the assertion's `value`",
                    ))
                }
                Some(Json::String(s)) => serde_yaml_ng::from_str(s)
                    .map_err(|e| ImportError::malformed(format!("{at}: the schema is not YAML or JSON: {e}")))?,
                Some(v @ (Json::Object(_) | Json::Bool(_))) => v.clone(),
                Some(_) => return Err(ImportError::malformed(format!("{at}: `{base}` needs a schema object"))),
            };
            if let Json::Object(o) = &mut json_value {
                // promptfoo validates with Ajv's default draft, draft-07.
                o.entry("$schema").or_insert_with(|| Json::String("http://json-schema.org/draft-07/schema#".into()));
            }
            if !json_value.is_null() && jsonschema::validator_for(&json_value).is_err() {
                return Err(ImportError::unsupported(
                    format!("{at}: the JSON schema of `{base}` does not compile"),
                    "promptfoo fails such an assertion whatever the output: fix the schema",
                ));
            }
            base
        }
        "levenshtein" => {
            if negate {
                return Err(ImportError::unsupported(
                    format!("{at}: `not-levenshtein`"),
                    "promptfoo does not negate `levenshtein`: remove the `not-`",
                ));
            }
            text = match &value {
                Some(Json::String(s)) => s.clone(),
                _ => return Err(ImportError::malformed(format!("{at}: `levenshtein` needs a string `value`"))),
            };
            // promptfoo: distance <= `threshold ?? 5` (a threshold of 0 asks for equality)
            number = a.get("threshold").and_then(Json::as_f64).unwrap_or(5.0);
            "levenshtein"
        }
        other => {
            return Err(ImportError::unsupported(
                format!("{at}: the assertion type `{kind}`"),
                format!(
                    "the importer reproduces equals, contains, icontains, contains-any, icontains-any, contains-all, \
                     icontains-all, starts-with, ends-with, regex, is-json, contains-json, levenshtein, llm-rubric and \
                     assert-set (and their `not-` forms); `{other}` has no exact counterpart"
                ),
            ))
        }
    };
    if a.get("threshold").is_some() && rkind != "levenshtein" {
        return Err(ImportError::unsupported(
            format!("{at}: `threshold` on a `{kind}` assertion"),
            "only `levenshtein`, `llm-rubric` and `assert-set` read a threshold",
        ));
    }
    let label = match (&value, rkind) {
        (_, "regex") => format!("{kind} {}", a.get("value").map(Json::to_string).unwrap_or_default()),
        (Some(v), _) => format!("{kind} {}", shorten(&v.to_string())),
        (None, _) => kind.to_string(),
    };
    Ok(json!({
        "label": label,
        "kind": rkind,
        "negate": negate,
        "text": text,
        "texts": texts,
        "json": json_value,
        "number": number,
        "weight": weight_of(a, at)?,
        "tags": metric(a),
    }))
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(79).collect::<String>())
    } else {
        s.to_string()
    }
}

/// A string or number value as JavaScript's `String(value)` writes it.
fn scalar_text(v: &Json, at: &str) -> Result<String, ImportError> {
    match v {
        Json::String(s) => Ok(s.clone()),
        Json::Bool(b) => Ok(b.to_string()),
        Json::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            // JavaScript writes 1e21 and up, and below 1e-6, in exponent form; Rust never does
            if x != 0.0 && !(1e-6..1e21).contains(&x.abs()) {
                return Err(ImportError::unsupported(
                    format!("{at}: the number `{n}` as text"),
                    "JavaScript writes it in exponent form: give the value as a string",
                ));
            }
            Ok(if x.fract() == 0.0 { format!("{}", x as i64) } else { format!("{x}") })
        }
        _ => Err(ImportError::malformed(format!("{at}: expected a string or a number, found `{v}`"))),
    }
}

/// The strings of a `contains-any`/`-all` value: a list, or promptfoo's comma-separated string.
fn list_value(value: Option<&Json>, at: &str, kind: &str) -> Result<Vec<String>, ImportError> {
    match value {
        Some(Json::Array(items)) => items.iter().map(|v| scalar_text(v, at)).collect(),
        Some(Json::String(s)) => {
            if s.contains('"') {
                return Err(ImportError::unsupported(
                    format!("{at}: the quoted comma-separated value `{s}`"),
                    "write the value as a YAML list",
                ));
            }
            let items: Vec<String> = s.split(',').map(|t| t.trim().to_string()).collect();
            if items.iter().any(String::is_empty) {
                return Err(ImportError::unsupported(
                    format!("{at}: an empty item in `{s}`"),
                    "write the value as a YAML list",
                ));
            }
            Ok(items)
        }
        _ => Err(ImportError::malformed(format!("{at}: `{kind}` needs a list value"))),
    }
}

/// Fill `{{ name }}` templates from the test's vars (promptfoo renders values with Nunjucks);
/// any other template syntax is refused.
fn render(s: &str, vars: &Map<String, Json>, at: &str) -> Result<String, ImportError> {
    if s.contains("{%") || s.contains("{#") {
        return Err(ImportError::unsupported(
            format!("{at}: the Nunjucks template `{s}`"),
            "only `{{ var }}` slots are filled in",
        ));
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let close = rest[open..].find("}}").ok_or_else(|| format!("{at}: an unclosed `{{{{` in `{s}`"))?;
        let name = rest[open + 2..open + close].trim();
        let ok_name = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
        match vars.get(name) {
            Some(Json::String(v)) if ok_name => out.push_str(v),
            Some(v @ Json::Number(_)) if ok_name => out.push_str(&scalar_text(v, at)?),
            _ => {
                return Err(ImportError::unsupported(
                    format!("{at}: the template `{}` in `{s}`", &rest[open..open + close + 2]),
                    "only `{{ var }}` slots naming a string or number var of the test are filled in",
                ))
            }
        }
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A JavaScript regular expression (no flags) rewritten in Rust `regex` syntax with the same
/// meaning: `\d`, `\w`, `\b` are ASCII in JavaScript and Unicode-aware in Rust, `\s` and `.`
/// differ in the characters they take; anything the Rust crate rejects is refused.
pub(crate) fn js_regex(p: &str) -> Result<String, String> {
    const JS_SPACE: &str =
        r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else { return Err("ends with a lone `\\`".into()) };
                match (e, in_class) {
                    ('d', false) => out.push_str("[0-9]"),
                    ('d', true) => out.push_str("0-9"),
                    ('D', false) => out.push_str("[^0-9]"),
                    ('w', false) => out.push_str("[0-9A-Za-z_]"),
                    ('w', true) => out.push_str("0-9A-Za-z_"),
                    ('W', false) => out.push_str("[^0-9A-Za-z_]"),
                    ('s', false) => {
                        let _ = write!(out, "[{JS_SPACE}]");
                    }
                    ('s', true) => out.push_str(JS_SPACE),
                    ('S', false) => {
                        let _ = write!(out, "[^{JS_SPACE}]");
                    }
                    ('b', false) => out.push_str(r"(?-u:\b)"),
                    ('B', false) => out.push_str(r"(?-u:\B)"),
                    ('D' | 'W' | 'S', true) => return Err(format!("has `\\{e}` inside a character class")),
                    ('b', true) => out.push_str(r"\x08"),
                    ('1'..='9', _) => return Err(format!("has the back-reference `\\{e}`")),
                    ('k', _) => return Err("has a named back-reference `\\k`".into()),
                    ('c' | 'u' | 'p' | 'P', _) => {
                        return Err(format!("has the escape `\\{e}`, read differently without the `u` flag"))
                    }
                    ('0', _) => out.push_str(r"\x00"),
                    ('x', _) => out.push_str(r"\x"),
                    (e, _) if e.is_ascii_alphanumeric() && !"tnrvf".contains(e) => {
                        return Err(format!("has the escape `\\{e}`"));
                    }
                    ('v', _) => out.push_str(r"\x0B"),
                    (e, _) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    return Err("has `[]` or `[^]`, which Rust reads differently".into());
                }
            }
            '[' if in_class => out.push_str(r"\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '.' if !in_class => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '(' if !in_class && chars.peek() == Some(&'?') => {
                let mut look = chars.clone();
                look.next();
                match look.next() {
                    Some(':') => out.push('('),
                    Some('=' | '!') => return Err("has a look-ahead".into()),
                    Some('<') if matches!(look.next(), Some('=' | '!')) => return Err("has a look-behind".into()),
                    Some('<') => out.push('('),
                    _ => return Err("has `(?`, which is not valid JavaScript".into()),
                }
            }
            '&' | '~' | '-' if in_class && chars.peek() == Some(&c) => {
                // Rust reads `&&`, `~~`, `--` in a class as set operations
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    if in_class {
        return Err("has an unclosed `[`".into());
    }
    regex::Regex::new(&out)
        .map_err(|e| format!("cannot be compiled as `{out}`: {}", e.to_string().lines().last().unwrap_or("")))?;
    Ok(out)
}

/// The rubric: the same text for every configuration but its name, title and grader model.
fn source(name: &str, title: &str, model: Option<&str>, judged: bool) -> String {
    const CHECK: &str = "{label: Text, kind: Text, negate: Bool, text: Text, texts: List[Text], json: Json?, number: Number, weight: Number, tags: List[Text]}";
    let mut out = String::new();
    let _ = writeln!(out, "rubric promptfoo.{} @ 1.0.0 {}\n", sanitize_package(name), quote(title));
    comment(
        &mut out,
        "Imported from a promptfoo test configuration by `rubric import promptfoo`.\n\
         Each row is one test: its assertions are data (`checks`, `sets`, `rubrics`), and this\n\
         rubric gives them promptfoo's meaning. The score is promptfoo's test score, the weighted\n\
         mean of the assertion scores (0 when every weight is 0, 1 for a test without assertions);\n\
         the report-only score `pass` is 1 when promptfoo passes the test: score >= `threshold` when\n\
         the test has one, otherwise every assertion passing.",
    );
    out.push('\n');
    out.push_str("input response: Text\n");
    let _ = writeln!(out, "input checks: List[{CHECK}] = []");
    let _ = writeln!(out, "input sets: List[{{label: Text, weight: Number, threshold: Number?, tags: List[Text], checks: List[{CHECK}]}}] = []");
    out.push_str("input rubrics: List[{text: Text, weight: Number, pass: Number, tags: List[Text]}] = []\n");
    out.push_str("input threshold: Number?\ninput total_weight: Number\ninput asserted: Bool\n\n");
    if judged {
        out.push_str(
            "// promptfoo's `llm-rubric` grader: it reads the output and one rubric, and answers a score in [0, 1].\n",
        );
        out.push_str("judge grader {\n");
        if let Some(m) = model {
            let _ = writeln!(out, "  model {}", quote(m));
        }
        out.push_str("  sees response\n  returns value(value: Number, reason: Text)\n");
        out.push_str("  template \"\"\"\n    Grade the output by the rubric. Score it from 0 to 1 and give your reason.\n\n    Output:\n    {{response}}\n\n    Rubric:\n    {{criterion}}\n  \"\"\"\n}\n\n");
    }
    comment(
        &mut out,
        "Whether an assertion's condition holds, before `not-`. Regexes are stored in Rust syntax with the\n\
         JavaScript meaning; `equals-json` is `equals` with an object value (deep equality of parsed JSON).",
    );
    let _ = writeln!(out, "fn holds(response: Text, a: {CHECK}) -> Bool =");
    let arms = [
        ("equals", "response == a.text"),
        ("equals-json", "parse_json(response) != null and json_equal(parse_json(response), a.json)"),
        ("contains", "contains(response, a.text)"),
        ("icontains", "contains_ci(response, a.text)"),
        ("contains-any", "any(a.texts, t => contains(response, t))"),
        ("icontains-any", "any(a.texts, t => contains_ci(response, t))"),
        ("contains-all", "all(a.texts, t => contains(response, t))"),
        ("icontains-all", "all(a.texts, t => contains_ci(response, t))"),
        ("starts-with", "starts_with(response, a.text)"),
        ("ends-with", "ends_with(response, a.text)"),
        ("regex", "matches(response, a.text)"),
        (
            "is-json",
            "parse_json(response) != null and (a.json == null or json_valid(parse_json(response) ?? json(\"null\"), a.json))",
        ),
        (
            "contains-json",
            "if a.json == null then len(json_objects(response)) > 0 else any(json_objects(response), o => json_valid(o, a.json))",
        ),
        ("levenshtein", "edit_distance(response, a.text) <= a.number"),
    ];
    for (i, (kind, expr)) in arms.iter().enumerate() {
        let lead = if i == 0 { "  if" } else { "  else if" };
        let _ = writeln!(out, "{lead} a.kind == {} then {expr}", quote(kind));
    }
    out.push_str("  else false  // the importer writes no other kind\n\n");
    out.push_str("/// Whether an assertion passes: its condition, inverted by `not-`.\n");
    let _ = writeln!(out, "fn passes(response: Text, a: {CHECK}) -> Bool = holds(response, a) != a.negate\n");
    out.push_str(
        "/// An assert-set's score: the weighted mean of its members' scores (0 when their weights sum to 0).\n",
    );
    let _ = writeln!(
        out,
        "fn set_score(response: Text, cs: List[{CHECK}]) -> Number =\n  \
         if sum(map(cs, c => c.weight)) > 0\n  \
         then sum(map(cs, c => c.weight * (if passes(response, c) then 1 else 0))) / sum(map(cs, c => c.weight))\n  \
         else 0\n"
    );
    out.push_str(
        "/// Whether an assert-set passes: its score reaches its threshold, or without one every member passes.\n",
    );
    let _ = writeln!(
        out,
        "fn set_passes(response: Text, cs: List[{CHECK}], threshold: Number?) -> Bool =\n  \
         if threshold == null then all(cs, c => passes(response, c)) else set_score(response, cs) >= threshold\n"
    );
    out.push_str("criteria asserts each a in checks {\n  criterion a.label weight a.weight tags a.tags check passes(response, a)\n}\n");
    out.push_str(
        "criteria assert_sets each s in sets {\n  criterion s.label weight s.weight tags s.tags value set_score(response, s.checks) pass s.threshold ?? 1\n}\n",
    );
    if judged {
        out.push_str("criteria llm_rubrics each r in rubrics by grader {\n  criterion r.text weight r.weight tags r.tags continuous pass r.pass\n}\n");
    }
    out.push('\n');
    out.push_str("let test_score = if not asserted then 1 else if total_weight > 0 then weighted_mean(all) else 0\n");
    let judged_pass = if judged { " and all(llm_rubrics)" } else { "" };
    let _ = writeln!(
        out,
        "let test_passes =\n  \
         if not asserted then true\n  \
         else if threshold != null then test_score >= threshold\n  \
         else all(asserts){judged_pass} and all(sets, s => set_passes(response, s.checks, s.threshold))\n"
    );
    out.push_str("score = test_score\nscore pass = if test_passes then 1 else 0\n");
    out
}
