//! `rubric import ifeval`: IFEval's `input_data.jsonl` (`key`, `prompt`, `instruction_id_list`,
//! `kwargs`) joined with a responses file (`--responses`: `{prompt, response}` lines, as IFEval
//! publishes them) by prompt, as rows of `examples/ifeval/main.rubric`, which this importer
//! writes out as the rubric: `strict[k]` and `loose[k]` per instruction, decided by `std.ifeval`
//! as the reference implementation decides them; the score is prompt-level strict accuracy.

use super::{jsonl, ImportError, Imported};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;

const RUBRIC: &str = include_str!("../../../examples/ifeval/main.rubric");

pub fn import(text: &str, responses: Option<&[Json]>) -> Result<Imported, ImportError> {
    let responses = responses.ok_or_else(|| {
        ImportError::malformed(
            "IFEval inputs carry no responses: give them with `--responses RESPONSES.jsonl` ({prompt, response} lines)",
        )
    })?;
    let mut by_prompt: HashMap<&str, &str> = HashMap::new();
    for (i, r) in responses.iter().enumerate() {
        let prompt = r.get("prompt").and_then(Json::as_str);
        let response = r.get("response").and_then(Json::as_str);
        match (prompt, response) {
            (Some(p), Some(t)) => {
                by_prompt.insert(p, t);
            }
            _ => {
                return Err(ImportError::malformed(format!(
                    "response line {}: no string `prompt` and `response`",
                    i + 1
                )))
            }
        }
    }
    let mut rows = Vec::new();
    let mut missing = 0;
    for (i, d) in jsonl(text)?.iter().enumerate() {
        let at = format!("input line {}", i + 1);
        let prompt = d.get("prompt").and_then(Json::as_str).ok_or_else(|| format!("{at}: no `prompt`"))?;
        let ids = d
            .get("instruction_id_list")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("{at}: no `instruction_id_list`"))?;
        let kwargs = d.get("kwargs").and_then(Json::as_array).ok_or_else(|| format!("{at}: no `kwargs`"))?;
        if ids.len() != kwargs.len() {
            return Err(ImportError::malformed(format!(
                "{at}: {} instructions but {} kwargs",
                ids.len(),
                kwargs.len()
            )));
        }
        let Some(response) = by_prompt.get(prompt) else {
            missing += 1;
            continue;
        };
        let mut instructions = Vec::new();
        for (id, kw) in ids.iter().zip(kwargs) {
            let mut o: Map<String, Json> =
                kw.as_object().cloned().ok_or_else(|| format!("{at}: a `kwargs` entry is not an object"))?;
            o.insert("id".into(), id.clone());
            instructions.push(Json::Object(o));
        }
        let id = d.get("key").cloned().unwrap_or(json!(i + 1));
        rows.push(json!({"id": id, "prompt": prompt, "response": response, "instructions": instructions}));
    }
    let notes = if missing > 0 {
        vec![format!("{missing} prompts of the inputs have no response in `--responses` and were left out of the rows")]
    } else {
        Vec::new()
    };
    Ok(Imported { source: RUBRIC.to_string(), rows: Some(rows), notes })
}
