//! JSON intrinsics: strict parsing, path access, typed accessors and JSON Schema validation
//! (the `jsonschema` crate, with remote and file references disabled).
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{arg, invalid, json_arg, json_value, number, opt_json_arg, text_arg, texts};
use crate::stdlib::{EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::{number_to_json, Value};
use serde_json::Value as JsonValue;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

fn parse(text: &str) -> Result<JsonValue, serde_json::Error> {
    serde_json::from_str(text)
}

pub(super) const JSON: Intrinsic = Intrinsic {
    name: "json",
    sig: "(text: Text) -> Json",
    doc: "`text` parsed as JSON; malformed JSON is a `json` trap. Use `parse_json` when malformed \
          input is an expected outcome rather than an error.",
    examples: &[r##"json_number(json("{\"a\": 2}").json_get("a")) == 2"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        ctx.reserve(t.len())?;
        parse(t).map(json_value).map_err(|e| Trap::new(TrapKind::Json, format!("malformed JSON: {e}")))
    },
};

pub(super) const JSON_OBJECTS: Intrinsic = Intrinsic {
    name: "json_objects",
    sig: "(text: Text) -> List[Json]",
    doc: "Every JSON object written inside `text`, left to right: from each `{` (outside an \
          object already found), the object that starts there when it is complete and valid \
          JSON, the scan going on after it; a `{` that starts no valid object is passed over. \
          Objects nested in one found are part of it, not found again. promptfoo's \
          `contains-json` passes when this finds an object (one that a JSON Schema accepts, \
          when it gives one).",
    examples: &[
        r##"json_objects("Result: {\"a\": 1} and {\"b\": {\"c\": 2}}") == [json("{\"a\": 1}"), json("{\"b\": {\"c\": 2}}")]"##,
        r##"json_objects("{oops} {\"k\": \"}\"}") == [json("{\"k\": \"}\"}")]"##,
        r##"len(json_objects("[1, 2] no object")) == 0"##,
    ],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let mut found = Vec::new();
        let mut at = 0;
        while let Some(off) = t[at..].find('{') {
            let start = at + off;
            let mut values = serde_json::Deserializer::from_str(&t[start..]).into_iter::<JsonValue>();
            let first = values.next();
            let read = values.byte_offset();
            ctx.work(read + 1)?;
            match first {
                Some(Ok(v @ JsonValue::Object(_))) => {
                    ctx.reserve(read)?;
                    found.push(json_value(v));
                    at = start + read.max(1);
                }
                _ => at = start + 1,
            }
        }
        Ok(Value::list(found))
    },
};

pub(super) const PARSE_JSON: Intrinsic = Intrinsic {
    name: "parse_json",
    sig: "(text: Text) -> Json?",
    doc: "`text` parsed as JSON, or `null` when it is not exactly one JSON value (surrounding \
          whitespace is allowed; prose, trailing commas, comments or a markdown code fence around \
          the JSON are not). The JSON literal `null` parses to a `Json` null, not to `null`.",
    examples: &[r##"json_len(parse_json("[1, 2, 3]") ?? json("[]")) == 3"##, r##"parse_json("not json") == null"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        ctx.reserve(t.len())?;
        Ok(parse(t).map_or(Value::Null, json_value))
    },
};

pub(super) const IS_JSON: Intrinsic = Intrinsic {
    name: "is_json",
    sig: "(text: Text) -> Bool",
    doc: "Whether `text` is exactly one JSON value, surrounding whitespace allowed. Strict: a \
          response wrapped in a ```` ```json ```` fence is not JSON (strip the fence first, e.g. \
          with `code_blocks(text, lang: \"json\")`, when a check should accept one).",
    examples: &[
        r##"is_json(" {\"a\": [1, null]} ")"##,
        r##"not is_json("```json\n{}\n```")"##,
        r##"not is_json("{'a': 1}")"##,
    ],
    imp: |a, _| Ok(Value::Bool(parse(text_arg(a, 0)?).is_ok())),
};

/// One step of a JSON path.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(i64),
}

/// Parse `a.b[0].c`, `[2].x`, `a["odd.key"]`, `items[-1]` (from the end). An optional leading
/// `$` or `$.` is accepted. The empty path is the value itself.
fn parse_path(path: &str) -> Result<Vec<Step>, Trap> {
    let bad = |why: &str| invalid(format!("bad JSON path `{path}`: {why}"));
    let mut rest = path.trim();
    rest = rest.strip_prefix('$').unwrap_or(rest);
    let mut steps = Vec::new();
    if rest.is_empty() {
        return Ok(steps);
    }
    let mut expect_key = !rest.starts_with('[');
    rest = rest.strip_prefix('.').unwrap_or(rest);
    while !rest.is_empty() || expect_key {
        if expect_key {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            let key = &rest[..end];
            if key.is_empty() {
                return Err(bad("empty key"));
            }
            if key.contains(']') {
                return Err(bad("unexpected `]`"));
            }
            steps.push(Step::Key(key.to_string()));
            rest = &rest[end..];
            expect_key = false;
        } else if let Some(r) = rest.strip_prefix('.') {
            rest = r;
            expect_key = true;
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']').ok_or_else(|| bad("unclosed `[`"))?;
            let inner = r[..close].trim();
            if let Some(q) = inner.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
                steps.push(Step::Key(q.to_string()));
            } else {
                let i: i64 = inner.parse().map_err(|_| bad("an index must be an integer"))?;
                steps.push(Step::Index(i));
            }
            rest = &r[close + 1..];
        } else {
            return Err(bad("expected `.` or `[`"));
        }
    }
    Ok(steps)
}

fn get<'j>(mut j: &'j JsonValue, steps: &[Step]) -> Option<&'j JsonValue> {
    for step in steps {
        j = match (step, j) {
            (Step::Key(k), JsonValue::Object(o)) => o.get(k)?,
            (Step::Key(k), JsonValue::Array(a)) => a.get(k.parse::<usize>().ok()?)?,
            (Step::Index(i), JsonValue::Array(a)) => {
                let i = if *i < 0 { a.len() as i64 + i } else { *i };
                a.get(usize::try_from(i).ok()?)?
            }
            _ => return None,
        };
    }
    Some(j)
}

fn json_get(args: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    let steps = parse_path(text_arg(args, 1)?)?;
    let Some(j) = opt_json_arg(args, 0)? else {
        return Ok(Value::Null);
    };
    Ok(get(&j, &steps).map_or(Value::Null, |v| json_value(v.clone())))
}

pub(super) const JSON_GET: Intrinsic = Intrinsic {
    name: "json_get",
    sig: "(value: Json?, path: Text) -> Json?",
    doc: "The part of `value` at `path`, or `null` when it is not there (or `value` is `null`). A \
          path is a sequence of keys and indexes: `a.b[0].c`, `[2]`, `items[-1]` (counting from \
          the end), `a[\"key.with.dots\"]`; a key also indexes an array when it is a number (`a.0`). \
          The empty path is `value` itself. A malformed path is an invalid argument.",
    examples: &[
        r##"json_text(json("{\"a\": {\"b\": [\"x\", \"y\"]}}").json_get("a.b[1]")) == "y""##,
        r##"json_get(json("{\"a\": 1}"), "b") == null"##,
        r##"json_number(json_get(json("[1, 2, 3]"), "[-1]")) == 3"##,
    ],
    imp: json_get,
};

pub(super) const JSON_TEXT: Intrinsic = Intrinsic {
    name: "json_text",
    sig: "(value: Json?) -> Text?",
    doc: "The string held by `value`, or `null` when `value` is not a JSON string (numbers are \
          not converted; see `to_json` for the other direction).",
    examples: &[r##"json_text(json("\"hi\"")) == "hi""##, r##"json_text(json("1")) == null"##],
    imp: |a, _| {
        Ok(match opt_json_arg(a, 0)?.as_deref() {
            Some(JsonValue::String(s)) => Value::text(s.as_str()),
            _ => Value::Null,
        })
    },
};

pub(super) const JSON_NUMBER: Intrinsic = Intrinsic {
    name: "json_number",
    sig: "(value: Json?) -> Number?",
    doc: "The number held by `value`, or `null` when `value` is not a JSON number (a string of \
          digits is not converted; use `parse_number` on `json_text` for that).",
    examples: &[r##"json_number(json("2.5")) == 2.5"##, r##"json_number(json("\"2\"")) == null"##],
    imp: |a, _| {
        Ok(match opt_json_arg(a, 0)?.as_deref() {
            Some(JsonValue::Number(n)) => n.as_f64().map_or(Value::Null, Value::Number),
            _ => Value::Null,
        })
    },
};

pub(super) const JSON_BOOL: Intrinsic = Intrinsic {
    name: "json_bool",
    sig: "(value: Json?) -> Bool?",
    doc: "The boolean held by `value`, or `null` when `value` is not `true` or `false`.",
    examples: &[r##"json_bool(json("{\"ok\": true}").json_get("ok")) == true"##],
    imp: |a, _| {
        Ok(match opt_json_arg(a, 0)?.as_deref() {
            Some(JsonValue::Bool(b)) => Value::Bool(*b),
            _ => Value::Null,
        })
    },
};

pub(super) const JSON_LEN: Intrinsic = Intrinsic {
    name: "json_len",
    sig: "(value: Json) -> Number",
    doc: "The number of elements of a JSON array, of keys of an object, or of characters of a \
          string. Any other JSON value is a `type` trap.",
    examples: &[r##"json_len(json("[1, [2, 3]]")) == 2"##, r##"json_len(json("{\"a\": 1, \"b\": 2}")) == 2"##],
    imp: |a, _| match &*json_arg(a, 0)? {
        JsonValue::Array(v) => Ok(number(v.len())),
        JsonValue::Object(o) => Ok(number(o.len())),
        JsonValue::String(s) => Ok(number(s.chars().count())),
        other => {
            Err(Trap::new(TrapKind::Type, format!("json_len needs an array, an object or a string, got `{other}`")))
        }
    },
};

pub(super) const JSON_KEYS: Intrinsic = Intrinsic {
    name: "json_keys",
    sig: "(value: Json) -> List[Text]",
    doc: "The keys of a JSON object in document order. Any other JSON value is a `type` trap.",
    examples: &[r##"json_keys(json("{\"b\": 1, \"a\": 2}")) == ["b", "a"]"##],
    imp: |a, ctx| match &*json_arg(a, 0)? {
        JsonValue::Object(o) => texts(ctx, o.keys().map(String::as_str)),
        other => Err(Trap::new(TrapKind::Type, format!("json_keys needs an object, got `{other}`"))),
    },
};

pub(super) const JSON_TYPE: Intrinsic = Intrinsic {
    name: "json_type",
    sig: "(value: Json?) -> Text",
    doc: "The kind of `value`: `\"object\"`, `\"array\"`, `\"string\"`, `\"number\"`, \
          `\"boolean\"` or `\"null\"` (also for an absent value).",
    examples: &[r##"json_type(json("[1]")) == "array""##, r##"json_type(parse_json("oops")) == "null""##],
    imp: |a, _| {
        let kind = match opt_json_arg(a, 0)?.as_deref() {
            None | Some(JsonValue::Null) => "null",
            Some(JsonValue::Bool(_)) => "boolean",
            Some(JsonValue::Number(_)) => "number",
            Some(JsonValue::String(_)) => "string",
            Some(JsonValue::Array(_)) => "array",
            Some(JsonValue::Object(_)) => "object",
        };
        Ok(Value::text(kind))
    },
};

thread_local! {
    /// Compiled schemas, keyed by their canonical text. Compilation is pure, so caching does
    /// not change results; the cache is bounded by clearing it when it grows large.
    static SCHEMAS: RefCell<HashMap<String, Arc<jsonschema::Validator>>> =
        RefCell::new(HashMap::new());
}

const SCHEMA_CACHE_LIMIT: usize = 64;

fn validator(schema: &JsonValue) -> Result<Arc<jsonschema::Validator>, Trap> {
    let key = schema.to_string();
    if let Some(v) = SCHEMAS.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(v);
    }
    let v = jsonschema::validator_for(schema)
        .map_err(|e| Trap::new(TrapKind::Json, format!("invalid JSON Schema: {e}")))?;
    let v = Arc::new(v);
    SCHEMAS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= SCHEMA_CACHE_LIMIT {
            c.clear();
        }
        c.insert(key, v.clone());
    });
    Ok(v)
}

pub(super) const JSON_VALID: Intrinsic = Intrinsic {
    name: "json_valid",
    sig: "(value: Json, schema: Json) -> Bool",
    doc: "Whether `value` is valid against the JSON Schema `schema` (the draft is taken from \
          `$schema`, 2020-12 by default; `format` is an annotation unless the draft asserts it). \
          A schema that is itself invalid, or that refers to an external document (remote and \
          file references are disabled), is a `json` trap.",
    examples: &[
        r##"json_valid(json("{\"a\": 1}"), json("{\"type\": \"object\", \"required\": [\"a\"]}"))"##,
        r##"not json_valid(json("[1, \"x\"]"), json("{\"items\": {\"type\": \"number\"}}"))"##,
    ],
    imp: |a, ctx| {
        let value = json_arg(a, 0)?;
        let schema = json_arg(a, 1)?;
        let v = validator(&schema)?;
        bound_validation(&schema, &value, ctx)?;
        Ok(Value::Bool(v.is_valid(&value)))
    },
};

/// The value `propertyNames` is walked over: a string (any key; the walk does not read it).
static KEY: JsonValue = JsonValue::String(String::new());

/// The most subschemas applied in place (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`,
/// `dependentSchemas`, references) one inside the other at one place of the value: past it, a
/// schema refers to itself without descending into the value, and validation would never end.
const MAX_IN_PLACE: usize = 128;
/// The most (subschema, place of the value) pairs a validation may visit, whatever the budget.
const MAX_VALIDATION_STEPS: usize = 10_000_000;

/// Bound the work of validating `value` against `schema` before `jsonschema` runs (it cannot be
/// stopped once it has started, and a schema such as `{"allOf": [{"$ref": "#"}]}` makes it
/// recurse for ever). A walk visits every (subschema, place) pair the validator could visit —
/// every branch of `anyOf`, `oneOf` and `if`, every pattern property — each charged to the row's
/// budget as one unit of work, so validation costs no more than what the walk was allowed; a
/// self-reference that never descends into the value, a reference the walk cannot follow, or
/// more than `MAX_VALIDATION_STEPS` steps is a `json` trap.
fn bound_validation(schema: &JsonValue, value: &JsonValue, ctx: &mut EvalCtx) -> Result<(), Trap> {
    let targets = SchemaTargets::new(schema);
    let mut stack: Vec<(&JsonValue, &JsonValue, usize)> = vec![(schema, value, 0)];
    let mut steps = 0usize;
    while let Some((s, v, depth)) = stack.pop() {
        steps += 1;
        if steps > MAX_VALIDATION_STEPS {
            return Err(Trap::new(
                TrapKind::Json,
                format!("the schema is too costly to validate against this value (over {MAX_VALIDATION_STEPS} steps)"),
            ));
        }
        ctx.work(1)?;
        let JsonValue::Object(s) = s else { continue };
        // In place: the same part of the value.
        let mut in_place: Vec<&JsonValue> = Vec::new();
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(JsonValue::Array(xs)) = s.get(key) {
                in_place.extend(xs);
            }
        }
        for key in ["not", "if", "then", "else"] {
            in_place.extend(s.get(key));
        }
        for key in ["dependentSchemas", "dependencies"] {
            if let Some(JsonValue::Object(m)) = s.get(key) {
                in_place.extend(m.values().filter(|x| x.is_object() || x.is_boolean()));
            }
        }
        for key in ["$ref", "$recursiveRef", "$dynamicRef"] {
            if let Some(JsonValue::String(r)) = s.get(key) {
                in_place.extend(targets.resolve(key, r)?);
            }
        }
        if !in_place.is_empty() && depth >= MAX_IN_PLACE {
            return Err(Trap::new(
                TrapKind::Json,
                "the schema refers to itself without descending into the value (more than 128 subschemas \
                 apply in place, one inside the other), so validation would never end",
            ));
        }
        stack.extend(in_place.into_iter().map(|x| (x, v, depth + 1)));
        // Descending: the parts of the value (every schema that could apply to each).
        match v {
            JsonValue::Object(o) => {
                let patterns: Vec<&JsonValue> = s
                    .get("patternProperties")
                    .and_then(JsonValue::as_object)
                    .map(|m| m.values().collect())
                    .unwrap_or_default();
                // A key is a string: what `propertyNames` applies to it cannot descend further,
                // but may still refer to itself in place.
                stack.extend(s.get("propertyNames").filter(|_| !o.is_empty()).map(|x| (x, &KEY, 0)));
                for (k, child) in o {
                    if let Some(x) = s.get("properties").and_then(|p| p.get(k)) {
                        stack.push((x, child, 0));
                    }
                    stack.extend(patterns.iter().map(|x| (*x, child, 0)));
                    for key in ["additionalProperties", "unevaluatedProperties"] {
                        stack.extend(s.get(key).map(|x| (x, child, 0)));
                    }
                }
            }
            JsonValue::Array(items) => {
                let prefix: &[JsonValue] = match (s.get("prefixItems"), s.get("items")) {
                    (Some(JsonValue::Array(p)), _) | (None, Some(JsonValue::Array(p))) => p,
                    _ => &[],
                };
                for (i, child) in items.iter().enumerate() {
                    stack.extend(prefix.get(i).map(|x| (x, child, 0)));
                    for key in ["items", "additionalItems", "contains", "unevaluatedItems"] {
                        if let Some(x) = s.get(key).filter(|x| !x.is_array()) {
                            stack.push((x, child, 0));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Where a schema's references can lead: its subschemas by JSON pointer from the root, by
/// `$anchor`/`$dynamicAnchor`, and by `$id` (`id` in draft 4).
struct SchemaTargets<'s> {
    root: &'s JsonValue,
    named: Vec<(&'s str, &'s JsonValue)>,
}

impl<'s> SchemaTargets<'s> {
    fn new(root: &'s JsonValue) -> SchemaTargets<'s> {
        let mut named = Vec::new();
        let mut stack = vec![root];
        while let Some(x) = stack.pop() {
            match x {
                JsonValue::Object(o) => {
                    for key in ["$id", "id", "$anchor", "$dynamicAnchor"] {
                        if let Some(JsonValue::String(name)) = o.get(key) {
                            named.push((name.as_str(), x));
                        }
                    }
                    stack.extend(o.values());
                }
                JsonValue::Array(a) => stack.extend(a),
                _ => {}
            }
        }
        SchemaTargets { root, named }
    }

    /// The subschemas reference `r` (of keyword `key`) may lead to; a reference the walk
    /// cannot follow is a trap, so that nothing the validator visits goes uncounted.
    fn resolve(&self, key: &str, r: &str) -> Result<Vec<&'s JsonValue>, Trap> {
        if r == "#" || r.is_empty() {
            return Ok(vec![self.root]);
        }
        if let Some(pointer) = r.strip_prefix('#').filter(|p| p.starts_with('/')) {
            let decoded = percent_decode(pointer);
            if let Some(x) = self.root.pointer(&decoded) {
                return Ok(vec![x]);
            }
        }
        let fragment = r.rsplit_once('#').map_or(r, |(_, f)| f);
        let base = r.split('#').next().unwrap_or("");
        let found: Vec<&'s JsonValue> = self
            .named
            .iter()
            .filter(|(name, _)| {
                let name_base = name.split('#').next().unwrap_or("");
                *name == r
                    || (!fragment.is_empty() && (*name == fragment || name.strip_prefix('#') == Some(fragment)))
                    || (!base.is_empty() && (name_base == base || name_base.ends_with(&format!("/{base}"))))
            })
            .map(|(_, x)| *x)
            .collect();
        if found.is_empty() && key != "$ref" {
            // `$recursiveRef: "#"` and an unmatched `$dynamicRef` fall back to the root.
            return Ok(vec![self.root]);
        }
        if found.is_empty() {
            return Err(Trap::new(
                TrapKind::Json,
                format!(
                    "the schema's reference `{r}` cannot be followed: `json_valid` resolves references within \
                     the schema (`#`, `#/json/pointer`, an `$anchor` or a subschema's `$id`)"
                ),
            ));
        }
        Ok(found)
    }
}

/// `%XX` escapes of a JSON pointer in a URI fragment, decoded.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) const TO_JSON: Intrinsic = Intrinsic {
    name: "to_json",
    sig: "(value: T) -> Json",
    doc: "`value` as JSON: texts become strings, lists arrays, records objects (keys sorted), \
          `null` null; integral numbers are written without a fraction. A `Json` value is \
          returned unchanged.",
    examples: &[
        r##"to_json({a: [1, 2], b: "x"}) == json("{\"a\": [1, 2], \"b\": \"x\"}")"##,
        r##"json_number(to_json(3)) == 3"##,
    ],
    imp: |a, _| {
        Ok(match arg(a, 0)? {
            Value::Json(j) => Value::Json(j.clone()),
            Value::Number(n) => json_value(number_to_json(*n)),
            other => json_value(other.to_json()),
        })
    },
};

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;
    use serde_json::json;

    fn j(v: JsonValue) -> Value {
        json_value(v)
    }

    #[test]
    fn paths_parse() {
        use Step::*;
        assert_eq!(parse_path("").unwrap(), []);
        assert_eq!(parse_path("$").unwrap(), []);
        assert_eq!(parse_path("a.b[0].c").unwrap(), [Key("a".into()), Key("b".into()), Index(0), Key("c".into())]);
        assert_eq!(parse_path("$.a[-1][\"x.y\"]").unwrap(), [Key("a".into()), Index(-1), Key("x.y".into())]);
        assert_eq!(parse_path("[2].x").unwrap(), [Index(2), Key("x".into())]);
        for bad in ["a..b", "a[", "a[x]", "a.", "a]b"] {
            assert!(parse_path(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn get_follows_paths() {
        let doc = j(json!({"a": {"b": [10, 20, {"c": true}]}, "k.k": null}));
        let g = |p: &str| call(JSON_GET.imp, &[doc.clone(), Value::text(p)]).unwrap();
        assert_eq!(g("a.b[1]"), j(json!(20)));
        assert_eq!(g("a.b.1"), j(json!(20)));
        assert_eq!(g("a.b[-1].c"), j(json!(true)));
        assert_eq!(g("a.b[3]"), Value::Null);
        assert_eq!(g("a.b[-4]"), Value::Null);
        assert_eq!(g("[\"k.k\"]"), j(json!(null)));
        assert_eq!(g("a.x"), Value::Null);
        assert_eq!(call(JSON_GET.imp, &[Value::Null, Value::text("a")]).unwrap(), Value::Null);
        assert!(call(JSON_GET.imp, &[doc, Value::text("a[")]).is_err());
    }

    #[test]
    fn schema_errors_are_json_traps() {
        let err = call(JSON_VALID.imp, &[j(json!(1)), j(json!({"type": 5}))]).unwrap_err();
        assert_eq!(err.kind, TrapKind::Json);
        let remote = json!({"$ref": "https://example.com/schema.json"});
        let err = call(JSON_VALID.imp, &[j(json!(1)), j(remote)]).unwrap_err();
        assert_eq!(err.kind, TrapKind::Json);
        let ok = call(JSON_VALID.imp, &[j(json!({"a": 1})), j(json!({"properties": {"a": {"type": "string"}}}))]);
        assert_eq!(ok.unwrap(), Value::Bool(false));
    }

    #[test]
    fn accessors_reject_other_kinds() {
        assert_eq!(call(JSON_TEXT.imp, &[j(json!(1))]).unwrap(), Value::Null);
        assert_eq!(call(JSON_NUMBER.imp, &[j(json!("1"))]).unwrap(), Value::Null);
        assert_eq!(call(JSON_BOOL.imp, &[Value::Null]).unwrap(), Value::Null);
        assert_eq!(call(JSON_LEN.imp, &[j(json!(1))]).unwrap_err().kind, TrapKind::Type);
        assert_eq!(call(JSON_KEYS.imp, &[j(json!([]))]).unwrap_err().kind, TrapKind::Type);
        assert_eq!(call(JSON.imp, &[Value::text("{")]).unwrap_err().kind, TrapKind::Json);
        assert_eq!(call(PARSE_JSON.imp, &[Value::text("null")]).unwrap(), j(json!(null)));
    }
}
