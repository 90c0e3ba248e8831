//! Judge dispatch (the `judges` feature): turns judge criteria into calls to OpenAI-compatible
//! chat-completions endpoints and their replies into the recorded-verdict JSON forms that the
//! engines already apply (`interp::verdict`), so a dispatched verdict and a recorded one mean
//! the same thing.
//!
//! A `Task` is one judge, the criteria of one row it must decide, and the inputs it sees — only
//! those: `Task::new` copies no other input, so a hidden input cannot reach a request. The
//! `Dispatcher` renders each task (`prompt`), in calls of `per_call` criteria, one request per
//! sample; identifies each request by the hash of its canonical form (`request`: rendered with
//! stable fence tags, while the body sent carries tags derived from a secret the dispatcher
//! draws when it is built, so that no input can forge a fence); deduplicates
//! identical requests; answers them from memory, the SQLite `cache`, a `transcript` replay, or
//! over HTTP (`client`: limits, retries, timeouts); and reads every reply (`reply`). Failures
//! become `{"unscored": "judge_...: ..."}` samples, never panics or hangs.
//!
//! A local judge (`local "DIR"`) is planned the same way, one criterion per request, but its
//! distinct requests are answered by a local model (`local`, over `models::local_judge`) in one
//! batched call per `resolve`, after memory, the cache and a replay transcript.
//!
//! `mock` is `rubric mock-judge`, a loopback server speaking the same API, driven by rules.

pub mod batch;
pub mod cache;
pub mod client;
pub mod config;
pub mod local;
pub mod mock;
pub mod prompt;
pub mod reply;
pub mod request;
pub mod tokens;
pub mod transcript;

pub use cache::Cache;
pub use config::{EndpointConfig, JudgesConfig, Price, ResponseFormat};
pub use reply::Reply;
pub use transcript::{Replay, TranscriptWriter};

use crate::ir::{Const, CriterionDecl, CriterionKind, ExprKind, InputDecl, JudgeDecl, Program, Type, Verifier};
use crate::value::Value;
use client::Endpoint;
use request::{Prepared, Wire};
use serde::Serialize;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

/// Errors that stop a dispatcher from being built (bad configuration, missing key, cache file).
/// Nothing that happens to one request is an error: it is an unscored verdict.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JudgeError {
    #[error("judges configuration: {0}")]
    Config(String),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("judge cache: {0}")]
    Cache(String),
    #[error("endpoint `{endpoint}` reads its API key from the environment variable `{var}`, which is not set")]
    MissingKey { endpoint: String, var: String },
}

/// What a judge is asked about a criterion.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// A verdict of this kind (binary, ordinal, nominal, continuous).
    Verdict(CriterionKind),
    /// A value of type `ty` extracted from input `from` (`extract ... by JUDGE`).
    Extract { ty: Type, from: String },
    /// A generator's items: a value of type `ty` (a list) it writes (`rubric generate`).
    Generate { ty: Type },
}

/// One criterion as a judge sees it: its id (as in results, e.g. `items[3]`), its text (already
/// evaluated for per-instance criteria), what is asked, and whether the text came from the
/// row.
#[derive(Debug, Clone, PartialEq)]
pub struct Criterion {
    pub id: String,
    pub text: String,
    pub ask: Ask,
    /// The text is not a constant of the rubric (an `each` template's `item.text`, say): it came
    /// from the row, is untrusted, and is fenced like an input.
    pub from_data: bool,
}

impl Criterion {
    /// The judge criterion `decl` with its evaluated `id` and `text`; `None` when its verifier is
    /// not a judge. Its text is from the data unless `decl`'s text is a constant string.
    pub fn for_decl(program: &Program, decl: &CriterionDecl, id: String, text: String) -> Option<Criterion> {
        let ask = match &decl.verifier {
            Verifier::Judge { .. } => Ask::Verdict(decl.kind.clone()),
            Verifier::Extract { from, ty, .. } => {
                Ask::Extract { ty: ty.clone(), from: program.inputs.get(*from as usize)?.name.clone() }
            }
            _ => return None,
        };
        let from_data = !matches!(decl.text.kind, ExprKind::Const(Const::Text(_)));
        Some(Criterion { id, text, ask, from_data })
    }
}

/// The `index` of a [`SeenInput`] that is not an input but what an `each` block `shows` its
/// judge of one instance.
pub const SHOWN: u32 = u32::MAX;

/// An input a judge sees, with its value for the row (or what a block shows it: [`SHOWN`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeenInput {
    /// Index into `Program::inputs`.
    pub index: u32,
    pub name: String,
    pub ty: Type,
    pub value: Value,
}

/// One judge, criteria of one row, and the inputs the judge sees.
#[derive(Debug, Clone)]
pub struct Task {
    judge: Arc<JudgeDecl>,
    criteria: Vec<Criterion>,
    seen: Vec<SeenInput>,
}

impl Task {
    /// Copies from `row` (the row's inputs, in `inputs` order) only the inputs `judge` sees.
    /// A comparing judge also gets its two candidates (shown as the first and second answer,
    /// never by name).
    pub fn new(judge: Arc<JudgeDecl>, inputs: &[InputDecl], criteria: Vec<Criterion>, row: &[Value]) -> Task {
        let compared = judge.compares.as_ref().map(|c| [c.first, c.second]);
        let seen = judge
            .sees
            .iter()
            .chain(compared.iter().flatten())
            .filter_map(|&i| {
                let d = inputs.get(i as usize)?;
                let v = row.get(i as usize)?;
                Some(SeenInput { index: i, name: d.name.clone(), ty: d.ty.clone(), value: v.clone() })
            })
            .collect();
        Task { judge, criteria, seen }
    }

    /// The task with what an `each` block `shows` its judge of one instance
    /// ([`Task::shown_of`]): fenced after the inputs it sees, under their names.
    pub fn with_shown(mut self, shown: Vec<SeenInput>) -> Task {
        self.seen.extend(shown);
        self
    }

    /// What block `e` shows its judge of an instance whose `shows` evaluated to `values`: one
    /// entry per item, under [`SHOWN`] (no input's index), typed as its expression.
    pub fn shown_of(e: &crate::ir::EachDecl, values: &[Value]) -> Vec<SeenInput> {
        e.shows
            .iter()
            .zip(values)
            .map(|(s, v)| SeenInput { index: SHOWN, name: s.name.clone(), ty: s.expr.ty.clone(), value: v.clone() })
            .collect()
    }

    /// What the task's block shows its judge ([`Task::with_shown`]).
    pub fn shown(&self) -> Vec<SeenInput> {
        self.seen.iter().filter(|s| s.index == SHOWN).cloned().collect()
    }

    /// `Task::new` for judge number `judge` of `program`.
    pub fn for_program(program: &Program, judge: u32, criteria: Vec<Criterion>, row: &[Value]) -> Option<Task> {
        let j = program.judges.get(judge as usize)?;
        Some(Task::new(Arc::new(j.clone()), &program.inputs, criteria, row))
    }

    /// A group judge's task (`rollouts X`): what it sees by name from `shared` (the group's
    /// first member), then input `X` of every member in `rollouts`, in group order, each an
    /// entry of `seen` under the rollouts input's index (the prompt fences them as rollout 1,
    /// 2, ...). `None` for a judge that is not a group judge.
    pub fn for_group(
        program: &Program,
        judge: u32,
        criteria: Vec<Criterion>,
        shared: &[Value],
        rollouts: Vec<Value>,
    ) -> Option<Task> {
        let j = program.judges.get(judge as usize)?;
        let at = j.rollouts?;
        let d = program.inputs.get(at as usize)?;
        let mut t = Task::new(Arc::new(j.clone()), &program.inputs, criteria, shared);
        t.seen.extend(rollouts.into_iter().map(|value| SeenInput {
            index: at,
            name: d.name.clone(),
            ty: d.ty.clone(),
            value,
        }));
        Some(t)
    }

    pub fn judge(&self) -> &JudgeDecl {
        &self.judge
    }

    pub fn criteria(&self) -> &[Criterion] {
        &self.criteria
    }

    pub fn seen(&self) -> &[SeenInput] {
        &self.seen
    }
}

/// A criterion's verdict, in a recorded-verdict JSON form. Two are equal when they decided
/// alike (verdict, models, requests, cost), however long each took.
#[derive(Debug, Clone)]
pub struct CriterionVerdict {
    pub id: String,
    /// One sample (`{"verdict": "met", "evidence": .., "model": ..}`, `{"level": 3, ..}`,
    /// `{"unscored": "judge_timeout: .."}`, ...) or `{"samples": [..]}` for `samples N`.
    pub verdict: Json,
    /// The models that answered, in sample order, without repeats.
    pub models: Vec<String>,
    /// The hash of each sample's request (empty for a sample that was never sent).
    pub requests: Vec<String>,
    /// What its verdict cost: its share of the price of each reply it was decided by (a
    /// request shared by several criteria, samples or rows is split evenly between them),
    /// from the usage the reply reported, whether it came over HTTP in this run, from the
    /// cache or from a transcript, so that replaying a run gives the same records; `None` when
    /// the configuration prices no model (cost accounting is off).
    pub cost: Option<Cost>,
    /// How long its slowest sample took to decide, from when the dispatcher took it up
    /// (waiting for a connection slot, retries and backoff included; 0 for one answered from
    /// memory, the cache or a transcript): what a slow row waited for (not written to records
    /// unless timings are asked for).
    pub waited_ms: f64,
}

impl PartialEq for CriterionVerdict {
    fn eq(&self, other: &Self) -> bool {
        (&self.id, &self.verdict, &self.models, &self.requests, &self.cost)
            == (&other.id, &other.verdict, &other.models, &other.requests, &other.cost)
    }
}

/// Dollars spent this run, and whether some of it could not be told.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// The known part.
    pub usd: f64,
    /// A request behind it was paid for but its cost is unknown (no usage in the reply, no
    /// price for the model, or a timed-out attempt the provider may bill).
    pub unknown: bool,
}

impl Cost {
    /// The dollars, or `None` when part of them is unknown.
    pub fn known(&self) -> Option<f64> {
        (!self.unknown).then_some(self.usd)
    }

    pub fn add(&mut self, other: Cost) {
        self.usd += other.usd;
        self.unknown |= other.unknown;
    }
}

/// What one request's reply cost.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Spend {
    /// Nothing: a local model's answer, or a request refused or failed before any reply was
    /// billed.
    Free,
    Paid(f64),
    /// Paid for, at a cost that cannot be told (no usage, no price, a timed-out attempt).
    Unknown,
}

/// Cost counters of one judge at one endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostTally {
    /// Requests answered over HTTP.
    pub calls: u64,
    pub usd: f64,
    /// Replies that reported no usage: their cost is unknown.
    pub no_usage: u64,
    /// Replies of a model the configuration has no price for.
    pub unpriced: u64,
    /// Requests that timed out after they were sent (the provider may bill them).
    pub timed_out: u64,
    pub prompt_tokens: u64,
    /// Prompt tokens the provider served from its prefix cache.
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// What the cached tokens saved against the full input price.
    pub saved_usd: f64,
}

/// A run's budget: no request is sent whose worst case could take the spending past `limit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BudgetStats {
    pub limit_usd: f64,
    /// Dollars paid (a reply of unknown cost counts at its worst case).
    pub spent_usd: f64,
    /// Held by requests in flight, at their worst case.
    #[serde(skip)]
    pub held_usd: f64,
    /// Requests not sent because they could have passed the budget, or could not be bounded.
    pub refused: u64,
}

/// Counters of one dispatcher's life.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Requests planned (calls × samples), before deduplication.
    pub planned: u64,
    /// Distinct requests among them.
    pub unique: u64,
    /// Planned requests answered by an identical request of the same batch.
    pub deduplicated: u64,
    /// Distinct requests answered by an identical request of an earlier batch.
    pub memo_hits: u64,
    pub cache_hits: u64,
    pub replayed: u64,
    /// Requests sent over HTTP (each with one or more attempts).
    pub http_requests: u64,
    pub http_attempts: u64,
    pub retries: u64,
    /// Requests that got no reply (every entry unscored).
    pub failed: u64,
    /// Replies with at least one entry that did not validate.
    pub invalid_replies: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cache_errors: u64,
    /// Cache entries found that did not verify (asked again and rewritten).
    pub cache_unverified: u64,
    /// Where a damaged cache file was moved when the run opened the cache.
    pub cache_set_aside: Option<String>,
    /// Endpoints whose circuit breaker tripped: how often, and the requests it refused.
    pub endpoints_down: BTreeMap<String, client::BreakerStats>,
    pub transcript_errors: u64,
    /// Requests answered by a local model (`local "DIR"` judges).
    pub local_requests: u64,
    /// Batched local-model calls that answered them (one per model and dispatch round).
    pub local_calls: u64,
    /// Milliseconds spent in those calls (model loading included).
    pub local_ms: f64,
    /// Milliseconds of each successful HTTP request, by endpoint.
    #[serde(skip)]
    pub latency_ms: BTreeMap<String, Vec<f64>>,
    /// Batches submitted through Batch APIs, open batches of an earlier run polled again, status
    /// polls, and requests answered (or failed) through them.
    pub batches_submitted: u64,
    pub batches_resumed: u64,
    pub batch_polls: u64,
    pub batch_lines: u64,
    /// Whether the configuration prices any model (cost accounting is on).
    pub accounted: bool,
    /// Cost counters, by judge and endpoint.
    pub costs: BTreeMap<String, BTreeMap<String, CostTally>>,
    /// The run's budget, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetStats>,
}

/// What a dispatch would send, without sending it ([`Dispatcher::dry_run`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DryRun {
    /// Requests planned (calls × samples), before deduplication.
    pub planned: u64,
    /// Planned requests identical to another of the batch.
    pub deduplicated: u64,
    /// Distinct requests the cache (or a replay transcript) would answer.
    pub cached: u64,
    /// Sample slots no request can serve, by reason (`judge_no_endpoint: ...`).
    pub unroutable: BTreeMap<String, u64>,
    /// The requests to send, by judge, endpoint and model.
    pub calls: Vec<PlannedCalls>,
}

/// The requests one judge would send to one endpoint and model.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlannedCalls {
    pub judge: String,
    pub endpoint: String,
    pub model: String,
    pub requests: u64,
    /// Criteria answered by them (a request of `per_call N` answers N).
    pub entries: u64,
    pub prompt_tokens: u64,
    /// The tokenizer that counted them; `None`: estimated at 4 bytes per token.
    pub tokenizer: Option<&'static str>,
    /// The sum of the requests' `max_tokens`; `None` when a request has none (no bound).
    pub max_completion_tokens: Option<u64>,
    /// The model's prices, when the configuration has them.
    #[serde(skip)]
    pub price: Option<Price>,
    /// Dollars for the prompts at the full input price (before any provider caching).
    pub prompt_usd: Option<f64>,
    /// Dollars for the replies at most (`max_tokens` each).
    pub max_completion_usd: Option<f64>,
}

/// Latency percentiles of one endpoint, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Stats {
    pub fn percentiles(&self, endpoint: &str) -> Option<Percentiles> {
        let mut v = self.latency_ms.get(endpoint)?.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Percentiles { n: v.len(), p50: at(0.5), p90: at(0.9), p99: at(0.99), max: v[v.len() - 1] })
    }

    /// The counters, with latency percentiles per endpoint.
    pub fn to_json(&self) -> Json {
        let mut j = serde_json::to_value(self).unwrap_or(Json::Null);
        let lat: serde_json::Map<String, Json> = self
            .latency_ms
            .keys()
            .filter_map(|e| Some((e.clone(), serde_json::to_value(self.percentiles(e)?).ok()?)))
            .collect();
        j["latency_ms"] = Json::Object(lat);
        j
    }
}

enum Backend {
    Http(BTreeMap<String, Arc<Endpoint>>),
    Replay(Replay),
}

struct Inner {
    /// When the run stops sending and waiting (`DispatcherBuilder::deadline`).
    deadline: Option<std::time::Instant>,
    /// Whether the run has a budget (its state is in `stats.budget`).
    budgeted: bool,
    /// Send through the endpoints' Batch APIs, polling this often (`DispatcherBuilder::batch`).
    batch: Option<std::time::Duration>,
    /// Woken whenever a request held against the budget settles.
    budget_settled: tokio::sync::Notify,
    config: JudgesConfig,
    backend: Backend,
    cache: Option<Cache>,
    transcript: Option<TranscriptWriter>,
    /// Validated replies of this dispatcher's earlier batches.
    memo: Mutex<HashMap<String, Reply>>,
    stats: Mutex<Stats>,
    local: local::LocalModels,
    /// The fence tags requests are sent with: from a secret drawn when the dispatcher is built.
    fences: prompt::Fences,
}

/// Sends judge requests and reads their replies; cheap to clone (shared state).
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

/// Builds a `Dispatcher`.
pub struct DispatcherBuilder {
    config: JudgesConfig,
    replay: Option<Replay>,
    cache: Option<Cache>,
    transcript: Option<TranscriptWriter>,
    deadline: Option<std::time::Instant>,
    budget: Option<f64>,
    dry: bool,
    batch: Option<std::time::Duration>,
}

impl DispatcherBuilder {
    /// Spend at most `usd` dollars: a request whose worst case (its prompt, and `max_tokens`
    /// of reply, at its model's prices) could take the spending past it is not sent, and its
    /// criteria end `budget`.
    pub fn budget(mut self, usd: f64) -> Self {
        self.budget = Some(usd);
        self
    }

    /// Answer from this transcript instead of over HTTP (the configuration then only names
    /// models, and may be empty).
    pub fn replay(mut self, replay: Replay) -> Self {
        self.replay = Some(replay);
        self
    }

    pub fn cache(mut self, cache: Cache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Record every request and reply.
    pub fn record(mut self, transcript: TranscriptWriter) -> Self {
        self.transcript = Some(transcript);
        self
    }

    /// Send each round's requests through the endpoints' Batch APIs (`--dispatch batch`),
    /// polling every `poll` until the batches end (or the deadline).
    pub fn batch(mut self, poll: std::time::Duration) -> Self {
        self.batch = Some(poll);
        self
    }

    /// Build for [`Dispatcher::dry_run`] only: no HTTP client is made and no API key read.
    pub fn dry(mut self) -> Self {
        self.dry = true;
        self
    }

    /// Send nothing and wait for nothing after `deadline`: requests still unanswered then end
    /// `judge_deadline`.
    pub fn deadline(mut self, deadline: std::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Build the HTTP clients (reading API keys from the environment) unless replaying, and
    /// draw the secret the fence tags of this dispatcher's requests derive from.
    pub fn build(self) -> Result<Dispatcher, JudgeError> {
        self.config.validate()?;
        let backend = match self.replay {
            Some(r) => Backend::Replay(r),
            None if self.dry => Backend::Http(BTreeMap::new()),
            None => {
                let mut eps = BTreeMap::new();
                for (name, cfg) in &self.config.endpoints {
                    eps.insert(name.clone(), Arc::new(Endpoint::new(name, cfg)?));
                }
                Backend::Http(eps)
            }
        };
        let key = prompt::FenceKey::random().map_err(JudgeError::Config)?;
        if let Some(b) = self.budget {
            if !(b.is_finite() && b >= 0.0) {
                return Err(JudgeError::Config(format!("the budget must be a number of dollars, not {b}")));
            }
        }
        let stats = Stats {
            cache_set_aside: self.cache.as_ref().and_then(Cache::set_aside).map(|p| p.display().to_string()),
            budget: self.budget.map(|limit_usd| BudgetStats { limit_usd, ..BudgetStats::default() }),
            accounted: !self.config.prices.is_empty(),
            ..Stats::default()
        };
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                config: self.config,
                backend,
                cache: self.cache,
                transcript: self.transcript,
                memo: Mutex::new(HashMap::new()),
                stats: Mutex::new(stats),
                deadline: self.deadline,
                budgeted: self.budget.is_some(),
                batch: self.batch,
                budget_settled: tokio::sync::Notify::new(),
                local: local::LocalModels::default(),
                fences: prompt::Fences::Secret(key),
            }),
        })
    }
}

/// Where a judge's requests go.
enum Route {
    Http { endpoint: Option<String>, wire: Wire, model: String },
    Local { model: String, fingerprint: String, dir: std::path::PathBuf },
}

/// What one distinct request produced: a sample per entry, and the model that answered.
#[derive(Debug, Clone)]
struct Fetched {
    samples: Vec<Json>,
    model: Option<String>,
    spend: Spend,
    /// From when this request was taken up until it was decided.
    waited_ms: f64,
}

/// A sample slot of a criterion: a distinct request and the entry in it, or why none was sent.
type Slot = Result<(usize, usize), String>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Dispatcher {
    pub fn builder(config: JudgesConfig) -> DispatcherBuilder {
        DispatcherBuilder {
            config,
            replay: None,
            cache: None,
            transcript: None,
            deadline: None,
            budget: None,
            dry: false,
            batch: None,
        }
    }

    pub fn stats(&self) -> Stats {
        let mut stats = lock(&self.inner.stats).clone();
        if let Backend::Http(eps) = &self.inner.backend {
            stats.endpoints_down = eps
                .values()
                .map(|e| (e.name.clone(), e.breaker_stats()))
                .filter(|(_, b)| b.trips > 0 || b.refused > 0)
                .collect();
        }
        stats
    }

    /// Where a judge's requests go: endpoint name, wire settings and model; or, for a local
    /// judge, its model directory, name and fingerprint.
    fn route(&self, judge: &JudgeDecl) -> Result<Route, String> {
        if let Some(written) = &judge.local {
            let dir = self.inner.config.local_dir(written);
            let fingerprint = self.inner.local.fingerprint(&dir)?;
            return Ok(Route::Local { model: format!("local:{written}"), fingerprint, dir });
        }
        self.route_http(judge).map(|(endpoint, wire, model)| Route::Http { endpoint, wire, model })
    }

    fn route_http(&self, judge: &JudgeDecl) -> Result<(Option<String>, Wire, String), String> {
        let bound = self.inner.config.endpoint_for(judge);
        let model = self.inner.config.model_for(judge);
        match (&self.inner.backend, bound) {
            (Backend::Http(_), None) => {
                Err(format!("judge_no_endpoint: the judges configuration binds no endpoint to judge `{}`", judge.name))
            }
            (Backend::Http(_), Some((name, cfg))) => {
                let model = model.ok_or_else(|| {
                    format!("judge_no_model: judge `{}` pins no model and endpoint `{name}` names none", judge.name)
                })?;
                Ok((Some(name.to_string()), Wire::of(cfg), model))
            }
            (Backend::Replay(_), Some((name, cfg))) => {
                Ok((Some(name.to_string()), Wire::of(cfg), model.unwrap_or_default()))
            }
            (Backend::Replay(_), None) => Ok((None, Wire::default(), model.unwrap_or_default())),
        }
    }

    /// Every request `tasks` need, rendered and hashed: the distinct requests, and for each
    /// task, criterion and sample, the slot that answers it.
    /// `on_new` sees each distinct request as soon as it is prepared, so the first calls go out
    /// while the rest of the batch is still being rendered.
    fn plan(
        &self,
        tasks: &[Task],
        mut on_new: impl FnMut(usize, &Arc<Prepared>),
    ) -> (Vec<Arc<Prepared>>, Vec<Vec<Vec<Slot>>>) {
        let mut uniques: Vec<Arc<Prepared>> = Vec::new();
        let mut by_hash: HashMap<String, usize> = HashMap::new();
        let mut planned = 0u64;
        let mut plan = Vec::with_capacity(tasks.len());
        for t in tasks {
            let route = self.route(&t.judge);
            let mut slots: Vec<Vec<Slot>> = vec![Vec::new(); t.criteria.len()];
            if let Ok(Route::Local { model, fingerprint, dir }) = &route {
                // One request per criterion, one sample: the answer is deterministic.
                for (c, criterion) in t.criteria.iter().enumerate() {
                    planned += 1;
                    let canonical = prompt::render_local(&t.judge, criterion, &t.seen, &prompt::Fences::Stable);
                    let hash = request::identity_local(&canonical, model, fingerprint);
                    let u = match by_hash.get(&hash) {
                        Some(&u) => u,
                        None => {
                            let sent = prompt::render_local(&t.judge, criterion, &t.seen, &self.inner.fences);
                            let p =
                                request::prepare_local(&t.judge, sent, hash.clone(), model, fingerprint, dir.clone());
                            let p = Arc::new(p);
                            on_new(uniques.len(), &p);
                            uniques.push(p);
                            by_hash.insert(hash, uniques.len() - 1);
                            uniques.len() - 1
                        }
                    };
                    slots[c].push(Ok((u, 0)));
                }
                plan.push(slots);
                continue;
            }
            let per_call = t.judge.per_call.max(1) as usize;
            // Every sample in every order (`order both` asks each sample twice).
            let samples = t.judge.asks();
            for (c, chunk) in t.criteria.chunks(per_call).enumerate() {
                let refs: Vec<&Criterion> = chunk.iter().collect();
                // Identified by the stable rendering; the secret one, sent, is rendered only
                // for a request not seen before (once for all its samples).
                // A judge with shuffled options shows each sample its own order.
                let per_sample = (t.judge.order == crate::ir::Order::Shuffled && samples > 1) || t.judge.orders() > 1;
                let mut canonical = prompt::render(&t.judge, &refs, &t.seen, &prompt::Fences::Stable);
                let mut sent: Option<prompt::Rendered> = None;
                for k in 0..samples {
                    if per_sample && k > 0 {
                        canonical = prompt::render_sample(&t.judge, &refs, &t.seen, &prompt::Fences::Stable, k);
                        sent = None;
                    }
                    let slot = match &route {
                        Err(reason) => Err(reason.clone()),
                        Ok(Route::Local { .. }) => Err("judge_internal: a local route".to_string()),
                        Ok(Route::Http { endpoint, wire, model }) => {
                            planned += 1;
                            let hash = request::identity(&t.judge, &canonical, model, k, *wire);
                            let u = match by_hash.get(&hash) {
                                Some(&u) => u,
                                None => {
                                    let rendered = sent
                                        .get_or_insert_with(|| {
                                            prompt::render_sample(&t.judge, &refs, &t.seen, &self.inner.fences, k)
                                        })
                                        .clone();
                                    let p = request::prepare(
                                        &t.judge,
                                        rendered,
                                        hash.clone(),
                                        model,
                                        k,
                                        endpoint.as_deref(),
                                        *wire,
                                    );
                                    let p = Arc::new(p);
                                    on_new(uniques.len(), &p);
                                    uniques.push(p);
                                    by_hash.insert(hash, uniques.len() - 1);
                                    uniques.len() - 1
                                }
                            };
                            Ok(u)
                        }
                    };
                    for e in 0..chunk.len() {
                        slots[c * per_call + e].push(slot.clone().map(|u| (u, e)));
                    }
                }
            }
            plan.push(slots);
        }
        let mut s = lock(&self.inner.stats);
        s.planned += planned;
        s.unique += uniques.len() as u64;
        s.deduplicated += planned - uniques.len() as u64;
        (uniques, plan)
    }

    /// What deciding `tasks` would send, after deduplication and what the cache (or a replay
    /// transcript) answers, with its prompt tokens and price; nothing is sent.
    pub fn dry_run(&self, tasks: &[Task]) -> DryRun {
        let (uniques, plan) = self.plan(tasks, |_, _| {});
        let mut dry = DryRun::default();
        for slot in plan.iter().flatten().flatten() {
            match slot {
                Ok(_) => dry.planned += 1,
                Err(reason) => *dry.unroutable.entry(reason.clone()).or_default() += 1,
            }
        }
        dry.deduplicated = dry.planned - uniques.len() as u64;
        let mut calls: BTreeMap<(String, String, String), PlannedCalls> = BTreeMap::new();
        for p in &uniques {
            let known = lock(&self.inner.memo).contains_key(&p.hash)
                || self.inner.cache.as_ref().is_some_and(|c| matches!(c.get(&p.hash), Ok(cache::Lookup::Hit(_))))
                || matches!(&self.inner.backend, Backend::Replay(r) if r.get(&p.hash).is_some());
            if known {
                dry.cached += 1;
                continue;
            }
            let model = p.body.get("model").and_then(Json::as_str).unwrap_or_default().to_string();
            let endpoint =
                p.endpoint.clone().unwrap_or_else(|| if p.local.is_some() { "local".into() } else { "-".into() });
            let price = self.inner.config.price(&model).copied();
            let c = calls.entry((p.judge.clone(), endpoint.clone(), model.clone())).or_insert_with(|| PlannedCalls {
                judge: p.judge.clone(),
                endpoint,
                model: model.clone(),
                max_completion_tokens: Some(0),
                price,
                ..PlannedCalls::default()
            });
            let counted = tokens::count_prompt(&model, &p.rendered.messages);
            c.requests += 1;
            c.entries += p.rendered.entries.len() as u64;
            c.prompt_tokens += counted.tokens;
            c.tokenizer = counted.tokenizer;
            c.max_completion_tokens = match (c.max_completion_tokens, p.body.get("max_tokens").and_then(Json::as_u64)) {
                (Some(sum), Some(m)) => Some(sum + m),
                _ => None,
            };
        }
        for c in calls.values_mut() {
            c.prompt_usd = c.price.map(|pr| pr.cost(c.prompt_tokens, 0, 0));
            c.max_completion_usd = match (c.price, c.max_completion_tokens) {
                (Some(pr), Some(m)) => Some(pr.cost(0, 0, m)),
                _ => None,
            };
        }
        dry.calls = calls.into_values().collect();
        dry
    }

    /// Decide every criterion of every task: one `CriterionVerdict` per criterion, in order.
    pub async fn resolve(&self, tasks: &[Task]) -> Vec<Vec<CriterionVerdict>> {
        self.resolve_until(tasks, None).await
    }

    /// [`Dispatcher::resolve`] by `until` as well as the run's deadline, whichever comes first
    /// (a row deadline: `rubric run --row-deadline-ms`, the server's and the Python package's):
    /// nothing is sent after it, a request in flight then is given up, and its criteria end
    /// `judge_deadline`.
    pub async fn resolve_until(&self, tasks: &[Task], until: Option<std::time::Instant>) -> Vec<Vec<CriterionVerdict>> {
        let deadline = match (self.inner.deadline, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut set = tokio::task::JoinSet::new();
        let mut ids = HashMap::new();
        let mut local_ids = Vec::new();
        let mut batched = Vec::new();
        let (uniques, plan) = self.plan(tasks, |i, p| {
            if p.local.is_some() {
                local_ids.push(i);
                return;
            }
            if self.inner.batch.is_some() {
                batched.push(i);
                return;
            }
            let me = self.clone();
            let p = p.clone();
            let h = set.spawn(async move { me.fetch(&p, deadline).await });
            ids.insert(h.id(), i);
        });
        // Local requests are answered together, off the async threads, while HTTP ones fly.
        let local = (!local_ids.is_empty()).then(|| {
            let me = self.clone();
            let ps: Vec<Arc<Prepared>> = local_ids.iter().map(|&i| uniques[i].clone()).collect();
            tokio::task::spawn_blocking(move || {
                let start = std::time::Instant::now();
                let mut fs = me.fetch_local(&ps);
                let took = start.elapsed().as_secs_f64() * 1000.0;
                for f in &mut fs {
                    f.waited_ms = took;
                }
                fs
            })
        });
        let mut fetched: Vec<Option<Fetched>> = vec![None; uniques.len()];
        if let (Some(poll), false) = (self.inner.batch, batched.is_empty()) {
            let ps: Vec<Arc<Prepared>> = batched.iter().map(|&i| uniques[i].clone()).collect();
            for (&i, f) in batched.iter().zip(self.fetch_batched(&ps, poll, deadline).await) {
                fetched[i] = Some(f);
            }
        }
        // A task that panicked leaves its slot empty: its criteria are unscored below.
        while let Some(r) = set.join_next_with_id().await {
            if let Ok((id, f)) = r {
                fetched[ids[&id]] = Some(f);
            }
        }
        if let Some(Ok(fs)) = match local {
            Some(h) => Some(h.await),
            None => None,
        } {
            for (&i, f) in local_ids.iter().zip(fs) {
                fetched[i] = Some(f);
            }
        }
        if let Some(cache) = &self.inner.cache {
            if cache.flush().is_err() {
                lock(&self.inner.stats).cache_errors += 1;
            }
        }
        // How many sample slots each distinct request answers: its cost is split between them.
        let mut uses = vec![0u32; uniques.len()];
        for (u, _) in plan.iter().flatten().flatten().flatten() {
            uses[*u] += 1;
        }
        tasks
            .iter()
            .zip(plan)
            .map(|(t, slots)| {
                t.criteria
                    .iter()
                    .zip(slots)
                    .map(|(c, slots)| {
                        let mut samples = Vec::with_capacity(slots.len());
                        let mut models: Vec<String> = Vec::new();
                        let mut requests = Vec::new();
                        let mut cost = Cost::default();
                        let mut waited_ms: f64 = 0.0;
                        let accounted = !self.inner.config.prices.is_empty();
                        for s in slots {
                            match s {
                                Ok((u, e)) => {
                                    requests.push(uniques[u].hash.clone());
                                    match &fetched[u] {
                                        Some(f) => {
                                            match f.spend {
                                                Spend::Free => {}
                                                Spend::Paid(usd) => cost.usd += usd / f64::from(uses[u].max(1)),
                                                Spend::Unknown => cost.unknown = true,
                                            }
                                            samples.push(f.samples[e].clone());
                                            waited_ms = waited_ms.max(f.waited_ms);
                                            if let Some(m) = &f.model {
                                                if !models.contains(m) {
                                                    models.push(m.clone());
                                                }
                                            }
                                        }
                                        None => samples.push(json!({"unscored": "judge_internal: the request failed"})),
                                    }
                                }
                                Err(reason) => {
                                    requests.push(String::new());
                                    samples.push(json!({ "unscored": reason }));
                                }
                            }
                        }
                        // An extractor takes one sample; a judge with `samples 1` gives a bare verdict.
                        let verdict =
                            if samples.len() == 1 || matches!(c.ask, Ask::Extract { .. } | Ask::Generate { .. }) {
                                samples
                                    .into_iter()
                                    .next()
                                    .unwrap_or_else(|| json!({"unscored": "judge_internal: no sample"}))
                            } else {
                                json!({ "samples": samples })
                            };
                        let cost = accounted.then_some(cost);
                        CriterionVerdict { id: c.id.clone(), verdict, models, requests, cost, waited_ms }
                    })
                    .collect()
            })
            .collect()
    }

    /// `resolve` from synchronous code (e.g. rayon workers), on a runtime shared by the process.
    /// Do not call it from inside an async context.
    pub fn resolve_blocking(&self, tasks: &[Task]) -> Vec<Vec<CriterionVerdict>> {
        self.resolve_blocking_until(tasks, None)
    }

    /// [`Dispatcher::resolve_until`] from synchronous code.
    pub fn resolve_blocking_until(
        &self,
        tasks: &[Task],
        until: Option<std::time::Instant>,
    ) -> Vec<Vec<CriterionVerdict>> {
        runtime().block_on(self.resolve_until(tasks, until))
    }

    /// The answer memory or the cache has for `p`, if any.
    fn lookup(&self, p: &Prepared) -> Option<Fetched> {
        let memo = lock(&self.inner.memo).get(&p.hash).cloned();
        if let Some(r) = memo {
            lock(&self.inner.stats).memo_hits += 1;
            return Some(self.finish(p, r, "memo", 0, None));
        }
        if let Some(cache) = &self.inner.cache {
            match cache.get(&p.hash) {
                Ok(cache::Lookup::Hit(r)) => {
                    lock(&self.inner.stats).cache_hits += 1;
                    return Some(self.finish(p, r, "cache", 0, None));
                }
                Ok(cache::Lookup::Miss) => {}
                Ok(cache::Lookup::Unverified(_)) => lock(&self.inner.stats).cache_unverified += 1,
                Err(_) => lock(&self.inner.stats).cache_errors += 1,
            }
        }
        None
    }

    async fn fetch(&self, p: &Prepared, deadline: Option<std::time::Instant>) -> Fetched {
        let start = std::time::Instant::now();
        let mut f = self.fetch_inner(p, deadline).await;
        f.waited_ms = start.elapsed().as_secs_f64() * 1000.0;
        f
    }

    async fn fetch_inner(&self, p: &Prepared, deadline: Option<std::time::Instant>) -> Fetched {
        if let Some(f) = self.lookup(p) {
            return f;
        }
        match &self.inner.backend {
            Backend::Replay(replay) => match replay.get(&p.hash) {
                Some(r) => {
                    lock(&self.inner.stats).replayed += 1;
                    self.finish(p, r.clone(), "replay", 0, None)
                }
                None => self.fail(
                    p,
                    format!("judge_not_recorded: the transcript has no reply for request {}", p.hash),
                    "replay",
                    0,
                ),
            },
            Backend::Http(eps) => {
                let Some(ep) = p.endpoint.as_ref().and_then(|n| eps.get(n)) else {
                    return self.fail(p, "judge_no_endpoint: no endpoint for this request".into(), "http", 0);
                };
                let model = p.body.get("model").and_then(Json::as_str).unwrap_or_default();
                let price = self.inner.config.price(model).copied();
                let held = match self.hold(p, model, price.as_ref(), true).await {
                    Ok(held) => held,
                    Err(reason) => return self.fail(p, reason, "budget", 0),
                };
                let sent = ep.send(&p.body, p.sample, deadline).await;
                {
                    let mut s = lock(&self.inner.stats);
                    s.http_requests += 1;
                    s.http_attempts += sent.attempts as u64;
                    s.retries += sent.attempts.saturating_sub(1) as u64;
                    if let Some(ms) = sent.latency_ms {
                        s.latency_ms.entry(ep.name.clone()).or_default().push(ms);
                    }
                }
                let spend = self.account(p, &ep.name, sent.result.as_ref(), sent.attempts, price, held);
                let mut fetched = match sent.result {
                    Ok(mut r) => {
                        // Whatever the server said, the key never travels further.
                        r.content = r.content.map(|c| ep.redact(&c));
                        r.refusal = r.refusal.map(|c| ep.redact(&c));
                        r.model = ep.redact(&r.model);
                        self.finish(p, r, "http", sent.attempts, sent.latency_ms)
                    }
                    Err(reason) => self.fail(p, reason, "http", sent.attempts),
                };
                fetched.spend = spend;
                fetched
            }
        }
    }

    /// Answer local requests: each from memory, the cache or a replay transcript when it can
    /// be, the rest by their model, one batched call per model directory.
    fn fetch_local(&self, ps: &[Arc<Prepared>]) -> Vec<Fetched> {
        let mut out: Vec<Option<Fetched>> = vec![None; ps.len()];
        let mut todo: BTreeMap<std::path::PathBuf, Vec<usize>> = BTreeMap::new();
        for (k, p) in ps.iter().enumerate() {
            if let Some(f) = self.lookup(p) {
                out[k] = Some(f);
                continue;
            }
            if let Backend::Replay(replay) = &self.inner.backend {
                if let Some(r) = replay.get(&p.hash) {
                    lock(&self.inner.stats).replayed += 1;
                    out[k] = Some(self.finish(p, r.clone(), "replay", 0, None));
                    continue;
                }
            }
            if let Some(dir) = &p.local {
                todo.entry(dir.clone()).or_default().push(k);
            }
        }
        for (dir, ks) in todo {
            let started = std::time::Instant::now();
            let model = ps[ks[0]].body.get("model").and_then(Json::as_str).unwrap_or("local").to_string();
            let prompts: Vec<&[prompt::Message]> = ks.iter().map(|&k| ps[k].rendered.messages.as_slice()).collect();
            let answers = self.inner.local.answer(&dir, &model, &prompts);
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            {
                let mut s = lock(&self.inner.stats);
                s.local_calls += 1;
                s.local_ms += ms;
                for r in answers.iter().flatten() {
                    s.local_requests += 1;
                    s.tokens_in += r.usage.prompt_tokens;
                }
            }
            for (&k, a) in ks.iter().zip(answers) {
                out[k] = Some(match a {
                    Ok(r) => self.finish(&ps[k], r, "local", 1, None),
                    Err(reason) => self.fail(&ps[k], reason, "local", 1),
                });
            }
        }
        out.into_iter()
            .enumerate()
            .map(|(k, f)| {
                f.unwrap_or_else(|| self.fail(&ps[k], "judge_internal: not a local request".into(), "local", 0))
            })
            .collect()
    }

    /// Count what sending `p` to endpoint `endpoint` cost (its tally, tokens and the budget's
    /// settlement of `held`), from its outcome: a reply priced from its usage, a timeout after
    /// sending (perhaps billed: unknown), or nothing.
    fn account(
        &self,
        p: &Prepared,
        endpoint: &str,
        result: Result<&Reply, &String>,
        attempts: u32,
        price: Option<Price>,
        held: Option<f64>,
    ) -> Spend {
        let spend = {
            let mut s = lock(&self.inner.stats);
            let tally = s.costs.entry(p.judge.clone()).or_default().entry(endpoint.to_string()).or_default();
            let spend = match result {
                Ok(r) => {
                    tally.calls += 1;
                    tally.prompt_tokens += r.usage.prompt_tokens;
                    tally.cached_tokens += r.usage.cached_tokens;
                    tally.completion_tokens += r.usage.completion_tokens;
                    match (r.usage.reported, price) {
                        (false, _) => {
                            tally.no_usage += 1;
                            Spend::Unknown
                        }
                        (true, None) => {
                            tally.unpriced += 1;
                            Spend::Unknown
                        }
                        (true, Some(pr)) => {
                            let usd = pr.charge(r.usage, r.batched);
                            tally.usd += usd;
                            tally.saved_usd += pr.saved_on(r.usage, r.batched);
                            Spend::Paid(usd)
                        }
                    }
                }
                // A request that timed out after it was sent may still be billed.
                Err(reason) if reason.starts_with("judge_timeout") || reason.starts_with("judge_deadline") => {
                    if attempts > 0 {
                        tally.timed_out += 1;
                        Spend::Unknown
                    } else {
                        Spend::Free
                    }
                }
                Err(_) => Spend::Free,
            };
            if let Ok(r) = result {
                s.tokens_in += r.usage.prompt_tokens;
                s.tokens_out += r.usage.completion_tokens;
            }
            if let (Some(b), Some(held)) = (s.budget.as_mut(), held) {
                b.held_usd -= held;
                b.spent_usd += match spend {
                    Spend::Free => 0.0,
                    Spend::Paid(usd) => usd,
                    Spend::Unknown => held,
                };
            }
            spend
        };
        self.inner.budget_settled.notify_waiters();
        spend
    }

    /// Answer `ps` (distinct requests, none local) through the endpoints' Batch APIs: each from
    /// memory or the cache when it can be, the rest in one batch per endpoint (a batch an
    /// earlier run left open is polled instead), within the budget.
    async fn fetch_batched(
        &self,
        ps: &[Arc<Prepared>],
        poll: std::time::Duration,
        deadline: Option<std::time::Instant>,
    ) -> Vec<Fetched> {
        let mut out: Vec<Option<Fetched>> = vec![None; ps.len()];
        // Per endpoint: each request's index, what the budget holds for it, its model's price.
        type Held = (usize, Option<f64>, Option<Price>);
        let mut by_endpoint: BTreeMap<String, Vec<Held>> = BTreeMap::new();
        for (k, p) in ps.iter().enumerate() {
            if let Some(f) = self.lookup(p) {
                out[k] = Some(f);
                continue;
            }
            let Backend::Http(eps) = &self.inner.backend else {
                out[k] = Some(self.fetch(p, deadline).await);
                continue;
            };
            let Some(name) = p.endpoint.as_ref().filter(|n| eps.contains_key(*n)) else {
                out[k] = Some(self.fail(p, "judge_no_endpoint: no endpoint for this request".into(), "http", 0));
                continue;
            };
            let model = p.body.get("model").and_then(Json::as_str).unwrap_or_default();
            let price = self.inner.config.price(model).copied();
            // Every request of a batch is held at once: none waits for another to settle.
            match self.hold(p, model, price.as_ref(), false).await {
                Ok(held) => by_endpoint.entry(name.clone()).or_default().push((k, held, price)),
                Err(reason) => out[k] = Some(self.fail(p, reason, "budget", 0)),
            }
        }
        if let Backend::Http(eps) = &self.inner.backend {
            for (name, items) in by_endpoint {
                let Some(ep) = eps.get(&name) else { continue };
                let lines: Vec<batch::Line> = items
                    .iter()
                    .map(|(k, _, _)| batch::Line {
                        hash: ps[*k].hash.clone(),
                        sample: ps[*k].sample,
                        body: ps[*k].body.clone(),
                    })
                    .collect();
                let mut done = batch::dispatch(ep, self.inner.cache.as_ref(), lines, poll, deadline).await;
                {
                    let mut s = lock(&self.inner.stats);
                    s.batches_submitted += done.submitted;
                    s.batches_resumed += done.resumed;
                    s.batch_polls += done.polls;
                    s.batch_lines += items.len() as u64;
                }
                for (k, held, price) in items {
                    let p = &ps[k];
                    let result = done
                        .replies
                        .remove(&p.hash)
                        .unwrap_or_else(|| Err("judge_batch_missing: the batch gave no result for this request".into()))
                        .map(|mut r| {
                            r.batched = true;
                            r.content = r.content.map(|c| ep.redact(&c));
                            r
                        });
                    // A line still in progress at the deadline is billed when its batch ends,
                    // to the run that then reads it back.
                    let sent = u32::from(!matches!(&result, Err(r) if r.starts_with("judge_deadline")));
                    let spend = self.account(p, &name, result.as_ref(), sent, price, held);
                    let mut f = match result {
                        Ok(r) => self.finish(p, r, "batch", 1, None),
                        Err(reason) => self.fail(p, reason, "batch", 1),
                    };
                    f.spend = spend;
                    out[k] = Some(f);
                }
            }
        }
        out.into_iter()
            .enumerate()
            .map(|(k, f)| f.unwrap_or_else(|| self.fail(&ps[k], "judge_internal: not answered".into(), "batch", 0)))
            .collect()
    }

    /// Under a budget, hold the worst case of `p` (its prompt's token bound at the input price,
    /// `max_tokens` at the output price) or refuse it: `Ok(None)` without a budget.
    async fn hold(&self, p: &Prepared, model: &str, price: Option<&Price>, wait: bool) -> Result<Option<f64>, String> {
        if !self.inner.budgeted {
            return Ok(None);
        }
        let worst = match (price, p.body.get("max_tokens").and_then(Json::as_u64)) {
            (None, _) => Err(format!(
                "budget: model `{model}` has no price in the judges configuration, so what judge `{}` costs \
                 cannot be bounded",
                p.judge
            )),
            (_, None) => {
                Err(format!("budget: judge `{}` sets no `max_tokens`, so the cost of its reply has no bound", p.judge))
            }
            (Some(price), Some(max_out)) => {
                let schema = p.body.get("response_format").map(Json::to_string).unwrap_or_default();
                let prompt = tokens::prompt_bound(model, &p.rendered.messages, &schema);
                Ok(price.cost(prompt, 0, max_out))
            }
        };
        loop {
            // Registered before the lock is let go, so that a settlement in between still wakes it.
            let settled = self.inner.budget_settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            {
                let mut s = lock(&self.inner.stats);
                let Some(b) = s.budget.as_mut() else { return Ok(None) };
                let fits = |x: f64| x <= b.limit_usd + 1e-12;
                match &worst {
                    Err(why) => {
                        b.refused += 1;
                        return Err(why.clone());
                    }
                    // Even once every request in flight has settled, this one could pass it.
                    Ok(worst) if !fits(b.spent_usd + worst) => {
                        b.refused += 1;
                        return Err(format!(
                            "budget: this request could cost up to ${worst:.6}, and ${:.6} of the run's budget of \
                             ${:.6} is spent",
                            b.spent_usd, b.limit_usd
                        ));
                    }
                    Ok(worst) if fits(b.spent_usd + b.held_usd + worst) => {
                        b.held_usd += worst;
                        return Ok(Some(*worst));
                    }
                    // It may fit once the requests in flight have settled at what they cost.
                    Ok(_) if wait => {}
                    Ok(worst) => {
                        b.refused += 1;
                        return Err(format!(
                            "budget: this request could cost up to ${worst:.6}, which with the rest of its batch \
                             (${:.6} held) could take the run past its budget of ${:.6} (${:.6} spent)",
                            b.held_usd, b.limit_usd, b.spent_usd
                        ));
                    }
                }
            }
            settled.await;
        }
    }

    fn redact(&self, s: String) -> String {
        match &self.inner.backend {
            Backend::Http(eps) => eps.values().fold(s, |s, e| e.redact(&s)),
            Backend::Replay(_) => s,
        }
    }

    fn record(&self, e: &transcript::Entry) {
        if let Some(t) = &self.inner.transcript {
            if t.write(e).is_err() {
                lock(&self.inner.stats).transcript_errors += 1;
            }
        }
    }

    fn finish(&self, p: &Prepared, reply: Reply, source: &str, attempts: u32, latency_ms: Option<f64>) -> Fetched {
        let (samples, ok) = reply::interpret(&p.rendered, &reply);
        if ok {
            lock(&self.inner.memo).insert(p.hash.clone(), reply.clone());
            if matches!(source, "http" | "batch" | "replay" | "local") {
                if let Some(cache) = &self.inner.cache {
                    if cache.put(&p.hash, &reply).is_err() {
                        lock(&self.inner.stats).cache_errors += 1;
                    }
                }
            }
        } else {
            lock(&self.inner.stats).invalid_replies += 1;
        }
        let error = (!ok).then(|| {
            let reasons: Vec<&str> = samples.iter().filter_map(|s| s.get("unscored").and_then(Json::as_str)).collect();
            self.redact(reasons.join("; "))
        });
        self.record(&transcript::Entry {
            hash: p.hash.clone(),
            judge: p.judge.clone(),
            endpoint: p.endpoint.clone(),
            sample: p.sample,
            request: p.body.clone(),
            reply: Some(reply.clone()),
            error,
            source: source.to_string(),
            attempts,
            latency_ms,
        });
        let spend = self.price_of(p, &reply, source);
        Fetched { samples, model: Some(reply.model), spend, waited_ms: 0.0 }
    }

    /// What `reply` to `p` cost, from the usage it reported and its model's price (a local
    /// model's answer is free).
    fn price_of(&self, p: &Prepared, reply: &Reply, source: &str) -> Spend {
        if source == "local" || p.local.is_some() {
            return Spend::Free;
        }
        let model = p.body.get("model").and_then(Json::as_str).unwrap_or_default();
        match (reply.usage.reported, self.inner.config.price(model)) {
            (true, Some(pr)) => Spend::Paid(pr.charge(reply.usage, reply.batched)),
            _ => Spend::Unknown,
        }
    }

    fn fail(&self, p: &Prepared, reason: String, source: &str, attempts: u32) -> Fetched {
        let reason = self.redact(reason);
        // A request the budget kept back did not fail: it is counted with the budget.
        if source != "budget" {
            lock(&self.inner.stats).failed += 1;
        }
        self.record(&transcript::Entry {
            hash: p.hash.clone(),
            judge: p.judge.clone(),
            endpoint: p.endpoint.clone(),
            sample: p.sample,
            request: p.body.clone(),
            reply: None,
            error: Some(reason.clone()),
            source: source.to_string(),
            attempts,
            latency_ms: None,
        });
        Fetched {
            samples: p.rendered.entries.iter().map(|_| json!({ "unscored": reason })).collect(),
            model: None,
            spend: Spend::Free,
            waited_ms: 0.0,
        }
    }
}

/// The runtime `resolve_blocking` runs on: created once, never dropped (so its pooled
/// connections stay valid).
#[expect(
    clippy::expect_used,
    reason = "without its runtime (no threads left) the process cannot dispatch any judge; nothing to fall back to"
)]
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rubric-judge")
            .enable_all()
            .build()
            .expect("cannot start the judge runtime")
    })
}
