//! `rubric init NAME`: a new rubric directory that passes `rubric test NAME` as it is: a
//! `main.rubric` with deterministic checks, a judged criterion and an example; rows; recorded
//! verdicts for the judged criterion; the expected results; a `judges.toml` for the mock judge;
//! and a README with the commands to run next.

use std::path::Path;
use std::process::ExitCode;

/// The rubric's name in its header: the directory's name, lowercased, with every character that
/// cannot be in a name replaced by `_`, and a leading `r_` when it does not start with a letter.
fn rubric_name(dir: &Path) -> String {
    let base = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut name: String =
        base.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name = format!("r_{name}");
    }
    name
}

const RUBRIC: &str = r#"rubric NAME.main @ 0.1.0 "What a good answer to a support question does"

// A row: the user's question and the response to grade (see inputs.jsonl).
input question: Text
input response: Text

// A judge for what no check can decide. Without an endpoint its verdicts come from
// verdicts.jsonl; `judges.toml` binds it to the mock judge (`rubric mock-judge`).
judge grader {
  model "gpt-4.1-mini"
  temperature 0
  max_tokens 200
  sees question, response
}

criterion answers "Answers the question that was asked" points 3 by grader
criterion polite "Thanks the user or says please" points 1 check contains_ci(response, "thank") or contains_ci(response, "please")
criterion concise "Is at most 80 words" points 1 check word_count(response) <= 80

// Saying nothing is not an answer, whatever the judge thinks.
gate empty: word_count(response) > 0 else score 0 reason "empty response"

score = points_ratio(all)

example "a polite, on-topic answer earns every point" {
  question "How do I reset my password?"
  response "Thanks for asking! Open Settings, choose Security, then Reset password."
  judge grader says answers = met
  expect score 1
}

example "an empty response is stopped by the gate" {
  question "How do I reset my password?"
  response ""
  expect score 0
  expect failure "empty response"
}
"#;

const INPUTS: &str = r#"{"id": "reset", "question": "How do I reset my password?", "response": "Thanks for asking! Open Settings, choose Security, then Reset password."}
{"id": "refund", "question": "Can I get a refund?", "response": "Refunds are possible within 30 days: write to billing with your order number."}
{"id": "off-topic", "question": "Where is my invoice?", "response": "Please note that our office is closed on Sundays."}
"#;

const VERDICTS: &str = r#"{"row": "reset", "verdicts": {"answers": "met"}}
{"row": "refund", "verdicts": {"answers": "met"}}
{"row": "off-topic", "verdicts": {"answers": "unmet"}}
"#;

// reset: 3 + 1 + 1 of 5; refund: 3 + 0 + 1 of 5; off-topic: 0 + 1 + 1 of 5.
const EXPECTED: &str = r#"{"row": 0, "id": "reset", "score": 1, "status": "scored"}
{"row": 1, "id": "refund", "score": 0.8, "status": "scored"}
{"row": 2, "id": "off-topic", "score": 0.4, "status": "scored"}
"#;

const JUDGES: &str = r#"# Binds the judge to the mock judge started with
#   rubric mock-judge --rules mock-rules.toml --addr 127.0.0.1:8765
# For a real endpoint, see docs/judges.md ("judges.toml") and docs/cost.md (prices).
default = "mock"

[endpoints.mock]
base_url = "http://127.0.0.1:8765/v1"

[prices."gpt-4.1-mini"]
input = 0.40
cached_input = 0.10
output = 1.60
"#;

const MOCK_RULES: &str = r#"# How the mock judge answers: a response that mentions what the question asks about is met.
model = "mock-grader-1"

[default]
verdict = "unmet"

[[rule]]
criterion = "(?i)answers the question"
prompt = "(?s)(password.*Settings|refund.*Refunds)"
verdict = "met"
"#;

const README: &str = r#"# NAME

A rubric made by `rubric init`. Every file here is plain text:

- `main.rubric`: the rubric (inputs, a judge, criteria, a gate, the score, examples);
- `inputs.jsonl`: rows to score; `verdicts.jsonl`: the judge's verdicts for them, recorded;
- `expected.jsonl`: what scoring the rows must give (a subset of each record);
- `judges.toml`, `mock-rules.toml`: the judge bound to `rubric mock-judge`, priced.

Check it, test it, score it:

```
rubric check DIR/main.rubric
rubric test DIR
rubric run DIR/main.rubric --input DIR/inputs.jsonl --verdicts DIR/verdicts.jsonl --output scores.jsonl
```

With a judge instead of recorded verdicts (no API key needed):

```
rubric mock-judge --rules DIR/mock-rules.toml --addr 127.0.0.1:8765 &
rubric plan DIR/main.rubric --input DIR/inputs.jsonl --judges DIR/judges.toml
rubric run DIR/main.rubric --input DIR/inputs.jsonl --judges DIR/judges.toml --output scores.jsonl
```

Change `main.rubric`, then `rubric test DIR` again: its examples and `expected.jsonl` say
whether the rubric still scores as you meant.
"#;

pub fn run(dir: &Path) -> ExitCode {
    if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
        eprintln!(
            "error: `{}` exists and is not empty; `rubric init` writes only into a new or empty directory",
            dir.display()
        );
        return ExitCode::from(2);
    }
    let name = rubric_name(dir);
    let shown = dir.display().to_string();
    let files = [
        ("main.rubric", RUBRIC.replace("NAME", &name)),
        ("inputs.jsonl", INPUTS.to_string()),
        ("verdicts.jsonl", VERDICTS.to_string()),
        ("expected.jsonl", EXPECTED.to_string()),
        ("judges.toml", JUDGES.to_string()),
        ("mock-rules.toml", MOCK_RULES.to_string()),
        ("README.md", README.replace("NAME", &name).replace("DIR", &shown)),
    ];
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("error: {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    for (file, text) in files {
        if let Err(e) = std::fs::write(dir.join(file), text) {
            eprintln!("error: {}: {e}", dir.join(file).display());
            return ExitCode::from(2);
        }
    }
    outln!("created {shown}/ (main.rubric, inputs.jsonl, verdicts.jsonl, expected.jsonl, judges.toml, mock-rules.toml, README.md)");
    outln!("next: rubric test {shown}");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_from_the_directory() {
        assert_eq!(rubric_name(Path::new("evals/My-Eval")), "my_eval");
        assert_eq!(rubric_name(Path::new("2026 support")), "r_2026_support");
    }
}
