//! The native module of the `rubric` Python package (`rubric._rubric`): loads a rubric (a
//! source, source text or a verified bundle, through `cli::bundle::load`), optionally with the
//! judge dispatcher of `rubric run --judges` (`cli::judge_dispatch`: endpoints, limits and the
//! SQLite cache), and scores rows given as JSON lines with `runtime::score_batch`, in parallel
//! on rayon with the GIL released, so that each record is exactly the line `rubric run` writes
//! (grouped, with advantages and token credit, as `rubric run --groups` when asked). The
//! pure-Python layer (`rubric/__init__.py`) turns dicts into lines and records back into dicts.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;
use rubric::cli::bundle::{self, Rubric as Loaded};
use rubric::cli::{judge_dispatch, EngineKind};
use rubric::ir::RewardUnscored;
use rubric::runtime::{self, ChunkJudge, Identity, VerdictFile};
use serde_json::Value as Json;
use std::path::Path;

// The system allocator, counted per row so that the sandbox's memory limit covers every
// allocation of a bundle's rows (`rubric::meter`).
#[global_allocator]
static GLOBAL: rubric::meter::Counting<std::alloc::System> = rubric::meter::Counting(std::alloc::System);

/// A loaded rubric, the engine it runs on and, when judges are configured, the dispatcher that
/// asks them (one per loaded rubric: its in-memory deduplication, limits and counters).
#[pyclass(frozen, module = "rubric._rubric", name = "NativeRubric")]
struct NativeRubric {
    loaded: Loaded,
    engine: EngineKind,
    ident: Identity,
    judges: Option<Box<dyn ChunkJudge>>,
}

fn engine_kind(name: &str) -> PyResult<EngineKind> {
    match name {
        "interp" => Ok(EngineKind::Interp),
        "wasm" => Ok(EngineKind::Wasm),
        "jit" => Ok(EngineKind::Jit),
        other => Err(PyValueError::new_err(format!("unknown engine `{other}`: expected `interp`, `wasm` or `jit`"))),
    }
}

impl NativeRubric {
    /// Every line's record, in order (grouped and annotated when `group_field` is set).
    fn records(&self, lines: Vec<String>, group_field: Option<&str>, verdicts: Option<&VerdictFile>) -> Vec<Json> {
        let program = self.loaded.program();
        let engine = self.engine.engine_for(program, rubric::stdlib::Limits::DEFAULT);
        let lines: Vec<(usize, String)> = lines.into_iter().enumerate().collect();
        runtime::score_batch(
            engine.as_ref(),
            program,
            &self.ident,
            &lines,
            verdicts,
            self.judges.as_deref(),
            group_field,
        )
    }
}

#[pymethods]
impl NativeRubric {
    /// Load `target`: rubric source text when it holds a newline, else a path to a `.rubric`
    /// source or a `.rbk` bundle. `engine`: `interp`, `wasm` or `jit` (`None`: `wasm` for a
    /// bundle, `interp` for a source). Raises `ValueError` with the rendered diagnostics.
    ///
    /// Judged criteria without a recorded verdict are dispatched as by `rubric run`: `judges`,
    /// a `judges.toml` path (`--judges`); `replay`, a transcript to answer from (`--judge
    /// replay:FILE`); `cache`, the SQLite judge cache (`--cache`; `None`: the default path);
    /// `no_cache` (`--no-cache`). Raises `ValueError` when the dispatcher cannot be built.
    #[new]
    #[pyo3(signature = (target, engine=None, judges=None, replay=None, cache=None, no_cache=false))]
    fn new(
        py: Python<'_>,
        target: String,
        engine: Option<String>,
        judges: Option<String>,
        replay: Option<String>,
        cache: Option<String>,
        no_cache: bool,
    ) -> PyResult<Self> {
        let loaded = py.detach(|| {
            if target.contains('\n') {
                bundle::load_source("<source>", &target)
            } else {
                bundle::load(Path::new(&target))
            }
        });
        let loaded = loaded.map_err(PyValueError::new_err)?;
        let engine = match engine.as_deref() {
            Some(name) => engine_kind(name)?,
            None if loaded.bundle.is_some() => EngineKind::Wasm,
            None => EngineKind::Interp,
        };
        if cache.is_some() && no_cache {
            return Err(PyValueError::new_err("`cache` and `no_cache` exclude each other"));
        }
        let replay = replay.map(|p| format!("replay:{p}"));
        // local judges (`judge { local "DIR" }`) need no configuration; this package is built
        // without local models, so their criteria end unscored with the reason
        let local = loaded.program().judges.iter().any(|j| j.local.is_some());
        let judges = py
            .detach(|| {
                judge_dispatch(
                    judges.as_deref().map(Path::new),
                    replay.as_deref(),
                    None,
                    cache.as_deref().map(Path::new),
                    no_cache,
                    local,
                )
            })
            .map_err(PyValueError::new_err)?;
        let ident = loaded.identity();
        Ok(NativeRubric { loaded, engine, ident, judges })
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
        match self.engine {
            EngineKind::Interp => "interp",
            EngineKind::Wasm => "wasm",
            EngineKind::Jit => "jit",
        }
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
    /// `verdicts`: a recorded-verdicts file (`rubric run --verdicts FILE`). Scores in parallel
    /// with the GIL released.
    #[pyo3(signature = (lines, groups=None, verdicts=None))]
    fn score_lines(
        &self,
        py: Python<'_>,
        lines: Vec<String>,
        groups: Option<String>,
        verdicts: Option<String>,
    ) -> PyResult<Vec<String>> {
        py.detach(|| -> Result<Vec<String>, String> {
            let verdicts = verdicts.map(|p| VerdictFile::load(Path::new(&p))).transpose()?;
            let records = self.records(lines, groups.as_deref(), verdicts.as_ref());
            Ok(records.par_iter().map(|r| serde_json::to_string(r).expect("a record serialises")).collect())
        })
        .map_err(PyValueError::new_err)
    }

    /// Each line's score (`None` when unscored or an error record), with the GIL released.
    fn scores_lines(&self, py: Python<'_>, lines: Vec<String>) -> Vec<Option<f64>> {
        py.detach(|| self.records(lines, None, None).iter().map(|r| r.get("score").and_then(Json::as_f64)).collect())
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

#[pymodule]
fn _rubric(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeRubric>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
