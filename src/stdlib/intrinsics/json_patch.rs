//! JSON Patch (RFC 6902) over JSON Pointers (RFC 6901): `json_patch` applies a patch,
//! `json_diff` makes one that turns a value into another. A patch that does not apply (a path
//! that is not there, a failed `test`, a malformed operation) gives `null`, never a trap: the
//! patches come from model output. `json_equal` is the same comparison of numbers by value
//! that a `test` operation makes, on two whole values. Checked against the JSON Patch test suite
//! (`tests/fixtures/json-patch/`, `tests/json_patch.rs`).
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{json_arg, json_value, opt_json_arg};
use crate::stdlib::{EvalCtx, Intrinsic, Trap};
use crate::value::Value;
use serde_json::{Map, Value as Json};

pub(super) const JSON_PATCH: Intrinsic = Intrinsic {
    name: "json_patch",
    sig: "(value: Json?, patch: Json) -> Json?",
    doc: "`value` with the JSON Patch `patch` (RFC 6902: a list of `add`, `remove`, `replace`, \
          `move`, `copy` and `test` operations whose `path` and `from` are JSON Pointers, RFC \
          6901) applied in order, or `null` when it does not apply: a path or `from` that is not \
          there, an array index past the end or with a leading zero, a `test` whose value \
          differs (numbers compare by value), a `move` into its own child, an unknown operation \
          or one missing a member. A `null` `value` is the JSON `null`.",
    examples: &[
        r##"json_patch(json("{\"a\": 1}"), json("[{\"op\": \"add\", \"path\": \"/b\", \"value\": [2]}]")) == json("{\"a\": 1, \"b\": [2]}")"##,
        r##"json_patch(json("{\"a\": 1}"), json("[{\"op\": \"test\", \"path\": \"/a\", \"value\": 2}]")) == null"##,
    ],
    imp: json_patch,
};

pub(super) const JSON_DIFF: Intrinsic = Intrinsic {
    name: "json_diff",
    sig: "(before: Json?, after: Json?) -> Json",
    doc: "A JSON Patch (RFC 6902) that turns `before` into `after`: an empty list when they are \
          equal; otherwise `remove`, `add` and `replace` operations, descending into objects by \
          key and into arrays by index (extra elements removed from the end, missing ones \
          appended). `json_patch(before, json_diff(before, after)) == after` always holds. `null` is the \
          JSON `null`.",
    examples: &[
        r##"json_diff(json("{\"a\": 1, \"b\": 2}"), json("{\"a\": 1, \"b\": 3}")) == json("[{\"op\": \"replace\", \"path\": \"/b\", \"value\": 3}]")"##,
        r##"json_len(json_diff(json("[1, 2]"), json("[1, 2]"))) == 0"##,
    ],
    imp: json_diff,
};

pub(super) const JSON_EQUAL: Intrinsic = Intrinsic {
    name: "json_equal",
    sig: "(a: Json?, b: Json?) -> Bool",
    doc: "Whether `a` and `b` are the same JSON value, numbers compared by value (`1` equals \
          `1.0`, which `==` on `Json` tells apart) and object keys in any order: JavaScript's \
          deep equality of parsed JSON, as promptfoo's `equals` compares an object value. \
          `null` is the JSON `null`.",
    examples: &[
        r##"json_equal(json("{\"a\": 1, \"b\": [2]}"), json("{\"b\": [2.0], \"a\": 1.0}"))"##,
        r##"not json_equal(json("[1, 2]"), json("[2, 1]"))"##,
    ],
    imp: json_equal,
};

fn json_equal(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let x = opt_json_arg(a, 0)?.map_or(Json::Null, |d| d.into_owned());
    let y = opt_json_arg(a, 1)?.map_or(Json::Null, |d| d.into_owned());
    ctx.work(x.to_string().len() + y.to_string().len())?;
    Ok(Value::Bool(same(&x, &y)))
}

fn json_patch(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let doc = opt_json_arg(a, 0)?.map_or(Json::Null, |d| d.into_owned());
    let patch = json_arg(a, 1)?;
    ctx.work(patch.to_string().len())?;
    Ok(apply(doc, &patch).map_or(Value::Null, json_value))
}

fn json_diff(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let from = opt_json_arg(a, 0)?.map_or(Json::Null, |d| d.into_owned());
    let to = opt_json_arg(a, 1)?.map_or(Json::Null, |d| d.into_owned());
    ctx.work(from.to_string().len() + to.to_string().len())?;
    let mut ops = Vec::new();
    diff(&from, &to, &mut String::new(), &mut ops);
    Ok(json_value(Json::Array(ops)))
}

// ---------------------------------------------------------------- pointers

/// The reference tokens of a JSON Pointer (`~1` is `/`, `~0` is `~`); `None` when malformed.
fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|t| {
            // `~` must be followed by 0 or 1
            let mut out = String::with_capacity(t.len());
            let mut chars = t.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    },
                    c => out.push(c),
                }
            }
            Some(out)
        })
        .collect()
}

/// An array index token: digits without a leading zero.
fn index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn get<'a>(doc: &'a Json, path: &[String]) -> Option<&'a Json> {
    path.iter().try_fold(doc, |v, t| match v {
        Json::Object(m) => m.get(t),
        Json::Array(a) => a.get(index(t)?),
        _ => None,
    })
}

fn get_mut<'a>(doc: &'a mut Json, path: &[String]) -> Option<&'a mut Json> {
    path.iter().try_fold(doc, |v, t| match v {
        Json::Object(m) => m.get_mut(t),
        Json::Array(a) => a.get_mut(index(t)?),
        _ => None,
    })
}

// ---------------------------------------------------------------- applying

fn apply(mut doc: Json, patch: &Json) -> Option<Json> {
    for op in patch.as_array()? {
        let op = op.as_object()?;
        let pointer = |name: &str| op.get(name).and_then(Json::as_str).and_then(tokens);
        let path = pointer("path")?;
        match op.get("op").and_then(Json::as_str)? {
            "add" => add(&mut doc, &path, op.get("value")?.clone())?,
            "remove" => {
                remove(&mut doc, &path)?;
            }
            "replace" => {
                let value = op.get("value")?.clone();
                *get_mut(&mut doc, &path)? = value;
            }
            "move" => {
                let from = pointer("from")?;
                // into its own child: refused (moving onto itself is allowed)
                if path.len() > from.len() && path.starts_with(&from) {
                    return None;
                }
                let value = remove(&mut doc, &from)?;
                add(&mut doc, &path, value)?;
            }
            "copy" => {
                let value = get(&doc, &pointer("from")?)?.clone();
                add(&mut doc, &path, value)?;
            }
            "test" => {
                if !same(get(&doc, &path)?, op.get("value")?) {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(doc)
}

fn add(doc: &mut Json, path: &[String], value: Json) -> Option<()> {
    let Some((last, parent)) = path.split_last() else {
        *doc = value;
        return Some(());
    };
    match get_mut(doc, parent)? {
        Json::Object(m) => {
            m.insert(last.clone(), value);
        }
        Json::Array(a) => {
            let at = if last == "-" { a.len() } else { index(last)? };
            if at > a.len() {
                return None;
            }
            a.insert(at, value);
        }
        _ => return None,
    }
    Some(())
}

fn remove(doc: &mut Json, path: &[String]) -> Option<Json> {
    let (last, parent) = path.split_last()?;
    match get_mut(doc, parent)? {
        Json::Object(m) => m.shift_remove(last),
        Json::Array(a) => {
            let at = index(last)?;
            (at < a.len()).then(|| a.remove(at))
        }
        _ => None,
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x == y || x.as_f64().is_some_and(|x| y.as_f64() == Some(x)),
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------- diffing

fn op(name: &str, path: &str, value: Option<&Json>) -> Json {
    let mut m = Map::new();
    m.insert("op".into(), Json::from(name));
    m.insert("path".into(), Json::from(path));
    if let Some(v) = value {
        m.insert("value".into(), v.clone());
    }
    Json::Object(m)
}

fn diff(from: &Json, to: &Json, path: &mut String, ops: &mut Vec<Json>) {
    if from == to {
        return;
    }
    match (from, to) {
        (Json::Object(a), Json::Object(b)) => {
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                ops.push(op("remove", &format!("{path}/{}", escape(k)), None));
            }
            for (k, v) in b {
                let here = format!("{path}/{}", escape(k));
                match a.get(k) {
                    Some(old) => {
                        let mut child = here;
                        diff(old, v, &mut child, ops);
                    }
                    None => ops.push(op("add", &here, Some(v))),
                }
            }
        }
        (Json::Array(a), Json::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let mut child = format!("{path}/{i}");
                diff(x, y, &mut child, ops);
            }
            for i in (b.len()..a.len()).rev() {
                ops.push(op("remove", &format!("{path}/{i}"), None));
            }
            for v in b.iter().skip(a.len()) {
                ops.push(op("add", &format!("{path}/-"), Some(v)));
            }
        }
        _ => ops.push(op("replace", path, Some(to))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_unescape_and_indexes_have_no_leading_zero() {
        assert_eq!(tokens("/a~1b/c~0d/0").unwrap(), ["a/b", "c~d", "0"]);
        assert_eq!(tokens("").unwrap(), Vec::<String>::new());
        assert!(tokens("a").is_none() && tokens("/a~2").is_none());
        assert_eq!(
            (index("0"), index("10"), index("01"), index("-1"), index("1e0")),
            (Some(0), Some(10), None, None, None)
        );
    }

    #[test]
    fn a_diff_applied_gives_the_target() {
        let pairs = [
            (json!({"a": [1, 2, 3], "b": {"c": null}}), json!({"a": [1, 5], "b": {"d": "x"}, "e/f~": 1})),
            (json!([1, [2, 3]]), json!([1, [2, 3, 4], {"x": 1}])),
            (json!(1), json!(1.0)),
            (json!({"a": 1}), json!([1])),
        ];
        for (from, to) in pairs {
            let mut ops = Vec::new();
            diff(&from, &to, &mut String::new(), &mut ops);
            assert_eq!(apply(from.clone(), &Json::Array(ops)), Some(to.clone()), "{from} -> {to}");
        }
    }
}
