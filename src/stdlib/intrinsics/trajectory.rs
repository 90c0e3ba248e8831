//! Agent trajectories: a `Json` list of chat messages in the OpenAI format whose assistant
//! messages carry `tool_calls`. `tool_calls`, `called`, `call_count` and `called_in_order` read
//! the calls; `trajectory_match` compares two trajectories with the semantics of agentevals'
//! trajectory match evaluator (strict, unordered, subset and superset modes; exact, ignore,
//! subset and superset argument modes), checked against agentevals' own test cases
//! (`tests/fixtures/trajectory/`, `tests/trajectory.rs`). See `docs/trajectories.md`.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{invalid, list_arg, opt_json_arg, text_arg, texts_arg};
use crate::stdlib::{EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::{Record, Value};
use serde_json::Value as Json;
use std::sync::Arc;

pub(super) const TOOL_CALLS: Intrinsic = Intrinsic {
    name: "tool_calls",
    sig: "(trajectory: Json?) -> List[{name: Text, arguments: Json, id: Text}]",
    doc: "Every tool call of the agent trajectory `trajectory`, in order: a list of chat messages \
          (or `{\"messages\": [...]}`, or one message) whose assistant messages (role \
          `assistant` or `ai`) carry `tool_calls`, each in the OpenAI form `{id, type, function: \
          {name, arguments}}` with `arguments` a JSON string, or the LangChain form `{id, name, \
          args}`. `arguments` is the parsed JSON; arguments that are not valid JSON are kept as \
          a JSON string of the raw text, and missing ones are `{}`. `id` is `\"\"` when absent. \
          Tool calls on other roles are ignored, as agentevals ignores them. A `null` trajectory \
          has no calls; one that is not in this form traps (`rubric::trap::type`). See \
          [trajectories.md](trajectories.md).",
    examples: &[
        r#"tool_calls(json("""[{"role": "user", "content": "Weather in SF?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"SF\"}"}}]}]"""))[0].name == "get_weather""#,
        r#"json_text(json_get(tool_calls(json("""[{"role": "assistant", "tool_calls": [{"name": "get_weather", "args": {"city": "SF"}}]}]"""))[0].arguments, "city")) == "SF""#,
        r#"tool_calls(json("""{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "not json"}}]}]}"""))[0].arguments == json("\"not json\"")"#,
    ],
    imp: tool_calls,
};

pub(super) const CALLED: Intrinsic = Intrinsic {
    name: "called",
    sig: "(trajectory: Json?, name: Text) -> Bool",
    doc: "Whether the agent trajectory `trajectory` calls the tool `name` at least once (the \
          calls as `tool_calls` reads them; names compare exactly).",
    examples: &[
        r#"called(json("""[{"role": "assistant", "tool_calls": [{"function": {"name": "search", "arguments": "{}"}}]}]"""), "search")"#,
        r#"not called(json("""[{"role": "assistant", "content": "No tools needed."}]"""), "search")"#,
    ],
    imp: called,
};

pub(super) const CALL_COUNT: Intrinsic = Intrinsic {
    name: "call_count",
    sig: "(trajectory: Json?, name: Text) -> Number",
    doc: "How many times the agent trajectory `trajectory` calls the tool `name` (the calls as \
          `tool_calls` reads them; names compare exactly).",
    examples: &[
        r#"call_count(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {"q": "a"}}, {"name": "search", "args": {"q": "b"}}]}]"""), "search") == 2"#,
        r#"call_count(null, "search") == 0"#,
    ],
    imp: call_count,
};

pub(super) const CALLED_IN_ORDER: Intrinsic = Intrinsic {
    name: "called_in_order",
    sig: "(trajectory: Json?, names: List[Text]) -> Bool",
    doc: "Whether the tools `names` are called in this order in the agent trajectory \
          `trajectory`: they appear as a subsequence of its calls' names, other calls may come \
          between them. An empty `names` is always true.",
    examples: &[
        r#"called_in_order(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {}}, {"name": "open", "args": {}}, {"name": "answer", "args": {}}]}]"""), ["search", "answer"])"#,
        r#"not called_in_order(json("""[{"role": "assistant", "tool_calls": [{"name": "answer", "args": {}}, {"name": "search", "args": {}}]}]"""), ["search", "answer"])"#,
    ],
    imp: called_in_order,
};

pub(super) const TRAJECTORY_MATCH: Intrinsic = Intrinsic {
    name: "trajectory_match",
    sig: "(outputs: Json?, reference: Json?, mode: Text = \"strict\", args: Text = \"exact\") -> Bool",
    doc: "Whether the agent trajectory `outputs` matches `reference`, as agentevals' \
          `create_trajectory_match_evaluator(trajectory_match_mode=mode, \
          tool_args_match_mode=args)` decides. `mode` `\"strict\"`: as many messages, the same \
          role at each position, tool calls on the same messages, and each message's calls \
          matched one to one (in any order within the message) to the reference message's by \
          name and arguments; `\"unordered\"`: the same calls in any order and on any messages \
          (superset both ways); `\"superset\"`: every reference call is matched by a distinct \
          call of `outputs`; `\"subset\"`: every call of `outputs` is matched by a distinct \
          reference call. Message contents are never compared. `args` `\"exact\"`: arguments \
          equal (numbers by value, `true` equals `1` as in Python); `\"ignore\"`: any \
          arguments; `\"subset\"` and `\"superset\"`: every key of one side's arguments is on \
          the other with an equal value, sides as agentevals orders them (see \
          [trajectories.md](trajectories.md)). Calls are matched greedily, first fit, as \
          agentevals does. Per-tool argument rules: the overload with `overrides`. An unknown `mode` or \
          `args` traps (`rubric::trap::invalid_argument`).",
    examples: &[
        r#"trajectory_match(json("""[{"role": "user", "content": "Weather in SF?"}, {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": "{\"city\": \"SF\"}"}}]}]"""), json("""[{"role": "user", "content": "What is the weather?"}, {"role": "assistant", "tool_calls": [{"name": "get_weather", "args": {"city": "SF"}}]}]"""))"#,
        r#"not trajectory_match(json("""[{"role": "assistant", "tool_calls": [{"name": "get_weather", "args": {"city": "SF"}}]}]"""), json("""[{"role": "assistant", "tool_calls": [{"name": "get_weather", "args": {"city": "San Francisco"}}]}]"""))"#,
        r#"trajectory_match(json("""[{"role": "assistant", "tool_calls": [{"name": "get_weather", "args": {"city": "SF"}}]}]"""), json("""[{"role": "assistant", "tool_calls": [{"name": "get_weather", "args": {"city": "San Francisco"}}]}]"""), "strict", "ignore")"#,
        r#"trajectory_match(json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {}}, {"name": "b", "args": {}}]}]"""), json("""[{"role": "assistant", "tool_calls": [{"name": "b", "args": {}}]}]"""), mode: "superset")"#,
    ],
    imp: trajectory_match,
};

/// The overloads of the functions above on a `Trajectory` (they read its `json`), and
/// `trajectory`, which builds one.
const TRAJ_DOC: &str = "(on a `Trajectory`: the same over its `json`, the messages as the row gave them)";

pub(super) const TRAJECTORY: Intrinsic = Intrinsic {
    name: "trajectory",
    sig: "(messages: Json?) -> Trajectory",
    doc: "The `Trajectory` of chat messages in the forms `tool_calls` reads, as a row's \
          `Trajectory` input is bound: `task` (the first user message's content), `messages` \
          (every message as a `{role, content}` turn), `steps` (one per assistant message, \
          numbered from 0: its `content` and its `calls`, each `{name, arguments, id, result}` \
          with `result` the content of the tool message answering it, or `null`), `answer` \
          (the last assistant message's content) and `json` (the messages as given). Content \
          given as a list of parts reads as its text parts joined by newlines. A `null` is the \
          empty trajectory; messages not in this form trap (`rubric::trap::type`). See \
          [trajectories.md](trajectories.md).",
    examples: &[
        r#"trajectory(json("""[{"role": "user", "content": "Weather in SF?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"SF\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "18C"}, {"role": "assistant", "content": "It is 18C."}]""")).steps[0].calls[0].result == "18C""#,
        r#"len(trajectory(json("""[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]""")).steps) == 1"#,
        r#"trajectory(json("""[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]""")).answer == "Hello""#,
        r#"trajectory(null).task == """#,
    ],
    imp: |a, ctx| {
        let t = opt_json_arg(a, 0)?;
        let Some(t) = t else { return trajectory_value(&Json::Null).map_err(bad) };
        ctx.work(t.to_string().len())?;
        trajectory_value(&t).map_err(bad)
    },
};

pub(super) const TOOL_CALLS_OF: Intrinsic = Intrinsic {
    name: "tool_calls",
    sig: "(trajectory: Trajectory?) -> List[{name: Text, arguments: Json, id: Text}]",
    doc: TRAJ_DOC,
    examples: &[
        r#"tool_calls(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {"q": "a"}}]}]""")))[0].name == "search""#,
    ],
    imp: tool_calls,
};

pub(super) const CALLED_OF: Intrinsic = Intrinsic {
    name: "called",
    sig: "(trajectory: Trajectory?, name: Text) -> Bool",
    doc: TRAJ_DOC,
    examples: &[
        r#"called(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {}}]}]""")), "search")"#,
    ],
    imp: called,
};

pub(super) const CALL_COUNT_OF: Intrinsic = Intrinsic {
    name: "call_count",
    sig: "(trajectory: Trajectory?, name: Text) -> Number",
    doc: TRAJ_DOC,
    examples: &[
        r#"call_count(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {}}, {"name": "search", "args": {}}]}]""")), "search") == 2"#,
    ],
    imp: call_count,
};

pub(super) const CALLED_IN_ORDER_OF: Intrinsic = Intrinsic {
    name: "called_in_order",
    sig: "(trajectory: Trajectory?, names: List[Text]) -> Bool",
    doc: TRAJ_DOC,
    examples: &[
        r#"called_in_order(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {}}, {"name": "answer", "args": {}}]}]""")), ["search", "answer"])"#,
    ],
    imp: called_in_order,
};

pub(super) const TRAJECTORY_MATCH_OF: Intrinsic = Intrinsic {
    name: "trajectory_match",
    sig: "(outputs: Trajectory?, reference: Json?, mode: Text = \"strict\", args: Text = \"exact\") -> Bool",
    doc: TRAJ_DOC,
    examples: &[
        r#"trajectory_match(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {}}]}]""")), json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {}}]}]"""))"#,
    ],
    imp: trajectory_match,
};

pub(super) const TRAJECTORY_MATCH_BOTH: Intrinsic = Intrinsic {
    name: "trajectory_match",
    sig: "(outputs: Trajectory?, reference: Trajectory?, mode: Text = \"strict\", args: Text = \"exact\") -> Bool",
    doc: TRAJ_DOC,
    examples: &[
        r#"trajectory_match(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {}}, {"name": "b", "args": {}}]}]""")), trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "b", "args": {}}]}]""")), mode: "superset")"#,
    ],
    imp: trajectory_match,
};

pub(super) const TRAJECTORY_MATCH_OVERRIDES: Intrinsic = Intrinsic {
    name: "trajectory_match",
    sig: "(outputs: Json?, reference: Json?, mode: Text = \"strict\", args: Text = \"exact\", overrides: Json? = null) -> Bool",
    doc: "`trajectory_match` with per-tool argument rules, as agentevals' \
          `tool_args_match_overrides`: `overrides` is an object from tool names to a mode \
          (`\"exact\"`, `\"ignore\"`, `\"subset\"`, `\"superset\"`), used for that tool's calls \
          in place of `args`, or to a list of key paths (`[\"time.start\", \"query\"]`): the \
          calls match when every path is on both calls' arguments with equal values, whatever \
          the other arguments (a path missing from either call does not match, as agentevals' \
          latest Python tests have it). A rule agentevals reads as false (`null`, `false`, \
          `\"\"`, `[]`) leaves the tool to `args`. Python functions cannot be given; an unknown \
          mode or a rule of another kind traps (`rubric::trap::invalid_argument`), where \
          agentevals reads an unknown mode as `ignore`. See [trajectories.md](trajectories.md).",
    examples: &[
        r#"trajectory_match(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {"q": "weather SF", "n": 5}}]}]"""), json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {"q": "SF weather", "n": 5}}]}]"""), overrides: json("""{"search": ["n"]}"""))"#,
        r#"trajectory_match(json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {"q": "a"}}]}]"""), json("""[{"role": "assistant", "tool_calls": [{"name": "search", "args": {"q": "b"}}]}]"""), overrides: json("""{"search": "ignore"}"""))"#,
        r#"not trajectory_match(json("""[{"role": "assistant", "tool_calls": [{"name": "f", "args": {"t": {"end": 2}}}]}]"""), json("""[{"role": "assistant", "tool_calls": [{"name": "f", "args": {"t": {"end": 2}}}]}]"""), overrides: json("""{"f": ["t.start"]}"""))"#,
    ],
    imp: trajectory_match,
};

pub(super) const TRAJECTORY_MATCH_OF_OVERRIDES: Intrinsic = Intrinsic {
    name: "trajectory_match",
    sig: "(outputs: Trajectory?, reference: Json?, mode: Text = \"strict\", args: Text = \"exact\", overrides: Json? = null) -> Bool",
    doc: TRAJ_DOC,
    examples: &[
        r#"trajectory_match(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {"x": 1}}]}]""")), json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {"x": 2}}]}]"""), overrides: json("""{"a": "ignore"}"""))"#,
    ],
    imp: trajectory_match,
};

pub(super) const TRAJECTORY_MATCH_BOTH_OVERRIDES: Intrinsic = Intrinsic {
    name: "trajectory_match",
    sig: "(outputs: Trajectory?, reference: Trajectory?, mode: Text = \"strict\", args: Text = \"exact\", overrides: Json? = null) -> Bool",
    doc: TRAJ_DOC,
    examples: &[
        r#"not trajectory_match(trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {"x": 1}}]}]""")), trajectory(json("""[{"role": "assistant", "tool_calls": [{"name": "a", "args": {"x": 2}}]}]""")), overrides: json("""{"a": ["x"]}"""))"#,
    ],
    imp: trajectory_match,
};

/// Argument `i` as the JSON of a trajectory: a `Json` as it is, a `Trajectory`'s `json`.
fn traj_arg(a: &[Value], i: usize) -> Result<Option<std::borrow::Cow<'_, Json>>, Trap> {
    if let Some(Value::Record(r)) = a.get(i) {
        if let Some(Value::Json(j)) = r.get("json") {
            return Ok(Some(std::borrow::Cow::Borrowed(&**j)));
        }
    }
    opt_json_arg(a, i)
}

// ---------------------------------------------------------------- reading trajectories

/// One tool call, normalised.
struct Call {
    name: String,
    args: Json,
    id: String,
    /// The length of the arguments' JSON text: what comparing them may cost.
    weight: usize,
}

/// One message, normalised: its role (`ai` read as `assistant`, `human` as `user`) and its
/// tool calls (`None` when it has none: absent, `null` or empty, or not an assistant message).
struct Message {
    role: String,
    calls: Option<Vec<Call>>,
    /// The content as text ([`content_text`]).
    content: String,
    /// A tool message's `tool_call_id`: the call it answers.
    tool_call_id: Option<String>,
}

fn bad(message: impl Into<String>) -> Trap {
    Trap::new(TrapKind::Type, message)
}

/// The messages of a trajectory: a list of messages, `{"messages": [...]}`, or one message
/// (an object with a `role`); `null` is an empty trajectory.
fn messages(trajectory: Option<&Json>, ctx: &mut EvalCtx) -> Result<Vec<Message>, Trap> {
    let Some(t) = trajectory else { return Ok(Vec::new()) };
    ctx.work(t.to_string().len())?;
    message_list(t).map_err(bad)
}

/// [`messages`] without the meter: the messages of a trajectory, or what is wrong with it.
fn message_list(t: &Json) -> Result<Vec<Message>, String> {
    let single;
    let list: &[Json] = match t {
        Json::Null => return Ok(Vec::new()),
        Json::Array(items) => items,
        Json::Object(o) if o.contains_key("role") => {
            single = [t.clone()];
            &single
        }
        Json::Object(o) => match o.get("messages") {
            Some(Json::Array(items)) => items,
            Some(Json::Null) => return Ok(Vec::new()),
            Some(_) => return Err("a trajectory's `messages` must be a list of messages".into()),
            None => {
                return Err("a trajectory object must be a message (with a `role`) or have a `messages` list".into())
            }
        },
        other => return Err(format!("a trajectory must be a list of messages, got `{other}`")),
    };
    list.iter().enumerate().map(|(i, m)| message(m).map_err(|e| format!("message {i}: {e}"))).collect()
}

/// A message's content as text: a string as it is, a list of content parts as their `text`
/// parts joined by newlines (other parts, such as images, left out), `null` or absent as `""`.
fn content_text(c: Option<&Json>) -> Result<String, String> {
    match c {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(Json::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| match p {
                Json::String(s) => Some(s.as_str()),
                Json::Object(o) => o.get("text").and_then(Json::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")),
        Some(other) => Err(format!("`content` must be text or a list of content parts, got `{other}`")),
    }
}

/// The `Trajectory` value (`ir::Type::trajectory`) of chat messages in the OpenAI form (the
/// forms [`TOOL_CALLS`] reads): `task`, the first user message's content; `messages`, every
/// message as a `{role, content}` turn; `steps`, one per assistant message, numbered from 0,
/// with its content and its calls, each call with the content of the tool message whose
/// `tool_call_id` names it (`null` when none does); `answer`, the last assistant message's
/// content; `json`, the messages as given. How rows bind a `Trajectory` input, and the
/// `trajectory` intrinsic.
pub(crate) fn trajectory_value(t: &Json) -> Result<Value, String> {
    let list = message_list(t)?;
    let mut results: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for m in &list {
        if let (Some(id), "tool") = (m.tool_call_id.as_deref(), m.role.as_str()) {
            results.entry(id).or_insert(m.content.as_str());
        }
    }
    let rec = |fields: Vec<(&str, Value)>| {
        let mut r = Record::new();
        for (k, v) in fields {
            r.insert(k.into(), v);
        }
        Value::Record(Arc::new(r))
    };
    let mut steps = Vec::new();
    for m in list.iter().filter(|m| m.role == "assistant") {
        let calls = m
            .calls
            .iter()
            .flatten()
            .map(|c| {
                let result = match results.get(c.id.as_str()) {
                    Some(r) if !c.id.is_empty() => Value::text(*r),
                    _ => Value::Null,
                };
                rec(vec![
                    ("arguments", super::json_value(c.args.clone())),
                    ("id", Value::text(c.id.as_str())),
                    ("name", Value::text(c.name.as_str())),
                    ("result", result),
                ])
            })
            .collect();
        steps.push(rec(vec![
            ("calls", Value::list(calls)),
            ("content", Value::text(m.content.as_str())),
            ("index", super::number(steps.len())),
        ]));
    }
    let turns = list
        .iter()
        .map(|m| rec(vec![("content", Value::text(m.content.as_str())), ("role", Value::text(m.role.as_str()))]))
        .collect();
    let first = |role: &str| list.iter().find(|m| m.role == role).map_or("", |m| m.content.as_str());
    let answer = list.iter().rev().find(|m| m.role == "assistant").map_or("", |m| m.content.as_str());
    Ok(rec(vec![
        ("answer", Value::text(answer)),
        ("json", super::json_value(t.clone())),
        ("messages", Value::list(turns)),
        ("steps", Value::list(steps)),
        ("task", Value::text(first("user"))),
    ]))
}

fn message(m: &Json) -> Result<Message, String> {
    let Json::Object(o) = m else { return Err(format!("a message must be an object, got `{m}`")) };
    // LangChain's `message_to_dict` form: `{"type": "ai", "data": {...}}`
    let fields = match (o.get("role"), o.get("type"), o.get("data")) {
        (None, Some(Json::String(_)), Some(Json::Object(data))) => data,
        _ => o,
    };
    let role = match o.get("role").or_else(|| o.get("type")) {
        Some(Json::String(r)) => match r.as_str() {
            "ai" => "assistant",
            "human" => "user",
            r => r,
        },
        Some(other) => return Err(format!("`role` must be text, got `{other}`")),
        None => return Err("a message needs a `role` (or a LangChain `type`)".into()),
    };
    let calls = match fields.get("tool_calls") {
        None | Some(Json::Null) => None,
        Some(Json::Array(calls)) if role == "assistant" && !calls.is_empty() => {
            Some(calls.iter().map(call).collect::<Result<Vec<_>, _>>()?)
        }
        Some(Json::Array(_)) => None,
        Some(other) => return Err(format!("`tool_calls` must be a list, got `{other}`")),
    };
    let content = content_text(fields.get("content"))?;
    let tool_call_id = match fields.get("tool_call_id") {
        Some(Json::String(id)) => Some(id.clone()),
        Some(Json::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(Message { role: role.to_string(), calls, content, tool_call_id })
}

/// One tool call in the OpenAI form (`{id, type, function: {name, arguments}}`, `arguments` a
/// JSON string or already an object) or the LangChain form (`{id, name, args}`).
fn call(c: &Json) -> Result<Call, String> {
    let Json::Object(o) = c else { return Err(format!("a tool call must be an object, got `{c}`")) };
    let (holder, args) = match o.get("function") {
        Some(Json::Object(f)) => (f, f.get("arguments")),
        Some(other) => return Err(format!("a tool call's `function` must be an object, got `{other}`")),
        None => (o, o.get("args")),
    };
    let name = match holder.get("name") {
        Some(Json::String(n)) => n.clone(),
        Some(other) => return Err(format!("a tool call's `name` must be text, got `{other}`")),
        None => return Err("a tool call needs a `name`".into()),
    };
    let args = match args {
        None | Some(Json::Null) => Json::Object(serde_json::Map::new()),
        Some(Json::String(s)) if o.contains_key("function") => {
            serde_json::from_str(s).unwrap_or_else(|_| Json::String(s.clone()))
        }
        Some(a) => a.clone(),
    };
    let id = match o.get("id") {
        Some(Json::String(id)) => id.clone(),
        Some(Json::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let weight = args.to_string().len();
    Ok(Call { name, args, id, weight })
}

/// Every tool call of the trajectory, in order.
fn all_calls(messages: Vec<Message>) -> impl Iterator<Item = Call> {
    messages.into_iter().filter_map(|m| m.calls).flatten()
}

fn calls_of(a: &[Value], ctx: &mut EvalCtx) -> Result<Vec<Call>, Trap> {
    let t = traj_arg(a, 0)?;
    Ok(all_calls(messages(t.as_deref(), ctx)?).collect())
}

fn tool_calls(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let calls = calls_of(a, ctx)?;
    let out = calls
        .into_iter()
        .map(|c| {
            let mut rec = Record::new();
            rec.insert("name".into(), Value::text(c.name));
            rec.insert("arguments".into(), super::json_value(c.args));
            rec.insert("id".into(), Value::text(c.id));
            Value::Record(Arc::new(rec))
        })
        .collect();
    Ok(Value::list(out))
}

fn called(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let name = text_arg(a, 1)?;
    Ok(Value::Bool(calls_of(a, ctx)?.iter().any(|c| *c.name == **name)))
}

fn call_count(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let name = text_arg(a, 1)?;
    Ok(super::number(calls_of(a, ctx)?.iter().filter(|c| *c.name == **name).count()))
}

fn called_in_order(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let names = texts_arg(a, 1)?;
    ctx.work(list_arg(a, 1)?.len())?;
    let calls = calls_of(a, ctx)?;
    let mut wanted = names.iter().peekable();
    for c in &calls {
        if wanted.peek().is_some_and(|n| **n == c.name) {
            wanted.next();
        }
    }
    Ok(Value::Bool(wanted.peek().is_none()))
}

// ---------------------------------------------------------------- matching

#[derive(Clone, Copy)]
enum ArgsMode {
    Exact,
    Ignore,
    Subset,
    Superset,
}

impl ArgsMode {
    /// Whether a call with arguments `call` matches one with `reference`, in agentevals'
    /// argument order: `subset` wants every key of `call` on `reference` with an equal value,
    /// `superset` every key of `reference` on `call`. When either side is not an object (where
    /// agentevals raises), `subset` and `superset` compare the two as `exact` does.
    fn matches(self, call: &Json, reference: &Json) -> bool {
        let within = |small: &Json, large: &Json| match (small, large) {
            (Json::Object(s), Json::Object(l)) => s.iter().all(|(k, v)| l.get(k).is_some_and(|w| py_eq(w, v))),
            _ => py_eq(small, large),
        };
        match self {
            ArgsMode::Exact => py_eq(call, reference),
            ArgsMode::Ignore => true,
            ArgsMode::Subset => within(call, reference),
            ArgsMode::Superset => within(reference, call),
        }
    }
}

/// How one tool's arguments are compared, in place of the default mode (agentevals'
/// `tool_args_match_overrides`, without its Python functions).
enum Override {
    Mode(ArgsMode),
    /// Key paths (`"time.start"`): each must be on both calls' arguments, with equal values.
    Keys(Vec<Vec<String>>),
}

/// The argument comparison of a match: the `args` mode, and the rules of the tools the
/// `overrides` name.
struct Matcher {
    default: ArgsMode,
    overrides: Vec<(String, Override)>,
}

impl Matcher {
    fn matches(&self, name: &str, call: &Json, reference: &Json) -> bool {
        match self.overrides.iter().find(|(n, _)| n == name).map(|(_, r)| r) {
            None => self.default.matches(call, reference),
            Some(Override::Mode(m)) => m.matches(call, reference),
            Some(Override::Keys(paths)) => paths.iter().all(
                |path| matches!((key_path(call, path), key_path(reference, path)), (Some(x), Some(y)) if py_eq(x, y)),
            ),
        }
    }
}

/// The value at a key path of JSON objects, if every key is there.
fn key_path<'j>(j: &'j Json, path: &[String]) -> Option<&'j Json> {
    path.iter().try_fold(j, |cur, part| cur.as_object()?.get(part))
}

fn args_mode(name: &str, what: &str) -> Result<ArgsMode, Trap> {
    Ok(match name {
        "exact" => ArgsMode::Exact,
        "ignore" => ArgsMode::Ignore,
        "subset" => ArgsMode::Subset,
        "superset" => ArgsMode::Superset,
        other => {
            return Err(invalid(format!(
                "trajectory_match: {what} is \"exact\", \"ignore\", \"subset\" or \"superset\", not {other:?}"
            )))
        }
    })
}

/// The `overrides` argument: an object from tool names to a mode or a list of key paths. A
/// value agentevals reads as false (`null`, `false`, `""`, `[]`) leaves that tool to the
/// default mode, as there.
fn overrides(j: Option<&Json>) -> Result<Vec<(String, Override)>, Trap> {
    let Some(j) = j.filter(|j| !j.is_null()) else { return Ok(Vec::new()) };
    let Json::Object(o) = j else {
        return Err(invalid(format!("trajectory_match: `overrides` is an object from tool names to rules, not {j}")));
    };
    let mut out = Vec::new();
    for (name, rule) in o {
        let rule = match rule {
            Json::Null | Json::Bool(false) => continue,
            Json::String(s) if s.is_empty() => continue,
            Json::Array(keys) if keys.is_empty() => continue,
            Json::String(mode) => Override::Mode(args_mode(mode, &format!("the override of `{name}`"))?),
            Json::Array(keys) => Override::Keys(
                keys.iter()
                    .map(|k| match k {
                        Json::String(path) => Ok(path.split('.').map(str::to_string).collect()),
                        other => Err(invalid(format!(
                            "trajectory_match: the key paths of `{name}` are texts (\"time.start\"), not {other}"
                        ))),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            other => {
                return Err(invalid(format!(
                    "trajectory_match: the override of `{name}` is a mode (\"exact\", \"ignore\", \"subset\", \"superset\") or a list of key paths, not {other}"
                )))
            }
        };
        out.push((name.clone(), rule));
    }
    Ok(out)
}

/// JSON equality as Python's `==` on the values `json.loads` gives: numbers by value (`1 ==
/// 1.0`, integers exactly), `true == 1` and `false == 0`, lists item by item, objects by their
/// key sets and values.
fn py_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (py_number(a), py_number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

/// A number as Python compares it: an integer exactly, a float exactly (so an integral float
/// equals the same integer); booleans are the integers 0 and 1.
#[derive(PartialEq)]
enum PyNumber {
    Int(i128),
    Float(f64),
}

fn py_number(v: &Json) -> Option<PyNumber> {
    match v {
        Json::Bool(b) => Some(PyNumber::Int(i128::from(*b))),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(PyNumber::Int(i128::from(i)))
            } else if let Some(u) = n.as_u64() {
                Some(PyNumber::Int(i128::from(u)))
            } else {
                let f = n.as_f64()?;
                // an integral float within i128 compares as that integer
                if f.fract() == 0.0 && f.abs() < 1.0e38 {
                    Some(PyNumber::Int(f as i128))
                } else {
                    Some(PyNumber::Float(f))
                }
            }
        }
        _ => None,
    }
}

/// Whether every call of `reference` is matched by a distinct call of `outputs` of the same
/// name whose arguments match (`args.matches(output's, reference's)`): for each reference
/// call in order, the first unused output call that matches.
fn is_superset(outputs: &[Call], reference: &[Call], args: &Matcher, ctx: &mut EvalCtx) -> Result<bool, Trap> {
    ctx.work(outputs.len().saturating_mul(reference.len()))?;
    let mut used = vec![false; outputs.len()];
    for r in reference {
        let mut found = None;
        for (i, o) in outputs.iter().enumerate() {
            if o.name == r.name && !used[i] && pair(o, r, args, ctx)? {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => used[i] = true,
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// Whether `call`'s arguments match `reference`'s, the comparison charged first.
fn pair(call: &Call, reference: &Call, args: &Matcher, ctx: &mut EvalCtx) -> Result<bool, Trap> {
    ctx.work(call.weight.min(reference.weight))?;
    Ok(args.matches(&reference.name, &call.args, &reference.args))
}

/// Position by position: the same role, tool calls on both or neither, and each output call
/// matched to a distinct reference call of the same message (first fit, in output order).
fn strict(outputs: &[Message], reference: &[Message], args: &Matcher, ctx: &mut EvalCtx) -> Result<bool, Trap> {
    if outputs.len() != reference.len() {
        return Ok(false);
    }
    for (o, r) in outputs.iter().zip(reference) {
        if o.role != r.role {
            return Ok(false);
        }
        match (&o.calls, &r.calls) {
            (None, None) => {}
            (Some(oc), Some(rc)) => {
                if oc.len() != rc.len() {
                    return Ok(false);
                }
                ctx.work(oc.len().saturating_mul(rc.len()))?;
                let mut remaining: Vec<&Call> = rc.iter().collect();
                for c in oc {
                    let mut found = None;
                    for (at, r) in remaining.iter().enumerate() {
                        if r.name == c.name && pair(c, r, args, ctx)? {
                            found = Some(at);
                            break;
                        }
                    }
                    let Some(at) = found else { return Ok(false) };
                    remaining.remove(at);
                }
            }
            _ => return Ok(false),
        }
    }
    Ok(true)
}

fn trajectory_match(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let mode = text_arg(a, 2)?;
    let args = Matcher {
        default: args_mode(text_arg(a, 3)?, "`args`")?,
        overrides: match a.len() {
            // The overloads without `overrides`.
            0..=4 => Vec::new(),
            _ => overrides(opt_json_arg(a, 4)?.as_deref())?,
        },
    };
    let args = &args;
    let outputs = messages(traj_arg(a, 0)?.as_deref(), ctx)?;
    let reference = messages(traj_arg(a, 1)?.as_deref(), ctx)?;
    let matched = match &**mode {
        "strict" => strict(&outputs, &reference, args, ctx)?,
        "unordered" | "subset" | "superset" => {
            let o: Vec<Call> = all_calls(outputs).collect();
            let r: Vec<Call> = all_calls(reference).collect();
            match &**mode {
                "unordered" => is_superset(&o, &r, args, ctx)? && is_superset(&r, &o, args, ctx)?,
                "superset" => is_superset(&o, &r, args, ctx)?,
                _ => is_superset(&r, &o, args, ctx)?,
            }
        }
        other => {
            return Err(invalid(format!(
                "trajectory_match: `mode` is \"strict\", \"unordered\", \"subset\" or \"superset\", not {other:?}"
            )))
        }
    };
    Ok(Value::Bool(matched))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_equality() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(py_eq(&json!({"a": [1, false]}), &json!({"a": [1.0, 0]})));
        assert!(!py_eq(&json!(1), &json!("1")));
        assert!(!py_eq(&json!(null), &json!(0)));
        assert!(!py_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!py_eq(&json!(9007199254740993u64), &json!(9007199254740992.0)));
        assert!(py_eq(&json!(0.5), &json!(0.5)));
    }

    #[test]
    fn argument_modes_follow_agentevals_order() {
        let (small, large) = (json!({"a": 1}), json!({"a": 1, "b": 2}));
        assert!(ArgsMode::Subset.matches(&small, &large));
        assert!(!ArgsMode::Subset.matches(&large, &small));
        assert!(ArgsMode::Superset.matches(&large, &small));
        assert!(!ArgsMode::Superset.matches(&small, &large));
        assert!(ArgsMode::Ignore.matches(&small, &json!("x")));
    }

    #[test]
    fn malformed_trajectories_trap() {
        let mut ctx = EvalCtx::new();
        for bad in [json!("text"), json!({"x": 1}), json!([1]), json!([{"content": "no role"}])] {
            let e = messages(Some(&bad), &mut ctx).err().unwrap_or_else(|| panic!("{bad} should trap"));
            assert_eq!(e.kind, TrapKind::Type, "{bad}");
        }
        let calls = json!([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]);
        assert!(messages(Some(&calls), &mut ctx).is_err());
    }
}
