//! `trajectory_match` against agentevals' own published test cases
//! (`tests/fixtures/trajectory/agentevals.jsonl`, transcribed from langchain-ai/agentevals'
//! `js/src/trajectory/tests/trajectory.test.ts`; see the README there): every case gives the
//! score agentevals' test expects. Then the tool-call readers (`tool_calls`, `called`,
//! `call_count`, `called_in_order`) and the edges of matching: Python's equality, the argument
//! order of the subset and superset argument modes, the input forms, unknown modes. On every
//! engine, with identical results.

use rubric::engine::Status;
use serde_json::Value as Json;

/// A rubric expression for the JSON value `j`: `json("""...""")`.
fn json_lit(j: &Json) -> String {
    let text = j.to_string();
    assert!(!text.contains("\"\"\""), "{text} holds a triple quote");
    format!("json(\"\"\"{text}\"\"\")")
}

/// Evaluate `checks` (name, expression) as the checks of one rubric on every engine; the
/// descriptions of those that are not met.
fn failing(what: &str, checks: &[(String, String)]) -> Vec<String> {
    let mut src = String::from("rubric t.trajectory @ 0.0.0\n");
    for (i, (_, expr)) in checks.iter().enumerate() {
        src.push_str(&format!("criterion c{i} \"check\" check {expr}\n"));
    }
    src.push_str("score = fraction(all)\n");
    let result = crate::common::evaluate_on_every_engine(what, &src);
    checks
        .iter()
        .enumerate()
        .filter_map(|(i, (name, _))| {
            let r = result.criterion(&format!("c{i}"))?;
            (r.status != Status::Met)
                .then(|| format!("{name}: {:?} {}", r.status, r.reason.clone().unwrap_or_default()))
        })
        .collect()
}

#[test]
fn trajectory_match_reproduces_agentevals_test_cases() {
    let path = crate::common::crate_root().join("tests/fixtures/trajectory/agentevals.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut checks = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: Json = serde_json::from_str(line).unwrap();
        let expected = r["expected"].as_bool().unwrap();
        let expr = format!(
            "trajectory_match({}, {}, {}, {}) == {expected}",
            json_lit(&r["outputs"]),
            json_lit(&r["reference"]),
            r["mode"],
            r["args"]
        );
        checks.push((r["name"].as_str().unwrap().to_string(), expr));
    }
    let failed = failing("<agentevals>", &checks);
    println!("agentevals trajectory cases: {} transcribed, {} reproduce", checks.len(), checks.len() - failed.len());
    assert_eq!(checks.len(), 34, "the fixture holds 34 published cases");
    assert!(failed.is_empty(), "{} of {} cases differ:\n{}", failed.len(), checks.len(), failed.join("\n"));
}

/// A trajectory in the OpenAI form: a user turn, an assistant turn calling `search` twice and
/// `open` once, their tool results, and an answer.
const TRAJECTORY: &str = r#"json("""[
  {"role": "user", "content": "Find the paper."},
  {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"rubric\", \"k\": 5}"}},
    {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"eval\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "..."},
  {"role": "tool", "tool_call_id": "call_2", "content": "..."},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "call_3", "type": "function", "function": {"name": "open", "arguments": "not json"}}]},
  {"role": "tool", "tool_call_id": "call_3", "content": "..."},
  {"role": "assistant", "content": "Here it is."}
]""")"#;

#[test]
fn tool_call_readers() {
    let t = TRAJECTORY;
    let checks: Vec<(String, String)> = [
        ("count", format!("len(tool_calls({t})) == 3")),
        ("names", format!("map(tool_calls({t}), c => c.name) == [\"search\", \"search\", \"open\"]")),
        ("ids", format!("map(tool_calls({t}), c => c.id) == [\"call_1\", \"call_2\", \"call_3\"]")),
        ("parsed arguments", format!("json_number(json_get(tool_calls({t})[0].arguments, \"k\")) == 5")),
        ("raw arguments", format!("tool_calls({t})[2].arguments == json(\"\\\"not json\\\"\")")),
        ("called", format!("called({t}, \"open\") and not called({t}, \"Open\")")),
        ("call_count", format!("call_count({t}, \"search\") == 2 and call_count({t}, \"answer\") == 0")),
        ("in order", format!("called_in_order({t}, [\"search\", \"open\"]) and called_in_order({t}, [\"search\", \"search\"])")),
        ("not in order", format!("not called_in_order({t}, [\"open\", \"search\"]) and not called_in_order({t}, [\"search\", \"search\", \"search\"])")),
        ("empty order", format!("called_in_order({t}, [])")),
        ("null", "len(tool_calls(null)) == 0 and not called(null, \"search\")".into()),
        (
            "messages wrapper and LangChain calls",
            r#"map(tool_calls(json("""{"messages": [{"type": "ai", "content": "", "tool_calls": [{"name": "search", "args": {"q": "x"}, "id": "7"}]}]}""")), c => c.id) == ["7"]"#.into(),
        ),
        (
            "one message",
            r#"call_count(json("""{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}"""), "f") == 1"#.into(),
        ),
        (
            "empty and null tool_calls",
            r#"len(tool_calls(json("""[{"role": "assistant", "tool_calls": []}, {"role": "assistant", "tool_calls": null}]"""))) == 0"#.into(),
        ),
        (
            "calls on other roles are ignored",
            r#"len(tool_calls(json("""[{"role": "user", "tool_calls": [{"name": "f", "args": {}}]}]"""))) == 0"#.into(),
        ),
    ]
    .into_iter()
    .map(|(n, e)| (n.to_string(), e))
    .collect();
    let failed = failing("<tool calls>", &checks);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// One assistant message calling `name` with `args` (a JSON object's text).
fn one_call(name: &str, args: &str) -> String {
    format!(r#"json("""[{{"role": "assistant", "tool_calls": [{{"name": "{name}", "args": {args}}}]}}]""")"#)
}

#[test]
fn trajectory_match_edges() {
    let small = one_call("f", r#"{"a": 1}"#);
    let large = one_call("f", r#"{"a": 1.0, "b": 2}"#);
    let checks: Vec<(String, String)> = [
        // Python's `==`: 1 == 1.0 and True == 1
        ("numbers by value", format!("trajectory_match({small}, {})", one_call("f", r#"{"a": 1.0}"#))),
        ("true equals 1", format!("trajectory_match({small}, {})", one_call("f", r#"{"a": true}"#))),
        ("text is not a number", format!("not trajectory_match({small}, {})", one_call("f", r#"{"a": "1"}"#))),
        // strict/superset pass (output args, reference args); subset passes (reference, output)
        ("strict args subset", format!("trajectory_match({small}, {large}, \"strict\", \"subset\")")),
        ("strict args subset, reversed", format!("not trajectory_match({large}, {small}, \"strict\", \"subset\")")),
        ("strict args superset", format!("trajectory_match({large}, {small}, \"strict\", \"superset\")")),
        ("superset mode, args subset", format!("trajectory_match({small}, {large}, \"superset\", \"subset\")")),
        ("subset mode, args subset", format!("trajectory_match({large}, {small}, \"subset\", \"subset\")")),
        ("subset mode, args subset, reversed", format!("not trajectory_match({small}, {large}, \"subset\", \"subset\")")),
        ("unordered, args superset one way only", format!("not trajectory_match({large}, {small}, \"unordered\", \"superset\")")),
        ("empty trajectories", "trajectory_match(json(\"[]\"), null)".into()),
        // strict: an empty tool_calls list is no tool calls
        (
            "empty tool_calls is none",
            r#"trajectory_match(json("""[{"role": "assistant", "tool_calls": []}]"""), json("""[{"role": "ai", "content": "x"}]"""))"#.into(),
        ),
        ("roles differ", format!("not trajectory_match({small}, json(\"\"\"[{{\"role\": \"user\"}}]\"\"\"))")),
        // greedy first fit: the first reference call that matches is taken, as in agentevals
        (
            "greedy first fit",
            format!(
                "not trajectory_match({}, {}, \"strict\", \"subset\")",
                r#"json("""[{"role": "assistant", "tool_calls": [{"name": "f", "args": {}}, {"name": "f", "args": {"a": 1}}]}]""")"#,
                r#"json("""[{"role": "assistant", "tool_calls": [{"name": "f", "args": {"a": 1}}, {"name": "f", "args": {"b": 2}}]}]""")"#
            ),
        ),
    ]
    .into_iter()
    .map(|(n, e)| (n.to_string(), e))
    .collect();
    let failed = failing("<trajectory edges>", &checks);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn unknown_modes_and_malformed_trajectories_trap() {
    let t = one_call("f", "{}");
    let src = format!(
        "rubric t.trajectory @ 0.0.0\n\
         criterion mode \"mode\" check trajectory_match({t}, {t}, \"loose\")\n\
         criterion args \"args\" check trajectory_match({t}, {t}, \"strict\", \"fuzzy\")\n\
         criterion shape \"shape\" check called(json(\"42\"), \"f\")\n\
         score = fraction(all)\n"
    );
    let result = crate::common::evaluate_on_every_engine("<trajectory traps>", &src);
    for (name, code) in [
        ("mode", "rubric::trap::invalid_argument"),
        ("args", "rubric::trap::invalid_argument"),
        ("shape", "rubric::trap::type"),
    ] {
        let r = result.criterion(name).unwrap();
        assert_eq!(r.status, Status::Unscored, "{name}");
        let reason = r.reason.clone().unwrap_or_default();
        assert!(reason.starts_with(code), "{name}: {reason}");
    }
}
