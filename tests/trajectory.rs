//! `trajectory_match` against agentevals' own published test cases
//! (`tests/fixtures/trajectory/agentevals.jsonl`, transcribed from langchain-ai/agentevals'
//! `js/src/trajectory/tests/trajectory.test.ts`; see the README there): every case gives the
//! score agentevals' test expects. Then the tool-call readers (`tool_calls`, `called`,
//! `call_count`, `called_in_order`) and the edges of matching: Python's equality, the argument
//! order of the subset and superset argument modes, the input forms, unknown modes. On every
//! engine, with identical results.

use rubric::engine::Status;
use serde_json::{json, Value as Json};

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

/// Per-tool argument rules (`overrides`, agentevals' `tool_args_match_overrides` without
/// functions): agentevals' two published cases of key-path overrides
/// (`python/tests/test_trajectory_async.py`, `test_trajectory_match_with_nested_field_overrides`
/// and `..._requires_key`), then mode overrides, rules read as false, and bad rules, on every
/// engine.
#[test]
fn argument_overrides_follow_agentevals() {
    let nested_out = r#"json("""[{"role": "user", "content": "Hi there, what time is my flight?"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "lookup_policy", "arguments": "{\"query\": \"flight upgrades\", \"time\": {\"start\": \"2025-03-22T18:34:40Z\", \"end\": \"2025-03-22T20:34:40Z\"}}"}}]}, {"role": "assistant", "content": "No upgrades available."}]""")"#;
    let nested_ref = r#"json("""[{"role": "user", "content": "Hi there, what time is my flight?"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "lookup_policy", "arguments": "{\"query\": \"foo\", \"time\": {\"start\": \"2025-03-22T18:34:40Z\", \"end\": \"baz\"}}"}}]}, {"role": "assistant", "content": "Upgrades possible."}]""")"#;
    let end_only = r#"json("""[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "lookup_policy", "arguments": "{\"time\": {\"end\": \"2025-03-22T20:34:40Z\"}}"}}]}]""")"#;
    let keys = r#"overrides: json("""{"lookup_policy": ["time.start"]}""")"#;
    let (a1, a2) = (one_call("f", r#"{"a": 1, "b": 2}"#), one_call("f", r#"{"a": 1, "b": 3}"#));
    let checks: Vec<(String, String)> = [
        (
            "agentevals: nested field override",
            format!("trajectory_match({nested_out}, {nested_ref}, \"strict\", {keys})"),
        ),
        (
            "agentevals: override requires the key",
            format!("not trajectory_match({end_only}, {end_only}, \"strict\", {keys})"),
        ),
        ("without the override the args differ", format!("not trajectory_match({nested_out}, {nested_ref})")),
        ("key list", format!(r#"trajectory_match({a1}, {a2}, overrides: json("""{{"f": ["a"]}}"""))"#)),
        (
            "key list, a differing key",
            format!(r#"not trajectory_match({a1}, {a2}, overrides: json("""{{"f": ["a", "b"]}}"""))"#),
        ),
        (
            "mode override",
            format!(r#"trajectory_match({a1}, {a2}, "unordered", "exact", json("""{{"f": "ignore"}}"""))"#),
        ),
        (
            "override of another tool",
            format!(r#"not trajectory_match({a1}, {a2}, overrides: json("""{{"g": "ignore"}}"""))"#),
        ),
        (
            "a rule read as false keeps the default",
            format!(r#"not trajectory_match({a1}, {a2}, overrides: json("""{{"f": []}}"""))"#),
        ),
        (
            "default mode under an override elsewhere",
            format!(r#"trajectory_match({a1}, {a1}, overrides: json("""{{"g": ["x"]}}"""))"#),
        ),
    ]
    .into_iter()
    .map(|(n, e)| (n.to_string(), e))
    .collect();
    let failed = failing("overrides", &checks);
    assert!(failed.is_empty(), "{failed:#?}");
    let t = one_call("f", "{}");
    let src = format!(
        "rubric t.overrides @ 0.0.0\n\
         criterion mode \"mode\" check trajectory_match({t}, {t}, overrides: json(\"\"\"{{\"f\": \"fuzzy\"}}\"\"\"))\n\
         criterion kind \"kind\" check trajectory_match({t}, {t}, overrides: json(\"\"\"{{\"f\": 3}}\"\"\"))\n\
         criterion shape \"shape\" check trajectory_match({t}, {t}, overrides: json(\"[1]\"))\n\
         score = fraction(all)\n"
    );
    let result = crate::common::evaluate_on_every_engine("<override traps>", &src);
    for name in ["mode", "kind", "shape"] {
        let r = result.criterion(name).unwrap();
        let reason = r.reason.clone().unwrap_or_default();
        assert!(
            r.status == Status::Unscored && reason.starts_with("rubric::trap::invalid_argument"),
            "{name}: {reason}"
        );
    }
}

// ---------------------------------------------------------------- the `Trajectory` type

use crate::cli::{describe, rubric};
use crate::common::{crate_root, json_lines, mock_judge, TempDir};
use crate::group_judging::fenced;
use crate::pairwise::{comparable, records};

const ENGINES: [&str; 3] = ["interp", "wasm", "jit"];

/// A row's `Trajectory` input is read into its task, turns, steps (calls with their results)
/// and answer, from the OpenAI form, the LangChain form in a `messages` wrapper and content
/// parts; a row whose messages are not in any form is an error record and the others go on.
/// Identical on every engine.
#[test]
fn a_trajectory_input_reads_task_steps_calls_results_and_answer() {
    let dir = TempDir::new("trajectory-bind");
    let src = dir.file(
        "main.rubric",
        r#"rubric t.bind @ 1.0.0
input run: Trajectory
criterion task "task" check run.task == "Weather in SF?"
criterion steps "two steps" check len(run.steps) == 2 and run.steps[1].index == 1
criterion call "first call" check run.steps[0].calls[0].name == "get_weather" and json_text(json_get(run.steps[0].calls[0].arguments, "city")) == "SF"
criterion result "its result" check run.steps[0].calls[0].result == "18C"
criterion unanswered "an unanswered call" check run.steps[1].calls[0].result == null
criterion answer "the answer" check run.answer == "It is 18C."
criterion turns "every message a turn" check turn_count(run.messages) == 4 and last_user(run.messages) == "Weather in SF?"
criterion overload "the intrinsics take it" check called_in_order(run, ["get_weather", "log"]) and call_count(run, "log") == 1
score = fraction(all)
"#,
    );
    let openai = json!([
        {"role": "user", "content": "Weather in SF?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"SF\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
        {"role": "assistant", "content": "It is 18C.", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "log", "arguments": "{}"}}]}
    ]);
    let langchain = json!({"messages": [
        {"type": "human", "content": [{"type": "text", "text": "Weather in SF?"}]},
        {"type": "ai", "content": "", "tool_calls": [{"id": "c1", "name": "get_weather", "args": {"city": "SF"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "18C"}]},
        {"role": "assistant", "content": "It is 18C.", "tool_calls": [{"id": "c2", "name": "log", "args": {}}]}
    ]});
    let rows = [
        json!({"id": "openai", "run": openai}),
        json!({"id": "langchain", "run": langchain}),
        json!({"id": "broken", "run": [{"content": "no role"}]}),
        json!({"id": "after", "run": openai}),
    ];
    let input = dir.file("rows.jsonl", &rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    let mut outs = Vec::new();
    for engine in ENGINES {
        let out = dir.path(&format!("{engine}.jsonl"));
        let o = rubric(&[&"run", &src, &"--input", &input, &"--output", &out, &"--engine", &engine, &"--allow-errors"]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
        let recs = records_or_errors(&out);
        for r in [&recs[0], &recs[1], &recs[3]] {
            assert_eq!(r["score"], json!(1), "{engine}: {r}");
        }
        assert_eq!(recs[2]["error"]["code"], "rubric::row::type", "{engine}: {}", recs[2]);
        let message = recs[2]["error"]["message"].as_str().unwrap();
        assert!(message.contains("message 0") && message.contains("role"), "{message}");
        outs.push(recs);
    }
    assert!(outs.iter().all(|o| *o == outs[0]), "the engines disagree: {outs:?}");
}

/// Records without the engine, error records kept as they are.
fn records_or_errors(path: &std::path::Path) -> Vec<Json> {
    let text = std::fs::read_to_string(path).unwrap();
    json_lines(&text)
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("engine");
            if r.get("error").is_none() {
                r = comparable(r);
            }
            r
        })
        .collect()
}

/// `examples/agent-trajectory` over HTTP: one request per judged step, each showing the task,
/// the steps before and that step in fences of their own (checked on the recorded requests
/// against the rows), verdicts equal to the shipped recorded ones, `step` on each instance and
/// `step_rewards` on each record, identical on every engine.
#[test]
fn each_step_of_the_example_is_judged_with_that_step_fenced() {
    let ex = crate_root().join("examples/agent-trajectory");
    let dir = TempDir::new("trajectory-steps");
    let (_mock, _, judges) = mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let input = ex.join("inputs.jsonl");
    let rows = json_lines(&std::fs::read_to_string(&input).unwrap());
    // The recorded verdicts, no judge: what the shipped files say.
    let offline = dir.path("offline.jsonl");
    let o = rubric(&[
        &"run",
        &ex.join("main.rubric"),
        &"--input",
        &input,
        &"--verdicts",
        &ex.join("verdicts.jsonl"),
        &"--output",
        &offline,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let expected = records(&offline);
    let mut transcripts = Vec::new();
    for engine in ENGINES {
        let out = dir.path(&format!("{engine}.jsonl"));
        let transcript = dir.path(&format!("{engine}-transcript.jsonl"));
        let o = rubric(&[
            &"run",
            &ex.join("main.rubric"),
            &"--input",
            &input,
            &"--judges",
            &judges,
            &"--no-cache",
            &"--record",
            &transcript,
            &"--output",
            &out,
            &"--engine",
            &engine,
        ]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
        assert_eq!(records(&out), expected, "{engine}: the mock's verdicts differ from the shipped ones");
        transcripts.push(json_lines(&std::fs::read_to_string(&transcript).unwrap()));
    }
    let hashes = |t: &[Json]| {
        let mut h: Vec<String> = t.iter().map(|e| e["hash"].as_str().unwrap().to_string()).collect();
        h.sort();
        h
    };
    assert!(transcripts.iter().all(|t| hashes(t) == hashes(&transcripts[0])), "the engines asked different requests");
    // Records: each instance names its step; the rewards are per step.
    let by_id = |id: &str| expected.iter().find(|r| r["id"] == id).unwrap().clone();
    let twice = by_id("booked-twice");
    assert_eq!(twice["step_rewards"], json!([1, 1, 0, 1]), "{twice}");
    let c2 = twice["criteria"].as_array().unwrap().iter().find(|c| c["id"] == "step_ok[2]").unwrap();
    assert_eq!((c2["step"].clone(), c2["status"].clone()), (json!(2), json!("unmet")), "{c2}");
    assert_eq!(by_id("never-booked")["step_rewards"], json!([null, null]), "a gate stopped that row");
    // Requests: every step of every row the gate let through, once, fenced with its context.
    let judged: Vec<&Json> = rows.iter().filter(|r| r["id"] != "never-booked").collect();
    let mut wanted = 0;
    let users: Vec<String> =
        transcripts[0].iter().map(|e| e["request"]["messages"][1]["content"].as_str().unwrap().to_string()).collect();
    for row in judged {
        let steps = steps_of(&row["trajectory"]);
        for (k, step) in steps.iter().enumerate() {
            wanted += 1;
            let hits: Vec<&String> = users
                .iter()
                .filter(|u| fenced(u, "step").and_then(|s| serde_json::from_str::<Json>(s).ok()).as_ref() == Some(step))
                .filter(|u| {
                    fenced(u, "before").and_then(|s| serde_json::from_str::<Json>(s).ok()) == Some(json!(steps[..k]))
                })
                .collect();
            assert!(!hits.is_empty(), "no request shows step {k} of `{}` after its steps before", row["id"]);
            for u in hits {
                assert_eq!(fenced(u, "task"), Some("Book me a nonstop flight from Paris to Rome on 12 May."));
                assert_eq!(u.matches("<<<BEGIN step ").count(), 1, "one step per request: {u}");
            }
        }
    }
    // Identical steps of two rows (the same step after the same steps) are one request.
    let distinct: std::collections::BTreeSet<(Option<&str>, Option<&str>)> =
        users.iter().map(|u| (fenced(u, "step"), fenced(u, "before"))).collect();
    assert_eq!(users.len(), distinct.len(), "a step was asked twice");
    assert!(users.len() <= wanted && users.len() >= 10, "{} requests for {wanted} judged steps", users.len());
}

/// The steps of a trajectory as the judge is shown them, worked out here from the messages
/// (OpenAI or LangChain form): `{calls, content, index}`, each call `{arguments, id, name,
/// result}`.
fn steps_of(t: &Json) -> Vec<Json> {
    let messages = t.get("messages").unwrap_or(t).as_array().unwrap();
    let result = |id: &str| {
        messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map_or(Json::Null, |m| m["content"].clone())
    };
    let mut out = Vec::new();
    for m in messages.iter().filter(|m| m["role"] == "assistant" || m["type"] == "ai") {
        let calls: Vec<Json> = m["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let (name, args) = match c.get("function") {
                    Some(f) => (f["name"].clone(), serde_json::from_str(f["arguments"].as_str().unwrap()).unwrap()),
                    None => (c["name"].clone(), c["args"].clone()),
                };
                let id = c["id"].as_str().unwrap();
                json!({"arguments": args, "id": id, "name": name, "result": result(id)})
            })
            .collect();
        let content = m["content"].as_str().unwrap_or_default();
        out.push(json!({"calls": calls, "content": content, "index": out.len()}));
    }
    out
}

/// `--groups`: each member's `step_advantages` normalise every step reward of the group by
/// their mean and (sample) standard deviation, and sum a step's with the later ones'.
#[test]
fn step_advantages_credit_each_step_within_the_group() {
    let ex = crate_root().join("examples/agent-trajectory");
    let dir = TempDir::new("trajectory-credit");
    let rows: Vec<Json> = json_lines(&std::fs::read_to_string(ex.join("inputs.jsonl")).unwrap())
        .into_iter()
        .filter(|r| r["id"] == "as-reference" || r["id"] == "booked-twice")
        .map(|mut r| {
            r["group"] = json!("g1");
            r
        })
        .collect();
    let input = dir.file("rows.jsonl", &rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &ex.join("main.rubric"),
        &"--input",
        &input,
        &"--verdicts",
        &ex.join("verdicts.jsonl"),
        &"--output",
        &out,
        &"--groups",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let recs = json_lines(&std::fs::read_to_string(&out).unwrap());
    // Step rewards [1, 1, 1] and [1, 1, 0, 1]: mean 6/7, sample std √(1/7); a met step is
    // worth (1 − 6/7)/√(1/7) = 0.37796, the unmet one −2.26779.
    let (up, down) =
        ((1.0 - 6.0 / 7.0) / ((1.0f64 / 7.0).sqrt() + 1e-6), (0.0 - 6.0 / 7.0) / ((1.0f64 / 7.0).sqrt() + 1e-6));
    assert!((up - 0.377964).abs() < 1e-5 && (down + 2.267787).abs() < 1e-5, "{up} {down}");
    let want = [vec![3.0 * up, 2.0 * up, up], vec![2.0 * up + down + up, up + down + up, down + up, up]];
    for (r, want) in recs.iter().zip(want) {
        let got: Vec<f64> = r["step_advantages"].as_array().unwrap().iter().map(|a| a.as_f64().unwrap()).collect();
        assert_eq!(got.len(), want.len(), "{r}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-9, "{} step advantages {got:?}, want {want:?}", r["id"]);
        }
    }
    // The tensor numeric stage writes the same records.
    #[cfg(feature = "models")]
    {
        let tensor = dir.path("tensor.jsonl");
        let o = rubric(&[
            &"run",
            &ex.join("main.rubric"),
            &"--input",
            &input,
            &"--verdicts",
            &ex.join("verdicts.jsonl"),
            &"--output",
            &tensor,
            &"--groups",
            &"--numeric",
            &"tensor",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        assert_eq!(std::fs::read_to_string(&tensor).unwrap(), std::fs::read_to_string(&out).unwrap());
    }
}

/// A `shows` item that fails for one instance (a step without calls has no first call) leaves
/// that instance unscored with the reason; the other steps are asked and decided.
#[test]
fn a_shown_item_that_fails_leaves_only_its_instance_unscored() {
    let dir = TempDir::new("trajectory-shows-fail");
    let rules = dir.file("rules.toml", "[default]\nverdict = \"met\"\n");
    let (_mock, _, judges) = mock_judge(&dir, &rules, "");
    let src = dir.file(
        "main.rubric",
        r#"rubric t.shows @ 1.0.0
input run: Trajectory
judge grader {
  model "m"
}
criteria first_call each step in run.steps by grader shows call = step.calls[0] {
  criterion "The call fits the task"
}
score = mean(first_call, unscored: skip)
"#,
    );
    let row = json!({"run": [
        {"role": "user", "content": "Find it"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "search", "args": {}}]},
        {"role": "tool", "tool_call_id": "1", "content": "found"},
        {"role": "assistant", "content": "Here it is."}
    ]});
    let input = dir.file("rows.jsonl", &format!("{row}\n"));
    for engine in ENGINES {
        let out = dir.path(&format!("{engine}.jsonl"));
        let o = rubric(&[
            &"run",
            &src,
            &"--input",
            &input,
            &"--judges",
            &judges,
            &"--no-cache",
            &"--output",
            &out,
            &"--engine",
            &engine,
            &"--allow-errors",
        ]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
        let r = &json_lines(&std::fs::read_to_string(&out).unwrap())[0];
        let cs = r["criteria"].as_array().unwrap();
        assert_eq!(cs[0]["status"], "met", "{engine}: {r}");
        assert_eq!(cs[1]["status"], "unscored", "{engine}: {r}");
        let reason = cs[1]["reason"].as_str().unwrap();
        assert!(reason.starts_with("shows `call`:") && reason.contains("index"), "{engine}: {reason}");
        assert_eq!(r["step_rewards"], json!([1, null]), "{engine}: {r}");
    }
}
