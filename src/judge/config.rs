//! `judges.toml`: binds each judge (by name, or by its model pin) to an OpenAI-compatible
//! endpoint with its limits. Keys never appear here: an endpoint names the environment variable
//! that holds its key (`api_key_env`), read once when the dispatcher starts.
//!
//! ```toml
//! default = "local"                      # endpoint for judges bound by neither table below
//!
//! [endpoints.local]
//! base_url = "http://127.0.0.1:8000/v1"  # the chat-completions URL is BASE/chat/completions
//! model = "Qwen/Qwen2.5-7B-Instruct"     # optional: replaces the judge's model pin
//! api_key_env = "LOCAL_API_KEY"          # optional
//! concurrency = 16
//! rpm = 600                              # requests per minute, 0 = unlimited
//! timeout_s = 30                         # per attempt, the whole reply body included
//! attempts = 4
//! max_reply_bytes = 4194304              # a larger reply is not read: unscored, not retried
//! breaker_failures = 5                   # consecutive failed attempts before the endpoint is down
//! breaker_cooldown_s = 30                # how long it stays down before one request probes it
//!
//! [judges]                               # judge name -> endpoint
//! grader = "local"
//!
//! [models]                               # judge model pin -> endpoint
//! "gpt-4.1-mini" = "openai"
//!
//! [local]                                # `local "NAME"` of a judge -> model directory
//! "qwen3-judge" = "/models/Qwen3-0.6B"   # relative paths are taken from this file's directory
//!
//! [prices."gpt-4.1-mini"]                # model sent -> USD per million tokens
//! input = 0.40
//! cached_input = 0.10                    # prompt tokens served from the provider's prefix cache
//! output = 1.60                          #   (default: the input price)
//! batch = 0.5                            # share of the price through the Batch API (default 1)
//! ```

use super::JudgeError;
use crate::ir::JudgeDecl;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The whole `judges.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgesConfig {
    /// The endpoint of judges bound neither by name nor by model.
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Judge name → endpoint name.
    #[serde(default)]
    pub judges: BTreeMap<String, String>,
    /// Judge model pin → endpoint name.
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    /// A local judge's `local "NAME"` → the model directory that answers for it.
    #[serde(default)]
    pub local: BTreeMap<String, String>,
    /// The model sent → its prices.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// The directory relative model directories are taken from: the configuration file's
    /// (set by [`JudgesConfig::load`]); `None` means the working directory.
    #[serde(skip)]
    pub base_dir: Option<std::path::PathBuf>,
}

/// What a model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Prompt tokens the provider served from its prefix cache; without it, `input`.
    #[serde(default)]
    pub cached_input: Option<f64>,
    pub output: f64,
    /// The share of the price a request sent through the Batch API is billed at (OpenAI's is
    /// 0.5); without it, the full price.
    #[serde(default)]
    pub batch: Option<f64>,
}

impl Price {
    pub fn batch_factor(&self) -> f64 {
        self.batch.unwrap_or(1.0)
    }

    pub fn cached(&self) -> f64 {
        self.cached_input.unwrap_or(self.input)
    }

    /// The dollars of a call with this usage: uncached prompt tokens at the input price,
    /// cached ones at the cached-input price, completion tokens at the output price.
    pub fn cost(&self, prompt: u64, cached: u64, completion: u64) -> f64 {
        let cached = cached.min(prompt);
        ((prompt - cached) as f64 * self.input + cached as f64 * self.cached() + completion as f64 * self.output) / 1e6
    }

    /// What the cached tokens saved against paying the full input price for them.
    pub fn saved(&self, cached: u64) -> f64 {
        cached as f64 * (self.input - self.cached()).max(0.0) / 1e6
    }

    /// What a reply with this usage was billed: [`Price::cost`], at the batch share when it
    /// came through the Batch API.
    pub fn charge(&self, u: super::reply::Usage, batched: bool) -> f64 {
        self.factor(batched) * self.cost(u.prompt_tokens, u.cached_tokens, u.completion_tokens)
    }

    /// What its cached prompt tokens saved, at the same share.
    pub fn saved_on(&self, u: super::reply::Usage, batched: bool) -> f64 {
        self.factor(batched) * self.saved(u.cached_tokens.min(u.prompt_tokens))
    }

    fn factor(&self, batched: bool) -> f64 {
        if batched {
            self.batch_factor()
        } else {
            1.0
        }
    }
}

/// How the reply schema is requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    /// `response_format: {"type": "json_schema", ...}` (OpenAI, vLLM, SGLang, llama.cpp, Ollama).
    #[default]
    JsonSchema,
    /// `response_format: {"type": "json_object"}`: JSON, schema only in the prompt.
    JsonObject,
    /// No `response_format`: the prompt alone asks for the JSON reply.
    None,
}

/// One endpoint: where to send, with which model and key, and its limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Base URL of the OpenAI-compatible API, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model name sent; without it, the judge's `model` pin.
    #[serde(default)]
    pub model: Option<String>,
    /// The environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The header carrying the key: `authorization` (as `Bearer KEY`, the default) or another
    /// header name that takes the bare key (e.g. Azure's `api-key`).
    #[serde(default)]
    pub api_key_header: Option<String>,
    /// Requests in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Requests started per minute; 0 = unlimited.
    #[serde(default)]
    pub rpm: u32,
    /// Whole-request timeout per attempt, in seconds.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_s: f64,
    /// Attempts per request (the first one included) on timeouts, 408, 429 and 5xx.
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    /// The first backoff; it doubles with every retry, with jitter.
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
    #[serde(default = "default_max_backoff")]
    pub max_backoff_ms: u64,
    /// A longer `Retry-After` is cut to this.
    #[serde(default = "default_max_retry_after")]
    pub max_retry_after_s: f64,
    #[serde(default)]
    pub response_format: ResponseFormat,
    /// `strict` in a `json_schema` response format.
    #[serde(default = "default_true")]
    pub strict: bool,
    /// `top_logprobs` asked for under `scoring logprob`.
    #[serde(default = "default_top_logprobs")]
    pub top_logprobs: u32,
    /// A reply body larger than this is not read further: the request ends unscored
    /// (`judge_reply_too_large`), without a retry.
    #[serde(default = "default_max_reply_bytes")]
    pub max_reply_bytes: usize,
    /// The circuit breaker: after this many consecutive failed attempts (timeouts, failed
    /// connections, 408, 429, 5xx) the endpoint is considered down and requests to it end
    /// `endpoint_down` at once, without being sent; 0 turns the breaker off.
    #[serde(default = "default_breaker_failures")]
    pub breaker_failures: u32,
    /// How long a tripped breaker keeps the endpoint down before one request may probe it.
    #[serde(default = "default_breaker_cooldown")]
    pub breaker_cooldown_s: f64,
}

fn default_concurrency() -> usize {
    8
}
fn default_timeout() -> f64 {
    60.0
}
fn default_connect_timeout() -> f64 {
    10.0
}
fn default_attempts() -> u32 {
    4
}
fn default_backoff() -> u64 {
    500
}
fn default_max_backoff() -> u64 {
    30_000
}
fn default_max_retry_after() -> f64 {
    120.0
}
fn default_true() -> bool {
    true
}
fn default_top_logprobs() -> u32 {
    10
}
/// 4 MiB: a completion with its log-probabilities is a few kilobytes, and `concurrency`
/// replies may be read at once.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 4 << 20;
fn default_max_reply_bytes() -> usize {
    DEFAULT_MAX_REPLY_BYTES
}
fn default_breaker_failures() -> u32 {
    5
}
fn default_breaker_cooldown() -> f64 {
    30.0
}

impl EndpointConfig {
    /// An endpoint at `base_url` with every limit at its default.
    pub fn new(base_url: impl Into<String>) -> EndpointConfig {
        EndpointConfig {
            base_url: base_url.into(),
            model: None,
            api_key_env: None,
            api_key_header: None,
            concurrency: default_concurrency(),
            rpm: 0,
            timeout_s: default_timeout(),
            connect_timeout_s: default_connect_timeout(),
            attempts: default_attempts(),
            backoff_ms: default_backoff(),
            max_backoff_ms: default_max_backoff(),
            max_retry_after_s: default_max_retry_after(),
            response_format: ResponseFormat::default(),
            strict: true,
            top_logprobs: default_top_logprobs(),
            breaker_failures: default_breaker_failures(),
            breaker_cooldown_s: default_breaker_cooldown(),
            max_reply_bytes: default_max_reply_bytes(),
        }
    }

    /// `BASE/chat/completions`.
    pub fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    fn validate(&self, name: &str) -> Result<(), String> {
        let url = self.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("endpoint `{name}`: base_url must start with http:// or https://"));
        }
        if url.split("://").nth(1).is_some_and(|rest| rest.split('/').next().unwrap_or("").contains('@')) {
            return Err(format!(
                "endpoint `{name}`: base_url must not carry credentials; name the key's variable in `api_key_env`"
            ));
        }
        if self.concurrency == 0 {
            return Err(format!("endpoint `{name}`: concurrency must be at least 1"));
        }
        if self.max_reply_bytes == 0 {
            return Err(format!("endpoint `{name}`: max_reply_bytes must be at least 1"));
        }
        if self.attempts == 0 {
            return Err(format!("endpoint `{name}`: attempts must be at least 1"));
        }
        if !(self.timeout_s > 0.0 && self.timeout_s.is_finite()) {
            return Err(format!("endpoint `{name}`: timeout_s must be a positive number of seconds"));
        }
        if !(self.connect_timeout_s > 0.0 && self.connect_timeout_s.is_finite()) {
            return Err(format!("endpoint `{name}`: connect_timeout_s must be a positive number of seconds"));
        }
        if !(self.max_retry_after_s >= 0.0 && self.max_retry_after_s.is_finite()) {
            return Err(format!("endpoint `{name}`: max_retry_after_s must be a number of seconds"));
        }
        if !(self.breaker_cooldown_s >= 0.0 && self.breaker_cooldown_s.is_finite()) {
            return Err(format!("endpoint `{name}`: breaker_cooldown_s must be a number of seconds"));
        }
        if let Some(var) = &self.api_key_env {
            if var.is_empty() || var.contains(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                return Err(format!(
                    "endpoint `{name}`: api_key_env is the *name* of an environment variable (letters, digits, `_`)"
                ));
            }
        }
        Ok(())
    }
}

impl JudgesConfig {
    /// Every judge goes to one endpoint.
    pub fn single(name: &str, endpoint: EndpointConfig) -> JudgesConfig {
        JudgesConfig {
            default: Some(name.to_string()),
            endpoints: BTreeMap::from([(name.to_string(), endpoint)]),
            judges: BTreeMap::new(),
            models: BTreeMap::new(),
            local: BTreeMap::new(),
            prices: BTreeMap::new(),
            base_dir: None,
        }
    }

    /// The prices of `model` (the model sent), if the configuration has them.
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.prices.get(model)
    }

    pub fn parse(text: &str) -> Result<JudgesConfig, JudgeError> {
        // A key written into the file is refused with a clear message before anything else.
        if let Ok(raw) = text.parse::<toml::Table>() {
            if let Some(toml::Value::Table(eps)) = raw.get("endpoints") {
                for (name, ep) in eps {
                    if ep.get("api_key").is_some() {
                        return Err(JudgeError::Config(format!(
                            "endpoint `{name}` has an `api_key`: keys never go into files; set `api_key_env` to the \
                             name of the environment variable that holds it"
                        )));
                    }
                }
            }
        }
        let cfg: JudgesConfig = toml::from_str(text).map_err(|e| JudgeError::Config(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn load(path: &Path) -> Result<JudgesConfig, JudgeError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| JudgeError::Io { path: path.display().to_string(), message: e.to_string() })?;
        let mut cfg = JudgesConfig::parse(&text).map_err(|e| match e {
            JudgeError::Config(m) => JudgeError::Config(format!("{}: {m}", path.display())),
            other => other,
        })?;
        cfg.base_dir = Some(path.parent().map(Path::to_path_buf).unwrap_or_default());
        Ok(cfg)
    }

    /// The model directory of a local judge written `local "WRITTEN"`: the `[local]` entry for
    /// `WRITTEN`, else `WRITTEN`; relative to [`JudgesConfig::base_dir`] when relative.
    pub fn local_dir(&self, written: &str) -> std::path::PathBuf {
        super::local::resolve_dir(written, self.local.get(written).map(String::as_str), self.base_dir.as_deref())
    }

    pub fn validate(&self) -> Result<(), JudgeError> {
        for (name, ep) in &self.endpoints {
            ep.validate(name).map_err(JudgeError::Config)?;
        }
        let refs = self
            .default
            .iter()
            .map(|e| ("default".to_string(), e))
            .chain(self.judges.iter().map(|(j, e)| (format!("judge `{j}`"), e)))
            .chain(self.models.iter().map(|(m, e)| (format!("model `{m}`"), e)));
        for (what, ep) in refs {
            if !self.endpoints.contains_key(ep) {
                return Err(JudgeError::Config(format!("{what} names endpoint `{ep}`, which is not defined")));
            }
        }
        for (model, p) in &self.prices {
            let fine = |x: f64| x.is_finite() && x >= 0.0;
            if !(fine(p.input) && fine(p.output) && p.cached_input.is_none_or(fine) && p.batch.is_none_or(fine)) {
                return Err(JudgeError::Config(format!(
                    "prices of model `{model}`: input, cached_input and output are dollars per million tokens, \
                     finite and not negative"
                )));
            }
        }
        Ok(())
    }

    /// The endpoint a judge is bound to: by its name, else by its model pin, else the default.
    pub fn endpoint_for(&self, judge: &JudgeDecl) -> Option<(&str, &EndpointConfig)> {
        let name = self
            .judges
            .get(&judge.name)
            .or_else(|| judge.model.as_ref().and_then(|m| self.models.get(m)))
            .or(self.default.as_ref())?;
        self.endpoints.get_key_value(name).map(|(k, v)| (k.as_str(), v))
    }

    /// The model name sent for a judge: the endpoint's `model`, else the judge's pin.
    pub fn model_for(&self, judge: &JudgeDecl) -> Option<String> {
        self.endpoint_for(judge).and_then(|(_, e)| e.model.clone()).or_else(|| judge.model.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bindings_and_defaults() {
        let cfg = JudgesConfig::parse(
            r#"
            default = "a"
            [endpoints.a]
            base_url = "http://127.0.0.1:9/v1/"
            [endpoints.b]
            base_url = "https://example.invalid/v1"
            model = "m-b"
            api_key_env = "B_KEY"
            timeout_s = 0.5
            [judges]
            grader = "b"
            [models]
            "pin-x" = "b"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.endpoints["a"].concurrency, 8);
        assert_eq!(cfg.endpoints["a"].max_reply_bytes, 4 << 20);
        assert_eq!(cfg.endpoints["a"].completions_url(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(cfg.endpoints["b"].timeout_s, 0.5);
        let mut j = crate::ir::JudgeDecl {
            name: "grader".into(),
            model: Some("pin".into()),
            temperature: None,
            top_p: None,
            max_tokens: None,
            seed: None,
            samples: 1,
            min_samples: None,
            vote: crate::ir::Vote::Majority,
            sees: vec![],
            returns: "verdict".into(),
            reply_fields: vec![],
            evidence_from: None,
            template: None,
            system: None,
            scoring: crate::ir::Scoring::Label,
            per_call: 1,
            local: None,
            calibration: None,
            order: crate::ir::Order::Fixed,
            jury: None,
            reasoning_effort: None,
            cascade: None,
            compares: None,
            rollouts: None,
        };
        assert_eq!(cfg.endpoint_for(&j).unwrap().0, "b");
        assert_eq!(cfg.model_for(&j).as_deref(), Some("m-b"));
        j.name = "other".into();
        assert_eq!(cfg.endpoint_for(&j).unwrap().0, "a");
        assert_eq!(cfg.model_for(&j).as_deref(), Some("pin"));
        j.model = Some("pin-x".into());
        assert_eq!(cfg.endpoint_for(&j).unwrap().0, "b");
    }

    #[test]
    fn refuses_keys_unknown_fields_and_dangling_names() {
        let e = JudgesConfig::parse("[endpoints.a]\nbase_url = \"http://x\"\napi_key = \"sk-1\"\n").unwrap_err();
        assert!(e.to_string().contains("keys never go into files"), "{e}");
        assert!(!e.to_string().contains("sk-1"));
        let e = JudgesConfig::parse("[endpoints.a]\nbase_url = \"http://x\"\nconcurrenc = 3\n").unwrap_err();
        assert!(e.to_string().contains("concurrenc"), "{e}");
        let e = JudgesConfig::parse("default = \"zz\"\n").unwrap_err();
        assert!(e.to_string().contains("`zz`"), "{e}");
        let e = JudgesConfig::parse("[endpoints.a]\nbase_url = \"http://x\"\nmax_reply_bytes = 0\n").unwrap_err();
        assert!(e.to_string().contains("max_reply_bytes"), "{e}");
        let e = JudgesConfig::parse("[endpoints.a]\nbase_url = \"ftp://x\"\n").unwrap_err();
        assert!(e.to_string().contains("http://"), "{e}");
        let e = JudgesConfig::parse("[endpoints.a]\nbase_url = \"https://u:p@x/v1\"\n").unwrap_err();
        assert!(e.to_string().contains("credentials"), "{e}");
    }
}
