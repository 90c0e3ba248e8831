//! `rubric mock-judge`: a real HTTP server (hyper) on loopback that speaks the chat-completions
//! API — structured output and logprobs included — and answers by rules from a file instead of
//! a model. It is what the judge tests, demos and benchmarks run against.
//!
//! Rules (TOML, or JSON for a `.json` file):
//!
//! ```toml
//! latency_ms = 5                 # added to every reply
//! model = "mock-1"               # the model the replies name (default: the one asked for)
//! require_key_env = "MOCK_KEY"   # answer 401 unless the request carries this variable's value
//!
//! [prefix_cache]                 # prompt-prefix caching, reported as providers report it
//! min_tokens = 1024              # (`usage.prompt_tokens_details.cached_tokens`): a prompt of at
//! block_tokens = 128             # least min_tokens whose first k·block_tokens tokens (k·block_tokens
//! enabled = true                 # >= min_tokens) were seen before, for the same model, has them cached
//!
//! [default]                      # when no rule matches
//! verdict = "unmet"
//!
//! [[rule]]                       # the first rule whose regexes match decides
//! criterion = "(?i)emergency"    # regex on the criterion text (the entry schema's description)
//! prompt = "911"                 # regex on the rendered prompt (all messages)
//! verdict = "met"                # or level = 3, label = "warm", value = 0.7 (or an extracted value)
//! quote = "Call \\d+ now"        # evidence: the first match of this regex in the prompt
//! evidence = "..."               # or a literal quote
//! rationale = "..."
//! p_yes = 0.83                   # P(yes) at the answer token, under logprobs
//! samples = ["met", "unmet", "met"]  # the answer for sample k (header x-rubric-sample), cycling
//! model = "(?i)small"            # regex on the model the request asks for (a per-model personality)
//! image = "^sha256:3a7bd3e2"     # regex on the images the request shows (`image_url` parts): an
//!                                #   image in a data URI is named `sha256:HEX` of its decoded
//!                                #   bytes, one by URL by its URL; the rule matches when any does
//! tpr = 0.9                      # a noisy grader: the rule's verdict is the truth, answered met
//! tnr = 0.8                      #   with probability tpr when it is met and unmet with
//! seed = 7                       #   probability tnr when not (P(yes) drawn on the answer's side),
//!                                #   the same draw for the same request, sample and seed
//! first_bias = 0.3               # with this probability answer the first option the schema lists
//!                                #   (an ordinal or nominal judge's position bias; for a comparing
//!                                #   judge, "first": it prefers whichever answer is shown first)
//! prefer = "(?i)ibuprofen"       # a comparing judge: prefer the answer (fence `candidate-1` or
//!                                #   `candidate-2`) this regex matches in; "tie" when it matches
//!                                #   in both or neither
//! rank_by = "(?i)\\bbecause\\b"   # a group judge: each rollout (fence `rollout-K`) scores the number
//!                                #   of this regex's matches in it over the most any rollout has
//!                                #   (0 for all when none matches); a ranking orders them by it,
//!                                #   more first, ties in rollout order
//! confidence_right = [0.85, 1.0] # a noisy grader's P of the side it answers, drawn in this band
//! confidence_wrong = [0.5, 0.8]  #   when it is right / wrong (default [0.5, 1.0] for both)
//! reasoning_tokens = 300         # completion tokens spent thinking, added to the usage reported
//!
//! [[fault]]                      # injected before the rules; the first applicable one fires
//! kind = "status"                # timeout | status | malformed | bad_body | endless |
//!                                # schema_violation | wrong_evidence | no_logprobs | refusal |
//!                                # truncated (cut off: finish_reason "length") | no_usage
//! status = 429
//! retry_after_s = 1              # a Retry-After header; retry_after_ms sends retry-after-ms
//! delay_ms = 30000               # timeout: the stall; endless: the pause between 16 KiB chunks
//! times = 1                      # per distinct request (fence tags aside); absent = every time
//! samples = [1, 2]               # only these samples (header x-rubric-sample); absent = all
//! prompt = "..."                 # optional regexes, as for rules (`criterion`, `model` too)
//! ```
//!
//! Tokens are counted as the mock's own tokenizer would: a prompt (its messages' contents joined
//! by newlines; of a message in content parts, its text parts) of B bytes is B/4 + 1 tokens
//! (images are free); a prefix cache block is 4·block_tokens bytes.
//!
//! The Batch API: `POST /v1/files` (multipart, `purpose=batch`: a JSONL file of
//! `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}` lines), `POST
//! /v1/batches` (`input_file_id`, `endpoint`, `completion_window`), `GET /v1/batches/ID` and
//! `GET /v1/files/ID/content`. Each line is answered as the same body would be alone (rules
//! and faults alike; a line whose fault would stall is a failed line), the batch is
//! `in_progress` for `[batch] completion_delay_ms` (default 100) and then `completed`, with an
//! output file of the lines answered 200 and an error file of the others. A `custom_id` of the
//! form `sK:...` is sample K.
//!
//! `GET /stats` returns the request counters, `GET /requests` every chat body received,
//! `GET /v1/models` the model list.

use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// The rules file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockRules {
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub require_key_env: Option<String>,
    #[serde(default)]
    pub default: Rule,
    #[serde(default, rename = "rule")]
    pub rules: Vec<Rule>,
    #[serde(default, rename = "fault")]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub prefix_cache: PrefixCache,
    #[serde(default)]
    pub batch: BatchRules,
}

/// How the mock's Batch API behaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRules {
    /// How long a batch stays `in_progress` after it is created.
    #[serde(default = "default_batch_delay")]
    pub completion_delay_ms: u64,
}

impl Default for BatchRules {
    fn default() -> BatchRules {
        BatchRules { completion_delay_ms: default_batch_delay() }
    }
}

fn default_batch_delay() -> u64 {
    100
}

/// Prompt-prefix caching as providers do it: automatic, above a minimum prompt length, in
/// blocks, per model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixCache {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_min_tokens")]
    pub min_tokens: u64,
    #[serde(default = "default_block_tokens")]
    pub block_tokens: u64,
}

impl Default for PrefixCache {
    fn default() -> PrefixCache {
        PrefixCache { enabled: true, min_tokens: default_min_tokens(), block_tokens: default_block_tokens() }
    }
}

fn yes() -> bool {
    true
}
fn default_min_tokens() -> u64 {
    1024
}
fn default_block_tokens() -> u64 {
    128
}

/// The mock's token count of a prompt of `bytes` bytes.
pub fn mock_tokens(bytes: usize) -> u64 {
    bytes as u64 / 4 + 1
}

/// How to answer the criteria it matches.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub criterion: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub verdict: Option<String>,
    #[serde(default)]
    pub level: Option<f64>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub value: Option<Json>,
    #[serde(default)]
    pub p_yes: Option<f64>,
    #[serde(default)]
    pub evidence: Option<String>,
    #[serde(default)]
    pub quote: Option<String>,
    #[serde(default)]
    pub rationale: Option<String>,
    #[serde(default)]
    pub samples: Option<Vec<Json>>,
    /// A regex on the model the request asks for.
    #[serde(default)]
    pub model: Option<String>,
    /// A noisy grader: P(answer met | the rule says met).
    #[serde(default)]
    pub tpr: Option<f64>,
    /// A noisy grader: P(answer unmet | the rule says unmet).
    #[serde(default)]
    pub tnr: Option<f64>,
    /// The noisy grader's seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// P(answer the first option the schema lists) for an answer among options.
    #[serde(default)]
    pub first_bias: Option<f64>,
    /// A noisy grader's confidence (P of the side it answers) when it is right, drawn in this band.
    #[serde(default)]
    pub confidence_right: Option<[f64; 2]>,
    /// ... and when it is wrong.
    #[serde(default)]
    pub confidence_wrong: Option<[f64; 2]>,
    /// Completion tokens the reply reports beyond its content (a reasoning model's thinking).
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    /// A comparing judge's rule: the answer this regex matches in is preferred.
    #[serde(default)]
    pub prefer: Option<String>,
    /// A group judge's rule: rollouts score (and rank) by this regex's matches in them.
    #[serde(default)]
    pub rank_by: Option<String>,
    /// A regex on the images the request shows (`sha256:HEX` of a data URI's bytes, or the URL).
    #[serde(default)]
    pub image: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Stall for `delay_ms` (default 30 s) before answering.
    Timeout,
    /// Answer `status` (default 500), with `Retry-After` / `retry-after-ms` when given.
    Status,
    /// A reply whose content is not JSON.
    Malformed,
    /// A 200 response whose body is not JSON.
    BadBody,
    /// A 200 response whose body never ends: a completion whose content is never closed,
    /// streamed in 16 KiB chunks, `delay_ms` apart (default 0: as fast as the client reads).
    Endless,
    /// JSON content whose answers break the schema.
    SchemaViolation,
    /// Evidence that does not occur in the prompt.
    WrongEvidence,
    /// No `logprobs` even when asked for.
    NoLogprobs,
    /// A refusal instead of content.
    Refusal,
    /// The reply cut off by the token limit: half its content, `finish_reason: "length"`.
    Truncated,
    /// A completion without `usage`.
    NoUsage,
}

/// An injected fault.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub kind: FaultKind,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub criterion: Option<String>,
    /// A regex on the model the request asks for.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub retry_after_s: Option<u64>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// How many times each distinct request gets the fault (its body, fence tags left out:
    /// they differ from run to run); absent = always.
    #[serde(default)]
    pub times: Option<u32>,
    /// The samples it applies to (the `x-rubric-sample` header); absent = every sample.
    #[serde(default)]
    pub samples: Option<Vec<usize>>,
}

impl Fault {
    pub fn new(kind: FaultKind) -> Fault {
        Fault {
            kind,
            prompt: None,
            criterion: None,
            model: None,
            status: None,
            retry_after_s: None,
            retry_after_ms: None,
            delay_ms: None,
            times: None,
            samples: None,
        }
    }
}

impl MockRules {
    pub fn parse_toml(text: &str) -> Result<MockRules, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    pub fn load(path: &Path) -> Result<MockRules, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let parsed = if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_str(&text).map_err(|e| e.to_string())
        } else {
            MockRules::parse_toml(&text)
        };
        parsed.map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn regex(what: &str, r: &Option<String>) -> Result<Option<Regex>, String> {
    r.as_deref().map(|s| Regex::new(s).map_err(|e| format!("{what}: {e}"))).transpose()
}

struct Matcher {
    rule: Rule,
    criterion: Option<Regex>,
    prompt: Option<Regex>,
    quote: Option<Regex>,
    model: Option<Regex>,
    prefer: Option<Regex>,
    rank_by: Option<Regex>,
    image: Option<Regex>,
}

impl Matcher {
    fn new(rule: Rule) -> Result<Matcher, String> {
        for (what, p) in [("tpr", rule.tpr), ("tnr", rule.tnr), ("first_bias", rule.first_bias)] {
            if p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
                return Err(format!("rule {what}: a probability in [0, 1], found {}", p.unwrap_or_default()));
            }
        }
        for (what, band) in [("confidence_right", rule.confidence_right), ("confidence_wrong", rule.confidence_wrong)] {
            if band.is_some_and(|[lo, hi]| !(0.5 <= lo && lo <= hi && hi <= 1.0)) {
                return Err(format!("rule {what}: a band [lo, hi] with 0.5 <= lo <= hi <= 1"));
            }
        }
        Ok(Matcher {
            criterion: regex("rule criterion", &rule.criterion)?,
            prompt: regex("rule prompt", &rule.prompt)?,
            quote: regex("rule quote", &rule.quote)?,
            model: regex("rule model", &rule.model)?,
            prefer: regex("rule prefer", &rule.prefer)?,
            rank_by: regex("rule rank_by", &rule.rank_by)?,
            image: regex("rule image", &rule.image)?,
            rule,
        })
    }

    fn matches(&self, criterion: &str, prompt: &str, model: &str, images: &[String]) -> bool {
        self.criterion.as_ref().is_none_or(|r| r.is_match(criterion))
            && self.prompt.as_ref().is_none_or(|r| r.is_match(prompt))
            && self.model.as_ref().is_none_or(|r| r.is_match(model))
            && self.image.as_ref().is_none_or(|r| images.iter().any(|i| r.is_match(i)))
    }
}

/// A uniform draw in [0, 1) fixed by the seed, what is asked (the criterion and the prompt,
/// fence tags left out) and the sample: the noisy grader answers the same request alike.
fn draw(seed: u64, criterion: &str, prompt: &str, sample: usize, salt: &str) -> f64 {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [seed.to_string().as_str(), criterion, prompt, sample.to_string().as_str(), salt] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

/// What one answer of one entry is decided from.
struct Ask<'a> {
    sample: usize,
    prompt: &'a str,
    /// The prompt and the criterion without their fence tags (which differ from run to run).
    untagged: &'a str,
    criterion: &'a str,
}

struct Compiled {
    latency: Duration,
    model: Option<String>,
    key: Option<String>,
    default: Matcher,
    rules: Vec<Matcher>,
    faults: Vec<CompiledFault>,
    prefix_cache: PrefixCache,
    batch: BatchRules,
}

/// A fault with its regexes compiled: on the prompt, the criterion and the model.
type CompiledFault = (Fault, Option<Regex>, Option<Regex>, Option<Regex>);

/// What the server has seen.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MockStats {
    /// Chat-completion requests received (each attempt of a client counts).
    pub requests: u64,
    /// Requests answered by the rules.
    pub replies: u64,
    /// Requests answered with an injected fault.
    pub faults: u64,
    /// Requests refused for a missing or wrong key.
    pub unauthorized: u64,
    /// The most chat requests it was handling at once.
    pub max_in_flight: u64,
    /// Milliseconds since the server started at which each chat request arrived.
    pub arrivals_ms: Vec<f64>,
    /// Bytes of `endless` bodies handed to the connections (the clients read them, or the
    /// sockets buffered them).
    pub endless_bytes: u64,
    /// Files uploaded, batches created, their lines, and batch status polls.
    pub files: u64,
    pub batches: u64,
    pub batch_lines: u64,
    pub batch_polls: u64,
}

/// A batch of the mock's Batch API.
#[derive(Debug, Clone)]
struct MockBatch {
    input_file_id: String,
    created: Instant,
    output_file_id: String,
    error_file_id: String,
    total: u64,
    failed: u64,
}

/// Precise delays for the configured latency. tokio's timer rounds a sleep up to its next
/// millisecond tick and wakes late under load, which added 1.5–2.5 ms to every reply of a
/// "20 ms" mock; one thread waiting on a heap of deadlines (a futex with a timeout, tens of
/// microseconds late) keeps the latency what the rules say.
struct Delays {
    tx: Mutex<std::sync::mpsc::Sender<(Instant, tokio::sync::oneshot::Sender<()>)>>,
}

impl Delays {
    #[expect(clippy::expect_used, reason = "the mock judge is a test server: without its delay thread it cannot serve")]
    fn start() -> Delays {
        let (tx, rx) = std::sync::mpsc::channel::<(Instant, tokio::sync::oneshot::Sender<()>)>();
        std::thread::Builder::new()
            .name("mock-judge-delays".into())
            .spawn(move || {
                use std::cmp::Reverse;
                use std::sync::mpsc::RecvTimeoutError;
                let mut heap: std::collections::BinaryHeap<(Reverse<Instant>, u64)> = Default::default();
                let mut waiting: HashMap<u64, tokio::sync::oneshot::Sender<()>> = HashMap::new();
                let mut next_id = 0u64;
                loop {
                    let now = Instant::now();
                    while let Some((Reverse(at), id)) = heap.peek().copied() {
                        if at > now {
                            break;
                        }
                        heap.pop();
                        if let Some(tx) = waiting.remove(&id) {
                            let _ = tx.send(());
                        }
                    }
                    let got = match heap.peek() {
                        Some((Reverse(at), _)) => rx.recv_timeout(at.saturating_duration_since(now)),
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match got {
                        Ok((at, tx)) => {
                            heap.push((Reverse(at), next_id));
                            waiting.insert(next_id, tx);
                            next_id += 1;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .expect("cannot start the mock judge's delay thread");
        Delays { tx: Mutex::new(tx) }
    }

    async fn until(&self, at: Instant) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send((at, tx)).is_ok();
        if !sent || rx.await.is_err() {
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

struct State {
    delays: Delays,
    rules: Compiled,
    started: Instant,
    stats: Mutex<MockStats>,
    in_flight: std::sync::atomic::AtomicU64,
    bodies: Mutex<Vec<Json>>,
    fault_counts: Mutex<HashMap<(usize, u64), u32>>,
    /// Uploaded and produced files, by id; batches, by id.
    files: Mutex<HashMap<String, Vec<u8>>>,
    batches: Mutex<HashMap<String, MockBatch>>,
    /// The prompt prefixes seen, per model: the chained hash of each block boundary.
    prefixes: Mutex<std::collections::HashSet<(String, [u8; 32])>>,
    /// Fence markers, whose tags are left out of a request's identity.
    fence_tags: Regex,
}

/// A running mock server; dropping it stops it.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// Bind `addr` (a loopback address; port 0 picks a free one) and serve in the background
    /// of the current tokio runtime.
    pub async fn start(rules: MockRules, addr: SocketAddr) -> Result<MockServer, String> {
        if !addr.ip().is_loopback() {
            return Err(format!("the mock judge serves on loopback only, not on {addr}"));
        }
        let key = match &rules.require_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| format!("require_key_env: `{var}` is not set"))?),
            None => None,
        };
        let compiled = Compiled {
            latency: Duration::from_millis(rules.latency_ms),
            model: rules.model.clone(),
            key,
            default: Matcher::new(rules.default.clone())?,
            rules: rules.rules.iter().cloned().map(Matcher::new).collect::<Result<_, _>>()?,
            faults: rules
                .faults
                .iter()
                .map(|f| {
                    Ok((
                        f.clone(),
                        regex("fault prompt", &f.prompt)?,
                        regex("fault criterion", &f.criterion)?,
                        regex("fault model", &f.model)?,
                    ))
                })
                .collect::<Result<_, String>>()?,
            prefix_cache: rules.prefix_cache.clone(),
            batch: rules.batch.clone(),
        };
        let listener = TcpListener::bind(addr).await.map_err(|e| format!("cannot bind {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let state = Arc::new(State {
            delays: Delays::start(),
            rules: compiled,
            started: Instant::now(),
            stats: Mutex::new(MockStats::default()),
            in_flight: std::sync::atomic::AtomicU64::new(0),
            bodies: Mutex::new(Vec::new()),
            fault_counts: Mutex::new(HashMap::new()),
            prefixes: Mutex::new(Default::default()),
            files: Mutex::new(HashMap::new()),
            batches: Mutex::new(HashMap::new()),
            fence_tags: Regex::new(r"<<<(BEGIN|END|TURN) ([^ >]+) [0-9a-f]{16}>>>").map_err(|e| e.to_string())?,
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            // Connections live in this set: stopping the server drops (aborts) them all.
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    acc = listener.accept() => match acc {
                        Ok((stream, _)) => {
                            let _ = stream.set_nodelay(true);
                            let st = st.clone();
                            conns.spawn(async move {
                                let svc = service_fn(move |req| {
                                    let st = st.clone();
                                    async move { Ok::<_, Infallible>(handle(st, req).await) }
                                });
                                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                            });
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                    },
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(MockServer { addr, state, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/v1`, the base URL for a `judges.toml` endpoint.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn stats(&self) -> MockStats {
        self.state.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Chat-completion requests received so far.
    pub fn requests(&self) -> u64 {
        self.stats().requests
    }

    /// Every chat-completion body received, in arrival order.
    pub fn bodies(&self) -> Vec<Json> {
        self.state.bodies.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A reply body: all of it at once, or the `endless` fault's.
type MockBody = Either<Full<Bytes>, Endless>;

type Resp = Response<MockBody>;

/// The body of the `endless` fault: the start of a completion whose content string is never
/// closed, then 16 KiB chunks of it without end, `delay` apart.
struct Endless {
    st: Arc<State>,
    started: bool,
    chunk: Bytes,
    delay: Duration,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if !this.started {
            this.started = true;
            let head = Bytes::from_static(
                br#"{"id": "mock-endless", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": ""#,
            );
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        if !this.delay.is_zero() {
            let delay = this.delay;
            let pause = this.pause.get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
            if pause.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.pause = None;
        }
        this.st.stats.lock().unwrap_or_else(|e| e.into_inner()).endless_bytes += this.chunk.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(this.chunk.clone()))))
    }
}

fn endless(st: Arc<State>, delay: Duration) -> Resp {
    let body = Endless { st, started: false, chunk: Bytes::from(vec![b'a'; 16 << 10]), delay, pause: None };
    let mut r = Response::new(Either::Right(body));
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

fn respond(status: u16, content_type: &str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Either::Left(Full::new(body.into())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn json_response(status: u16, j: &Json) -> Resp {
    respond(status, "application/json", serde_json::to_vec(j).unwrap_or_default())
}

fn api_error(status: u16, message: &str) -> Resp {
    json_response(status, &json!({"error": {"message": message, "type": "mock_error", "code": status}}))
}

async fn handle(st: Arc<State>, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().to_string();
    match (req.method().clone(), path.as_str()) {
        (Method::POST, "/v1/chat/completions" | "/chat/completions") => {
            use std::sync::atomic::Ordering::SeqCst;
            let now = st.in_flight.fetch_add(1, SeqCst) + 1;
            {
                let mut s = st.stats.lock().unwrap_or_else(|e| e.into_inner());
                s.max_in_flight = s.max_in_flight.max(now);
            }
            // Counted down even when the client goes away and the handler is dropped.
            struct Done<'a>(&'a std::sync::atomic::AtomicU64);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            let _done = Done(&st.in_flight);
            chat(st.clone(), req).await
        }
        (Method::POST, "/v1/files" | "/files") => upload(st.clone(), req).await,
        (Method::POST, "/v1/batches" | "/batches") => create_batch(st.clone(), req).await,
        (Method::GET, p) if p.starts_with("/v1/batches/") || p.starts_with("/batches/") => {
            batch_status(&st, p.rsplit('/').next().unwrap_or(""))
        }
        (Method::GET, p) if (p.starts_with("/v1/files/") || p.starts_with("/files/")) && p.ends_with("/content") => {
            let id = p.trim_end_matches("/content").rsplit('/').next().unwrap_or("");
            match st.files.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
                Some(b) => respond(200, "application/jsonl", b.clone()),
                None => api_error(404, &format!("no file `{id}`")),
            }
        }
        (Method::GET, "/stats") => {
            let s = st.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
            json_response(200, &serde_json::to_value(s).unwrap_or(Json::Null))
        }
        (Method::GET, "/requests") => {
            let b = st.bodies.lock().unwrap_or_else(|e| e.into_inner()).clone();
            json_response(200, &Json::Array(b))
        }
        (Method::GET, "/v1/models" | "/models") => {
            let id = st.rules.model.clone().unwrap_or_else(|| "mock-judge".into());
            json_response(
                200,
                &json!({"object": "list", "data": [{"id": id, "object": "model", "owned_by": "rubric"}]}),
            )
        }
        _ => api_error(404, "not found"),
    }
}

/// `POST /v1/files`: a multipart form with `purpose` and `file`; the file is kept by id.
async fn upload(st: Arc<State>, req: Request<Incoming>) -> Resp {
    let boundary = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split("boundary=").nth(1))
        .map(|b| b.trim_matches('"').to_string());
    let Some(boundary) = boundary else { return api_error(400, "a multipart/form-data body is expected") };
    let Ok(bytes) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return api_error(400, "cannot read the request body");
    };
    let mut file = None;
    let mut purpose = None;
    for part in split_bytes(&bytes, format!("--{boundary}").as_bytes()) {
        let Some(at) = find(part, b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&part[..at]).to_string();
        let mut content = &part[at + 4..];
        if content.ends_with(b"\r\n") {
            content = &content[..content.len() - 2];
        }
        if head.contains("name=\"file\"") {
            file = Some(content.to_vec());
        } else if head.contains("name=\"purpose\"") {
            purpose = Some(String::from_utf8_lossy(content).to_string());
        }
    }
    let (Some(file), Some(purpose)) = (file, purpose) else {
        return api_error(400, "the form needs `purpose` and `file`");
    };
    let mut files = st.files.lock().unwrap_or_else(|e| e.into_inner());
    let id = format!("file-{}", files.len() + 1);
    let size = file.len();
    files.insert(id.clone(), file);
    st.stats.lock().unwrap_or_else(|e| e.into_inner()).files += 1;
    json_response(
        200,
        &json!({"id": id, "object": "file", "bytes": size, "purpose": purpose, "filename": "batch.jsonl"}),
    )
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn split_bytes<'a>(hay: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = hay;
    while let Some(i) = find(rest, sep) {
        out.push(&rest[..i]);
        rest = &rest[i + sep.len()..];
    }
    out.push(rest);
    out
}

/// `POST /v1/batches`: answer every line of the input file now (as each body would be answered
/// alone); the batch reads `in_progress` until its completion delay has passed.
async fn create_batch(st: Arc<State>, req: Request<Incoming>) -> Resp {
    let Ok(bytes) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return api_error(400, "cannot read the request body");
    };
    let Ok(ask) = serde_json::from_slice::<Json>(&bytes) else { return api_error(400, "the body is not JSON") };
    let input = ask.get("input_file_id").and_then(Json::as_str).unwrap_or("").to_string();
    if ask.get("endpoint").and_then(Json::as_str) != Some("/v1/chat/completions") {
        return api_error(400, "endpoint must be /v1/chat/completions");
    }
    let Some(text) = st.files.lock().unwrap_or_else(|e| e.into_inner()).get(&input).cloned() else {
        return api_error(404, &format!("no file `{input}`"));
    };
    let (mut out, mut errors, mut total, mut failed) = (Vec::new(), Vec::new(), 0u64, 0u64);
    for (n, line) in text.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).enumerate() {
        total += 1;
        let parsed: Option<Json> = serde_json::from_slice(line).ok();
        let custom = parsed.as_ref().and_then(|l| l.get("custom_id")).and_then(Json::as_str).unwrap_or("").to_string();
        let sample =
            custom.strip_prefix('s').and_then(|r| r.split_once(':')).and_then(|(k, _)| k.parse().ok()).unwrap_or(0);
        let body = parsed.as_ref().and_then(|l| l.get("body")).cloned();
        let (status, reply) = match body {
            None => (400, json!({"error": {"message": "the line has no body"}})),
            Some(body) => {
                let bytes = serde_json::to_vec(&body).unwrap_or_default();
                st.bodies.lock().unwrap_or_else(|e| e.into_inner()).push(body.clone());
                let r = answer(&st, sample, &body, &bytes, true).await;
                let status = r.status().as_u16();
                let j = match r.into_body() {
                    Either::Left(full) => match full.collect().await {
                        Ok(b) => {
                            serde_json::from_slice(&b.to_bytes()).unwrap_or(json!({"error": {"message": "not JSON"}}))
                        }
                        Err(_) => json!({"error": {"message": "no body"}}),
                    },
                    Either::Right(_) => json!({"error": {"message": "the line failed"}}),
                };
                (status, j)
            }
        };
        let entry = json!({
            "id": format!("batch_req_{n}"),
            "custom_id": custom,
            "response": {"status_code": status, "request_id": format!("req_{n}"), "body": reply},
            "error": null,
        });
        let line = serde_json::to_vec(&entry).unwrap_or_default();
        if status == 200 {
            out.extend(line);
            out.push(b'\n');
        } else {
            failed += 1;
            errors.extend(line);
            errors.push(b'\n');
        }
    }
    let id = {
        let mut files = st.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut batches = st.batches.lock().unwrap_or_else(|e| e.into_inner());
        let id = format!("batch_{}", batches.len() + 1);
        let (o, e) = (format!("file-{id}-output"), format!("file-{id}-errors"));
        files.insert(o.clone(), out);
        files.insert(e.clone(), errors);
        batches.insert(
            id.clone(),
            MockBatch {
                input_file_id: input,
                created: Instant::now(),
                output_file_id: o,
                error_file_id: e,
                total,
                failed,
            },
        );
        id
    };
    {
        let mut s = st.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.batches += 1;
        s.batch_lines += total;
    }
    batch_status(&st, &id)
}

/// `GET /v1/batches/ID`.
fn batch_status(st: &State, id: &str) -> Resp {
    let Some(b) = st.batches.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned() else {
        return api_error(404, &format!("no batch `{id}`"));
    };
    st.stats.lock().unwrap_or_else(|e| e.into_inner()).batch_polls += 1;
    let done = b.created.elapsed() >= Duration::from_millis(st.rules.batch.completion_delay_ms);
    json_response(
        200,
        &json!({
            "id": id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": b.input_file_id,
            "completion_window": "24h",
            "status": if done { "completed" } else { "in_progress" },
            "output_file_id": if done { json!(b.output_file_id) } else { Json::Null },
            "error_file_id": if done { json!(b.error_file_id) } else { Json::Null },
            "request_counts": {
                "total": b.total,
                "completed": if done { b.total - b.failed } else { 0 },
                "failed": if done { b.failed } else { 0 },
            },
        }),
    )
}

/// One entry the reply must contain: its key in a multi-criterion reply, the criterion text
/// (the schema's description) and the entry schema.
struct EntryAsk {
    key: Option<String>,
    criterion: String,
    schema: Json,
}

fn entries_of(body: &Json) -> Vec<EntryAsk> {
    let schema = body.pointer("/response_format/json_schema/schema").cloned().unwrap_or(Json::Null);
    let desc = |s: &Json| s.get("description").and_then(Json::as_str).unwrap_or("").to_string();
    match schema.get("properties").and_then(Json::as_object) {
        Some(props) if !props.is_empty() && props.values().all(|p| p.get("type") == Some(&json!("object"))) => props
            .iter()
            .map(|(k, s)| EntryAsk { key: Some(k.clone()), criterion: desc(s), schema: s.clone() })
            .collect(),
        Some(_) => vec![EntryAsk { key: None, criterion: desc(&schema), schema }],
        // No schema: one binary verdict.
        None => vec![EntryAsk {
            key: None,
            criterion: String::new(),
            schema: json!({"properties": {"verdict": {"type": "string", "enum": ["met", "unmet"]}}}),
        }],
    }
}

async fn chat(st: Arc<State>, req: Request<Incoming>) -> Resp {
    // The latency counts from the request's arrival, whatever reading and checking it took.
    let arrived = Instant::now();
    let headers = req.headers().clone();
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return api_error(400, "cannot read the request body"),
    };
    {
        let mut s = st.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.requests += 1;
        s.arrivals_ms.push(st.started.elapsed().as_secs_f64() * 1000.0);
    }
    if let Some(key) = &st.rules.key {
        let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        let ok =
            get("authorization").as_deref() == Some(&format!("Bearer {key}")) || get("api-key").as_ref() == Some(key);
        if !ok {
            st.stats.lock().unwrap_or_else(|e| e.into_inner()).unauthorized += 1;
            return api_error(401, "missing or wrong API key");
        }
    }
    let body: Json = match serde_json::from_slice(&bytes) {
        Ok(b) => b,
        Err(e) => return api_error(400, &format!("the body is not JSON: {e}")),
    };
    st.bodies.lock().unwrap_or_else(|e| e.into_inner()).push(body.clone());
    if !st.rules.latency.is_zero() {
        st.delays.until(arrived + st.rules.latency).await;
    }
    let sample: usize =
        headers.get("x-rubric-sample").and_then(|v| v.to_str().ok()).and_then(|s| s.parse().ok()).unwrap_or(0);
    answer(&st, sample, &body, &bytes, false).await
}

/// A message's text: its content, or the text parts of content in parts.
fn message_text(m: &Json) -> Option<String> {
    match m.get("content")? {
        Json::String(s) => Some(s.clone()),
        Json::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Json::as_str))
                .collect(),
        ),
        _ => None,
    }
}

/// What names each image the messages show (`image_url` parts), in order: `sha256:HEX` of a
/// data URI's decoded bytes, or the URL.
fn request_images(messages: &[Json]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Json::as_array))
        .flatten()
        .filter_map(|p| p.pointer("/image_url/url").and_then(Json::as_str))
        .map(crate::image::identity_of_url)
        .collect()
}

/// The reply to one chat-completions body (sample `sample`): a fault or the rules' answer. In
/// a batch (`batch`), faults that stall or never end are failed lines instead.
async fn answer(st: &Arc<State>, sample: usize, body: &Json, bytes: &[u8], batch: bool) -> Resp {
    let messages = body.get("messages").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default();
    let prompt: String = messages.iter().filter_map(message_text).collect::<Vec<_>>().join("\n");
    let images = request_images(messages);
    let untagged_prompt = st.fence_tags.replace_all(&prompt, "<<<$1 $2 TAG>>>").into_owned();
    let entries = entries_of(body);
    let body_hash = {
        // Fence tags differ from run to run (a dispatcher draws its own secret): the same
        // request from another run is the same request here.
        let text = String::from_utf8_lossy(bytes);
        let untagged = st.fence_tags.replace_all(&text, "<<<$1 $2 TAG>>>");
        let mut h = std::collections::hash_map::DefaultHasher::new();
        untagged.hash(&mut h);
        h.finish()
    };
    let mut flags = Flags::default();
    let asked_model = body.get("model").and_then(Json::as_str).unwrap_or("");
    for (i, (f, p, c, m)) in st.rules.faults.iter().enumerate() {
        let applies = p.as_ref().is_none_or(|r| r.is_match(&prompt))
            && m.as_ref().is_none_or(|r| r.is_match(asked_model))
            && c.as_ref().is_none_or(|r| entries.iter().any(|e| r.is_match(&e.criterion)))
            && f.samples.as_ref().is_none_or(|s| s.contains(&sample));
        if !applies {
            continue;
        }
        {
            let mut counts = st.fault_counts.lock().unwrap_or_else(|e| e.into_inner());
            let n = counts.entry((i, body_hash)).or_insert(0);
            if f.times.is_some_and(|t| *n >= t) {
                continue;
            }
            *n += 1;
        }
        st.stats.lock().unwrap_or_else(|e| e.into_inner()).faults += 1;
        match f.kind {
            FaultKind::Timeout | FaultKind::Endless if batch => {
                return api_error(500, "injected fault: the line failed")
            }
            FaultKind::Timeout => {
                tokio::time::sleep(Duration::from_millis(f.delay_ms.unwrap_or(30_000))).await;
            }
            FaultKind::Status => {
                let status = f.status.unwrap_or(500);
                let mut r = api_error(status, "injected fault");
                if let Some(s) = f.retry_after_s {
                    r.headers_mut().insert("retry-after", s.into());
                }
                if let Some(ms) = f.retry_after_ms {
                    r.headers_mut().insert("retry-after-ms", ms.into());
                }
                return r;
            }
            FaultKind::BadBody => return respond(200, "text/html", "<html><body>upstream hiccup</body></html>"),
            FaultKind::Endless => return endless(st.clone(), Duration::from_millis(f.delay_ms.unwrap_or(0))),
            FaultKind::Malformed => flags.malformed = true,
            FaultKind::SchemaViolation => flags.schema = true,
            FaultKind::WrongEvidence => flags.wrong_evidence = true,
            FaultKind::NoLogprobs => flags.no_logprobs = true,
            FaultKind::Refusal => flags.refusal = true,
            FaultKind::Truncated => flags.truncated = true,
            FaultKind::NoUsage => flags.no_usage = true,
        }
        break;
    }
    let faulted = flags != Flags::default();
    if !faulted {
        st.stats.lock().unwrap_or_else(|e| e.into_inner()).replies += 1;
    }
    let model = st.rules.model.clone().or_else(|| body.get("model").and_then(Json::as_str).map(str::to_string));
    let want_logprobs = body.get("logprobs").and_then(Json::as_bool).unwrap_or(false) && !flags.no_logprobs;
    let top_n = body.get("top_logprobs").and_then(Json::as_u64).unwrap_or(5).max(1) as usize;
    let mut toks = Tokens::default();
    if flags.malformed {
        toks.push("Sure! My verdict: met, because the response {is fine", None);
    } else {
        let multi = entries.iter().any(|e| e.key.is_some());
        if multi {
            toks.push("{", None);
        }
        for (i, e) in entries.iter().enumerate() {
            if let Some(k) = &e.key {
                if i > 0 {
                    toks.push(", ", None);
                }
                toks.push(&serde_json::to_string(k).unwrap_or_default(), None);
                toks.push(": ", None);
            }
            let asked = body.get("model").and_then(Json::as_str).unwrap_or("");
            let rule = st
                .rules
                .rules
                .iter()
                .find(|r| r.matches(&e.criterion, &prompt, asked, &images))
                .unwrap_or(&st.rules.default);
            let criterion = st.fence_tags.replace_all(&e.criterion, "<<<$1 $2 TAG>>>");
            let ask = Ask { sample, prompt: &prompt, untagged: &untagged_prompt, criterion: &criterion };
            emit_entry(&mut toks, e, rule, &ask, &flags);
        }
        if multi {
            toks.push("}", None);
        }
    }
    if flags.truncated {
        toks.0.truncate(toks.0.len() / 2);
    }
    let content: String = toks.0.iter().map(|(t, _)| t.as_str()).collect();
    let message = if flags.refusal {
        json!({"role": "assistant", "content": null, "refusal": "I can't help with grading this."})
    } else {
        json!({"role": "assistant", "content": content})
    };
    let logprobs = if want_logprobs && !flags.refusal { toks.logprobs(top_n) } else { Json::Null };
    let asked = body.get("model").and_then(Json::as_str).unwrap_or("").to_string();
    let reasoning: u64 = entries
        .iter()
        .filter_map(|e| {
            let rule = st
                .rules
                .rules
                .iter()
                .find(|r| r.matches(&e.criterion, &prompt, &asked, &images))
                .unwrap_or(&st.rules.default);
            rule.rule.reasoning_tokens
        })
        .sum();
    let prompt_tokens = mock_tokens(prompt.len());
    let cached = cached_prefix(st, &asked, prompt.as_bytes());
    let finish = if flags.truncated { "length" } else { "stop" };
    let mut reply = json!({
        "id": format!("mock-{body_hash:016x}"),
        "object": "chat.completion",
        "created": 0,
        "model": model.unwrap_or_else(|| "mock-judge".into()),
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": toks.0.len() as u64 + reasoning,
            "total_tokens": prompt_tokens + toks.0.len() as u64 + reasoning,
            "completion_tokens_details": {"reasoning_tokens": reasoning},
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    });
    if flags.no_usage {
        if let Some(o) = reply.as_object_mut() {
            o.remove("usage");
        }
    }
    json_response(200, &reply)
}

/// The prompt tokens of `prompt` served from the prefix cache of `model`: the longest prefix of
/// whole blocks seen before (at least `min_tokens` of them, else none); then every block
/// boundary of this prompt is remembered.
fn cached_prefix(st: &State, model: &str, prompt: &[u8]) -> u64 {
    use sha2::{Digest, Sha256};
    let pc = &st.rules.prefix_cache;
    if !pc.enabled || pc.block_tokens == 0 || mock_tokens(prompt.len()) < pc.min_tokens {
        return 0;
    }
    let block = (pc.block_tokens * 4) as usize;
    let mut chain = [0u8; 32];
    let mut boundaries = Vec::new();
    for (k, piece) in prompt.chunks_exact(block).enumerate() {
        let mut h = Sha256::new();
        h.update(chain);
        h.update(piece);
        chain = h.finalize().into();
        boundaries.push(((k as u64 + 1) * pc.block_tokens, chain));
    }
    let mut seen = st.prefixes.lock().unwrap_or_else(|e| e.into_inner());
    let mut cached = 0;
    for (tokens, h) in &boundaries {
        if !seen.contains(&(model.to_string(), *h)) {
            break;
        }
        if *tokens >= pc.min_tokens {
            cached = *tokens;
        }
    }
    for (_, h) in boundaries {
        seen.insert((model.to_string(), h));
    }
    cached
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Flags {
    malformed: bool,
    schema: bool,
    wrong_evidence: bool,
    no_logprobs: bool,
    refusal: bool,
    truncated: bool,
    no_usage: bool,
}

/// The two alternatives of an answer token and the probability of the first: (yes, no, P(yes)).
type Alt = (String, String, f64);

/// The content as tokens, each with its alternatives when it is an answer.
#[derive(Default)]
struct Tokens(Vec<(String, Option<Alt>)>);

impl Tokens {
    fn push(&mut self, t: &str, alt: Option<Alt>) {
        self.0.push((t.to_string(), alt));
    }

    fn logprobs(&self, top_n: usize) -> Json {
        let content: Vec<Json> = self
            .0
            .iter()
            .map(|(t, alt)| match alt {
                None => json!({"token": t, "logprob": 0.0, "top_logprobs": [{"token": t, "logprob": 0.0}]}),
                Some((yes, no, p)) => {
                    let p = p.clamp(1e-6, 1.0 - 1e-6);
                    let mut top = vec![(yes.clone(), p.ln()), (no.clone(), (1.0 - p).ln())];
                    top.sort_by(|a, b| b.1.total_cmp(&a.1));
                    top.truncate(top_n);
                    let own = if t == yes { p.ln() } else { (1.0 - p).ln() };
                    json!({
                        "token": t,
                        "logprob": own,
                        "top_logprobs": top.iter().map(|(k, lp)| json!({"token": k, "logprob": lp})).collect::<Vec<_>>(),
                    })
                }
            })
            .collect();
        json!({ "content": content })
    }
}

/// The answer the rule gives for sample `k`: a sample override, else the rule's fields.
/// The text of fence `candidate-K` in a comparing judge's prompt.
fn candidate_text(prompt: &str, k: usize) -> Option<&str> {
    let begin = format!("<<<BEGIN candidate-{k} ");
    let start = prompt.find(&begin)?;
    let body = start + prompt[start..].find(">>>\n")? + 4;
    let end = body + prompt[body..].find(&format!("<<<END candidate-{k} "))?;
    Some(&prompt[body..end])
}

/// The text of every fence `rollout-1`, `rollout-2`, ... of a group judge's prompt, in order.
fn rollout_texts(prompt: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for k in 1.. {
        let begin = format!("<<<BEGIN rollout-{k} ");
        let Some(start) = prompt.find(&begin) else { break };
        let Some(body) = prompt[start..].find(">>>\n").map(|i| start + i + 4) else { break };
        let Some(end) = prompt[body..].find(&format!("<<<END rollout-{k} ")).map(|i| body + i) else { break };
        out.push(&prompt[body..end]);
    }
    out
}

/// A group judge's answer by `rank_by`: each rollout's matches over the most any has (all 0
/// when none matches, or without `rank_by`: `value` for all), or, for `ranking`, the rollout
/// numbers by matches, more first, ties in rollout order.
fn group_answer(cr: &Matcher, prompt: &str, ranking: bool) -> Json {
    let texts = rollout_texts(prompt);
    let counts: Vec<usize> = texts.iter().map(|t| cr.rank_by.as_ref().map_or(0, |r| r.find_iter(t).count())).collect();
    if ranking {
        let mut order: Vec<usize> = (0..counts.len()).collect();
        order.sort_by(|a, b| counts[*b].cmp(&counts[*a]).then(a.cmp(b)));
        return json!(order.iter().map(|i| i + 1).collect::<Vec<_>>());
    }
    let most = counts.iter().copied().max().unwrap_or(0);
    let flat = cr.rule.value.as_ref().and_then(Json::as_f64).unwrap_or(0.0);
    json!(counts
        .iter()
        .map(|&c| if cr.rank_by.is_some() && most > 0 {
            c as f64 / most as f64
        } else if cr.rank_by.is_some() {
            0.0
        } else {
            flat
        })
        .collect::<Vec<_>>())
}

fn sample_override(rule: &Rule, k: usize) -> Option<&Json> {
    rule.samples.as_ref().filter(|s| !s.is_empty()).map(|s| &s[k % s.len()])
}

/// P(yes) for sample `k`.
fn p_yes(rule: &Rule, k: usize) -> f64 {
    match sample_override(rule, k) {
        Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Json::Bool(b)) => {
            if *b {
                0.9
            } else {
                0.1
            }
        }
        Some(Json::String(s)) => {
            if matches!(s.as_str(), "met" | "yes" | "true") {
                0.9
            } else {
                0.1
            }
        }
        _ => rule.p_yes.unwrap_or_else(|| if rule.verdict.as_deref() == Some("met") { 0.9 } else { 0.1 }),
    }
}

fn emit_entry(toks: &mut Tokens, e: &EntryAsk, cr: &Matcher, ask: &Ask, flags: &Flags) {
    let (k, prompt) = (ask.sample, ask.prompt);
    let rule = &cr.rule;
    let props = e.schema.get("properties").and_then(Json::as_object).cloned().unwrap_or_default();
    let over = sample_override(rule, k);
    let mut p = p_yes(rule, k);
    if rule.tpr.is_some() || rule.tnr.is_some() {
        // The rule's answer is the truth; the noisy grader gets it right with probability
        // TPR (truth met) or TNR (truth unmet), and draws P(yes) on the side it answers.
        let seed = rule.seed.unwrap_or(0);
        let truth = p >= 0.5;
        let right = draw(seed, ask.criterion, ask.untagged, k, "answer")
            < if truth { rule.tpr.unwrap_or(1.0) } else { rule.tnr.unwrap_or(1.0) };
        let says_met = truth == right;
        let u = draw(seed, ask.criterion, ask.untagged, k, "p_yes");
        let [lo, hi] = if right { rule.confidence_right } else { rule.confidence_wrong }.unwrap_or([0.5, 1.0]);
        // (Drawn so that the default band gives P(yes) = 0.5 + u/2 for met and u/2 for unmet.)
        let confidence = lo + (hi - lo) * if says_met { u } else { 1.0 - u };
        p = if says_met { confidence } else { 1.0 - confidence };
    }
    let first =
        rule.first_bias.is_some_and(|b| draw(rule.seed.unwrap_or(0), ask.criterion, ask.untagged, k, "first") < b);
    toks.push("{", None);
    let mut first_answer = true;
    for (i, (name, s)) in props.iter().enumerate() {
        if i > 0 {
            toks.push(", ", None);
        }
        toks.push(&serde_json::to_string(name).unwrap_or_default(), None);
        toks.push(": ", None);
        let ty = s.get("type").cloned().unwrap_or(Json::Null);
        let is = |t: &str| ty == json!(t) || ty.as_array().is_some_and(|a| a.contains(&json!(t)));
        let enumv = s.get("enum").and_then(Json::as_array).cloned();
        let is_answer = enumv.is_some() || is("boolean") || matches!(name.as_str(), "value" | "scores" | "ranking");
        if flags.schema && is_answer && first_answer {
            first_answer = false;
            toks.push("\"perhaps\"", None);
            continue;
        }
        // Yes/no style answers are three tokens (quote, word, quote) so the word has logprobs.
        let yes_no = |yes: &str, no: &str| -> (String, Option<Alt>) {
            let word = if p >= 0.5 { yes } else { no };
            (word.to_string(), Some((yes.to_string(), no.to_string(), p)))
        };
        match enumv {
            None if is("array") && (name == "scores" || name == "ranking") => {
                let answer = over.cloned().unwrap_or_else(|| group_answer(cr, prompt, name == "ranking"));
                toks.push(&answer.to_string(), None);
            }
            Some(opts) if opts == [json!("met"), json!("unmet")] || opts == [json!("yes"), json!("no")] => {
                let (y, n) = (opts[0].as_str().unwrap_or(""), opts[1].as_str().unwrap_or(""));
                let (word, alt) = yes_no(y, n);
                toks.push("\"", None);
                toks.push(&word, alt);
                toks.push("\"", None);
            }
            Some(opts) if opts == crate::judge::prompt::PREFERENCES && cr.prefer.is_some() && over.is_none() => {
                let says = |k: usize| {
                    candidate_text(prompt, k).is_some_and(|t| cr.prefer.as_ref().is_some_and(|r| r.is_match(t)))
                };
                let pick = match (first, says(1), says(2)) {
                    (true, _, _) | (false, true, false) => "first",
                    (false, false, true) => "second",
                    _ => "tie",
                };
                toks.push(&json!(pick).to_string(), None);
            }
            Some(opts) => {
                let wanted = over
                    .cloned()
                    .or_else(|| rule.level.map(crate::value::number_to_json))
                    .or_else(|| rule.label.clone().map(Json::String))
                    .or_else(|| rule.value.clone());
                let same = |o: &Json, w: &Json| o == w || (o.is_number() && o.as_f64() == w.as_f64());
                let pick = wanted
                    .filter(|_| !first)
                    .and_then(|w| opts.iter().find(|o| same(o, &w)).cloned())
                    .or_else(|| opts.first().cloned())
                    .unwrap_or(Json::Null);
                toks.push(&pick.to_string(), None);
            }
            None if is("boolean") => {
                let (word, alt) = yes_no("true", "false");
                toks.push(&word, alt);
            }
            None if name == "evidence" || name == "quote" => {
                let ev = if flags.wrong_evidence {
                    "A sentence that the response never contained.".to_string()
                } else {
                    rule.evidence
                        .clone()
                        .or_else(|| cr.quote.as_ref().and_then(|r| r.find(prompt)).map(|m| m.as_str().to_string()))
                        .unwrap_or_default()
                };
                toks.push(&serde_json::to_string(&ev).unwrap_or_default(), None);
            }
            None if matches!(name.as_str(), "rationale" | "reason" | "reasoning" | "explanation") => {
                let r = rule.rationale.clone().unwrap_or_else(|| "Decided by the mock judge's rules.".into());
                toks.push(&serde_json::to_string(&r).unwrap_or_default(), None);
            }
            None => {
                let v = over
                    .cloned()
                    .or_else(|| rule.value.clone())
                    .or_else(|| rule.level.map(crate::value::number_to_json));
                let v = match v {
                    Some(v) => v,
                    None if is("null") => Json::Null,
                    None if is("number") => json!(0),
                    None if is("string") => json!(""),
                    None => Json::Null,
                };
                toks.push(&v.to_string(), None);
            }
        }
    }
    toks.push("}", None);
}

/// `rubric mock-judge`: serve until killed; the first line on stdout is the base URL.
pub fn main(rules: Option<&Path>, addr: &str, latency_ms: Option<u64>) -> ExitCode {
    let mut r = match rules {
        Some(p) => match MockRules::load(p) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => MockRules::default(),
    };
    if let Some(l) = latency_ms {
        r.latency_ms = l;
    }
    let addr: SocketAddr = match addr.parse::<SocketAddr>().or_else(|_| format!("127.0.0.1:{addr}").parse()) {
        Ok(a) => a,
        Err(_) => {
            eprintln!("error: `{addr}` is not an address (e.g. 127.0.0.1:8080) or a port");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        let n_rules = r.rules.len();
        let n_faults = r.faults.len();
        let server = match MockServer::start(r, addr).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        {
            use std::io::Write as _;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{}", server.base_url());
            let _ = out.flush();
        }
        eprintln!(
            "mock-judge: serving chat completions at {}/chat/completions ({n_rules} rules, {n_faults} faults); \
             GET /stats for counters; stop with Ctrl-C",
            server.base_url()
        );
        std::future::pending::<()>().await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_from_toml() {
        let r = MockRules::parse_toml(
            r#"
            latency_ms = 3
            [default]
            verdict = "unmet"
            [[rule]]
            criterion = "(?i)emergency"
            verdict = "met"
            samples = ["met", "unmet", 3]
            [[fault]]
            kind = "status"
            status = 429
            retry_after_ms = 20
            times = 1
            "#,
        )
        .unwrap();
        assert_eq!(r.latency_ms, 3);
        assert_eq!(r.rules.len(), 1);
        assert_eq!(r.faults[0].kind, FaultKind::Status);
        assert!(MockRules::parse_toml("[[fault]]\nkind = \"meteor\"\n").is_err());
        assert!(MockRules::parse_toml("bogus = 1\n").is_err());
    }

    #[test]
    fn entries_read_the_schema() {
        let body = json!({"response_format": {"json_schema": {"schema": {
            "type": "object",
            "properties": {
                "c1": {"type": "object", "description": "first", "properties": {}},
                "c2": {"type": "object", "description": "second", "properties": {}},
            }
        }}}});
        let e = entries_of(&body);
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].criterion, "second");
        assert_eq!(e[1].key.as_deref(), Some("c2"));
        let single = json!({"response_format": {"json_schema": {"schema": {
            "type": "object", "description": "only", "properties": {"verdict": {"type": "string"}}
        }}}});
        assert_eq!(entries_of(&single)[0].criterion, "only");
        assert!(entries_of(&json!({}))[0].key.is_none());
    }
}
