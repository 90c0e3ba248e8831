//! `rubric import healthbench`: HealthBench rows (JSONL, as simple-evals reads them: `prompt`, a
//! conversation; `rubrics`, items of `criterion`, signed `points` and `tags`; `example_tags`;
//! `prompt_id`; the graded reply as `completion` or `response`, or from `--responses`) become
//! rows of `examples/healthbench/main.rubric`, which this importer writes out as the rubric:
//! one judged criterion per rubric item, `score = points_ratio(items)` (simple-evals: Σ points of
//! the met items / Σ positive points, not clipped per row), the run's clipped means as `stat`s.

use super::{check_responses, jsonl, num_field, response_text, str_field, ImportError, Imported};
use serde_json::{json, Value as Json};

const RUBRIC: &str = include_str!("../../../examples/healthbench/main.rubric");

pub fn import(text: &str, responses: Option<&[Json]>) -> Result<Imported, ImportError> {
    let lines = jsonl(text)?;
    check_responses(responses, lines.len(), "row")?;
    let mut rows = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let at = format!("row {}", i + 1);
        let prompt = line.get("prompt").cloned().ok_or_else(|| format!("{at}: no `prompt`"))?;
        if !(prompt.is_array() || prompt.is_string()) {
            return Err(ImportError::malformed(format!("{at}: `prompt` is not a conversation")));
        }
        let response = match responses {
            Some(r) => response_text(&r[i], i)?,
            None => reply(line).ok_or_else(|| {
                ImportError::malformed(format!(
                    "{at}: no `completion` or `response` to grade: give the replies with `--responses`"
                ))
            })?,
        };
        let mut items = Vec::new();
        for (k, item) in line
            .get("rubrics")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("{at}: no `rubrics` list"))?
            .iter()
            .enumerate()
        {
            let at_item = format!("{at}, rubric item {}", k + 1);
            let (criterion, points) = (str_field(item, "criterion", &at_item)?, num_field(item, "points", &at_item)?);
            let tags = item.get("tags").cloned().unwrap_or(json!([]));
            items.push(json!({"criterion": criterion, "points": points, "tags": tags}));
        }
        let id = match line.get("prompt_id").or_else(|| line.get("id")) {
            Some(id @ (Json::String(_) | Json::Number(_))) => id.clone(),
            _ => json!(format!("row-{}", i + 1)),
        };
        let mut row = json!({
            "id": id,
            "prompt": prompt,
            "response": response,
            "rubrics": items,
            "example_tags": line.get("example_tags").cloned().unwrap_or(json!([])),
        });
        if let Some(c) = line.get("canary") {
            row["canary"] = c.clone();
        }
        rows.push(row);
    }
    Ok(Imported { source: RUBRIC.to_string(), rows: Some(rows), notes: Vec::new() })
}

/// The reply a row carries: a string, or a list of messages whose last one is the reply.
fn reply(line: &Json) -> Option<String> {
    match line.get("completion").or_else(|| line.get("response"))? {
        Json::String(s) => Some(s.clone()),
        Json::Array(turns) => turns.last()?.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}
