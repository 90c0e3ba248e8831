//! Runtime values shared by every engine and by the intrinsics in `stdlib`.
//!
//! `Unscored` is a value, not an error: it propagates through operators so that a check that
//! depends on an unscored criterion is itself unscored, never a silent 0.

use serde_json::Value as JsonValue;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub type Record = BTreeMap<Arc<str>, Value>;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    Text(Arc<str>),
    List(Arc<Vec<Value>>),
    Record(Arc<Record>),
    Json(Arc<JsonValue>),
    /// A result that could not be determined, with its reason.
    Unscored(Arc<str>),
}

impl Value {
    pub fn text(s: impl Into<Arc<str>>) -> Value {
        Value::Text(s.into())
    }

    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_arc_text(&self) -> Option<&Arc<str>> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_json(&self) -> Option<&JsonValue> {
        match self {
            Value::Json(j) => Some(j),
            _ => None,
        }
    }

    pub fn is_unscored(&self) -> bool {
        matches!(self, Value::Unscored(_))
    }

    /// Convert a JSON value into a runtime value of the *structural* kind (records, lists,
    /// numbers...). Inputs declared `Json` keep the JSON as `Value::Json` instead.
    pub fn from_json(j: &JsonValue) -> Value {
        match j {
            JsonValue::Null => Value::Null,
            JsonValue::Bool(b) => Value::Bool(*b),
            JsonValue::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
            JsonValue::String(s) => Value::Text(Arc::from(s.as_str())),
            JsonValue::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            JsonValue::Object(o) => {
                Value::Record(Arc::new(o.iter().map(|(k, v)| (Arc::from(k.as_str()), Value::from_json(v))).collect()))
            }
        }
    }

    /// The JSON form of a value, used for results and traces.
    pub fn to_json(&self) -> JsonValue {
        match self {
            Value::Null => JsonValue::Null,
            Value::Bool(b) => JsonValue::Bool(*b),
            Value::Number(n) => number_to_json(*n),
            Value::Text(t) => JsonValue::String(t.to_string()),
            Value::List(l) => JsonValue::Array(l.iter().map(Value::to_json).collect()),
            Value::Record(r) => JsonValue::Object(r.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect()),
            Value::Json(j) => (**j).clone(),
            Value::Unscored(reason) => serde_json::json!({ "unscored": reason.to_string() }),
        }
    }
}

/// How a number is written in JSON: as an integer when it is integral and small enough to be
/// exact, as `null` when it is not finite (JSON has no such numbers), else as itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonNumber {
    Integer(i64),
    Float(f64),
    Null,
}

impl JsonNumber {
    pub fn of(n: f64) -> JsonNumber {
        if !n.is_finite() {
            JsonNumber::Null
        } else if n.fract() == 0.0 && n.abs() < 9.0e15 {
            JsonNumber::Integer(n as i64)
        } else {
            JsonNumber::Float(n)
        }
    }

    /// The number a reader of the JSON gets back (`null`: none).
    pub fn read_back(self) -> Option<f64> {
        match self {
            JsonNumber::Integer(i) => Some(i as f64),
            JsonNumber::Float(x) => Some(x),
            JsonNumber::Null => None,
        }
    }
}

/// `n` as JSON ([`JsonNumber`]).
pub fn number_to_json(n: f64) -> JsonValue {
    match JsonNumber::of(n) {
        JsonNumber::Integer(i) => JsonValue::from(i),
        JsonNumber::Float(x) => serde_json::Number::from_f64(x).map_or(JsonValue::Null, JsonValue::Number),
        JsonNumber::Null => JsonValue::Null,
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Text(t) => write!(f, "{t:?}"),
            Value::Unscored(r) => write!(f, "unscored({r:?})"),
            other => write!(f, "{}", other.to_json()),
        }
    }
}
