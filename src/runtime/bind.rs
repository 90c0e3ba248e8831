//! Binding a JSON row to a program's typed inputs: every declared input is looked up by name,
//! converted to its declared type, defaulted or rejected with a clear message. An `Image` is
//! read here (`crate::image`): a path relative to the rows file's directory, a data URI or a URL.

use crate::image::Paths;
use crate::interp::eval_constant;
use crate::ir::{Program, Type};
use crate::value::Value;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct BindError {
    pub code: &'static str,
    pub message: String,
}

/// Bind a row that did not come from a file: an `Image` given as a path is refused.
pub fn bind_row(p: &Program, row: &Json) -> Result<Vec<Value>, BindError> {
    bind_row_in(p, row, None)
}

/// Bind a row of the rows file in `rows_dir` (image paths are relative to it); with `None`, an
/// `Image` given as a path is refused (`rubric::row::image`).
pub fn bind_row_in(p: &Program, row: &Json, rows_dir: Option<&Path>) -> Result<Vec<Value>, BindError> {
    let paths = match rows_dir {
        Some(d) => Paths::Under(d),
        None => Paths::Refused,
    };
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
            Some(j) => convert_in(j, &input.ty, paths).map_err(|e| BindError {
                code: match e {
                    Failure::Type(_) => "rubric::row::type",
                    Failure::Image(_) => "rubric::row::image",
                },
                message: format!("field `{}`: {}", input.field(), e.message()),
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

/// Why a value does not convert: the wrong shape, or an image that cannot be read.
enum Failure {
    Type(String),
    Image(String),
}

impl Failure {
    fn message(&self) -> &str {
        match self {
            Failure::Type(m) | Failure::Image(m) => m,
        }
    }

    fn within(self, at: impl std::fmt::Display) -> Failure {
        match self {
            Failure::Type(m) => Failure::Type(format!("{at}: {m}")),
            Failure::Image(m) => Failure::Image(format!("{at}: {m}")),
        }
    }
}

/// Convert a JSON value to a runtime value of type `ty` (an `Image` given as a path is
/// refused: there is no rows file to read it from).
pub fn convert(j: &Json, ty: &Type) -> Result<Value, String> {
    convert_in(j, ty, Paths::Refused).map_err(|e| e.message().to_string())
}

/// An `Image` value: a string (a path, a data URI, a URL), or an object with such a `url` (the
/// OpenAI `image_url` form).
fn image_value(j: &Json, paths: Paths<'_>) -> Result<Value, Failure> {
    let reference = match j {
        Json::String(s) => s.as_str(),
        Json::Object(o) => match o.get("url") {
            Some(Json::String(s)) => s.as_str(),
            _ => {
                return Err(Failure::Type(format!("expected `Image` (a path, data URI or URL), found {}", describe(j))))
            }
        },
        _ => return Err(Failure::Type(format!("expected `Image` (a path, data URI or URL), found {}", describe(j)))),
    };
    let img = crate::image::read(reference, paths).map_err(Failure::Image)?;
    let text = |t: Option<&str>| t.map_or(Value::Null, Value::text);
    let number = |n: Option<u32>| n.map_or(Value::Null, |n| Value::Number(f64::from(n)));
    let mut m = BTreeMap::new();
    m.insert(Arc::from("format"), text(img.format));
    m.insert(Arc::from("height"), number(img.height));
    m.insert(Arc::from("phash"), text(img.phash.as_deref()));
    m.insert(Arc::from("sha256"), text(img.sha256.as_deref()));
    m.insert(Arc::from("url"), Value::text(img.url.as_str()));
    m.insert(Arc::from("width"), number(img.width));
    Ok(Value::Record(Arc::new(m)))
}

/// The types bound from special forms, made once (each value bound is compared with them).
static IMAGE: LazyLock<Type> = LazyLock::new(Type::image);
static TRAJECTORY: LazyLock<Type> = LazyLock::new(Type::trajectory);
static CONVERSATION: LazyLock<Type> = LazyLock::new(Type::conversation);

fn convert_in(j: &Json, ty: &Type, paths: Paths<'_>) -> Result<Value, Failure> {
    Ok(match (ty, j) {
        (Type::Optional(_), Json::Null) => Value::Null,
        (Type::Optional(t), j) => convert_in(j, t, paths)?,
        (t, j) if *t == *IMAGE => image_value(j, paths)?,
        (Type::Text, Json::String(s)) => Value::Text(Arc::from(s.as_str())),
        (Type::Number, Json::Number(n)) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        (Type::Bool, Json::Bool(b)) => Value::Bool(*b),
        (Type::Json, j) => Value::Json(Arc::new(j.clone())),
        (Type::Any, j) => Value::from_json(j),
        // A trajectory from chat messages in the OpenAI form (`null` is handled above).
        (t, j) if *t == *TRAJECTORY => crate::stdlib::trajectory_value(j).map_err(Failure::Type)?,
        // A conversation may be given as one user message.
        (t, Json::String(s)) if *t == *CONVERSATION => {
            let mut m = BTreeMap::new();
            m.insert(Arc::from("content"), Value::text(s.as_str()));
            m.insert(Arc::from("role"), Value::text("user"));
            Value::list(vec![Value::Record(Arc::new(m))])
        }
        (Type::List(t), Json::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                out.push(convert_in(it, t, paths).map_err(|e| e.within(format_args!("[{i}]")))?);
            }
            Value::list(out)
        }
        (Type::Record(fields), Json::Object(o)) => {
            let mut out = Vec::with_capacity(fields.len());
            for (name, t) in fields {
                let v = match o.get(name) {
                    Some(x) => convert_in(x, t, paths).map_err(|e| e.within(format_args!(".{name}")))?,
                    None if t.is_optional() => Value::Null,
                    None => return Err(Failure::Type(format!("missing field `{name}` (expected `{ty}`)"))),
                };
                out.push((Arc::from(name.as_str()), v));
            }
            // Built at once (the fields are sorted), not field by field.
            Value::Record(Arc::new(out.into_iter().collect::<BTreeMap<_, _>>()))
        }
        (t, j) => return Err(Failure::Type(format!("expected `{t}`, found {}", describe(j)))),
    })
}
