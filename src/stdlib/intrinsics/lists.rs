//! List intrinsics (generic over the element type `T`) and conversation helpers (a
//! `Conversation` is a `List[{role: Text, content: Text}]`).
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{arg, list_arg, number, numbers_arg, texts_arg};
use crate::stdlib::{Intrinsic, Trap, TrapKind};
use crate::value::Value;
use std::collections::HashSet;

pub(super) const LEN_LIST: Intrinsic = Intrinsic {
    name: "len",
    sig: "(list: List[T]) -> Number",
    doc: "The number of elements of `list`.",
    examples: &[r##"len([1, 2, 3]) == 3"##, r##"["a"].len() == 1"##],
    imp: |a, _| Ok(number(list_arg(a, 0)?.len())),
};

pub(super) const CONTAINS_LIST: Intrinsic = Intrinsic {
    name: "contains",
    sig: "(list: List[T], item: T) -> Bool",
    doc: "Whether `item` is an element of `list` (structural equality).",
    examples: &[r##"[1, 2, 3].contains(2)"##, r##"not contains(["a", "b"], "c")"##],
    imp: |a, _| {
        let item = arg(a, 1)?;
        Ok(Value::Bool(list_arg(a, 0)?.iter().any(|v| v == item)))
    },
};

pub(super) const FIRST: Intrinsic = Intrinsic {
    name: "first",
    sig: "(list: List[T]) -> T?",
    doc: "The first element of `list`, or `null` when it is empty.",
    examples: &[r##"first(["x", "y"]) == "x""##, r##"first(words("")) == null"##],
    imp: |a, _| Ok(list_arg(a, 0)?.first().cloned().unwrap_or(Value::Null)),
};

pub(super) const LAST: Intrinsic = Intrinsic {
    name: "last",
    sig: "(list: List[T]) -> T?",
    doc: "The last element of `list`, or `null` when it is empty.",
    examples: &[r##"last([1, 2, 3]) == 3"##, r##"last(words("  ")) == null"##],
    imp: |a, _| Ok(list_arg(a, 0)?.last().cloned().unwrap_or(Value::Null)),
};

/// A key that is equal for structurally equal values of one type.
fn key(v: &Value) -> String {
    match v {
        Value::Number(n) if *n == 0.0 => "0".to_string(), // -0 == 0
        Value::Number(n) => format!("{n:?}"),
        other => other.to_json().to_string(),
    }
}

pub(super) const UNIQUE_COUNT: Intrinsic = Intrinsic {
    name: "unique_count",
    sig: "(list: List[T]) -> Number",
    doc: "The number of distinct elements of `list` (structural equality; texts are compared \
          exactly, so combine with `lower` or `normalize` for looser counts).",
    examples: &[r##"unique_count([1, 2, 2, 3, 1]) == 3"##, r##"unique_count(words("the cat and the hat")) == 4"##],
    imp: |a, _| {
        let set: HashSet<String> = list_arg(a, 0)?.iter().map(key).collect();
        Ok(number(set.len()))
    },
};

pub(super) const SORT_NUMBERS: Intrinsic = Intrinsic {
    name: "sort",
    sig: "(list: List[Number]) -> List[Number]",
    doc: "The numbers of `list` in ascending order.",
    examples: &[r##"sort([3, 1, 2]) == [1, 2, 3]"##],
    imp: |a, _| {
        let mut xs = numbers_arg(a, 0)?;
        xs.sort_by(f64::total_cmp);
        Ok(Value::list(xs.into_iter().map(Value::Number).collect()))
    },
};

pub(super) const SORT_TEXTS: Intrinsic = Intrinsic {
    name: "sort",
    sig: "(list: List[Text]) -> List[Text]",
    doc: "The texts of `list` in ascending order by Unicode code point (so uppercase letters sort \
          before lowercase ones; no locale rules).",
    examples: &[r##"sort(["b", "a", "C"]) == ["C", "a", "b"]"##],
    imp: |a, ctx| {
        let mut xs = texts_arg(a, 0)?;
        xs.sort_unstable();
        super::texts(ctx, xs)
    },
};

pub(super) const REVERSE: Intrinsic = Intrinsic {
    name: "reverse",
    sig: "(list: List[T]) -> List[T]",
    doc: "The elements of `list` in reverse order.",
    examples: &[r##"reverse([1, 2, 3]) == [3, 2, 1]"##],
    imp: |a, _| Ok(Value::list(list_arg(a, 0)?.iter().rev().cloned().collect())),
};

// ---------------------------------------------------------------- conversations

/// The `(role, content)` pairs of a conversation: a list of records, or a JSON array of
/// objects when an engine passed JSON through.
fn turns(v: &Value) -> Result<Vec<(&str, &str)>, Trap> {
    fn field<'v>(turn: &'v Value, name: &str) -> Option<&'v str> {
        match turn {
            Value::Record(rec) => rec.get(name).and_then(Value::as_text),
            Value::Json(j) => j.get(name).and_then(|s| s.as_str()),
            _ => None,
        }
    }
    fn json_field<'v>(turn: &'v serde_json::Value, name: &str) -> Option<&'v str> {
        turn.get(name).and_then(|s| s.as_str())
    }
    let bad =
        || Trap::new(TrapKind::Type, format!("a conversation must be a list of {{role, content}} records, got `{v}`"));
    let pair = |r: Option<_>, c: Option<_>| r.zip(c).ok_or_else(bad);
    match v {
        Value::List(items) => items.iter().map(|t| pair(field(t, "role"), field(t, "content"))).collect(),
        Value::Json(j) => j
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|t| pair(json_field(t, "role"), json_field(t, "content")))
            .collect(),
        _ => Err(bad()),
    }
}

fn last_of(args: &[Value], role: &str) -> Result<Value, Trap> {
    let turns = turns(arg(args, 0)?)?;
    Ok(turns.iter().rev().find(|(r, _)| *r == role).map_or(Value::Null, |(_, c)| Value::text(*c)))
}

pub(super) const LAST_USER: Intrinsic = Intrinsic {
    name: "last_user",
    sig: "(conversation: Conversation) -> Text?",
    doc: "The content of the last turn whose role is `user`, or `null` when there is none.",
    examples: &[r##"last_user([{role: "user", content: "hi"}, {role: "assistant", content: "hello"}]) == "hi""##],
    imp: |a, _| last_of(a, "user"),
};

pub(super) const LAST_ASSISTANT: Intrinsic = Intrinsic {
    name: "last_assistant",
    sig: "(conversation: Conversation) -> Text?",
    doc: "The content of the last turn whose role is `assistant`, or `null` when there is none.",
    examples: &[
        r##"last_assistant([{role: "user", content: "hi"}, {role: "assistant", content: "hello"}]) == "hello""##,
        r##"last_assistant([{role: "user", content: "hi"}]) == null"##,
    ],
    imp: |a, _| last_of(a, "assistant"),
};

pub(super) const TURN_COUNT: Intrinsic = Intrinsic {
    name: "turn_count",
    sig: "(conversation: Conversation) -> Number",
    doc: "The number of turns (messages, whatever their role, system messages included) in \
          `conversation`.",
    examples: &[r##"turn_count([{role: "system", content: "be brief"}, {role: "user", content: "hi"}]) == 2"##],
    imp: |a, _| Ok(number(turns(arg(a, 0)?)?.len())),
};

pub(super) const RENDER: Intrinsic = Intrinsic {
    name: "render",
    sig: "(conversation: Conversation) -> Text",
    doc: "`conversation` as text, one `role: content` line per turn, joined with line breaks (a \
          content with line breaks keeps them).",
    examples: &[
        r##"render([{role: "user", content: "hi"}, {role: "assistant", content: "hello"}]) == "user: hi\nassistant: hello""##,
    ],
    imp: |a, _| {
        let turns = turns(arg(a, 0)?)?;
        let lines: Vec<String> = turns.iter().map(|(r, c)| format!("{r}: {c}")).collect();
        Ok(Value::text(lines.join("\n")))
    },
};

#[cfg(test)]
mod tests {
    use super::super::{call, json_value};
    use super::*;

    #[test]
    fn conversations_from_json_too() {
        let conv = json_value(serde_json::json!([
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}
        ]));
        assert_eq!(call(LAST_USER.imp, std::slice::from_ref(&conv)).unwrap(), Value::text("c"));
        assert_eq!(call(TURN_COUNT.imp, std::slice::from_ref(&conv)).unwrap(), Value::Number(3.0));
        assert_eq!(call(RENDER.imp, &[conv]).unwrap(), Value::text("user: a\nassistant: b\nuser: c"));
        let bad = Value::list(vec![Value::Number(1.0)]);
        assert_eq!(call(TURN_COUNT.imp, &[bad]).unwrap_err().kind, TrapKind::Type);
    }

    #[test]
    fn unique_count_treats_zeroes_alike() {
        let l = Value::list(vec![Value::Number(0.0), Value::Number(-0.0), Value::Number(1.5)]);
        assert_eq!(call(UNIQUE_COUNT.imp, &[l]).unwrap(), Value::Number(2.0));
        let l = Value::list(vec![Value::text("a"), Value::text("a"), Value::text("A")]);
        assert_eq!(call(UNIQUE_COUNT.imp, &[l]).unwrap(), Value::Number(2.0));
    }
}
