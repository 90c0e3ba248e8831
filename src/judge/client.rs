//! The HTTP client for one OpenAI-compatible endpoint (reqwest over rustls with the `ring`
//! provider): a concurrency limit (a semaphore held for one attempt), a requests-per-minute
//! pacer, a timeout per attempt that covers the whole reply body, a reply size limit
//! (`max_reply_bytes`: a larger `Content-Length` is refused unread, a streamed body is dropped
//! as soon as it passes the limit), and retries with exponential backoff and jitter on
//! timeouts, connection failures, 408, 429 and 5xx, honouring `Retry-After` (and
//! `retry-after-ms`), for a bounded number of attempts; a circuit breaker that, after
//! `breaker_failures` consecutive failed attempts, considers the endpoint down for
//! `breaker_cooldown_s` (requests then end `endpoint_down` without being sent, until one probe
//! gets through); and the run's deadline, past which nothing more is sent or waited for
//! (`judge_deadline`). Every failure ends as a reason, never a panic or a wait without end. The
//! key is sent in a header marked sensitive and scrubbed from every reason.

use super::config::EndpointConfig;
use super::reply::Reply;
use super::JudgeError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value as Json;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The key of an endpoint. Its `Debug` never shows it.
#[derive(Clone)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// One endpoint with its limits.
#[derive(Debug)]
pub struct Endpoint {
    pub name: String,
    pub config: EndpointConfig,
    url: String,
    key: Option<Secret>,
    http: reqwest::Client,
    permits: Semaphore,
    /// When the next request may start, under an `rpm` limit.
    next_slot: Mutex<Instant>,
    breaker: Mutex<Breaker>,
    /// Counts the breaker's trips; attempts in flight watch it and give up when it moves (an
    /// endpoint that failed so often in a row will not answer them either).
    tripped: tokio::sync::watch::Sender<u32>,
}

/// An endpoint's circuit breaker.
#[derive(Debug, Default)]
struct Breaker {
    /// Failed attempts in a row (a reply of any kind resets it).
    consecutive: u32,
    /// While down: until when.
    down_until: Option<Instant>,
    /// After a cooldown, one request probes the endpoint; the others wait no longer than it.
    probing: bool,
    /// Times the endpoint was found down, and requests refused because it was.
    trips: u32,
    refused: u64,
    /// Attempts in flight when it tripped, ended then.
    cut: u64,
    /// The failure that tripped it last.
    last: String,
}

/// What [`Endpoint::breaker_stats`] reports: times the endpoint was considered down, attempts
/// not sent because it was, and attempts in flight ended when it tripped.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct BreakerStats {
    pub trips: u32,
    pub refused: u64,
    pub cut: u64,
}

/// How one request ended after all its attempts.
#[derive(Debug)]
pub struct Sent {
    pub result: Result<Reply, String>,
    pub attempts: u32,
    /// Wall time of the successful attempt, in milliseconds.
    pub latency_ms: Option<f64>,
}

enum Attempt {
    Done(Reply),
    Retry { reason: String, after: Option<Duration> },
    Fail(String),
}

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one already; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn is_loopback(url: &str) -> bool {
    let host = url.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("");
    let host =
        host.rsplit_once(':').map_or(host, |(h, p)| if p.chars().all(|c| c.is_ascii_digit()) { h } else { host });
    matches!(host, "127.0.0.1" | "localhost" | "[::1]") || host.starts_with("127.")
}

impl Endpoint {
    /// Build the client; reads the key from the environment variable the endpoint names.
    pub fn new(name: &str, config: &EndpointConfig) -> Result<Endpoint, JudgeError> {
        let key = match &config.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.is_empty() => Some(Secret(k)),
                _ => {
                    return Err(JudgeError::MissingKey { endpoint: name.to_string(), var: var.clone() });
                }
            },
            None => None,
        };
        install_crypto_provider();
        let mut b = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs_f64(config.connect_timeout_s))
            .pool_max_idle_per_host(config.concurrency)
            .user_agent(concat!("rubric/", env!("CARGO_PKG_VERSION")));
        if is_loopback(&config.base_url) {
            b = b.no_proxy();
        }
        let http =
            b.build().map_err(|e| JudgeError::Config(format!("endpoint `{name}`: cannot build the client: {e}")))?;
        Ok(Endpoint {
            name: name.to_string(),
            config: config.clone(),
            url: config.completions_url(),
            key,
            http,
            permits: Semaphore::new(config.concurrency),
            next_slot: Mutex::new(Instant::now()),
            breaker: Mutex::default(),
            tripped: tokio::sync::watch::Sender::new(0),
        })
    }

    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn breaker_stats(&self) -> BreakerStats {
        let b = self.breaker();
        BreakerStats { trips: b.trips, refused: b.refused, cut: b.cut }
    }

    /// Whether an attempt may be sent now; when the endpoint is down, why not. After the
    /// cooldown one attempt (the probe) goes through; while it is out, the others are refused.
    fn admit(&self) -> Result<bool, String> {
        let threshold = self.config.breaker_failures;
        let mut b = self.breaker();
        if threshold == 0 || b.consecutive < threshold {
            return Ok(false);
        }
        let cooled = b.down_until.is_none_or(|t| Instant::now() >= t);
        if cooled && !b.probing {
            b.probing = true;
            return Ok(true);
        }
        b.refused += 1;
        Err(format!(
            "endpoint_down: endpoint `{}` is considered down after {} consecutive failed attempts (the last: {}); \
             it is tried again {}s after it went down",
            self.name, b.consecutive, b.last, self.config.breaker_cooldown_s
        ))
    }

    /// Count an attempt's outcome: a failure that could pass (`failed`) or any reply.
    fn settle(&self, probe: bool, failed: Option<&str>) {
        let mut b = self.breaker();
        if probe {
            b.probing = false;
        }
        match failed {
            None => {
                b.consecutive = 0;
                b.down_until = None;
            }
            Some(reason) => {
                b.consecutive += 1;
                let threshold = self.config.breaker_failures;
                if threshold > 0 && (b.consecutive == threshold || (probe && b.consecutive > threshold)) {
                    b.trips += 1;
                    b.last = reason.split(" (").next().unwrap_or(reason).to_string();
                    b.down_until = Some(Instant::now() + Duration::from_secs_f64(self.config.breaker_cooldown_s));
                    self.tripped.send_modify(|n| *n += 1);
                }
            }
        }
    }

    /// Replace every occurrence of the key in `s`.
    pub fn redact(&self, s: &str) -> String {
        match &self.key {
            Some(Secret(k)) if k.len() >= 4 => s.replace(k.as_str(), "***"),
            _ => s.to_string(),
        }
    }

    fn headers(&self, sample: u32) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(HeaderName::from_static("x-rubric-sample"), HeaderValue::from(sample));
        if let Some(Secret(k)) = &self.key {
            let (name, value) = match self.config.api_key_header.as_deref() {
                None => (AUTHORIZATION, format!("Bearer {k}")),
                Some(n) if n.eq_ignore_ascii_case("authorization") => (AUTHORIZATION, format!("Bearer {k}")),
                Some(n) => match HeaderName::from_bytes(n.as_bytes()) {
                    Ok(n) => (n, k.clone()),
                    Err(_) => (AUTHORIZATION, format!("Bearer {k}")),
                },
            };
            if let Ok(mut v) = HeaderValue::from_str(&value) {
                v.set_sensitive(true);
                h.insert(name, v);
            }
        }
        h
    }

    /// One call of the endpoint's other APIs (the Batch API's files and batches): `method` on
    /// `BASE/path` with an optional body and its content type, retried on timeouts, failed
    /// connections, 408, 429 and 5xx like a completion; the reply body, at most `limit` bytes.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(Vec<u8>, String)>,
        limit: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, String> {
        let url = format!("{}/{}", self.config.base_url.trim_end_matches('/'), path.trim_start_matches('/'));
        let name = &self.name;
        let attempts = self.config.attempts.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(format!("judge_deadline: the deadline passed before endpoint `{name}` answered"));
            }
            let mut headers = self.headers(0);
            headers.remove(HeaderName::from_static("x-rubric-sample"));
            let mut req =
                self.http.request(method.clone(), &url).timeout(Duration::from_secs_f64(self.config.timeout_s));
            if let Some((bytes, ct)) = &body {
                if let Ok(v) = HeaderValue::from_str(ct) {
                    headers.insert(CONTENT_TYPE, v);
                }
                req = req.body(bytes.clone());
            } else {
                headers.remove(CONTENT_TYPE);
            }
            let (retry, after) = match req.headers(headers).send().await {
                Err(e) if e.is_timeout() => (format!("judge_timeout: endpoint `{name}` gave no reply to {path}"), None),
                Err(e) => (format!("judge_unreachable: endpoint `{name}`: {}", error_chain(&e)), None),
                Ok(resp) => {
                    let status = resp.status();
                    let after = retry_after(resp.headers());
                    let deadline = Instant::now() + Duration::from_secs_f64(self.config.timeout_s);
                    let bytes = match read_body(resp, limit, deadline).await {
                        Ok(b) => b,
                        Err(BodyError::TooLarge) => {
                            return Err(format!(
                                "judge_reply_too_large: endpoint `{name}`: {path} passed {limit} bytes"
                            ))
                        }
                        Err(_) => {
                            return Err(format!("judge_unreachable: endpoint `{name}`: {path}: the body broke off"))
                        }
                    };
                    if status.is_success() {
                        return Ok(bytes);
                    }
                    let code = status.as_u16();
                    let reason = format!(
                        "judge_http_{code}: endpoint `{name}` answered {status} to {path}{}",
                        error_message(&bytes)
                    );
                    if !(code == 408 || code == 429 || status.is_server_error()) {
                        return Err(self.redact(&reason));
                    }
                    (reason, after)
                }
            };
            last = retry;
            if attempt < attempts {
                tokio::time::sleep(self.backoff(attempt, after)).await;
            }
        }
        Err(self.redact(&format!("{last} ({attempts} attempts)")))
    }

    /// Wait for this request's slot under the `rpm` limit.
    async fn pace(&self) {
        if self.config.rpm == 0 {
            return;
        }
        let interval = Duration::from_secs_f64(60.0 / self.config.rpm as f64);
        let wait = {
            let mut next = self.next_slot.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let slot = (*next).max(now);
            *next = slot + interval;
            slot - now
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// The delay before retry number `retry` (1-based): exponential with jitter, at least what
    /// the server asked for, at most `max_retry_after_s` when it asked for more.
    fn backoff(&self, retry: u32, asked: Option<Duration>) -> Duration {
        let base = self.config.backoff_ms as f64 * 2f64.powi(retry.saturating_sub(1).min(30) as i32);
        let capped = base.min(self.config.max_backoff_ms as f64);
        let jittered = Duration::from_secs_f64(capped * (0.5 + 0.5 * fastrand::f64()) / 1000.0);
        match asked {
            Some(a) => a.min(Duration::from_secs_f64(self.config.max_retry_after_s)).max(jittered),
            None => jittered,
        }
    }

    /// Send `body` (sample `sample`) until it succeeds, fails for good, runs out of attempts,
    /// finds the endpoint down, or reaches the run's `deadline`.
    pub async fn send(&self, body: &Json, sample: u32, deadline: Option<Instant>) -> Sent {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let sent_model = body.get("model").and_then(Json::as_str).unwrap_or("");
        let timeout = Duration::from_secs_f64(self.config.timeout_s);
        let attempts = self.config.attempts.max(1);
        let mut last = String::new();
        let end =
            |reason: String, attempts: u32| Sent { result: Err(self.redact(&reason)), attempts, latency_ms: None };
        let past_deadline = || deadline.is_some_and(|d| Instant::now() >= d);
        let deadline_reason =
            || format!("judge_deadline: the deadline passed before endpoint `{}` answered", self.name);
        for attempt in 1..=attempts {
            self.pace().await;
            let outcome = {
                let permit = match deadline {
                    Some(d) => match tokio::time::timeout_at(d.into(), self.permits.acquire()).await {
                        Ok(p) => p,
                        Err(_) => return end(deadline_reason(), attempt - 1),
                    },
                    None => self.permits.acquire().await,
                };
                let Ok(_permit) = permit else {
                    return end("judge_unreachable: client closed".into(), attempt);
                };
                if past_deadline() {
                    return end(deadline_reason(), attempt - 1);
                }
                let probe = match self.admit() {
                    Ok(probe) => probe,
                    Err(down) => return end(down, attempt - 1),
                };
                let start = Instant::now();
                let by = deadline.map_or(start + timeout, |d| d.min(start + timeout));
                let mut trips = self.tripped.subscribe();
                let outcome = tokio::select! {
                    outcome = self.attempt(bytes.clone(), sample, by, sent_model) => outcome,
                    _ = trips.changed() => {
                        self.breaker().cut += 1;
                        Attempt::Retry {
                            reason: format!(
                                "endpoint_down: endpoint `{}` was found down while this attempt waited",
                                self.name
                            ),
                            after: None,
                        }
                    }
                };
                let failed = match &outcome {
                    Attempt::Retry { reason, .. } => Some(reason.as_str()),
                    Attempt::Done(_) | Attempt::Fail(_) => None,
                };
                self.settle(probe, failed);
                (outcome, start.elapsed())
            };
            match outcome {
                (Attempt::Done(reply), took) => {
                    return Sent { result: Ok(reply), attempts: attempt, latency_ms: Some(took.as_secs_f64() * 1000.0) }
                }
                (Attempt::Fail(reason), _) => return end(reason, attempt),
                (Attempt::Retry { .. }, _) if past_deadline() => return end(deadline_reason(), attempt),
                (Attempt::Retry { reason, after }, _) => {
                    last = reason;
                    if attempt < attempts {
                        let wait = self.backoff(attempt, after);
                        let wait = deadline.map_or(wait, |d| wait.min(d.saturating_duration_since(Instant::now())));
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        }
        end(format!("{last} ({attempts} attempt{})", if attempts == 1 { "" } else { "s" }), attempts)
    }

    /// One attempt, over by `deadline` (the request, the reply's headers and all of its body).
    async fn attempt(&self, bytes: Vec<u8>, sample: u32, deadline: Instant, sent_model: &str) -> Attempt {
        let name = &self.name;
        let timeout = deadline.saturating_duration_since(Instant::now());
        let req = self.http.post(&self.url).headers(self.headers(sample)).body(bytes).timeout(timeout);
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Attempt::Retry {
                    reason: format!("judge_timeout: endpoint `{name}` gave no reply within {}s", self.config.timeout_s),
                    after: None,
                }
            }
            Err(e) if e.is_connect() => {
                return Attempt::Retry {
                    reason: format!("judge_unreachable: cannot connect to endpoint `{name}`"),
                    after: None,
                }
            }
            Err(e) => {
                return Attempt::Retry {
                    reason: format!("judge_unreachable: endpoint `{name}`: {}", error_chain(&e)),
                    after: None,
                }
            }
        };
        let status = resp.status();
        let after = retry_after(resp.headers());
        let limit = self.config.max_reply_bytes;
        let too_large = |size: Option<u64>| {
            let what = match size {
                Some(n) => format!("is {n} bytes, over"),
                None => "passed".to_string(),
            };
            Attempt::Fail(format!(
                "judge_reply_too_large: the reply of endpoint `{name}` {what} its limit of {limit} bytes \
                 (`max_reply_bytes`); it was not read further"
            ))
        };
        if let Some(n) = resp.content_length().filter(|&n| n > limit as u64) {
            // Not read at all: dropping the response closes the connection.
            return too_large(Some(n));
        }
        let body = match read_body(resp, limit, deadline).await {
            Ok(b) => b,
            Err(BodyError::Timeout) => {
                return Attempt::Retry {
                    reason: format!("judge_timeout: endpoint `{name}` gave no reply within {}s", self.config.timeout_s),
                    after: None,
                }
            }
            Err(BodyError::TooLarge) => return too_large(None),
            Err(BodyError::Other(e)) => {
                return Attempt::Retry { reason: format!("judge_unreachable: endpoint `{name}`: {e}"), after: None }
            }
        };
        let code = status.as_u16();
        if status.is_success() {
            let json: Json = match serde_json::from_slice(&body) {
                Ok(j) => j,
                Err(_) => {
                    return Attempt::Fail(format!(
                        "judge_bad_response: endpoint `{name}` answered {code} with a body that is not JSON: {:?}",
                        snippet(&body)
                    ))
                }
            };
            return match Reply::from_completion(&json, sent_model) {
                Ok(r) => Attempt::Done(r),
                Err(reason) => Attempt::Fail(reason),
            };
        }
        let message = error_message(&body);
        let reason = format!("judge_http_{code}: endpoint `{name}` answered {status}{message}");
        if code == 408 || code == 429 || status.is_server_error() {
            Attempt::Retry { reason, after }
        } else {
            Attempt::Fail(reason)
        }
    }
}

enum BodyError {
    Timeout,
    TooLarge,
    Other(String),
}

/// The whole body, unless it passes `limit` bytes (reading stops at the chunk that would pass
/// it) or is not complete by `deadline`. The buffer grows with what arrives, never ahead of it.
async fn read_body(mut resp: reqwest::Response, limit: usize, deadline: Instant) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline.into(), resp.chunk()).await {
            Err(_) => return Err(BodyError::Timeout),
            Ok(Ok(Some(c))) => {
                if out.len() + c.len() > limit {
                    return Err(BodyError::TooLarge);
                }
                out.extend_from_slice(&c);
            }
            Ok(Ok(None)) => return Ok(out),
            Ok(Err(e)) if e.is_timeout() => return Err(BodyError::Timeout),
            Ok(Err(e)) => return Err(BodyError::Other(error_chain(&e))),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.into_owned(),
    }
}

/// `: message` from an OpenAI-style error body, else a snippet of the body.
fn error_message(body: &[u8]) -> String {
    if body.is_empty() {
        return String::new();
    }
    let msg = serde_json::from_slice::<Json>(body)
        .ok()
        .and_then(|j| j.pointer("/error/message").and_then(Json::as_str).map(str::to_string))
        .unwrap_or_else(|| snippet(body));
    let msg = match msg.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &msg[..i]),
        None => msg,
    };
    format!(": {msg}")
}

/// `retry-after-ms` (milliseconds, as OpenAI sends), else `Retry-After` in seconds or as an
/// HTTP date (a date in the past means now).
fn retry_after(h: &HeaderMap) -> Option<Duration> {
    let text = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::trim);
    let get = |n: &str| text(n).and_then(|s| s.parse::<f64>().ok());
    if let Some(ms) = get("retry-after-ms").filter(|x| x.is_finite() && *x >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    if let Some(s) = get("retry-after") {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s));
    }
    let date = httpdate::parse_http_date(text("retry-after")?).ok()?;
    Some(date.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("http://localhost/v1"));
        assert!(is_loopback("http://[::1]:9/v1"));
        assert!(!is_loopback("https://api.openai.com/v1"));
    }

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let mut cfg = EndpointConfig::new("http://127.0.0.1:1/v1");
        cfg.backoff_ms = 100;
        cfg.max_backoff_ms = 300;
        cfg.max_retry_after_s = 2.0;
        let e = Endpoint::new("t", &cfg).unwrap();
        for _ in 0..20 {
            let d1 = e.backoff(1, None).as_secs_f64();
            assert!((0.05..=0.1).contains(&d1), "{d1}");
            let d5 = e.backoff(5, None).as_secs_f64();
            assert!((0.15..=0.3).contains(&d5), "{d5}");
            assert_eq!(e.backoff(1, Some(Duration::from_secs(1))), Duration::from_secs(1));
            assert_eq!(e.backoff(1, Some(Duration::from_secs(100))), Duration::from_secs(2));
        }
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        let in_a_minute = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
        h.insert("retry-after", HeaderValue::from_str(&in_a_minute).unwrap());
        let d = retry_after(&h).unwrap().as_secs_f64();
        assert!((55.0..=60.0).contains(&d), "{d}");
        h.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after-ms", HeaderValue::from_static("25"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(25)));
    }
}
