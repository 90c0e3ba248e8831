//! Chat templates: a model's Jinja `chat_template` (from `chat_template.jinja` or
//! `tokenizer_config.json`) rendered with minijinja into the text a local judge tokenizes.
//!
//! The template sees `messages` (role and content), `add_generation_prompt = true` (the text
//! ends where the assistant's answer begins), `enable_thinking = false` (templates of thinking
//! models then open and close an empty thought), `bos_token`, `eos_token` and `pad_token`, and
//! `raise_exception`. No clock is offered (`strftime_now` is undefined), so templates that
//! print a date fall back to their fixed one and the same messages always give the same text.
//! The Python string and dict methods that model templates use (`startswith`, `split`,
//! `strip`, `items`, ...) are provided by a small method callback.
//!
//! Pipeline position: used by `models::local_judge` between the judge's messages and the
//! tokenizer.

use super::ModelError;
use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};
use serde::Serialize;
use serde_json::Value as Json;
use std::path::Path;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

/// A compiled chat template with the special tokens it is rendered with.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    pad: String,
}

/// A special token of `tokenizer_config.json`: a string, or an object with `content`.
fn token_text(v: Option<&Json>) -> String {
    match v {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Object(o)) => o.get("content").and_then(Json::as_str).unwrap_or("").to_string(),
        _ => String::new(),
    }
}

impl ChatTemplate {
    /// The template of a model directory: `chat_template.jinja` if present, else the
    /// `chat_template` of `tokenizer_config.json` (a string, or a list of named templates of
    /// which `default` is used).
    pub fn load(dir: &Path) -> Result<ChatTemplate, ModelError> {
        let cfg_path = dir.join("tokenizer_config.json");
        let cfg: Json = match std::fs::read_to_string(&cfg_path) {
            Ok(t) => serde_json::from_str(&t)
                .map_err(|e| ModelError::Load { path: cfg_path.display().to_string(), message: e.to_string() })?,
            Err(_) => Json::Null,
        };
        let jinja = dir.join("chat_template.jinja");
        let source = if jinja.is_file() {
            std::fs::read_to_string(&jinja)
                .map_err(|e| ModelError::Load { path: jinja.display().to_string(), message: e.to_string() })?
        } else {
            match cfg.get("chat_template") {
                Some(Json::String(s)) => s.clone(),
                Some(Json::Array(list)) => list
                    .iter()
                    .find(|t| t.get("name").and_then(Json::as_str) == Some("default"))
                    .and_then(|t| t.get("template"))
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| ModelError::Load {
                        path: cfg_path.display().to_string(),
                        message: "chat_template lists no template named `default`".into(),
                    })?,
                _ => {
                    return Err(ModelError::Load {
                        path: dir.display().to_string(),
                        message: "the model has no chat template (no chat_template.jinja, and no `chat_template` in \
                                  tokenizer_config.json)"
                            .into(),
                    })
                }
            }
        };
        ChatTemplate::new(
            &source,
            &token_text(cfg.get("bos_token")),
            &token_text(cfg.get("eos_token")),
            &token_text(cfg.get("pad_token")),
        )
        .map_err(|e| ModelError::Load { path: dir.display().to_string(), message: e.to_string() })
    }

    /// Compile `source`.
    pub fn new(source: &str, bos: &str, eos: &str, pad: &str) -> Result<ChatTemplate, ModelError> {
        let mut env = Environment::new();
        env.set_keep_trailing_newline(true);
        env.set_trim_blocks(false);
        env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, format!("the chat template raised: {msg}")))
        });
        env.set_unknown_method_callback(python_method);
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| ModelError::Config(format!("chat template: {e}")))?;
        Ok(ChatTemplate { env, bos: bos.to_string(), eos: eos.to_string(), pad: pad.to_string() })
    }

    /// The prompt text for `messages`, ending where the assistant's answer begins.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, ModelError> {
        let t = self.env.get_template("chat").map_err(|e| ModelError::Run(format!("chat template: {e}")))?;
        t.render(minijinja::context! {
            messages => messages,
            add_generation_prompt => true,
            enable_thinking => false,
            bos_token => &self.bos,
            eos_token => &self.eos,
            pad_token => &self.pad,
        })
        .map_err(|e| ModelError::Run(format!("chat template: {e}")))
    }
}

fn arg_str(args: &[Value], i: usize) -> Option<String> {
    args.get(i).filter(|v| !v.is_none() && !v.is_undefined()).and_then(|v| v.as_str().map(str::to_string))
}

/// Python methods on strings and dicts that chat templates call.
fn python_method(_state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let unknown = || Error::from(ErrorKind::UnknownMethod);
    if let Some(s) = value.as_str() {
        let chars = arg_str(args, 0);
        let trim_set = |c: char| match &chars {
            Some(set) => set.contains(c),
            None => c.is_whitespace(),
        };
        return Ok(match method {
            "startswith" | "endswith" => {
                // A tuple of prefixes arrives as a sequence.
                let candidates: Vec<String> = match args.first() {
                    Some(v) if v.kind() == ValueKind::Seq => {
                        v.try_iter()?.filter_map(|x| x.as_str().map(str::to_string)).collect()
                    }
                    Some(v) => v.as_str().map(|x| vec![x.to_string()]).unwrap_or_default(),
                    None => return Err(Error::new(ErrorKind::MissingArgument, format!("{method} needs an argument"))),
                };
                let hit = candidates.iter().any(|c| {
                    if method == "startswith" {
                        s.starts_with(c.as_str())
                    } else {
                        s.ends_with(c.as_str())
                    }
                });
                Value::from(hit)
            }
            "strip" => Value::from(s.trim_matches(trim_set)),
            "lstrip" => Value::from(s.trim_start_matches(trim_set)),
            "rstrip" => Value::from(s.trim_end_matches(trim_set)),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "title" => Value::from(
                s.split(' ')
                    .map(|w| {
                        let mut c = w.chars();
                        match c.next() {
                            Some(f) => f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase(),
                            None => String::new(),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            "replace" => match (arg_str(args, 0), arg_str(args, 1)) {
                (Some(a), Some(b)) => Value::from(s.replace(&a, &b)),
                _ => return Err(Error::new(ErrorKind::MissingArgument, "replace needs two strings")),
            },
            "split" => {
                let parts: Vec<Value> = match arg_str(args, 0) {
                    Some(sep) if !sep.is_empty() => s.split(sep.as_str()).map(Value::from).collect(),
                    _ => s.split_whitespace().map(Value::from).collect(),
                };
                Value::from(parts)
            }
            "find" => match arg_str(args, 0) {
                Some(needle) => Value::from(s.find(&needle).map_or(-1i64, |i| s[..i].chars().count() as i64)),
                None => return Err(Error::new(ErrorKind::MissingArgument, "find needs a string")),
            },
            "count" => match arg_str(args, 0) {
                Some(needle) if !needle.is_empty() => Value::from(s.matches(needle.as_str()).count()),
                _ => return Err(Error::new(ErrorKind::MissingArgument, "count needs a string")),
            },
            _ => return Err(unknown()),
        });
    }
    if value.kind() == ValueKind::Map {
        return Ok(match method {
            "items" => {
                let mut out = Vec::new();
                for k in value.try_iter()? {
                    let v = value.get_item(&k)?;
                    out.push(Value::from(vec![k, v]));
                }
                Value::from(out)
            }
            "keys" => Value::from(value.try_iter()?.collect::<Vec<_>>()),
            "values" => {
                let mut out = Vec::new();
                for k in value.try_iter()? {
                    out.push(value.get_item(&k)?);
                }
                Value::from(out)
            }
            "get" => {
                let key = args.first().cloned().unwrap_or(Value::UNDEFINED);
                let v = value.get_item(&key)?;
                if v.is_undefined() {
                    args.get(1).cloned().unwrap_or(Value::from(()))
                } else {
                    v
                }
            }
            _ => return Err(unknown()),
        });
    }
    Err(unknown())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_messages_with_a_generation_prompt_and_python_methods() {
        let src = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content.strip() }}\
                   {% if m.content.startswith(('Grade', 'x')) %}!{% endif %}{% endfor %}\
                   {% if add_generation_prompt %}[assistant]{% if enable_thinking is false %}(no thoughts){% endif %}{% endif %}\
                   {{ {'a': 1}.get('b', 'd') }}{{ 'a,b'.split(',')|length }}";
        let t = ChatTemplate::new(src, "<s>", "</s>", "").unwrap();
        let out = t.render(&[ChatMessage::new("system", " Be fair "), ChatMessage::new("user", "Grade it")]).unwrap();
        assert_eq!(out, "<s>[system]Be fair[user]Grade it![assistant](no thoughts)d2");
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}", "", "", "").unwrap();
        assert!(t.render(&[]).unwrap_err().to_string().contains("no system role"));
        assert!(ChatTemplate::new("{% for %}", "", "", "").is_err());
    }
}
