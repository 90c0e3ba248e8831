//! Group judging end to end: `examples/group-judging` (a judge that `rollouts response`, one
//! scoring and one ranking) asked over real HTTP of the mock judge with `--groups prompt_id`,
//! checked on the requests the mock received (one per group and judge, every member's response
//! in its own fence, the gated rollout shown to none), on the records (the same as the recorded
//! verdicts give, on every engine), on the rewards and advantages (recomputed here from the
//! mock's rules), without groups (unscored, no call) and through `rubric serve`.

use serde_json::{json, Value as Json};

use crate::cli::{describe, rubric};
use crate::common::{crate_root, mock_get, TempDir};
use crate::pairwise::{comparable, records};

/// The text between the markers of fence `name` in `user`, if it has one.
pub(crate) fn fenced<'a>(user: &'a str, name: &str) -> Option<&'a str> {
    let begin = user.find(&format!("<<<BEGIN {name} "))?;
    let body = begin + user[begin..].find(">>>\n")? + 4;
    let end = body + user[body..].find(&format!("<<<END {name} "))?;
    Some(user[body..end].trim_end_matches('\n'))
}

/// What the example's mock rules answer, worked out here from the rows: the scorer's value of
/// each rollout (causal words over the group's most), and the ranker's ((n - rank) / (n - 1),
/// ranked by the correct causes named, ties in rollout order).
fn expected_values(members: &[&str]) -> (Vec<f64>, Vec<f64>) {
    let count = |text: &str, words: &[&str], whole: bool| -> usize {
        let lower = text.to_lowercase();
        let tokens: Vec<String> =
            lower.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_string).collect();
        if whole {
            tokens.iter().filter(|t| words.contains(&t.as_str())).count()
        } else {
            words.iter().map(|w| lower.matches(w).count()).sum()
        }
    };
    let causal: Vec<usize> = members.iter().map(|m| count(m, &["because", "so", "since"], true)).collect();
    let most = *causal.iter().max().unwrap();
    let scores = causal.iter().map(|&c| if most == 0 { 0.0 } else { c as f64 / most as f64 }).collect();
    let correct: Vec<usize> =
        members.iter().map(|m| count(m, &["scatter", "tilt", "dense", "expands"], false)).collect();
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|a, b| correct[*b].cmp(&correct[*a]).then(a.cmp(b)));
    let n = members.len() as f64;
    let mut ranked = vec![0.0; members.len()];
    for (place, &i) in order.iter().enumerate() {
        ranked[i] = (n - (place as f64 + 1.0)) / (n - 1.0);
    }
    (scores, ranked)
}

#[test]
fn the_group_judging_example_asks_once_per_group_with_every_rollout_fenced() {
    let dir = TempDir::new("group-judging");
    let ex = crate_root().join("examples/group-judging");
    let (_mock, base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let (main, input) = (ex.join("main.rubric"), ex.join("inputs.jsonl"));
    let live = dir.path("live.jsonl");
    let run = |out: &std::path::Path, extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"run", &main, &"--input", &input, &"--output", &out, &"--no-progress"];
        args.extend_from_slice(extra);
        rubric(&args)
    };
    let o = run(&live, &[&"--groups", &"prompt_id", &"--judges", &judges, &"--no-cache"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));

    // One request per group and judge: 3 prompts x 2 judges, each showing every member that
    // reached the criterion (the sky group's empty rollout is stopped by the gate).
    let rows: Vec<Json> =
        std::fs::read_to_string(&input).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let bodies = mock_get(&base, "/requests");
    let bodies = bodies.as_array().unwrap();
    assert_eq!(bodies.len(), 6, "{bodies:?}");
    let mut seen: Vec<(String, String)> = Vec::new();
    for b in bodies {
        let user = b["messages"][1]["content"].as_str().unwrap();
        let prompt_id = ["sky", "seasons", "ice"]
            .into_iter()
            .find(|p| rows.iter().any(|r| r["prompt_id"] == *p && user.contains(r["prompt"].as_str().unwrap())))
            .unwrap_or_else(|| panic!("no prompt in {user}"));
        let members: Vec<&str> = rows
            .iter()
            .filter(|r| r["prompt_id"] == prompt_id && !r["response"].as_str().unwrap().is_empty())
            .map(|r| r["response"].as_str().unwrap())
            .collect();
        for (k, m) in members.iter().enumerate() {
            assert_eq!(fenced(user, &format!("rollout-{}", k + 1)), Some(*m), "rollout {} of {prompt_id}", k + 1);
        }
        assert_eq!(fenced(user, &format!("rollout-{}", members.len() + 1)), None, "no more rollouts: {user}");
        assert!(!user.contains("response ("), "the rollouts input is never shown by name: {user}");
        let props = &b["response_format"]["json_schema"]["schema"]["properties"];
        let kind = if props.get("ranking").is_some() { "ranking" } else { "scores" };
        assert_eq!(props[kind]["type"], "array", "{b}");
        seen.push((prompt_id.to_string(), kind.to_string()));
    }
    seen.sort();
    let want: Vec<(String, String)> = ["ice", "seasons", "sky"]
        .iter()
        .flat_map(|p| [(p.to_string(), "ranking".to_string()), (p.to_string(), "scores".to_string())])
        .collect();
    assert_eq!(seen, want);

    // Each member's values, rewards and advantages, worked out from the rules.
    let live = records(&live);
    for p in ["sky", "seasons", "ice"] {
        let group: Vec<(&Json, &Json)> = rows.iter().zip(&live).filter(|(r, _)| r["prompt_id"] == p).collect();
        let reached: Vec<&(&Json, &Json)> =
            group.iter().filter(|(r, _)| !r["response"].as_str().unwrap().is_empty()).collect();
        let texts: Vec<&str> = reached.iter().map(|(r, _)| r["response"].as_str().unwrap()).collect();
        let (scores, ranked) = expected_values(&texts);
        let mut rewards = Vec::new();
        for (r, rec) in &group {
            let text = r["response"].as_str().unwrap();
            let value =
                |id: &str| rec["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap()["value"].clone();
            let reward = match texts.iter().position(|t| *t == text) {
                Some(k) => {
                    assert_eq!(value("explains").as_f64(), Some(scores[k]), "{rec}");
                    assert!((value("correct").as_f64().unwrap() - ranked[k]).abs() < 1e-12, "{rec}");
                    let concise = f64::from(u8::from(text.split_whitespace().count() <= 40));
                    (2.0 * scores[k] + 2.0 * ranked[k] + concise) / 5.0
                }
                None => 0.0,
            };
            assert!((rec["reward"].as_f64().unwrap() - reward).abs() < 1e-12, "{rec}");
            rewards.push(reward);
        }
        // `advantage zscore` with `std population`.
        let n = rewards.len() as f64;
        let mean = rewards.iter().sum::<f64>() / n;
        let std = (rewards.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
        for ((_, rec), r) in group.iter().zip(&rewards) {
            let want = (r - mean) / (std + 1e-6);
            assert!((rec["advantage"].as_f64().unwrap() - want).abs() < 1e-9, "{rec}: want {want}");
        }
    }

    // `rubric plan --groups` plans what the run sent: one request per group and judge.
    let plan = |extra: &[&dyn AsRef<std::ffi::OsStr>]| -> Json {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"plan", &main, &"--input", &input, &"--judges", &judges, &"--no-cache", &"--format", &"json"];
        args.extend_from_slice(extra);
        let o = rubric(&args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let planned = plan(&[&"--groups", &"prompt_id"]);
    assert_eq!((&planned["plan"]["planned"], &planned["criteria_asked"]), (&json!(6), &json!(22)), "{planned}");
    assert_eq!(plan(&[])["plan"]["planned"], json!(0), "without groups a group judge is asked nothing");

    // The live records are what the recorded verdicts give, on every engine.
    for engine in ["interp", "wasm", "jit"] {
        let out = dir.path(&format!("{engine}.jsonl"));
        let verdicts = ex.join("verdicts.jsonl");
        let o = run(&out, &[&"--groups", &"prompt_id", &"--verdicts", &verdicts, &"--engine", &engine]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", describe(&o));
        assert_eq!(records(&out), live, "{engine}");
    }

    // Without groups, a group judge has no rollouts to show: its criteria are unscored with the
    // reason, and nothing is asked.
    let out = dir.path("ungrouped.jsonl");
    let o = run(&out, &[&"--judges", &judges, &"--no-cache", &"--allow-errors"]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    assert_eq!(mock_get(&base, "/requests").as_array().unwrap().len(), 6, "no call without groups");
    for rec in records(&out).iter().filter(|r| r["gates"][0]["passed"] == true) {
        for c in rec["criteria"].as_array().unwrap().iter().filter(|c| c["id"] != "concise") {
            assert!(c["reason"].as_str().unwrap().starts_with("judge_group: "), "{c}");
        }
    }

    // `rubric serve` with the same rows and group field: the records `rubric run` wrote, and one
    // call per group and judge again (the server has no cache of the run's).
    let server = crate::serve::Server::start(&[&main, &"--judges", &judges, &"--no-cache"], &[]);
    let (status, answer) = server.score(&json!({ "rows": rows, "groups": "prompt_id" }));
    assert_eq!(status, 200, "{answer}");
    let served: Vec<Json> = answer["results"].as_array().unwrap().iter().cloned().map(comparable).collect();
    assert_eq!(served, live);
    assert_eq!(mock_get(&base, "/requests").as_array().unwrap().len(), 12);
}

/// A reply that does not answer every rollout (a wrong length, a ranking that repeats one)
/// leaves the criterion unscored for every member, with the reason.
#[test]
fn a_group_reply_that_does_not_fit_the_group_is_unscored_for_every_member() {
    let dir = TempDir::new("group-judging-bad");
    let ex = crate_root().join("examples/group-judging");
    let rules = dir.file(
        "rules.toml",
        "[[rule]]\ncriterion = \"(?i)explains\"\nsamples = [[1, 0]]\n\n\
         [[rule]]\ncriterion = \"(?i)correct\"\nsamples = [[1, 1, 2]]\n",
    );
    let (_mock, _base, judges) = crate::common::mock_judge(&dir, &rules, "");
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &ex.join("main.rubric"),
        &"--input",
        &ex.join("inputs.jsonl"),
        &"--output",
        &out,
        &"--groups",
        &"prompt_id",
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
        &"--allow-errors",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let recs = records(&out);
    let judged: Vec<&Json> = recs.iter().filter(|r| r["gates"][0]["passed"] == true).collect();
    assert_eq!(judged.len(), 11);
    for rec in judged {
        let reason = |id: &str| {
            let c = rec["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
            assert_eq!(c["status"], "unscored", "{c}");
            c["reason"].as_str().unwrap().to_string()
        };
        assert!(reason("explains").starts_with("judge_schema: `scores` of the reply is [1,0], not a list of"), "{rec}");
        assert!(reason("correct").starts_with("judge_schema: `ranking` of the reply is [1,1,2], not the"), "{rec}");
        assert!(rec["score"].is_null(), "{rec}");
    }
}

/// A group that straddles the batch's chunk boundary (512 rows) is asked whole: 175 groups of 3
/// rows, the 171st holding rows 510 to 512; one request per group and judge, each with the
/// group's 3 rollouts.
#[test]
fn a_group_across_the_chunk_boundary_is_asked_whole() {
    let dir = TempDir::new("group-judging-chunks");
    let ex = crate_root().join("examples/group-judging");
    let (_mock, base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let rows: String = (0..175 * 3)
        .map(|i| {
            let g = i / 3;
            json!({"id": format!("r{i}"), "prompt_id": format!("p{g}"), "prompt": format!("Question {g}?"),
                   "response": format!("Answer {i}, because it is so.")})
            .to_string()
                + "\n"
        })
        .collect();
    let input = dir.file("rows.jsonl", &rows);
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &ex.join("main.rubric"),
        &"--input",
        &input,
        &"--output",
        &out,
        &"--groups",
        &"prompt_id",
        &"--judges",
        &judges,
        &"--no-cache",
        &"--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let bodies = mock_get(&base, "/requests");
    let bodies = bodies.as_array().unwrap();
    assert_eq!(bodies.len(), 175 * 2);
    for b in bodies {
        let user = b["messages"][1]["content"].as_str().unwrap();
        assert!(fenced(user, "rollout-3").is_some() && fenced(user, "rollout-4").is_none(), "{user}");
    }
    let straddling =
        bodies.iter().filter(|b| b["messages"][1]["content"].as_str().unwrap().contains("Question 170?")).count();
    assert_eq!(straddling, 2, "the group of rows 510 to 512: one request per judge");
}
