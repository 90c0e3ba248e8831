//! The bundle commands: `rubric build` (source → `.rbk`), `rubric inspect` (what a bundle or
//! source holds), `rubric diff` (what changed between two versions, optionally scored on probe
//! rows), and `load_or_report`, which lets `run`, `test`, `explain` and `ir` take a bundle
//! wherever they take a `.rubric` file.

use super::{emit, ErrorFormat};
use crate::bundle::describe::{CriterionView, Description};
use crate::bundle::diff::{diff, returns, Change};
use crate::bundle::{self, BundleError};
use crate::diag::{Diagnostic, Severity};
use crate::interp::Interpreter;
use crate::ir::Program;
use crate::runtime::{self, VerdictFile};
use crate::source::SourceMap;
use crate::types::{compile_path, facts, Compiled};
use rayon::prelude::*;
use serde_json::{json, Value as Json};
use std::path::Path;
use std::process::ExitCode;

pub use crate::api::{is_bundle, Rubric, WASM_ABI_VERSION};

/// The portable Wasm module of a program (wasm-encoder output; never wasmtime machine code).
fn wasm_module(p: &Program) -> Result<Vec<u8>, String> {
    crate::backend::wasm::compile_module(p)
}

/// Load a verified bundle or compile a source through the library (`api::Rubric::load`); print
/// what went wrong (bundle errors, and a source's diagnostics other than notes) and return
/// `None` on an error.
pub fn load_or_report(path: &Path, format: ErrorFormat) -> Option<Rubric> {
    load_or_report_as(path, format, true)
}

/// [`load_or_report`]; without `warnings`, a source's warnings are counted, not printed.
pub fn load_or_report_as(path: &Path, format: ErrorFormat, warnings: bool) -> Option<Rubric> {
    if is_bundle(path) {
        return match Rubric::from_bundle_path(path) {
            Ok(r) => Some(r),
            Err(e) => {
                emit(&e.diagnostics().unwrap_or_default(), &SourceMap::new(), format, true);
                None
            }
        };
    }
    Rubric::from_compiled(super::compile_or_report_as(path, format, warnings)?).ok()
}

fn human_size(n: u64) -> String {
    if n < 10 * 1024 {
        format!("{n} B")
    } else if n < 10 * 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

// ------------------------------------------------------------------ build

/// Build the bundle of a compiled rubric (its program must be present).
pub fn build_compiled(c: &Compiled, with_sources: bool) -> Result<bundle::Built, BundleError> {
    let Some(program) = c.program.as_ref() else {
        return Err(BundleError::new(bundle::CODE_WRITE, "there is no program to build: the source has errors"));
    };
    // What a reader will check: a program that does not validate is a compiler bug, caught
    // here rather than by whoever loads the bundle.
    crate::ir::validate::validate(program, &crate::types::CATALOGUE).map_err(|e| {
        BundleError::new(bundle::CODE_IR, format!("the compiled program is not valid IR: {e}"))
            .with_help("this is a bug in the compiler; please report the rubric")
    })?;
    let wasm = wasm_module(program)
        .map_err(|e| BundleError::new(bundle::CODE_WASM, format!("cannot compile the rubric to Wasm: {e}")))?;
    let input = bundle::BuildInput {
        program,
        sites: &c.sites,
        wasm: &wasm,
        wasm_abi_version: WASM_ABI_VERSION,
        stdlib_version: crate::resolve::STDLIB_VERSION,
        sources: &c.sources,
        with_sources,
    };
    bundle::build(&input)
}

/// `rubric build FILE -o OUT.rbk [--with-sources]`.
pub fn build_command(file: &Path, output: &Path, with_sources: bool, format: ErrorFormat) -> ExitCode {
    if is_bundle(file) {
        eprintln!("error: `{}` is already a bundle; build takes a .rubric source", file.display());
        return ExitCode::from(2);
    }
    let c = compile_path(file);
    let shown: Vec<Diagnostic> = c.diagnostics.iter().filter(|d| d.severity != Severity::Note).cloned().collect();
    emit(&shown, &c.sources, format, true);
    if c.program.is_none() {
        return ExitCode::from(1);
    }
    let built = match build_compiled(&c, with_sources) {
        Ok(b) => b,
        Err(e) => {
            let e = crate::api::Error::Bundle { path: file.to_path_buf(), error: e };
            emit(&e.diagnostics().unwrap_or_default(), &c.sources, format, true);
            return ExitCode::from(1);
        }
    };
    // Write beside the target, then rename: a reader never sees half a bundle.
    let tmp = output.with_extension("rbk.tmp");
    let written = std::fs::write(&tmp, &built.bytes).and_then(|()| std::fs::rename(&tmp, output));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        let d = Diagnostic::error(bundle::CODE_WRITE, format!("cannot write `{}`: {e}", output.display()))
            .with_help("check that the directory exists and is writable");
        emit(&[d], &c.sources, format, true);
        return ExitCode::from(1);
    }
    let m = &built.manifest;
    if format == ErrorFormat::Json {
        outln!(
            "{}",
            json!({"bundle": output.display().to_string(), "hash": built.hash, "size": built.bytes.len(),
                   "rubric": m.rubric.name, "version": m.rubric.version, "ir_hash": m.ir_hash})
        );
    } else {
        eprintln!(
            "built {} @ {} → {} ({})\nbundle: {}",
            m.rubric.name,
            m.rubric.version,
            output.display(),
            human_size(built.bytes.len() as u64),
            built.hash
        );
    }
    ExitCode::SUCCESS
}

// ------------------------------------------------------------------ inspect

/// `[lo, hi]` with `null` for an infinite end.
fn range_json(r: facts::Range) -> Json {
    let end = |x: f64| if x.is_finite() { json!(x) } else { Json::Null };
    json!([end(r.lo), end(r.hi)])
}

/// `rubric inspect FILE [--json]`.
pub fn inspect_command(file: &Path, as_json: bool) -> ExitCode {
    let format = if as_json { ErrorFormat::Json } else { ErrorFormat::Human };
    let Some(r) = load_or_report(file, format) else { return ExitCode::from(1) };
    let p = r.program();
    let d = bundle::describe(p);
    let range = facts::score_range(p);
    let ir_size = p.canonical_bytes().len();
    if as_json {
        let mut out = json!({
            "path": file.display().to_string(),
            "kind": if r.bundle.is_some() { "bundle" } else { "source" },
            "rubric": d.rubric,
            "ir_hash": d.ir_hash,
            "score_range": range_json(range),
            "executes": p.executes(),
            "description": d,
        });
        match &r.bundle {
            Some(b) => {
                out["hash"] = json!(b.hash);
                out["size"] = json!(b.size);
                out["manifest"] = json!(b.manifest);
                out["entries"] =
                    json!(b.entries.iter().map(|(n, s)| json!({"path": n, "size": s})).collect::<Vec<_>>());
            }
            None => {
                out["ir_size"] = json!(ir_size);
                out["wasm_size"] = json!(wasm_module(p).ok().map(|m| m.len()));
            }
        }
        outln!("{out}");
        return ExitCode::SUCCESS;
    }
    let title = d.rubric.title.as_ref().map(|t| format!("  {}", bundle::describe::quote(t))).unwrap_or_default();
    outln!("{} @ {}{title}", d.rubric.name, d.rubric.version);
    match &r.bundle {
        Some(b) => {
            let m = &b.manifest;
            outln!("bundle    {}", b.hash);
            outln!("ir_hash   {}", d.ir_hash);
            outln!(
                "versions  format {}, language {}, compiler {}, IR {}, Wasm ABI {}, stdlib {}",
                m.format_version,
                m.language_version,
                m.compiler_version,
                m.ir_version,
                m.wasm_abi_version,
                m.stdlib_version
            );
        }
        None => {
            outln!("source    {} (not a bundle)", file.display());
            outln!("ir_hash   {}", d.ir_hash);
        }
    }
    let params: Vec<String> = d
        .inputs
        .iter()
        .map(|i| match &i.default {
            Some(def) => format!("{}: {} = {def}", i.name, i.ty),
            None => format!("{}: {}", i.name, i.ty),
        })
        .collect();
    outln!("entry     score({}) -> {}", params.join(", "), d.score_type);
    outln!("score     {}", d.score);
    for s in &d.scores {
        outln!("score     {} = {}  (report only)", s.name, s.value);
    }
    for s in &d.stats {
        outln!("stat      {} = {}", s.name, s.value);
    }
    outln!("range     {range}");
    if p.executes() {
        outln!("executes  programs in the sandbox (`exec`): a run needs `--allow-exec` or `--exec-replay FILE`");
    }
    inspect_body(&d);
    outln!("");
    match &r.bundle {
        Some(b) => {
            outln!("files");
            let width = b.entries.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (name, size) in &b.entries {
                let hash = match b.manifest.files.iter().find(|f| &f.path == name) {
                    Some(f) => f.sha256.as_str(),
                    None if name == bundle::MANIFEST => "(its hash is the bundle's)",
                    None => "",
                };
                outln!("  {name:<width$}  {size:>8} B  {hash}");
            }
            outln!("  {:<width$}  {:>8} B", "(bundle)", b.size);
        }
        None => {
            let module = wasm_module(p).map_or_else(|e| format!("not compiled: {e}"), |m| format!("{} B", m.len()));
            outln!("sizes     IR {ir_size} B (canonical JSON), Wasm module {module}");
        }
    }
    ExitCode::SUCCESS
}

fn criterion_line(c: &CriterionView) -> String {
    let mut parts = vec![c.kind.clone()];
    if let Some(s) = &c.scale {
        parts.push(s.clone());
    }
    for (k, v) in [("points", &c.points), ("weight", &c.weight), ("pass", &c.pass), ("tags", &c.tags)] {
        if let Some(v) = v {
            parts.push(format!("{k} {v}"));
        }
    }
    if let Some(a) = &c.axis {
        parts.push(format!("axis {a}"));
    }
    match c.verifier.as_str() {
        "judge" => parts.push(format!("by {}", c.verifier_detail)),
        "extract" => parts.push(c.verifier_detail.clone()),
        v => parts.push(format!("{v} {}", c.verifier_detail)),
    }
    if !c.sets.is_empty() {
        parts.push(format!("in {}", c.sets.join(" < ")));
    }
    parts.join("  ")
}

fn inspect_body(d: &Description) {
    if !d.inputs.is_empty() {
        outln!("\ninputs");
        for i in &d.inputs {
            let how = match (&i.default, i.required) {
                (Some(def), _) => format!("default {def}"),
                (None, true) => "required".into(),
                (None, false) => "optional".into(),
            };
            outln!("  {}: {}  {how}", i.name, i.ty);
        }
    }
    if !d.judges.is_empty() {
        outln!("\njudges");
        for j in &d.judges {
            let mut head = vec![j.name.clone()];
            head.push(format!("model {}", j.model.as_deref().map_or("(unpinned)".into(), bundle::describe::quote)));
            if let Some(t) = j.temperature {
                head.push(format!("temperature {}", bundle::describe::num(t)));
            }
            if let Some(t) = j.top_p {
                head.push(format!("top_p {}", bundle::describe::num(t)));
            }
            if let Some(t) = j.max_tokens {
                head.push(format!("max_tokens {t}"));
            }
            if let Some(e) = &j.reasoning_effort {
                head.push(format!("reasoning_effort {e}"));
            }
            if let Some(s) = j.seed {
                head.push(format!("seed {s}"));
            }
            head.push(format!("samples {} vote {}", j.samples, j.vote));
            head.push(format!("scoring {}", j.scoring));
            head.push(format!("per_call {}", j.per_call));
            if let Some(o) = &j.order {
                head.push(format!("order {o}"));
            }
            outln!("  {}", head.join("  "));
            outln!("    sees      {}", if j.sees.is_empty() { "(nothing)".into() } else { j.sees.join(", ") });
            outln!("    returns   {}", returns(j));
            if let Some(e) = &j.evidence_from {
                outln!("    evidence  must quote {e}");
            }
            if let Some(d) = &j.local {
                outln!("    local     {d}");
            }
            if let Some(c) = &j.calibration {
                outln!("    calibrated {c}");
            }
            if let Some(members) = &j.jury {
                outln!("    jury      {members}");
            }
            if let Some(c) = &j.cascade {
                outln!("    cascade   {c}");
            }
            if let Some(c) = &j.compares {
                outln!("    compares  {c}");
            }
            if let Some(r) = &j.rollouts {
                outln!("    rollouts  {r} (every member of a group, in one request)");
            }
            outln!("    decides   {}", j.criteria.join(", "));
            for (label, text) in [("system", &j.system), ("template", &j.template)] {
                if let Some(t) = text {
                    let mut first = true;
                    for line in t.lines() {
                        outln!("    {:<9} | {line}", if first { label } else { "" });
                        first = false;
                    }
                }
            }
        }
    }
    if !d.gates.is_empty() {
        outln!("\ngates (in order)");
        for g in &d.gates {
            let reason =
                g.reason.as_deref().map(|r| format!("  reason {}", bundle::describe::quote(r))).unwrap_or_default();
            outln!("  {}: unless {}  → {} {}{reason}", g.name, g.condition, g.action, g.value);
        }
    }
    outln!("\ncriteria ({})", d.criteria.len());
    for c in &d.criteria {
        outln!("  {}  {}", c.id, criterion_line(c));
        outln!("      {}", c.text);
    }
    let sets: Vec<_> = d.sets.iter().filter(|s| s.kind != "all").collect();
    if !sets.is_empty() {
        outln!("\nsets");
        for s in sets {
            let w = s.weight.map(|w| format!(" weight {}", bundle::describe::num(w))).unwrap_or_default();
            outln!("  {} {}{w}: {}", s.kind, s.name, s.members.join(", "));
        }
    }
    if !d.examples.is_empty() {
        outln!("\nexamples ({})", d.examples.len());
        for e in &d.examples {
            outln!("  {}", bundle::describe::quote(e));
        }
    }
}

// ------------------------------------------------------------------ diff

/// Options of `rubric diff`.
pub struct DiffOptions<'a> {
    pub probe: Option<&'a Path>,
    pub verdicts: Option<&'a Path>,
    /// A score at or above it passes.
    pub pass: f64,
    pub json: bool,
}

/// `rubric diff A B [--probe rows.jsonl [--verdicts v.jsonl]] [--pass X] [--json]`.
pub fn diff_command(a: &Path, b: &Path, opts: &DiffOptions<'_>) -> ExitCode {
    let format = if opts.json { ErrorFormat::Json } else { ErrorFormat::Human };
    let Some(ra) = load_or_report(a, format) else { return ExitCode::from(1) };
    let Some(rb) = load_or_report(b, format) else { return ExitCode::from(1) };
    let (da, db) = (bundle::describe(ra.program()), bundle::describe(rb.program()));
    let changes = diff(&da, &db);
    let probe = match opts.probe {
        Some(rows) => match probe(&ra, &rb, rows, opts.verdicts) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let side = |r: &Rubric, path: &Path| {
        json!({"path": path.display().to_string(), "rubric": r.program().rubric.name,
               "version": r.program().rubric.version, "ir_hash": r.program().hash(),
               "bundle": r.bundle.as_ref().map(|b| b.hash.clone())})
    };
    if opts.json {
        let mut out = json!({"a": side(&ra, a), "b": side(&rb, b), "changes": changes});
        if let Some(p) = &probe {
            out["probe"] = p.to_json(opts.pass);
        }
        outln!("{out}");
        return ExitCode::SUCCESS;
    }
    outln!("a: {} @ {}  {}", da.rubric.name, da.rubric.version, a.display());
    outln!("b: {} @ {}  {}", db.rubric.name, db.rubric.version, b.display());
    if changes.is_empty() {
        outln!(
            "no changes to the rubric{}",
            if da.ir_hash == db.ir_hash { "" } else { " (only source positions moved)" }
        );
    } else {
        outln!("{} change{}:", changes.len(), if changes.len() == 1 { "" } else { "s" });
        for c in &changes {
            outln!("{}", change_line(c));
        }
    }
    if let Some(p) = &probe {
        p.print(opts.pass);
    }
    ExitCode::SUCCESS
}

fn short(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 90 {
        format!("{}…", one.chars().take(89).collect::<String>())
    } else {
        one
    }
}

fn change_line(c: &Change) -> String {
    let what = if c.name == c.scope || c.name == "*" { c.scope.to_string() } else { format!("{} {}", c.scope, c.name) };
    let long = |x: &Option<String>| x.as_ref().is_some_and(|x| x.chars().count() > 60);
    match (c.change, &c.from, &c.to) {
        ("added", _, Some(to)) => format!("  + {what}: added ({})", short(to)),
        ("added", ..) => format!("  + {what}: added"),
        ("removed", Some(from), _) => format!("  - {what}: removed ({})", short(from)),
        ("removed", ..) => format!("  - {what}: removed"),
        (change, Some(from), Some(to)) if long(&c.from) || long(&c.to) || from.contains('\n') || to.contains('\n') => {
            let mut s = format!("  ~ {what}: {change} changed");
            for l in line_diff(from, to) {
                s.push_str("\n      ");
                s.push_str(&l);
            }
            s
        }
        (change, from, to) => format!(
            "  ~ {what}: {change} {} → {}",
            from.as_deref().map_or("(none)".into(), short),
            to.as_deref().map_or("(none)".into(), short)
        ),
    }
}

/// The lines of a text that changed, `- old` / `+ new` (a plain LCS over lines).
fn line_diff(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("- {}", a[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    out
}

/// One probe row scored by both versions.
struct ProbeRow {
    row: usize,
    id: Option<Json>,
    a: Option<f64>,
    b: Option<f64>,
    a_error: Option<String>,
    b_error: Option<String>,
    /// Criteria whose status differs, `(id, a, b)`.
    criteria: Vec<(String, String, String)>,
}

struct Probe {
    rows: Vec<ProbeRow>,
}

fn score_of(v: &Json) -> Option<f64> {
    v.get("score").and_then(Json::as_f64)
}

fn error_of(v: &Json) -> Option<String> {
    v.get("error").and_then(|e| e.get("code")).and_then(Json::as_str).map(String::from)
}

fn statuses(v: &Json) -> Vec<(String, String)> {
    v.get("criteria")
        .and_then(Json::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| Some((c.get("id")?.as_str()?.to_string(), c.get("status")?.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn passes(score: Option<f64>, pass: f64) -> bool {
    score.is_some_and(|s| s >= pass)
}

/// Score the probe rows with both versions on the reference interpreter.
fn probe(a: &Rubric, b: &Rubric, rows: &Path, verdicts: Option<&Path>) -> Result<Probe, String> {
    let text = std::fs::read_to_string(rows).map_err(|e| format!("cannot read `{}`: {e}", rows.display()))?;
    let vf = verdicts.map(VerdictFile::load).transpose().map_err(|e| e.to_string())?;
    let (ia, ib) = (a.identity(), b.identity());
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let rows = lines
        .par_iter()
        .enumerate()
        .map(|(i, line)| {
            let ra = runtime::score_line(&Interpreter, a.program(), &ia, i, line, vf.as_ref());
            let rb = runtime::score_line(&Interpreter, b.program(), &ib, i, line, vf.as_ref());
            let sb = statuses(&rb);
            let criteria = statuses(&ra)
                .into_iter()
                .filter_map(|(id, st)| {
                    let other = sb.iter().find(|(j, _)| *j == id)?;
                    (other.1 != st).then(|| (id, st, other.1.clone()))
                })
                .collect();
            ProbeRow {
                row: i,
                id: ra.get("id").cloned(),
                a: score_of(&ra),
                b: score_of(&rb),
                a_error: error_of(&ra),
                b_error: error_of(&rb),
                criteria,
            }
        })
        .collect();
    Ok(Probe { rows })
}

impl ProbeRow {
    fn changed(&self) -> bool {
        self.a != self.b || self.a_error != self.b_error
    }

    fn flip(&self, pass: f64) -> Option<&'static str> {
        match (passes(self.a, pass), passes(self.b, pass)) {
            (true, false) => Some("pass→fail"),
            (false, true) => Some("fail→pass"),
            _ => None,
        }
    }

    fn delta(&self) -> Option<f64> {
        Some(self.b? - self.a?)
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut s) = (0usize, 0.0);
    for x in xs {
        n += 1;
        s += x;
    }
    (n > 0).then(|| s / n as f64)
}

impl Probe {
    fn summary(&self, pass: f64) -> Json {
        let changed = self.rows.iter().filter(|r| r.changed()).count();
        let to_fail = self.rows.iter().filter(|r| r.flip(pass) == Some("pass→fail")).count();
        let to_pass = self.rows.iter().filter(|r| r.flip(pass) == Some("fail→pass")).count();
        let mut by_criterion: Vec<(String, usize)> = Vec::new();
        for r in &self.rows {
            for (id, _, _) in &r.criteria {
                match by_criterion.iter_mut().find(|(c, _)| c == id) {
                    Some((_, n)) => *n += 1,
                    None => by_criterion.push((id.clone(), 1)),
                }
            }
        }
        json!({
            "rows": self.rows.len(),
            "changed": changed,
            "pass_threshold": pass,
            "pass_to_fail": to_fail,
            "fail_to_pass": to_pass,
            "mean_a": mean(self.rows.iter().filter_map(|r| r.a)),
            "mean_b": mean(self.rows.iter().filter_map(|r| r.b)),
            "mean_delta": mean(self.rows.iter().filter_map(ProbeRow::delta)),
            "max_abs_delta": self.rows.iter().filter_map(ProbeRow::delta).map(f64::abs).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
            "criteria_changed": by_criterion.iter().map(|(c, n)| json!({"id": c, "rows": n})).collect::<Vec<_>>(),
        })
    }

    fn to_json(&self, pass: f64) -> Json {
        let rows: Vec<Json> = self
            .rows
            .iter()
            .filter(|r| r.changed() || !r.criteria.is_empty())
            .map(|r| {
                json!({
                    "row": r.row, "id": r.id, "a": r.a, "b": r.b, "delta": r.delta(),
                    "flip": r.flip(pass), "a_error": r.a_error, "b_error": r.b_error,
                    "criteria": r.criteria.iter().map(|(id, x, y)| json!({"id": id, "a": x, "b": y})).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({"summary": self.summary(pass), "rows": rows})
    }

    fn print(&self, pass: f64) {
        let s = self.summary(pass);
        let fmt = |v: &Json| v.as_f64().map_or("-".into(), |x| format!("{x:.6}"));
        outln!("\nprobe: {} rows, {} with a different score", s["rows"], s["changed"]);
        outln!(
            "  mean score a {}  b {}  (mean change {}, largest {})",
            fmt(&s["mean_a"]),
            fmt(&s["mean_b"]),
            fmt(&s["mean_delta"]),
            fmt(&s["max_abs_delta"])
        );
        outln!(
            "  pass (score >= {}): {} pass→fail, {} fail→pass",
            bundle::describe::num(pass),
            s["pass_to_fail"],
            s["fail_to_pass"]
        );
        let score = |x: Option<f64>, e: &Option<String>| match (x, e) {
            (Some(x), _) => format!("{x:.6}"),
            (None, Some(e)) => format!("error {e}"),
            (None, None) => "unscored".into(),
        };
        for r in self.rows.iter().filter(|r| r.changed()) {
            let id = r.id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default();
            let flip = r.flip(pass).map(|f| format!("  {f}")).unwrap_or_default();
            let crit: Vec<String> = r.criteria.iter().map(|(c, x, y)| format!("{c} {x}→{y}")).collect();
            let crit = if crit.is_empty() { String::new() } else { format!("  [{}]", crit.join(", ")) };
            outln!("  row {}{id}: {} → {}{flip}{crit}", r.row, score(r.a, &r.a_error), score(r.b, &r.b_error));
        }
    }
}
