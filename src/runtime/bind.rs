//! Binding a JSON row to a program's typed inputs: every declared input is looked up by name,
//! converted to its declared type, defaulted or rejected with a clear message.

use crate::interp::eval_constant;
use crate::ir::{Program, Type};
use crate::value::Value;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct BindError {
    pub code: &'static str,
    pub message: String,
}

pub fn bind_row(p: &Program, row: &Json) -> Result<Vec<Value>, BindError> {
    let mut out = Vec::with_capacity(p.inputs.len());
    for input in &p.inputs {
        let v = match row.get(input.field()) {
            Some(Json::Null) | None => match &input.default {
                Some(d) => eval_constant(p, d).map_err(|t| BindError {
                    code: "rubric::row::default",
                    message: format!("the default of `{}` failed: {t}", input.name),
                })?,
                None if input.ty.is_optional() => Value::Null,
                None => {
                    return Err(BindError {
                        code: "rubric::row::missing_input",
                        message: format!(
                            "the row has no field `{}` (input `{}: {}`)",
                            input.field(),
                            input.name,
                            input.ty
                        ),
                    })
                }
            },
            Some(j) => convert(j, &input.ty).map_err(|m| BindError {
                code: "rubric::row::type",
                message: format!("field `{}`: {m}", input.field()),
            })?,
        };
        out.push(v);
    }
    Ok(out)
}

fn describe(j: &Json) -> String {
    let s = j.to_string();
    if s.len() > 40 {
        format!("{}…", &s[..s.char_indices().nth(40).map_or(s.len(), |(i, _)| i)])
    } else {
        s
    }
}

/// Convert a JSON value to a runtime value of type `ty`.
pub fn convert(j: &Json, ty: &Type) -> Result<Value, String> {
    Ok(match (ty, j) {
        (Type::Optional(_), Json::Null) => Value::Null,
        (Type::Optional(t), j) => convert(j, t)?,
        (Type::Text, Json::String(s)) => Value::Text(Arc::from(s.as_str())),
        (Type::Number, Json::Number(n)) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        (Type::Bool, Json::Bool(b)) => Value::Bool(*b),
        (Type::Json, j) => Value::Json(Arc::new(j.clone())),
        (Type::Any, j) => Value::from_json(j),
        // A trajectory from chat messages in the OpenAI form (`null` is handled above).
        (t, j) if *t == Type::trajectory() => crate::stdlib::trajectory_value(j)?,
        // A conversation may be given as one user message.
        (t, Json::String(s)) if *t == Type::conversation() => {
            let mut m = BTreeMap::new();
            m.insert(Arc::from("content"), Value::text(s.as_str()));
            m.insert(Arc::from("role"), Value::text("user"));
            Value::list(vec![Value::Record(Arc::new(m))])
        }
        (Type::List(t), Json::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                out.push(convert(it, t).map_err(|m| format!("[{i}]: {m}"))?);
            }
            Value::list(out)
        }
        (Type::Record(fields), Json::Object(o)) => {
            let mut out = BTreeMap::new();
            for (name, t) in fields {
                let v = match o.get(name) {
                    Some(x) => convert(x, t).map_err(|m| format!(".{name}: {m}"))?,
                    None if t.is_optional() => Value::Null,
                    None => return Err(format!("missing field `{name}` (expected `{ty}`)")),
                };
                out.insert(Arc::from(name.as_str()), v);
            }
            Value::Record(Arc::new(out))
        }
        (t, j) => return Err(format!("expected `{t}`, found {}", describe(j))),
    })
}
