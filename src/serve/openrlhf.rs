//! OpenRLHF's remote reward model protocol beside `/v1/score`: `POST /v1/openrlhf` (optional
//! `?rubric=NAME`, as `/v1/score`'s `rubric` field) takes the body OpenRLHF posts to its
//! `--remote_rm_url`, `{"query": [...], "prompts": [...], "labels": [...]}`, where each query is
//! the prompt followed by the response as the trainer decoded them, and answers
//! `{"rewards": [...], "scores": [...], "extra_logs": {...}}`, one number per query.
//!
//! Row `i` the rubric scores is `{"prompt": prompts[i], "response": query[i] less the prompt
//! (the whole query when it does not start with the prompt), "query": query[i], "label":
//! labels[i]}`, and a label that is a JSON object adds its fields (they do not replace those
//! four). The reward is the record's reward (its score less the penalty), or its score without
//! a `reward` declaration. OpenRLHF takes numbers only: a row without one (unscored, or an
//! error record) is 0.0 there, with `extra_logs.unscored` (1.0 for such a row, else 0.0) so
//! that the trainer's logs count them, and the reason written to the server's log.

use super::{error, json_response, pick, score_rows, Shared};
use crate::runtime;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value as Json};

/// The body OpenRLHF posts.
#[derive(serde::Deserialize)]
struct RewardRequest {
    query: Vec<String>,
    #[serde(default)]
    prompts: Option<Vec<Json>>,
    #[serde(default)]
    labels: Option<Vec<Json>>,
}

/// The rubric named by the URL's `rubric=` parameter, percent-decoded.
fn rubric_param(query: Option<&str>) -> Option<String> {
    let value = query?.split('&').find_map(|kv| kv.strip_prefix("rubric="))?;
    let mut out = Vec::with_capacity(value.len());
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The rows OpenRLHF's request stands for (see the module's documentation).
fn rows_of(req: RewardRequest) -> Result<Vec<Json>, String> {
    let n = req.query.len();
    for (name, list) in [("prompts", &req.prompts), ("labels", &req.labels)] {
        if let Some(l) = list.as_ref().filter(|l| l.len() != n) {
            return Err(format!("`{name}` has {} entries for {n} queries: give one per query", l.len()));
        }
    }
    let mut prompts = req.prompts.map(Vec::into_iter);
    let mut labels = req.labels.map(Vec::into_iter);
    Ok(req
        .query
        .into_iter()
        .map(|query| {
            let prompt = prompts.as_mut().and_then(Iterator::next).unwrap_or(Json::Null);
            let label = labels.as_mut().and_then(Iterator::next).unwrap_or(Json::Null);
            let response = match prompt.as_str() {
                Some(p) if !p.is_empty() => query.strip_prefix(p).unwrap_or(&query).to_string(),
                _ => query.clone(),
            };
            let mut row = Map::new();
            if let Json::Object(fields) = &label {
                row.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            row.insert("prompt".into(), prompt);
            row.insert("response".into(), json!(response));
            row.insert("query".into(), json!(query));
            row.insert("label".into(), label);
            Json::Object(row)
        })
        .collect())
}

/// A record's reward as OpenRLHF takes it: the number, or why there is none.
fn reward_of(record: &Json) -> Result<f64, String> {
    if let Some(e) = record.get("error") {
        let code = e.get("code").and_then(Json::as_str).unwrap_or("error");
        let message = e.get("message").and_then(Json::as_str).unwrap_or("");
        return Err(format!("{code}: {message}"));
    }
    let value = if record.get("reward").is_some() { record.get("reward") } else { record.get("score") };
    value.and_then(Json::as_f64).ok_or_else(|| {
        let why = record.get("reward_reason").or_else(|| record.get("unscored_reason"));
        format!("unscored: {}", why.and_then(Json::as_str).unwrap_or("no score"))
    })
}

pub(super) async fn reward(State(state): State<Shared>, req: Request) -> Response {
    let name = rubric_param(req.uri().query());
    let body = match axum::body::to_bytes(req.into_body(), usize::MAX).await {
        Ok(b) => b,
        Err(e) => return super::body_refusal(e),
    };
    let bad = |message: String| error(StatusCode::BAD_REQUEST, "rubric::serve::bad_request", message);
    let parsed: RewardRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return bad(format!("the body is not an OpenRLHF reward request (`query`, `prompts`, `labels`): {e}"))
        }
    };
    let which = match pick(&state.rubrics, name.as_deref()) {
        Ok(i) => i,
        Err((status, code, message)) => return error(status, code, message),
    };
    let rows = match rows_of(parsed) {
        Ok(r) => r,
        Err(m) => return bad(m),
    };
    let policy = runtime::RowPolicy { deadline: super::row_deadline(state, None), timings: false };
    let records = match score_rows(state, which, rows, None, policy).await {
        Ok(r) => r,
        Err(refusal) => return refusal,
    };
    let mut rewards = Vec::with_capacity(records.len());
    let mut unscored = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        match reward_of(r) {
            Ok(x) => {
                rewards.push(x);
                unscored.push(0.0);
            }
            Err(why) => {
                eprintln!("serve: /v1/openrlhf: query {i} has no reward, given as 0.0: {why}");
                rewards.push(0.0);
                unscored.push(1.0);
            }
        }
    }
    json_response(&json!({ "rewards": rewards, "scores": rewards, "extra_logs": { "unscored": unscored } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_strip_the_prompt_and_merge_object_labels() {
        let req = RewardRequest {
            query: vec!["Q: 2+2? A: 4".into(), "other text".into()],
            prompts: Some(vec![json!("Q: 2+2? "), json!("Q: x")]),
            labels: Some(vec![json!({"answer": "4", "response": "ignored"}), json!("plain")]),
        };
        let rows = rows_of(req).unwrap();
        assert_eq!(rows[0]["response"], "A: 4");
        assert_eq!(rows[0]["answer"], "4");
        assert_eq!(rows[0]["label"]["answer"], "4");
        assert_eq!(rows[1]["response"], "other text", "a query without its prompt is the response");
        assert_eq!(rows[1]["label"], "plain");
        let short = RewardRequest { query: vec!["a".into()], prompts: Some(vec![]), labels: None };
        assert!(rows_of(short).unwrap_err().contains("`prompts` has 0 entries for 1 queries"));
    }

    #[test]
    fn the_rubric_parameter_is_percent_decoded() {
        assert_eq!(rubric_param(Some("rubric=ifeval%2Dstrict&x=1")).as_deref(), Some("ifeval-strict"));
        assert_eq!(rubric_param(Some("x=1")), None);
        assert_eq!(rubric_param(None), None);
        assert_eq!(rubric_param(Some("rubric=a+b%zz")).as_deref(), Some("a b%zz"));
    }

    #[test]
    fn rewards_come_from_the_reward_then_the_score() {
        assert_eq!(reward_of(&json!({"score": 0.5, "reward": 0.25})), Ok(0.25));
        assert_eq!(reward_of(&json!({"score": 0.5})), Ok(0.5));
        assert!(reward_of(&json!({"score": null, "unscored_reason": "timeout: x"})).unwrap_err().contains("timeout"));
        assert!(reward_of(&json!({"error": {"code": "rubric::row::missing_input", "message": "m"}}))
            .unwrap_err()
            .starts_with("rubric::row::missing_input"));
    }
}
