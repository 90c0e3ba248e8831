//! The native module of the `rubric` Python package (`rubric._rubric`): loads a rubric (a
//! source, source text or a verified bundle) through the library facade (`rubric::api`), with
//! its engine chosen as the command line chooses it (a bundle on the Wasm engine, under the
//! row limits given, unless an engine is named) and optionally the judge dispatcher of
//! `rubric run --judges` (`api::JudgeSettings`: endpoints, limits and the SQLite cache), and
//! scores rows given as JSON lines (`api::Rubric::score`, in parallel on rayon with the GIL
//! released), so that each record is exactly the line `rubric run` writes (grouped, with
//! advantages and token credit, as `rubric run --groups` when asked). The pure-Python layer
//! (`rubric/__init__.py`) turns dicts into lines and records back into dicts.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;
use rubric::api::{self, CacheSetting, EngineChoice, EngineKind, JudgeSettings, Rubric as Loaded};
use rubric::ir::RewardUnscored;
use rubric::runtime::{ChunkJudge, Identity, RowIn, RowPolicy, VerdictFile};
use rubric::stdlib::Limits;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

// The system allocator, counted per row so that the sandbox's memory limit covers every
// allocation of a bundle's rows (`rubric::meter`).
#[global_allocator]
static GLOBAL: rubric::meter::Counting<std::alloc::System> = rubric::meter::Counting(std::alloc::System);

/// A loaded rubric, how it runs and, when judges are configured, the dispatcher that asks them
/// (one per loaded rubric: its in-memory deduplication, limits and counters).
#[pyclass(frozen, module = "rubric._rubric", name = "NativeRubric")]
struct NativeRubric {
    loaded: Loaded,
    choice: EngineChoice,
    ident: Identity,
    judges: Option<Box<dyn ChunkJudge>>,
    /// Every scoring call's rows are decided within this (`RowPolicy::deadline`).
    row_deadline: Option<std::time::Duration>,
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

impl NativeRubric {
    /// Every line's record, in order (grouped and annotated when `group_field` is set).
    fn records(
        &self,
        lines: Vec<String>,
        group_field: Option<&str>,
        verdicts: Option<&VerdictFile>,
        timings: bool,
    ) -> Vec<Json> {
        let engine = self.choice.engine_for(&self.loaded);
        let rows: Vec<(usize, RowIn<'_>)> = lines.iter().enumerate().map(|(i, l)| (i, RowIn::Line(l))).collect();
        let policy = RowPolicy { deadline: self.row_deadline, timings };
        self.loaded.score_with(engine.as_ref(), &rows, verdicts, self.judges.as_deref(), group_field, policy)
    }
}

#[pymethods]
impl NativeRubric {
    /// Load `target`: rubric source text when it holds a newline, else a path to a `.rubric`
    /// source or a `.rbk` bundle. `engine`: `interp`, `wasm` or `jit` (`None`: `wasm` for a
    /// bundle — the sandbox —; for a source `jit` when checks on its inputs alone make it up,
    /// else `interp`, as `rubric run` chooses; naming another engine for a bundle says it is
    /// trusted). `row_fuel`, `row_timeout_ms`, `row_memory_mb`: the Wasm engine's row
    /// limits (`rubric run --row-fuel ...`). Raises `ValueError` with the rendered diagnostics.
    ///
    /// Judged criteria without a recorded verdict are dispatched as by `rubric run`: `judges`,
    /// a `judges.toml` path (`--judges`); `replay`, a transcript to answer from (`--judge
    /// replay:FILE`); `cache`, the SQLite judge cache (`--cache`; `None`: the default path);
    /// `no_cache` (`--no-cache`); `budget`, the most its judge calls may cost in dollars
    /// while it is loaded (`--budget`). Raises `ValueError` when the dispatcher cannot be built.
    /// `row_deadline_ms`: every scoring call's rows are decided within this many milliseconds
    /// of the call (`rubric run --row-deadline-ms`); a row that lost a judge call to it is
    /// unscored with reason `timeout`.
    #[new]
    #[pyo3(signature = (target, engine=None, judges=None, replay=None, cache=None, no_cache=false, row_fuel=None, row_timeout_ms=None, row_memory_mb=None, budget=None, row_deadline_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        target: String,
        engine: Option<String>,
        judges: Option<String>,
        replay: Option<String>,
        cache: Option<String>,
        no_cache: bool,
        row_fuel: Option<u64>,
        row_timeout_ms: Option<u64>,
        row_memory_mb: Option<u64>,
        budget: Option<f64>,
        row_deadline_ms: Option<u64>,
    ) -> PyResult<Self> {
        let loaded = py
            .detach(|| {
                if target.contains('\n') {
                    Loaded::from_source("<source>", &target)
                } else {
                    Loaded::load(Path::new(&target))
                }
            })
            .map_err(value_error)?;
        let engine = match engine.as_deref() {
            Some(name) => Some(EngineKind::from_name(name).ok_or_else(|| {
                PyValueError::new_err(format!("unknown engine `{name}`: expected `interp`, `wasm` or `jit`"))
            })?),
            None => None,
        };
        let d = Limits::DEFAULT;
        let limits = Limits {
            fuel: row_fuel.unwrap_or(d.fuel),
            timeout: row_timeout_ms.map_or(d.timeout, std::time::Duration::from_millis),
            heap_bytes: row_memory_mb
                .map_or(Some(d.heap_bytes), |mb| usize::try_from(mb).ok().and_then(|mb| mb.checked_mul(1 << 20)))
                .ok_or_else(|| PyValueError::new_err("`row_memory_mb` is too large"))?,
            ..d
        };
        let choice = EngineChoice { engine, limits };
        if cache.is_some() && no_cache {
            return Err(PyValueError::new_err("`cache` and `no_cache` exclude each other"));
        }
        let settings = JudgeSettings {
            config: judges.map(PathBuf::from),
            replay: replay.map(PathBuf::from),
            record: None,
            cache: match (no_cache, cache) {
                (true, _) => CacheSetting::Off,
                (false, Some(p)) => CacheSetting::At(p.into()),
                (false, None) => CacheSetting::Default,
            },
            // A loaded rubric lives as long as the trainer: no deadline for all of its judging.
            deadline: None,
            // The budget, though, covers all of it: what the rubric may spend while loaded.
            budget_usd: budget,
            batch_poll: None,
        };
        // local judges (`judge { local "DIR" }`) need no configuration: the package has local
        // models, found as `rubric run` finds them (the embedding model: RUBRIC_EMBEDDING_MODEL,
        // else ~/.local/share/rubric/models/)
        let judges = py.detach(|| settings.dispatcher(&[loaded.program()])).map_err(value_error)?;
        let ident = loaded.identity();
        let row_deadline = row_deadline_ms.map(std::time::Duration::from_millis);
        Ok(NativeRubric { loaded, choice, ident, judges, row_deadline })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.ident.rubric
    }

    #[getter]
    fn version(&self) -> &str {
        &self.ident.version
    }

    #[getter]
    fn ir_hash(&self) -> &str {
        &self.ident.ir_hash
    }

    /// The bundle's hash when loaded from a bundle.
    #[getter]
    fn bundle(&self) -> Option<&str> {
        self.ident.bundle.as_deref()
    }

    #[getter]
    fn engine(&self) -> &'static str {
        self.choice.kind_for(&self.loaded).name()
    }

    /// The rubric's `reward { unscored ... }` rule: `exclude` (also without a `reward`
    /// declaration), `zero` or `flag_group`.
    #[getter]
    fn reward_unscored(&self) -> &'static str {
        let rule = self.loaded.program().reward.as_ref().map_or(RewardUnscored::Exclude, |r| r.unscored);
        RewardUnscored::ALL.iter().find(|(_, r)| *r == rule).map_or("exclude", |(name, _)| name)
    }

    /// The records of `lines` (one JSON object per line) as JSON text, one per line, exactly
    /// as `rubric run` writes them. `groups`: the group field (`rubric run --groups FIELD`);
    /// `verdicts`: a recorded-verdicts file (`rubric run --verdicts FILE`); `timings`: each
    /// record gets its `timing` (`rubric run --timings`). Scores in parallel with the GIL
    /// released.
    #[pyo3(signature = (lines, groups=None, verdicts=None, timings=false))]
    fn score_lines(
        &self,
        py: Python<'_>,
        lines: Vec<String>,
        groups: Option<String>,
        verdicts: Option<String>,
        timings: bool,
    ) -> PyResult<Vec<String>> {
        py.detach(|| -> Result<Vec<String>, String> {
            let verdicts = verdicts.map(|p| api::load_verdicts(Path::new(&p))).transpose().map_err(|e| e.to_string())?;
            let records = self.records(lines, groups.as_deref(), verdicts.as_ref(), timings);
            Ok(records.par_iter().map(|r| serde_json::to_string(r).expect("a record serialises")).collect())
        })
        .map_err(PyValueError::new_err)
    }

    /// Each line's score (`None` when unscored or an error record), with the GIL released.
    fn scores_lines(&self, py: Python<'_>, lines: Vec<String>) -> Vec<Option<f64>> {
        py.detach(|| self.records(lines, None, None, false).iter().map(|r| r.get("score").and_then(Json::as_f64)).collect())
    }

    /// Whether judged criteria are dispatched to judges (`judges` or `replay` given).
    #[getter]
    fn has_judges(&self) -> bool {
        self.judges.is_some()
    }

    /// The judge dispatcher's counters as JSON text (the `judges` object of `rubric serve`'s
    /// `/metrics`: HTTP calls, cache hits, deduplicated requests, tokens, planning), or `None`
    /// without judges.
    fn judge_stats(&self) -> Option<String> {
        self.judges.as_ref().map(|j| j.stats().to_string())
    }
}

/// Set how `exec` runs programs in this process (`rubric run`'s execution options): `allow`
/// (`--allow-exec`), the cache directory (`None`: the default one; `no_cache`: none), a
/// transcript to record to and one to replay from, the sandboxes at once (0: the cores), and
/// the root of submission directories (`--exec-dir-root`).
#[pyfunction]
#[pyo3(signature = (allow, cache, no_cache, record, replay, concurrency, dir_root=None))]
fn configure_exec(
    allow: bool,
    cache: Option<PathBuf>,
    no_cache: bool,
    record: Option<PathBuf>,
    replay: Option<PathBuf>,
    concurrency: usize,
    dir_root: Option<PathBuf>,
) -> PyResult<()> {
    use rubric::sandbox::executor;
    let cache = if no_cache { None } else { cache.or_else(executor::default_cache_dir) };
    let dir_root = dir_root
        .map(|d| d.canonicalize().map_err(|e| PyValueError::new_err(format!("dir_root {}: {e}", d.display()))))
        .transpose()?;
    executor::configure(executor::ExecConfig {
        allow,
        concurrency,
        cache,
        record,
        replay,
        runtimes: Vec::new(),
        dir_root,
    })
    .map_err(PyValueError::new_err)
}

/// What the process's executor did: executions run, answered from the cache or a transcript,
/// deduplicated, not made; `None` before `configure_exec`.
#[pyfunction]
fn exec_stats() -> Option<String> {
    rubric::sandbox::executor::current().map(|e| serde_json::to_string(&e.stats()).unwrap_or_default())
}

#[pymodule]
fn _rubric(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeRubric>()?;
    m.add_function(wrap_pyfunction!(configure_exec, m)?)?;
    m.add_function(wrap_pyfunction!(exec_stats, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
