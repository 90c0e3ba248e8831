//! The library facade: what a program that embeds `rubric` calls. Load a rubric — a source
//! file, source text or a verified bundle ([`Rubric`]); decide how it runs — its engine and the
//! sandbox's limits, a bundle on the Wasm engine unless the caller names another
//! ([`EngineChoice`]); build judge dispatch from judge settings ([`JudgeSettings`]); score rows
//! into the records `rubric run` writes ([`Rubric::score`]). The command line, the reward
//! server and the Python package all go through it, so they load, choose engines and score
//! the same way; its errors are its own ([`Error`]).
//!
//! Pipeline position: above `types`, `bundle`, `backend`, `runtime` and `judge`; below `cli`
//! (and `serve`, which `cli` hands rubrics loaded here) and the Python package.

use crate::bundle::{self, Bundle, BundleError};
use crate::diag::{Diagnostic, Severity};
use crate::engine::Engine;
use crate::interp::Interpreter;
use crate::ir::{Program, SiteTable};
use crate::runtime::{self, ChunkJudge, Identity, RowIn, VerdictFile};
use crate::source::SourceMap;
use crate::stdlib::Limits;
use crate::types::Compiled;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

/// What went wrong loading a rubric or setting up its run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The source does not compile: its error diagnostics, and their rendering without colour.
    #[error("{rendered}")]
    Compile { diagnostics: Vec<Diagnostic>, rendered: String },
    /// The bundle does not verify (or cannot be read).
    #[error("{}", bundle_diagnostic(path, error).render(&SourceMap::new(), false))]
    Bundle { path: PathBuf, error: BundleError },
    /// A recorded-verdicts file that cannot be read.
    #[error("{0}")]
    Verdicts(String),
    /// Judge dispatch cannot be built: configuration, a missing key variable, the cache.
    #[error("{0}")]
    Judges(String),
}

impl Error {
    /// A compile or bundle error as diagnostics, for a caller that renders them itself (human
    /// or JSON); `None` for the others, whose message is all there is.
    pub fn diagnostics(&self) -> Option<Vec<Diagnostic>> {
        match self {
            Error::Compile { diagnostics, .. } => Some(diagnostics.clone()),
            Error::Bundle { path, error } => Some(vec![bundle_diagnostic(path, error)]),
            Error::Verdicts(_) | Error::Judges(_) => None,
        }
    }
}

fn bundle_diagnostic(path: &Path, e: &BundleError) -> Diagnostic {
    let message = if e.code == bundle::CODE_READ {
        e.message.clone()
    } else {
        format!("bundle `{}` rejected: {}", path.display(), e.message)
    };
    let d = Diagnostic::error(e.code, message);
    match &e.help {
        Some(h) => d.with_help(h.clone()),
        None => d,
    }
}

/// The Wasm ABI this build implements (what bundles it writes declare and what it can load).
pub const WASM_ABI_VERSION: u32 = crate::backend::wasm::abi::ABI_VERSION;

/// The limits bundles are loaded with (sizes, entries, the ABI version), and what they are
/// checked against: this build's intrinsic catalogue (`ir.json` is validated against it) and
/// its Wasm compiler (`module.wasm` must be what it produces from `ir.json`).
pub fn bundle_limits() -> bundle::Limits {
    bundle::Limits::new(WASM_ABI_VERSION, &crate::types::CATALOGUE, crate::backend::wasm::compile_module)
}

/// A path that names a bundle rather than a source (by its `.rbk` extension).
pub fn is_bundle(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "rbk")
}

/// A loaded rubric: compiled from source (with the warnings and notes of its compilation), or a
/// verified bundle (with its bundled sources, if any, for diagnostics).
pub struct Rubric {
    program: Program,
    /// The program's source locations, by site id.
    pub sites: SiteTable,
    /// The sources diagnostics and trap sites point into.
    pub sources: SourceMap,
    /// The compilation's warnings and notes (none for a bundle).
    pub diagnostics: Vec<Diagnostic>,
    pub bundle: Option<Bundle>,
}

impl Rubric {
    /// A `.rbk` bundle (verified) or a `.rubric` source (compiled), by the path's extension.
    pub fn load(path: &Path) -> Result<Rubric, Error> {
        if is_bundle(path) {
            Rubric::from_bundle_path(path)
        } else {
            Rubric::from_compiled(crate::types::compile_path(path))
        }
    }

    /// A verified bundle.
    pub fn from_bundle_path(path: &Path) -> Result<Rubric, Error> {
        let b = bundle::load_path(path, &bundle_limits())
            .map_err(|error| Error::Bundle { path: path.to_path_buf(), error })?;
        Ok(Rubric {
            program: b.program.clone(),
            sites: b.sites.clone(),
            sources: b.sources_map(),
            diagnostics: vec![],
            bundle: Some(b),
        })
    }

    /// Rubric source text (`name` is the file name diagnostics show).
    pub fn from_source(name: &str, text: &str) -> Result<Rubric, Error> {
        Rubric::from_compiled(crate::types::compile_source(name, text))
    }

    /// A compiled source: an error when it has errors.
    pub fn from_compiled(compiled: Compiled) -> Result<Rubric, Error> {
        let Compiled { program, sites, diagnostics, sources } = compiled;
        match program {
            Some(program) if !diagnostics.iter().any(|d| d.severity == Severity::Error) => {
                Ok(Rubric { program, sites, sources, diagnostics, bundle: None })
            }
            _ => {
                let errors: Vec<Diagnostic> =
                    diagnostics.into_iter().filter(|d| d.severity == Severity::Error).collect();
                let rendered = errors.iter().map(|d| d.render(&sources, false)).collect::<Vec<_>>().join("\n");
                Err(Error::Compile { diagnostics: errors, rendered })
            }
        }
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Whether the rubric came from a bundle (from elsewhere, untrusted until said otherwise).
    pub fn is_bundle(&self) -> bool {
        self.bundle.is_some()
    }

    /// The identity stamped on results: the bundle's hash too when there is one.
    pub fn identity(&self) -> Identity {
        let ident = Identity::of(self.program(), &self.sites);
        match &self.bundle {
            Some(b) => ident.with_bundle(&b.hash),
            None => ident,
        }
    }

    /// Every row's record, in input order, exactly as `rubric run` writes them: each row (a
    /// line of JSONL text or a JSON value, parsed once) scored by `engine` with the recorded
    /// `verdicts`, judged criteria without one dispatched through `judges`, and with
    /// `group_field` the records annotated as `--groups` annotates them (token credit included,
    /// for rows that carry `token_offsets`).
    pub fn score(
        &self,
        engine: &dyn Engine,
        rows: &[(usize, RowIn<'_>)],
        verdicts: Option<&VerdictFile>,
        judges: Option<&dyn ChunkJudge>,
        group_field: Option<&str>,
    ) -> Vec<Json> {
        self.score_with(engine, rows, verdicts, judges, group_field, runtime::RowPolicy::default())
    }

    /// [`Rubric::score`] under `policy`: the rows' deadline (counted from this call: the
    /// batch is back by then, a row that lost a judge call to it `unscored` with reason
    /// `timeout`) and whether records carry their `timing`.
    pub fn score_with(
        &self,
        engine: &dyn Engine,
        rows: &[(usize, RowIn<'_>)],
        verdicts: Option<&VerdictFile>,
        judges: Option<&dyn ChunkJudge>,
        group_field: Option<&str>,
        policy: runtime::RowPolicy,
    ) -> Vec<Json> {
        runtime::score_batch(engine, self.program(), &self.identity(), rows, verdicts, judges, group_field, policy)
    }
}

/// An engine a rubric can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// The reference interpreter.
    Interp,
    /// The IR compiled to WebAssembly and run sandboxed in wasmtime, with per-row limits.
    Wasm,
    /// The IR compiled to native code with Cranelift: fastest, no sandbox (trusted rubrics).
    Jit,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [EngineKind::Interp, EngineKind::Wasm, EngineKind::Jit];

    /// The name the command line and the records use.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Interp => "interp",
            EngineKind::Wasm => "wasm",
            EngineKind::Jit => "jit",
        }
    }

    pub fn from_name(name: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// This engine, the Wasm engine under `limits`.
    pub fn engine(self, limits: Limits) -> Box<dyn Engine> {
        match self {
            EngineKind::Interp => Box::new(Interpreter),
            EngineKind::Wasm => Box::new(crate::backend::wasm::WasmEngine::with_limits(limits)),
            EngineKind::Jit => Box::new(crate::backend::jit::JitEngine::new()),
        }
    }

    /// The engine a trusted source runs on when the caller names none, chosen per rubric from
    /// its shape ([`SourceShape`]) by the rule `docs/performance.md` measures: the JIT when
    /// checks the JIT calls back to back dominate the rubric and it compiles, else the
    /// interpreter, which has no cold start and is ahead on everything else (judged and
    /// per-instance criteria, IFEval's function-heavy checks). Deterministic: the same rubric
    /// always gets the same engine, so its records and `--resume` agree from run to run.
    pub fn for_source(program: &Program) -> EngineKind {
        if SourceShape::of(program).prefers_jit() && crate::backend::jit::compiles(program) {
            EngineKind::Jit
        } else {
            EngineKind::Interp
        }
    }

    /// The engine for a batch of rows of one program (the Wasm and JIT engines compile it
    /// once, here), the Wasm engine under `limits`.
    pub fn engine_for(self, program: &Program, limits: Limits) -> Box<dyn Engine + '_> {
        match self {
            EngineKind::Interp => Box::new(Interpreter),
            EngineKind::Wasm => Box::new(crate::backend::wasm::WasmEngine::with_limits(limits).bind(program)),
            EngineKind::Jit => Box::new(crate::backend::jit::JitEngine::new().bind(program)),
        }
    }
}

/// What decides a source's default engine ([`EngineKind::for_source`]): the checks in the
/// program's plain runs (`interp::prepared::PlainRun`: consecutive criteria decided by a check
/// on the inputs alone, which the JIT calls one after another with no driver in between and
/// answers from one scan of each text) against every other criterion root (static criteria
/// outside those runs, and each `each` step, whose instances are made per row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceShape {
    pub plain_checks: usize,
    pub other_criteria: usize,
}

impl SourceShape {
    /// Plain checks below which the JIT's compile and per-row entry are not paid back: with 8
    /// text checks it was 1.16-1.18x the interpreter on one thread, with 4 1.01x, with 2 0.99x
    /// (`docs/performance.md`, "Choosing the default engine").
    pub const MIN_PLAIN_CHECKS: usize = 8;
    /// How many times the other criteria the plain checks must outnumber: the JIT enters every
    /// other root separately, and on rubrics of judged or per-instance criteria alone it ran
    /// at 0.57-0.97x the interpreter.
    pub const CHECK_SHARE: usize = 3;

    pub fn of(program: &Program) -> SourceShape {
        let prepared = crate::interp::prepared(program);
        let plain_checks: usize = prepared.runs.iter().map(|r| r.criteria.len()).sum();
        let each = program.steps.iter().filter(|s| matches!(s, crate::ir::Step::Each(_))).count();
        SourceShape { plain_checks, other_criteria: program.criteria.len().saturating_sub(plain_checks) + each }
    }

    /// Whether the JIT is the faster engine for rubrics of this shape.
    pub fn prefers_jit(&self) -> bool {
        self.plain_checks >= SourceShape::MIN_PLAIN_CHECKS
            && self.plain_checks >= SourceShape::CHECK_SHARE.saturating_mul(self.other_criteria)
    }
}

/// How rubrics run: the engine (none named: the Wasm engine for a bundle, the sandbox; for a
/// source the one its shape calls for, [`EngineKind::for_source`]) and the row limits of the
/// Wasm engine. Naming another engine for a bundle says the caller trusts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineChoice {
    pub engine: Option<EngineKind>,
    pub limits: Limits,
}

impl Default for EngineChoice {
    fn default() -> EngineChoice {
        EngineChoice { engine: None, limits: Limits::DEFAULT }
    }
}

impl EngineChoice {
    /// The engine `rubric` runs on: the one named, else the Wasm engine for a bundle and
    /// [`EngineKind::for_source`] for a source.
    pub fn kind_for(&self, rubric: &Rubric) -> EngineKind {
        match self.engine {
            Some(kind) => kind,
            None if rubric.is_bundle() => EngineKind::Wasm,
            None => EngineKind::for_source(rubric.program()),
        }
    }

    /// Whether `rubric` is a bundle that leaves the sandbox (the caller named another engine).
    pub fn leaves_sandbox(&self, rubric: &Rubric) -> bool {
        rubric.is_bundle() && self.kind_for(rubric) != EngineKind::Wasm
    }

    /// The engine for rows of `rubric`, bound to its program.
    pub fn engine_for<'r>(&self, rubric: &'r Rubric) -> Box<dyn Engine + 'r> {
        self.kind_for(rubric).engine_for(rubric.program(), self.limits)
    }
}

/// Where the judge cache lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheSetting {
    /// The user's cache directory (`$XDG_CACHE_HOME/rubric/judge-cache.sqlite`).
    #[default]
    Default,
    At(PathBuf),
    /// No cache: every call goes out.
    Off,
}

/// Judge dispatch for judged criteria without a recorded verdict, as `rubric run` takes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JudgeSettings {
    /// `judges.toml`: the endpoints to call (`--judges`).
    pub config: Option<PathBuf>,
    /// A transcript to answer calls from, offline (`--judge replay:FILE`).
    pub replay: Option<PathBuf>,
    /// A transcript to write every request and reply to (`--record`).
    pub record: Option<PathBuf>,
    pub cache: CacheSetting,
    /// How long judging may take in all, from when the dispatcher is built (`--deadline`):
    /// requests unanswered then end `judge_deadline`.
    pub deadline: Option<std::time::Duration>,
    /// The most the dispatcher may spend, in dollars (`--budget`): a request whose worst case
    /// could pass it is not sent, and its criteria end `unscored(budget: ...)`.
    pub budget_usd: Option<f64>,
    /// Send through the endpoints' Batch APIs, polling this often (`--dispatch batch`).
    pub batch_poll: Option<std::time::Duration>,
}

impl JudgeSettings {
    /// The judge cache these settings read and write: none when it is off, and none for a
    /// replay, which answers from its transcript alone (a reply the transcript lacks is
    /// `judge_not_recorded`, never a cached one).
    pub fn cache_path(&self) -> Option<PathBuf> {
        if self.replay.is_some() {
            return None;
        }
        match &self.cache {
            CacheSetting::Off => None,
            CacheSetting::At(p) => Some(p.clone()),
            #[cfg(feature = "judges")]
            CacheSetting::Default => crate::judge::Cache::default_path(),
            #[cfg(not(feature = "judges"))]
            CacheSetting::Default => None,
        }
    }

    /// The dispatcher for rubrics whose programs are `programs`: `None` when nothing is
    /// configured and none of them has a local judge (recorded verdicts only).
    pub fn dispatcher(&self, programs: &[&Program]) -> Result<Option<Box<dyn ChunkJudge>>, Error> {
        let local = programs.iter().any(|p| p.judges.iter().any(|j| j.local.is_some()));
        self.build(local)
    }

    #[cfg(feature = "judges")]
    fn build(&self, local: bool) -> Result<Option<Box<dyn ChunkJudge>>, Error> {
        Ok(self.raw(local)?.map(|d| Box::new(runtime::dispatch::Dispatching::new(d)) as Box<dyn ChunkJudge>))
    }

    /// The dispatcher itself, for `rubric generate` (`runtime::generate`): `None` without
    /// endpoints or a transcript.
    #[cfg(feature = "judges")]
    pub fn generation_dispatcher(&self) -> Result<Option<crate::judge::Dispatcher>, Error> {
        self.raw(false)
    }

    #[cfg(feature = "judges")]
    fn raw(&self, local: bool) -> Result<Option<crate::judge::Dispatcher>, Error> {
        use crate::judge::{Cache, Dispatcher, JudgesConfig, Replay, TranscriptWriter};
        let err = |e: &dyn std::fmt::Display| Error::Judges(e.to_string());
        let replay = self.replay.as_deref().map(Replay::load).transpose().map_err(|e| err(&e))?;
        if self.config.is_none() && replay.is_none() && !local {
            return Ok(None);
        }
        let config = match &self.config {
            Some(p) => JudgesConfig::load(p).map_err(|e| err(&e))?,
            None => JudgesConfig::default(),
        };
        let mut b = Dispatcher::builder(config);
        if let Some(r) = replay {
            b = b.replay(r);
        }
        if let Some(p) = self.cache_path() {
            if let Some(dir) = p.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            b = b.cache(Cache::open(&p).map_err(|e| err(&e))?);
        }
        if let Some(r) = &self.record {
            b = b.record(TranscriptWriter::create(r).map_err(|e| err(&e))?);
        }
        if let Some(d) = self.deadline {
            b = b.deadline(std::time::Instant::now() + d);
        }
        if let Some(usd) = self.budget_usd {
            b = b.budget(usd);
        }
        if let Some(poll) = self.batch_poll {
            b = b.batch(poll);
        }
        b.build().map(Some).map_err(|e| err(&e))
    }

    /// A dispatcher for [`crate::judge::Dispatcher::dry_run`] (`rubric plan`): the
    /// configuration and the cache, no HTTP client, no API key read.
    #[cfg(feature = "judges")]
    pub fn dry_dispatcher(&self) -> Result<crate::judge::Dispatcher, Error> {
        use crate::judge::{Cache, Dispatcher, JudgesConfig};
        let err = |e: &dyn std::fmt::Display| Error::Judges(e.to_string());
        let config = match &self.config {
            Some(p) => JudgesConfig::load(p).map_err(|e| err(&e))?,
            None => JudgesConfig::default(),
        };
        let mut b = Dispatcher::builder(config).dry();
        if let Some(p) = self.cache_path().filter(|p| p.exists()) {
            b = b.cache(Cache::open(&p).map_err(|e| err(&e))?);
        }
        b.build().map_err(|e| err(&e))
    }

    #[cfg(not(feature = "judges"))]
    fn build(&self, _local: bool) -> Result<Option<Box<dyn ChunkJudge>>, Error> {
        if self.config.is_some() || self.replay.is_some() || self.budget_usd.is_some() {
            return Err(Error::Judges("this build has no judge dispatch: build with the `judges` feature".into()));
        }
        Ok(None)
    }
}

/// A recorded-verdicts file (`--verdicts`).
pub fn load_verdicts(path: &Path) -> Result<VerdictFile, Error> {
    VerdictFile::load(path).map_err(Error::Verdicts)
}
