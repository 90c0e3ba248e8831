//! The standard library: intrinsics implemented once in Rust and shared by every engine, the
//! per-response text index (lexed once with logos), and the `stdlib/` modules written in the
//! language, embedded under `<stdlib/...>` names.
//!
//! Pipeline position: consulted by `types` (signatures) and called by `interp` (implementations).

mod intrinsics;
pub mod scan;
pub mod text_index;

use crate::value::Value;
use rustc_hash::FxHashMap;
use scan::{Memo, ScanPlan, TextScans};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use intrinsics::trajectory::trajectory_value;
pub(crate) use intrinsics::{larger, number_pair_extreme, smaller};
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

thread_local! {
    static ROW_DEADLINE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Run `f` with `deadline` as the deadline of the row this thread evaluates
/// (`runtime::RowPolicy::deadline`): what an evaluation waits for beside its own work reads it
/// ([`row_deadline`]; `exec` stops waiting for a program then). The previous value is restored.
pub fn with_row_deadline<R>(deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    let before = ROW_DEADLINE.with(|d| d.replace(deadline));
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ROW_DEADLINE.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(before);
    f()
}

/// The deadline of the row this thread evaluates, when it has one.
pub fn row_deadline() -> Option<Instant> {
    ROW_DEADLINE.with(std::cell::Cell::get)
}

/// The resources one row may use: the sandbox's limits (the Wasm engine; `rubric run
/// --fuel --timeout-ms --memory-mb`). Every engine's intrinsics enforce the first three through
/// the row's [`Budget`]; the Wasm engine also meters its own instructions with the same fuel and
/// interrupts its code at the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel for all the work of a row: about one unit per Wasm instruction, and one per byte
    /// or element an intrinsic reads or produces.
    pub fuel: u64,
    /// Wall-clock time for a row.
    pub timeout: Duration,
    /// Bytes a row may hold on the host at once: everything it allocates (values, text
    /// indexes, JSON trees, regexes, embeddings), counted by `meter`.
    pub heap_bytes: usize,
    /// Bytes of linear memory a Wasm instance may have.
    pub memory_bytes: usize,
}

impl Limits {
    pub const DEFAULT: Limits =
        Limits { fuel: 2_000_000_000, timeout: Duration::from_secs(10), heap_bytes: 512 << 20, memory_bytes: 16 << 20 };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// The most bytes a regular expression's compiled program (and its lazy DFA cache) may take.
const REGEX_SIZE_LIMIT: usize = 2 << 20;

/// Work between two readings of the clock inside intrinsics (about 100 µs of scanning).
const CLOCK_EVERY: u64 = 1 << 17;

/// What a row may still spend inside host functions, and what it has spent: the fuel left,
/// the deadline and the memory cap of its [`Limits`]. An unlimited budget (the interpreter and
/// the JIT, for trusted rubrics) makes every check a no-op.
///
/// Intrinsics charge [`EvalCtx::work`] for what they read and produce and check
/// [`EvalCtx::reserve`] before building anything larger than their inputs, so a limit stops a
/// host function as it works, not after; the Wasm engine moves the fuel they spent into its
/// store (`take_spent`) so that host work and Wasm instructions draw on one tank.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    limits: Option<Limits>,
    deadline: Option<Instant>,
    /// Fuel left when the budget was last synchronised with its owner.
    fuel: u64,
    /// Fuel spent since then.
    spent: u64,
    /// `spent` at which the clock is read next.
    next_clock: u64,
    /// The deadline moved since an engine last asked ([`Budget::take_pause`]).
    paused: bool,
}

impl Budget {
    /// No limits: every check passes.
    pub fn unlimited() -> Budget {
        Budget::default()
    }

    /// The limits of one row starting now.
    pub fn new(limits: Limits) -> Budget {
        let deadline = Instant::now().checked_add(limits.timeout);
        Budget { limits: Some(limits), deadline, fuel: limits.fuel, spent: 0, next_clock: CLOCK_EVERY, paused: false }
    }

    pub fn limits(&self) -> Option<&Limits> {
        self.limits.as_ref()
    }

    /// Move the deadline `d` later: time the row spent waiting on something with limits of its
    /// own (a sandboxed execution) does not count against the row's.
    pub fn pause(&mut self, d: std::time::Duration) {
        if let Some(t) = self.deadline {
            self.deadline = t.checked_add(d).or(Some(t));
            self.paused = true;
        }
    }

    /// When the deadline moved since the last call: the time left until it, for an engine that
    /// keeps a clock of its own (the Wasm engine's epoch deadline).
    pub fn take_pause(&mut self) -> Option<std::time::Duration> {
        if !std::mem::take(&mut self.paused) {
            return None;
        }
        self.deadline.map(|t| t.saturating_duration_since(Instant::now()))
    }

    /// The fuel spent since the last [`Budget::take_spent`].
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// The fuel spent since the last call, and the fuel left from now on (the owner's count
    /// after it subtracted what was spent).
    pub fn take_spent(&mut self, fuel_left: u64) -> u64 {
        let spent = std::mem::take(&mut self.spent);
        self.fuel = fuel_left;
        self.next_clock = CLOCK_EVERY;
        spent
    }

    pub fn fuel_trap(limits: &Limits) -> Trap {
        Trap::new(TrapKind::Limit, format!("fuel limit: the row ran out of its {} units of fuel", limits.fuel))
    }

    pub fn time_trap(limits: &Limits) -> Trap {
        Trap::new(TrapKind::Limit, format!("time limit: the row ran longer than {} ms", limits.timeout.as_millis()))
    }

    pub fn memory_trap(limits: &Limits) -> Trap {
        Trap::new(TrapKind::Limit, format!("memory limit: the row needs more than {} bytes", limits.heap_bytes))
    }

    /// The deadline and the memory cap, now.
    pub fn check(&self) -> Result<(), Trap> {
        let Some(limits) = &self.limits else { return Ok(()) };
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Budget::time_trap(limits));
        }
        if crate::meter::row_bytes() > limits.heap_bytes {
            return Err(Budget::memory_trap(limits));
        }
        Ok(())
    }

    /// The memory cap, now (cheap: one thread-local read).
    #[inline]
    pub fn check_memory(&self) -> Result<(), Trap> {
        match &self.limits {
            Some(limits) if crate::meter::row_bytes() > limits.heap_bytes => Err(Budget::memory_trap(limits)),
            _ => Ok(()),
        }
    }

    /// Charge `units` of work: past the fuel left it is a fuel trap; the memory cap is checked
    /// every time and the clock every `CLOCK_EVERY` units.
    #[inline]
    pub fn work(&mut self, units: u64) -> Result<(), Trap> {
        let Some(limits) = &self.limits else { return Ok(()) };
        self.spent = self.spent.saturating_add(units);
        if self.spent > self.fuel {
            return Err(Budget::fuel_trap(limits));
        }
        if self.spent >= self.next_clock {
            self.next_clock = self.spent.saturating_add(CLOCK_EVERY);
            return self.check();
        }
        self.check_memory()
    }

    /// Whether `bytes` more would still fit under the memory cap (checked before building a
    /// value larger than the inputs it comes from). Counts even where `meter` is not installed.
    #[inline]
    pub fn reserve(&self, bytes: usize) -> Result<(), Trap> {
        match &self.limits {
            Some(limits) if crate::meter::row_bytes().saturating_add(bytes) > limits.heap_bytes => {
                Err(Budget::memory_trap(limits))
            }
            _ => Ok(()),
        }
    }
}

/// A text's key in the per-row maps of [`EvalCtx`]: its `Arc`'s address and length (each map
/// keeps the `Arc` alive, so the address cannot be reused while the entry stands).
fn text_key(text: &Arc<str>) -> (usize, usize) {
    (Arc::as_ptr(text) as *const u8 as usize, text.len())
}

/// Per-row evaluation context shared by all intrinsic calls of one row: the text index of
/// every distinct text seen (so a response is lexed once however many checks read it),
/// compiled regular expressions, and the row's [`Budget`].
#[derive(Default)]
pub struct EvalCtx {
    texts: FxHashMap<(usize, usize), (Arc<str>, Arc<TextIndex>)>,
    regexes: FxHashMap<String, Arc<regex::Regex>>,
    /// The program's scan plan (`scan`): only under an unlimited budget.
    plan: Option<Arc<ScanPlan>>,
    /// Each distinct text's scans, by the `Arc`'s address and length (the scans keep it alive).
    scans: FxHashMap<(usize, usize), TextScans>,
    /// Results of the intrinsic calls the plan memoises.
    memo: Memo,
    /// How many times a text was lexed (for tests proving sharing).
    pub lex_count: usize,
    pub budget: Budget,
}

impl EvalCtx {
    pub fn new() -> EvalCtx {
        EvalCtx::default()
    }

    /// A context whose intrinsics spend from `budget`.
    pub fn with_budget(budget: Budget) -> EvalCtx {
        EvalCtx { budget, ..EvalCtx::default() }
    }

    /// This context, emptied, for a row of the program whose scan plan is `plan`, keeping its
    /// tables' room (a batch's rows then allocate none of them again). The plan is used only
    /// under an unlimited `budget`: a row with limits computes and charges every call as
    /// written.
    pub fn reset_for_row(&mut self, budget: Budget, plan: Option<&Arc<ScanPlan>>) {
        self.texts.clear();
        self.regexes.clear();
        self.plan = plan.filter(|_| budget.limits().is_none()).cloned();
        self.scans.clear();
        self.memo.clear();
        self.lex_count = 0;
        self.budget = budget;
    }

    /// The plan and `text`'s scans in this row; `None` without a plan (nothing is kept then).
    fn scans_of(&mut self, text: &Arc<str>) -> Option<(&ScanPlan, &mut TextScans)> {
        let plan = self.plan.as_deref()?;
        Some((plan, self.scans.entry(text_key(text)).or_insert_with(|| TextScans::new(text))))
    }

    /// The scans this row ran over `text` so far, to read several answers of one pass
    /// (`ScanPlan::read`) with one lookup.
    pub fn scans_of_text(&self, text: &Arc<str>) -> Option<&TextScans> {
        self.scans.get(&text_key(text))
    }

    /// `text` lowercased: with a plan once per row and text, else afresh.
    pub fn lowered(&mut self, text: &Arc<str>) -> Arc<str> {
        match self.scans_of(text) {
            Some((_, scans)) => scans.lower(text),
            None => Arc::from(text.to_lowercase()),
        }
    }

    /// How many times `c` occurs in `text` lowercased, from one count of every character
    /// (only with a plan).
    pub fn lowercase_letter_count(&mut self, text: &Arc<str>, c: char) -> Option<u32> {
        let (_, scans) = self.scans_of(text)?;
        Some(scans.lowercase_letter(text, c))
    }

    /// `contains(text, needle)` from the text's one pass, when the plan holds `needle`.
    pub fn planned_contains(&mut self, text: &Arc<str>, needle: &str) -> Option<bool> {
        let (plan, scans) = self.scans_of(text)?;
        plan.contains(scans, text, needle)
    }

    /// `count_occurrences(text, needle)` from the text's one pass, when the plan counts `needle`.
    pub fn planned_count(&mut self, text: &Arc<str>, needle: &str) -> Option<u32> {
        let (plan, scans) = self.scans_of(text)?;
        plan.count(scans, text, needle)
    }

    /// `contains_ci(text, needle)` from the lowercased text's one pass, when the plan holds
    /// `needle`.
    pub fn planned_contains_ci(&mut self, text: &Arc<str>, needle: &str) -> Option<bool> {
        if !self.plan.as_ref()?.holds_folded(needle) {
            return None;
        }
        let (plan, scans) = self.scans_of(text)?;
        let lowered = scans.lower(text);
        plan.contains_folded(scans, &lowered, needle)
    }

    /// `matches(text, pattern)` from the text's one pass of the program's regex set, when the
    /// plan holds `pattern`.
    pub fn planned_matches(&mut self, text: &Arc<str>, pattern: &str) -> Option<bool> {
        let (plan, scans) = self.scans_of(text)?;
        plan.matches(scans, text, pattern)
    }

    /// Call `f` on `args`, through the row's memo when the plan memoises `f`.
    pub fn call_memoised(&mut self, f: &'static Intrinsic, args: &[Value]) -> Result<Value, Trap> {
        let key = match &self.plan {
            Some(plan) if plan.memoises(f) => Memo::key(f, args),
            _ => None,
        };
        let Some(key) = key else { return (f.imp)(args, self) };
        if let Some(v) = self.memo.get(key, f, args) {
            return Ok(v);
        }
        let v = (f.imp)(args, self)?;
        self.memo.insert(key, f, args, v.clone());
        Ok(v)
    }

    /// Charge `units` of work to the row's budget ([`Budget::work`]).
    #[inline]
    pub fn work(&mut self, units: usize) -> Result<(), Trap> {
        self.budget.work(units as u64)
    }

    /// Check that `bytes` more fit in the row's memory ([`Budget::reserve`]).
    #[inline]
    pub fn reserve(&self, bytes: usize) -> Result<(), Trap> {
        self.budget.reserve(bytes)
    }

    /// The index of `text`, lexed on first use. Keyed by the `Arc`'s address and length; the
    /// `Arc` is kept alive in the map so the address cannot be reused while cached.
    /// Lexing is charged to the row's budget, and stops at its limits.
    pub fn text_index(&mut self, text: &Arc<str>) -> Result<Arc<TextIndex>, Trap> {
        let key = text_key(text);
        if let Some((_, idx)) = self.texts.get(&key) {
            return Ok(idx.clone());
        }
        self.lex_count += 1;
        let idx = Arc::new(TextIndex::build(text, &mut self.budget)?);
        self.texts.insert(key, (text.clone(), idx.clone()));
        Ok(idx)
    }

    /// A compiled regex: cached per row, and process-wide so that a fixed pattern is compiled
    /// once per process, not once per row (the shared cache is bounded).
    pub fn regex(&mut self, pattern: &str) -> Result<Arc<regex::Regex>, Trap> {
        if let Some(r) = self.plan.as_ref().and_then(|p| p.regex(pattern)) {
            return Ok(r.clone());
        }
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
                // Compiling is work in proportion to the pattern, and the compiled program is
                // bounded (a pattern can ask for far more states than it has characters).
                self.budget.work(pattern.len() as u64)?;
                let re = Arc::new(
                    compile_regex(pattern)
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

/// Whether the command will score rows, so that [`warm_up`] may start loading tables early.
static WARM_UPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Let [`warm_up`] load what intrinsics need ahead of the first row: set by the commands that
/// score rows from a rubric they compile (`rubric run`, `rubric serve`), not by those that only
/// check, show or edit one.
pub fn allow_warm_ups() {
    WARM_UPS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// A module's text, before it is parsed: start the loaders ([`warm_up`]) of the intrinsics it
/// names, so that they run while the module is parsed, which is most of compiling. A name in a
/// comment starts its loader too: a load on another thread that no row needs, never a
/// different answer.
pub fn warm_up_named_in(text: &str) {
    if !WARM_UPS.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    for i in intrinsics::ALL {
        if intrinsics::loader(i.name).is_some() && text.contains(i.name) {
            warm_up(i.name);
        }
    }
}

/// The checker met a call of intrinsic `name`. When rows will be scored ([`allow_warm_ups`])
/// and the intrinsic loads tables on its first call (Punkt's parameters, the word tokenizer's
/// patterns, Python's character classes; language detection only finds its tables in the
/// binary and seeds its random generator), start loading them now on a thread of its own, once per process, so that
/// the load overlaps the rest of compiling, which runs on one core, instead of holding up the
/// first row that needs them. The answers are the same either way: the tables are the same,
/// and a row that needs them before they are loaded waits for them.
pub fn warm_up(name: &str) {
    if !WARM_UPS.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let Some(load) = intrinsics::loader(name) else { return };
    static STARTED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut started) = STARTED.lock() else { return };
    if started.contains(&(load as usize)) {
        return;
    }
    started.push(load as usize);
    // A thread that cannot be started leaves the load to the first row that needs it.
    let _ = std::thread::Builder::new().name(format!("rubric-load-{name}")).spawn(load);
}

/// A rubric's regular expression, compiled under the size limits every engine applies.
pub(crate) fn compile_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(REGEX_SIZE_LIMIT).build()
}
