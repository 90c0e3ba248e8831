//! The OpenAI Batch API as the way a round's requests reach an endpoint (`rubric run
//! --dispatch batch`): the requests no memory, cache or transcript answers are written as one
//! JSONL file (`{"custom_id": "sK:HASH", "method": "POST", "url": "/v1/chat/completions",
//! "body": ...}`, K the sample), uploaded (`POST /files`, purpose `batch`), submitted (`POST
//! /batches`), polled (`GET /batches/ID`) until the batch ends, and its output and error files
//! read back (`GET /files/ID/content`) and mapped to the requests by hash. A line that failed is
//! that request's `unscored` reason; a request the batch ended without is
//! `judge_batch_missing`. The batch and its requests are recorded in the judge cache, so a run
//! stopped while a batch is in progress (a `--deadline`, an interrupt) resumes polling it next
//! time instead of submitting its requests again.

use super::client::Endpoint;
use super::{Cache, Reply};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// One request of a batch.
#[derive(Debug, Clone)]
pub struct Line {
    pub hash: String,
    pub sample: u32,
    pub body: Json,
}

/// What a batch dispatch did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The reply to each request, or why it has none, by hash.
    pub replies: HashMap<String, Result<Reply, String>>,
    /// Batches submitted, and open batches of an earlier run polled again.
    pub submitted: u64,
    pub resumed: u64,
    /// Status polls made.
    pub polls: u64,
}

/// The largest batch file the API takes is 50,000 lines.
const MAX_LINES: usize = 50_000;
/// Batch files and their results are read up to this many bytes.
const MAX_FILE_BYTES: usize = 512 << 20;

fn custom_id(l: &Line) -> String {
    format!("s{}:{}", l.sample, l.hash)
}

fn field<'a>(j: &'a Json, k: &str) -> Option<&'a str> {
    j.get(k).and_then(Json::as_str)
}

/// Send `lines` to `ep` through its Batch API and wait (polling every `poll`) until each has a
/// reply or a reason, or `deadline` passes.
pub async fn dispatch(
    ep: &Endpoint,
    cache: Option<&Cache>,
    lines: Vec<Line>,
    poll: Duration,
    deadline: Option<Instant>,
) -> Outcome {
    let mut out = Outcome::default();
    let by_hash: HashMap<String, Line> = lines.iter().map(|l| (l.hash.clone(), l.clone())).collect();
    // Requests an open batch of an earlier run already holds are polled there.
    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut fresh = Vec::new();
    for l in lines {
        match cache.and_then(|c| c.open_batch(&ep.name, &l.hash).ok().flatten()) {
            Some(id) => open.entry(id).or_default().push(l.hash),
            None => fresh.push(l),
        }
    }
    out.resumed = open.len() as u64;
    for chunk in fresh.chunks(MAX_LINES) {
        match submit(ep, chunk, deadline).await {
            Ok(id) => {
                out.submitted += 1;
                let hashes: Vec<&str> = chunk.iter().map(|l| l.hash.as_str()).collect();
                if let Some(c) = cache {
                    let _ = c.record_batch(&id, &ep.name, &hashes);
                }
                open.insert(id, chunk.iter().map(|l| l.hash.clone()).collect());
            }
            Err(reason) => {
                for l in chunk {
                    out.replies.insert(l.hash.clone(), Err(reason.clone()));
                }
            }
        }
    }
    // Poll every open batch until it ends.
    while !open.is_empty() {
        let mut ended = Vec::new();
        for (id, hashes) in &open {
            out.polls += 1;
            let status = match ep.call(reqwest::Method::GET, &format!("batches/{id}"), None, 1 << 20, deadline).await {
                Ok(b) => serde_json::from_slice::<Json>(&b).unwrap_or(Json::Null),
                Err(reason) if reason.starts_with("judge_deadline") => break,
                // A poll that failed is tried again at the next round of polls.
                Err(_) => continue,
            };
            let state = field(&status, "status").unwrap_or("").to_string();
            if !matches!(state.as_str(), "completed" | "failed" | "expired" | "cancelled") {
                continue;
            }
            let mut got: HashMap<String, Result<Reply, String>> = HashMap::new();
            for key in ["output_file_id", "error_file_id"] {
                let Some(file) = field(&status, key) else { continue };
                match ep
                    .call(reqwest::Method::GET, &format!("files/{file}/content"), None, MAX_FILE_BYTES, deadline)
                    .await
                {
                    Ok(text) => read_results(ep, &text, &by_hash, &mut got),
                    Err(reason) => {
                        for h in hashes {
                            got.entry(h.clone()).or_insert_with(|| Err(reason.clone()));
                        }
                    }
                }
            }
            for h in hashes {
                let r = got.remove(h).unwrap_or_else(|| {
                    Err(format!(
                        "judge_batch_missing: batch `{id}` at endpoint `{}` ended `{state}` without a result for this request",
                        ep.name
                    ))
                });
                out.replies.insert(h.clone(), r);
            }
            if let Some(c) = cache {
                let _ = c.close_batch(id, &state);
            }
            ended.push(id.clone());
        }
        for id in ended {
            open.remove(&id);
        }
        if open.is_empty() {
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now + poll > d) {
            if let Some(d) = deadline {
                tokio::time::sleep(d.saturating_duration_since(now)).await;
            }
            for (id, hashes) in &open {
                for h in hashes {
                    out.replies.insert(
                        h.clone(),
                        Err(format!(
                            "judge_deadline: batch `{id}` at endpoint `{}` was still in progress at the run's deadline; \
                             a later run with the same cache polls it again instead of resubmitting",
                            ep.name
                        )),
                    );
                }
            }
            break;
        }
        tokio::time::sleep(poll).await;
    }
    out
}

/// Upload `lines` as a batch file and create the batch: its id.
async fn submit(ep: &Endpoint, lines: &[Line], deadline: Option<Instant>) -> Result<String, String> {
    let mut file = Vec::new();
    for l in lines {
        let line = json!({"custom_id": custom_id(l), "method": "POST", "url": "/v1/chat/completions", "body": l.body});
        file.extend(serde_json::to_vec(&line).unwrap_or_default());
        file.push(b'\n');
    }
    let boundary = format!("rubric-{:016x}", fastrand::u64(..));
    let mut form = Vec::new();
    form.extend(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n").as_bytes(),
    );
    form.extend(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"rubric-batch.jsonl\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    form.extend(&file);
    form.extend(format!("\r\n--{boundary}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={boundary}");
    let uploaded = ep.call(reqwest::Method::POST, "files", Some((form, ct)), 1 << 20, deadline).await?;
    let uploaded: Json = serde_json::from_slice(&uploaded).unwrap_or(Json::Null);
    let Some(file_id) = field(&uploaded, "id") else {
        return Err(format!("judge_bad_response: endpoint `{}` answered the file upload without an id", ep.name));
    };
    let create = json!({"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let body = serde_json::to_vec(&create).unwrap_or_default();
    let created =
        ep.call(reqwest::Method::POST, "batches", Some((body, "application/json".into())), 1 << 20, deadline).await?;
    let created: Json = serde_json::from_slice(&created).unwrap_or(Json::Null);
    field(&created, "id")
        .map(str::to_string)
        .ok_or_else(|| format!("judge_bad_response: endpoint `{}` created a batch without an id", ep.name))
}

/// The results of one output or error file, by request hash.
fn read_results(
    ep: &Endpoint,
    text: &[u8],
    lines: &HashMap<String, Line>,
    got: &mut HashMap<String, Result<Reply, String>>,
) {
    for raw in text.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
        let Ok(r) = serde_json::from_slice::<Json>(raw) else { continue };
        let Some(hash) = field(&r, "custom_id").and_then(|c| c.split_once(':')).map(|(_, h)| h.to_string()) else {
            continue;
        };
        let Some(line) = lines.get(&hash) else { continue };
        let sent_model = field(&line.body, "model").unwrap_or("");
        let result = match (r.get("response").filter(|x| !x.is_null()), r.get("error").filter(|x| !x.is_null())) {
            (_, Some(e)) => Err(format!(
                "judge_batch_error: endpoint `{}`: {}: {}",
                ep.name,
                field(e, "code").unwrap_or("error"),
                field(e, "message").unwrap_or("")
            )),
            (Some(resp), None) => {
                let code = resp.get("status_code").and_then(Json::as_u64).unwrap_or(0);
                let body = resp.get("body").cloned().unwrap_or(Json::Null);
                if code == 200 {
                    Reply::from_completion(&body, sent_model)
                } else {
                    let message = body.pointer("/error/message").and_then(Json::as_str).unwrap_or("");
                    Err(format!("judge_http_{code}: endpoint `{}` answered a batch line {code}: {message}", ep.name))
                }
            }
            (None, None) => {
                Err(format!("judge_batch_error: endpoint `{}` gave a result line with no response", ep.name))
            }
        };
        got.insert(hash, result.map_err(|e| ep.redact(&e)));
    }
}
