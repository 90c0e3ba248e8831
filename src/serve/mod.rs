//! The reward server (`rubric serve`, feature `serve`): an axum router that holds loaded
//! rubrics and scores batches of rows for RL trainers, each row into exactly the record
//! `rubric run` writes (`runtime::score_batch`), on the rayon pool, off the async executor.
//! Token offsets (in the rows, or a list beside them) give the token credit of `--groups`.
//! `conn.rs` is the accept loop that serves the router under connection limits and timeouts
//! (`limits.rs`); the guard here checks the token and bounds each request body before it is read.

mod conn;
mod limits;
mod metrics;
mod openrlhf;

pub use limits::{LimitArgs, Limits};

use crate::engine::Engine;
use crate::ir::Program;
use crate::runtime::{self, ChunkJudge, Identity};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use limits::{BodyError, Bounded};
use metrics::Metrics;
use serde_json::{json, Value as Json};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// One loaded rubric: its program, the identity stamped on its records and the engine that
/// scores it (bound to the program once, at start).
pub struct Served {
    pub program: &'static Program,
    pub ident: Identity,
    pub engine: Box<dyn Engine>,
}

/// How the server listens and what it accepts.
pub struct Options {
    pub addr: SocketAddr,
    /// The bearer token every request but `GET /healthz` must carry, when set.
    pub token: Option<String>,
    /// Larger request bodies are refused with 413.
    pub max_body_bytes: usize,
    /// A scoring request that takes longer is answered 503 (its rows finish on the pool).
    pub timeout: Duration,
    /// Every request's rows are decided within this (`runtime::RowPolicy::deadline`); a
    /// request may ask for less.
    pub row_deadline: Option<Duration>,
    /// Connection limits and timeouts, and the deadline of a request body.
    pub limits: Limits,
}

/// Everything a request handler reads: set up once and never freed (the server runs until
/// the process ends).
struct AppState {
    rubrics: Vec<Served>,
    judges: Option<Box<dyn ChunkJudge>>,
    token: Option<String>,
    timeout: Duration,
    row_deadline: Option<Duration>,
    max_body_bytes: usize,
    body_timeout: Duration,
    metrics: Metrics,
}

type Shared = &'static AppState;

/// A JSON error response: `{"error": {"code": CODE, "message": MESSAGE}}`.
fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "error": { "code": code, "message": message.into() } });
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body.to_string()).into_response()
}

#[expect(
    clippy::expect_used,
    reason = "serde_json cannot fail on a JSON value or on types with string keys and plain fields"
)]
fn json_response(body: &Json) -> Response {
    let bytes = serde_json::to_vec(body).expect("a JSON value serialises");
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response()
}

/// The body of `POST /v1/score`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ScoreRequest {
    /// A loaded rubric's name, `ir_hash` or bundle hash; optional when one is loaded.
    rubric: Option<String>,
    rows: Vec<Json>,
    /// Group rows by this field, as `rubric run --groups FIELD`.
    groups: Option<String>,
    /// Token offsets parallel to `rows` (`null` for a row without): each becomes its row's
    /// `token_offsets` field, which a row may also carry itself.
    token_offsets: Option<Vec<Json>>,
    /// Decide every row within this many milliseconds (at most the server's
    /// `--row-deadline-ms`): a row that lost a judge call to it is unscored, reason `timeout`.
    deadline_ms: Option<u64>,
    /// Add each row's `timing` to its record.
    #[serde(default)]
    timings: bool,
}

/// The error a request gets: status, code and message.
type Refusal = (StatusCode, &'static str, String);

/// The rubric a request names, or the error that says why there is none.
fn pick(rubrics: &[Served], name: Option<&str>) -> Result<usize, Refusal> {
    let Some(name) = name else {
        return match rubrics.len() {
            1 => Ok(0),
            n => Err((
                StatusCode::BAD_REQUEST,
                "rubric::serve::bad_request",
                format!("{n} rubrics are loaded: say which with `rubric` (a name, `ir_hash` or bundle hash)"),
            )),
        };
    };
    let matches: Vec<usize> = rubrics
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ident.rubric == name || s.ident.ir_hash == name || s.ident.bundle.as_deref() == Some(name))
        .map(|(i, _)| i)
        .collect();
    match matches[..] {
        [i] => Ok(i),
        [] => Err((
            StatusCode::NOT_FOUND,
            "rubric::serve::unknown_rubric",
            format!("no loaded rubric is named or hashed `{name}`; `GET /v1/bundles` lists them"),
        )),
        _ => Err((
            StatusCode::BAD_REQUEST,
            "rubric::serve::bad_request",
            format!("several loaded rubrics are named `{name}`: name one by its `ir_hash` or bundle hash"),
        )),
    }
}

/// Move a request's top-level `token_offsets` into its rows (`rows[i].token_offsets`), where
/// `rubric run --groups` reads them. Refused: a list of another length than `rows`, offsets
/// without `groups` (only groups give token credit), and a row that has offsets both ways.
fn attach_token_offsets(rows: &mut [Json], offsets: Vec<Json>, grouped: bool) -> Result<(), Refusal> {
    let bad = |message: String| (StatusCode::BAD_REQUEST, "rubric::serve::bad_request", message);
    if !grouped {
        return Err(bad("`token_offsets` gives token credit, which needs `groups` (the group field)".into()));
    }
    if offsets.len() != rows.len() {
        return Err(bad(format!(
            "`token_offsets` has {} entries for {} rows: give one per row (`null` for none)",
            offsets.len(),
            rows.len()
        )));
    }
    for (i, (row, o)) in rows.iter_mut().zip(offsets).enumerate() {
        if o.is_null() {
            continue;
        }
        // A row that is not an object stays as it is: its error record says so.
        let Some(fields) = row.as_object_mut() else { continue };
        if fields.contains_key("token_offsets") {
            return Err(bad(format!(
                "row {i} has a `token_offsets` field and `token_offsets[{i}]` is given too: give one"
            )));
        }
        fields.insert("token_offsets".into(), o);
    }
    Ok(())
}

/// The refusal for a body that `limits::Bounded` stopped, or that could not be read.
fn body_refusal(e: axum::Error) -> Response {
    let inner = e.into_inner();
    // The bound's error is wrapped once per body adapter: look through the chain.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(inner.as_ref());
    let bound = std::iter::from_fn(|| {
        let c = cause?;
        cause = c.source();
        Some(c)
    })
    .find_map(|c| c.downcast_ref::<BodyError>());
    match bound {
        Some(e @ BodyError::TooLarge(_)) => too_large(e.to_string()),
        Some(e @ BodyError::Timeout(_)) => {
            let mut r = error(StatusCode::REQUEST_TIMEOUT, "rubric::serve::body_timeout", e.to_string());
            r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            r
        }
        Some(e) => error(StatusCode::BAD_REQUEST, "rubric::serve::bad_request", e.to_string()),
        None => {
            error(StatusCode::BAD_REQUEST, "rubric::serve::bad_request", format!("the body could not be read: {inner}"))
        }
    }
}

/// 413, and the connection closes: the rest of the body is never read.
fn too_large(message: String) -> Response {
    let mut r = error(StatusCode::PAYLOAD_TOO_LARGE, "rubric::serve::too_large", message);
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

async fn score(State(state): State<Shared>, req: Request) -> Response {
    // The guard bounded the body (size and deadline); reading stops where it says.
    let body = match axum::body::to_bytes(req.into_body(), usize::MAX).await {
        Ok(b) => b,
        Err(e) => return body_refusal(e),
    };
    let mut req: ScoreRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "rubric::serve::bad_request",
                format!("the body is not a score request: {e}"),
            )
        }
    };
    let which = match pick(&state.rubrics, req.rubric.as_deref()) {
        Ok(i) => i,
        Err((status, code, message)) => return error(status, code, message),
    };
    if let Some(offsets) = req.token_offsets.take() {
        if let Err((status, code, message)) = attach_token_offsets(&mut req.rows, offsets, req.groups.is_some()) {
            return error(status, code, message);
        }
    }
    let policy = runtime::RowPolicy { deadline: row_deadline(state, req.deadline_ms), timings: req.timings };
    match score_rows(state, which, req.rows, req.groups, policy).await {
        Ok(records) => json_response(&json!({ "results": records })),
        Err(refusal) => refusal,
    }
}

/// The deadline of a request's rows: the server's, or the request's when it asks for less.
fn row_deadline(state: Shared, asked_ms: Option<u64>) -> Option<Duration> {
    let asked = asked_ms.map(Duration::from_millis);
    match (state.row_deadline, asked) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Score `rows` (values, never turned back into text and parsed again) with rubric `which`,
/// off the async executor, within the server's request timeout: their records, in order, or
/// the error response.
async fn score_rows(
    state: Shared,
    which: usize,
    rows: Vec<Json>,
    group_field: Option<String>,
    policy: runtime::RowPolicy,
) -> Result<Vec<Json>, Response> {
    let n = rows.len();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = move || {
        let s = &state.rubrics[which];
        // A row that panics is contained at the row (its error record); anything else that
        // panics fails this request with a 500, and never unwinds into rayon, which would
        // abort the server.
        let scored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let rows: Vec<(usize, runtime::RowIn<'_>)> =
                rows.iter().enumerate().map(|(i, r)| (i, runtime::RowIn::Value(r))).collect();
            runtime::score_batch(
                s.engine.as_ref(),
                s.program,
                &s.ident,
                &rows,
                None,
                state.judges.as_deref(),
                group_field.as_deref(),
                policy,
            )
        }));
        let _ = tx.send(
            scored.map_err(|payload| format!("scoring the request panicked: {}", runtime::panic_message(&*payload))),
        );
    };
    // Not on a tokio blocking thread: judge dispatch blocks on its own runtime, which tokio
    // forbids inside a runtime's context. With judges, a thread of its own, so that a request
    // waiting for judge replies holds no rayon worker (its rows are still evaluated on the
    // pool) and cannot stall the requests beside it; without, the rayon pool.
    if state.judges.is_some() {
        if let Err(e) = std::thread::Builder::new().name("rubric-serve-judged".into()).spawn(job) {
            return Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "rubric::serve::internal",
                format!("cannot start a scoring thread: {e}"),
            ));
        }
    } else {
        rayon::spawn(job);
    }
    match tokio::time::timeout(state.timeout, rx).await {
        Ok(Ok(Ok(records))) => {
            state.metrics.add_rows(n);
            Ok(records)
        }
        Ok(Ok(Err(e))) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, "rubric::serve::internal", e)),
        Ok(Err(_)) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, "rubric::serve::internal", "scoring stopped")),
        Err(_) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "rubric::serve::timeout",
            format!(
                "scoring {n} rows took longer than {:.1}s; send fewer rows per request",
                state.timeout.as_secs_f64()
            ),
        )),
    }
}

async fn bundles(State(state): State<Shared>) -> Response {
    let list: Vec<Json> = state
        .rubrics
        .iter()
        .map(|s| {
            json!({
                "name": s.ident.rubric,
                "version": s.ident.version,
                "ir_hash": s.ident.ir_hash,
                "bundle": s.ident.bundle,
                "engine": s.engine.name(),
            })
        })
        .collect();
    json_response(&json!({ "rubrics": list }))
}

async fn metrics_handler(State(state): State<Shared>) -> Response {
    let judges = state.judges.as_ref().map(|j| j.stats());
    json_response(&state.metrics.to_json(judges))
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "rubric::serve::not_found",
        "no such endpoint: POST /v1/score, POST /v1/openrlhf, GET /v1/bundles, GET /healthz, GET /metrics",
    )
}

/// Bearer-token check (every path but `/healthz`), then the body's bounds — a
/// `Content-Length` over `--max-body-bytes` is 413 before a byte of the body is read; any other
/// body is cut at that size and at `--body-timeout-s` — then counters and latency.
async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let scoring = matches!(req.uri().path(), "/v1/score" | "/v1/openrlhf");
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let resp = match &state.token {
        Some(token) if req.uri().path() != "/healthz" && !authorized(&req, token) => error(
            StatusCode::UNAUTHORIZED,
            "rubric::serve::unauthorized",
            "this server needs `Authorization: Bearer <token>`",
        ),
        _ if declared.is_some_and(|n| n > state.max_body_bytes as u64) => too_large(format!(
            "the body is {} bytes, larger than {} bytes (`--max-body-bytes`)",
            declared.unwrap_or_default(),
            state.max_body_bytes
        )),
        _ => {
            let req = req.map(|b| Body::new(Bounded::new(b, state.max_body_bytes, state.body_timeout)));
            state.metrics.enter();
            let r = next.run(req).await;
            state.metrics.leave();
            r
        }
    };
    state.metrics.record(resp.status().as_u16(), scoring.then(|| start.elapsed()));
    resp
}

fn authorized(req: &Request, token: &str) -> bool {
    let Some(given) = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
    let Some(given) = given.strip_prefix("Bearer ") else { return false };
    // Compared in time independent of where the first difference is.
    given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/v1/score", post(score))
        .route("/v1/openrlhf", post(openrlhf::reward))
        .route("/v1/bundles", get(bundles))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics_handler))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state, guard))
        .with_state(state)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    eprintln!("serve: shutting down after the requests in flight");
}

/// `rubric serve`: listen on `opts.addr`, print the base URL as the first line of stdout, and
/// serve until SIGINT or SIGTERM, finishing the requests in flight.
pub fn main(rubrics: Vec<Served>, judges: Option<Box<dyn ChunkJudge>>, opts: Options) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let state: Shared = Box::leak(Box::new(AppState {
        rubrics,
        judges,
        token: opts.token,
        timeout: opts.timeout,
        row_deadline: opts.row_deadline,
        max_body_bytes: opts.max_body_bytes,
        body_timeout: opts.limits.body_timeout,
        metrics: Metrics::default(),
    }));
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(opts.addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {}: {e}", opts.addr);
                return ExitCode::from(2);
            }
        };
        let local = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        {
            use std::io::Write as _;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "http://{local}");
            let _ = out.flush();
        }
        for s in &state.rubrics {
            eprintln!(
                "serve: {} {} ({}{}) on {}",
                s.ident.rubric,
                s.ident.version,
                s.ident.ir_hash,
                s.ident.bundle.as_ref().map(|b| format!(", bundle {b}")).unwrap_or_default(),
                s.engine.name()
            );
        }
        let l = opts.limits;
        eprintln!(
            "serve: at most {} connections ({} per client address); headers within {:.1}s, bodies within {:.1}s, \
             idle connections closed after {:.1}s",
            l.max_connections,
            l.max_connections_per_client,
            l.header_timeout.as_secs_f64(),
            l.body_timeout.as_secs_f64(),
            l.keep_alive.as_secs_f64()
        );
        eprintln!(
            "serve: POST http://{local}/v1/score (OpenRLHF: /v1/openrlhf); GET /v1/bundles, /healthz, /metrics; stop with Ctrl-C"
        );
        conn::serve(listener, router(state), opts.limits, &state.metrics, shutdown_signal()).await;
        ExitCode::SUCCESS
    })
}
