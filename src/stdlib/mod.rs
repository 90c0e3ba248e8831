//! The standard library: intrinsics implemented once in Rust and shared by every engine, the
//! per-response text index (lexed once with logos), and the `stdlib/` modules written in the
//! language, embedded under `<stdlib/...>` names.
//!
//! Pipeline position: consulted by `types` (signatures) and called by `interp` (implementations).

mod intrinsics;
pub mod text_index;

use crate::value::Value;
use std::collections::HashMap;
use std::sync::Arc;

pub use text_index::TextIndex;

/// The signature of every intrinsic implementation. Arguments arrive after the caller filled
/// defaults, in parameter order; an optional parameter left out arrives as `Value::Null`.
/// Intrinsics never see `Value::Unscored`: engines short-circuit it before the call.
pub type IntrinsicFn = fn(&[Value], &mut EvalCtx) -> Result<Value, Trap>;

/// One built-in function.
pub struct Intrinsic {
    pub name: &'static str,
    /// Signature in rubric syntax, e.g. `"(text: Text, lang: Text? = null) -> List[Text]"`.
    /// `T` is a type variable bound by the first argument that mentions it.
    pub sig: &'static str,
    /// One paragraph of documentation (markdown).
    pub doc: &'static str,
    /// Doc examples: rubric expressions that must evaluate to `true`. Run as tests.
    pub examples: &'static [&'static str],
    pub imp: IntrinsicFn,
}

/// Every intrinsic, in a stable order. Names may repeat (overloads): the checker picks the
/// first whose parameters accept the arguments.
pub fn intrinsics() -> &'static [Intrinsic] {
    intrinsics::ALL
}

pub fn lookup(name: &str) -> impl Iterator<Item = (usize, &'static Intrinsic)> + '_ {
    intrinsics().iter().enumerate().filter(move |(_, i)| i.name == name)
}

/// What went wrong inside an intrinsic or an engine. One taxonomy for all engines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Trap {
    pub kind: TrapKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrapKind {
    /// An argument outside the function's domain (negative count, bad tolerance...).
    InvalidArgument,
    /// A regular expression that does not compile.
    Regex,
    /// Malformed JSON or JSON Schema.
    Json,
    /// A list index or a required field that is not there.
    OutOfRange,
    /// Division by zero at run time.
    DivisionByZero,
    /// A value of the wrong shape reached an operation (a `Json` input that is not an object...).
    Type,
    /// A resource limit (fuel, memory, time).
    Limit,
    /// A local model that is not configured, does not load or fails (embedding verifiers).
    Model,
    /// A panic while a row was evaluated (a bug), caught at the row boundary by the runtime:
    /// the row gets an error record with this code, and the batch goes on.
    Internal,
}

impl TrapKind {
    /// The stable code written into results, `rubric::trap::<kind>`.
    pub fn code(self) -> &'static str {
        match self {
            TrapKind::InvalidArgument => "rubric::trap::invalid_argument",
            TrapKind::Regex => "rubric::trap::regex",
            TrapKind::Json => "rubric::trap::json",
            TrapKind::OutOfRange => "rubric::trap::out_of_range",
            TrapKind::DivisionByZero => "rubric::trap::division_by_zero",
            TrapKind::Type => "rubric::trap::type",
            TrapKind::Limit => "rubric::trap::limit",
            TrapKind::Model => "rubric::trap::model",
            TrapKind::Internal => "rubric::trap::internal",
        }
    }
}

impl Trap {
    pub fn new(kind: TrapKind, message: impl Into<String>) -> Trap {
        Trap { kind, message: message.into() }
    }
}

/// Per-row evaluation context shared by all intrinsic calls of one row: the text index of
/// every distinct text seen (so a response is lexed once however many checks read it) and
/// compiled regular expressions.
#[derive(Default)]
pub struct EvalCtx {
    texts: HashMap<(usize, usize), (Arc<str>, Arc<TextIndex>)>,
    regexes: HashMap<String, Arc<regex::Regex>>,
    /// How many times a text was lexed (for tests proving sharing).
    pub lex_count: usize,
}

impl EvalCtx {
    pub fn new() -> EvalCtx {
        EvalCtx::default()
    }

    /// The index of `text`, lexed on first use. Keyed by the `Arc`'s address and length; the
    /// `Arc` is kept alive in the map so the address cannot be reused while cached.
    pub fn text_index(&mut self, text: &Arc<str>) -> Arc<TextIndex> {
        let key = (Arc::as_ptr(text) as *const u8 as usize, text.len());
        if let Some((_, idx)) = self.texts.get(&key) {
            return idx.clone();
        }
        self.lex_count += 1;
        let idx = Arc::new(TextIndex::new(text));
        self.texts.insert(key, (text.clone(), idx.clone()));
        idx
    }

    /// A compiled regex: cached per row, and process-wide so that a fixed pattern is compiled
    /// once per process, not once per row (the shared cache is bounded).
    pub fn regex(&mut self, pattern: &str) -> Result<Arc<regex::Regex>, Trap> {
        if let Some(r) = self.regexes.get(pattern) {
            return Ok(r.clone());
        }
        static SHARED: std::sync::OnceLock<std::sync::Mutex<HashMap<String, Arc<regex::Regex>>>> =
            std::sync::OnceLock::new();
        const SHARED_LIMIT: usize = 4096;
        let shared = SHARED.get_or_init(Default::default);
        let cached = shared.lock().ok().and_then(|m| m.get(pattern).cloned());
        let re = match cached {
            Some(r) => r,
            None => {
                let re = Arc::new(
                    regex::Regex::new(pattern)
                        .map_err(|e| Trap::new(TrapKind::Regex, format!("invalid regex `{pattern}`: {e}")))?,
                );
                if let Ok(mut m) = shared.lock() {
                    if m.len() >= SHARED_LIMIT {
                        m.clear();
                    }
                    m.insert(pattern.to_string(), re.clone());
                }
                re
            }
        };
        self.regexes.insert(pattern.to_string(), re.clone());
        Ok(re)
    }
}
