//! A judge request in canonical form: the chat-completions body (model, sampling parameters,
//! rendered messages, response format) plus the reply schema and the sample index, serialised
//! to compact JSON in a fixed key order. Its SHA-256 (`sha256:…`) identifies the request for
//! deduplication, the cache and replay. The canonical form is rendered with stable fence tags
//! (`prompt::Fences::Stable`, derived from the fenced text), and the body sent with the run's
//! secret tags: the hash is the same on every run, and no secret enters it. Transport details
//! (URL, headers, the key) are not part of it either.

use super::config::{EndpointConfig, ResponseFormat};
use super::prompt::Rendered;
use crate::ir::JudgeDecl;
use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

/// Bumped whenever the canonical form changes (old cache entries then stop matching).
/// 2: the default prompt puts the note on fenced inputs before the criteria (what a row's calls
/// share comes first, for providers' prefix caches).
pub const REQUEST_VERSION: u32 = 2;

/// A request ready to send: its identity, its body, and how to read its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// `sha256:` of the canonical form (stable fence tags).
    pub hash: String,
    pub judge: String,
    /// The endpoint it goes to (`None` when replaying without a configuration).
    pub endpoint: Option<String>,
    /// Which of the judge's `samples` this is (0-based).
    pub sample: u32,
    /// The chat-completions body, as sent (the run's fence tags).
    pub body: Json,
    /// The rendering the body was built from (the run's fence tags).
    pub rendered: Rendered,
    /// The model directory that answers, for a local judge's request (never part of the hash:
    /// the body names the model and its fingerprint instead).
    pub local: Option<std::path::PathBuf>,
}

/// The wire settings an endpoint adds to a request.
#[derive(Debug, Clone, Copy)]
pub struct Wire {
    pub response_format: ResponseFormat,
    pub strict: bool,
    pub top_logprobs: u32,
}

impl Default for Wire {
    fn default() -> Wire {
        Wire { response_format: ResponseFormat::JsonSchema, strict: true, top_logprobs: 10 }
    }
}

impl Wire {
    pub fn of(e: &EndpointConfig) -> Wire {
        Wire { response_format: e.response_format, strict: e.strict, top_logprobs: e.top_logprobs }
    }
}

/// The chat-completions body for sample `sample` of `judge`. With a `seed`, sample `k` is sent
/// with seed `seed + k`, so that samples differ yet stay reproducible.
fn body(judge: &JudgeDecl, rendered: &Rendered, model: &str, sample: u32, wire: Wire) -> Json {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), serde_json::to_value(&rendered.messages).unwrap_or(Json::Null));
    if let Some(t) = judge.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = judge.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if let Some(m) = judge.max_tokens {
        body.insert("max_tokens".into(), json!(m));
    }
    if let Some(s) = judge.seed {
        body.insert("seed".into(), json!(s.wrapping_add(sample as u64)));
    }
    if let Some(e) = &judge.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(e));
    }
    match wire.response_format {
        ResponseFormat::JsonSchema => {
            body.insert(
                "response_format".into(),
                json!({
                    "type": "json_schema",
                    "json_schema": {"name": "rubric_reply", "strict": wire.strict, "schema": rendered.schema},
                }),
            );
        }
        ResponseFormat::JsonObject => {
            body.insert("response_format".into(), json!({"type": "json_object"}));
        }
        ResponseFormat::None => {}
    }
    if rendered.entries.iter().any(|e| e.logprob) {
        body.insert("logprobs".into(), json!(true));
        body.insert("top_logprobs".into(), json!(wire.top_logprobs));
    }
    Json::Object(body)
}

/// The hash of sample `sample` of `judge`'s request, from `canonical`: the call rendered with
/// `Fences::Stable`.
pub fn identity(judge: &JudgeDecl, canonical: &Rendered, model: &str, sample: u32, wire: Wire) -> String {
    request_hash(&body(judge, canonical, model, sample, wire), &canonical.schema, sample)
}

/// The request to send for sample `sample` of `judge`: the body of `sent` (the call rendered
/// with the run's secret fence tags) under `hash`, the [`identity`] of its canonical form.
pub fn prepare(
    judge: &JudgeDecl,
    sent: Rendered,
    hash: String,
    model: &str,
    sample: u32,
    endpoint: Option<&str>,
    wire: Wire,
) -> Prepared {
    let body = body(judge, &sent, model, sample, wire);
    Prepared {
        hash,
        judge: judge.name.clone(),
        endpoint: endpoint.map(str::to_string),
        sample,
        body,
        rendered: sent,
        local: None,
    }
}

/// A local judge's request body: the model `local:DIR`, the rendered messages, and the model
/// directory's fingerprint.
fn local_body(rendered: &Rendered, model: &str, fingerprint: &str) -> Json {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), serde_json::to_value(&rendered.messages).unwrap_or(Json::Null));
    body.insert("local".into(), json!({"fingerprint": fingerprint, "score": "p_yes_first_token"}));
    Json::Object(body)
}

/// The hash of a local judge's request (`local "DIR"`), from its canonical rendering.
pub fn identity_local(canonical: &Rendered, model: &str, fingerprint: &str) -> String {
    request_hash(&local_body(canonical, model, fingerprint), &canonical.schema, 0)
}

/// The request of a local judge: the model `local:DIR`, the rendered messages (`sent`, with
/// the run's fence tags), and the model directory's fingerprint
/// (`models::local_judge::fingerprint`), so that a cached reply is never taken for another
/// model's; under `hash`, its [`identity_local`]. One sample: the answer is deterministic.
/// Sampling settings do not apply.
pub fn prepare_local(
    judge: &JudgeDecl,
    sent: Rendered,
    hash: String,
    model: &str,
    fingerprint: &str,
    dir: std::path::PathBuf,
) -> Prepared {
    let body = local_body(&sent, model, fingerprint);
    Prepared { hash, judge: judge.name.clone(), endpoint: None, sample: 0, body, rendered: sent, local: Some(dir) }
}

/// The canonical bytes of a request: compact JSON, keys in a fixed order.
pub fn canonical_bytes(body: &Json, schema: &Json, sample: u32) -> Vec<u8> {
    let canonical = json!({"v": REQUEST_VERSION, "sample": sample, "schema": schema, "body": body});
    serde_json::to_vec(&canonical).unwrap_or_default()
}

pub fn request_hash(body: &Json, schema: &Json, sample: u32) -> String {
    let digest = Sha256::digest(canonical_bytes(body, schema, sample));
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
