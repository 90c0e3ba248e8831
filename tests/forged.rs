//! Forged bundles (security issue "Untrusted means untrusted", item 3): for every `examples/*`
//! rubric and every `tests/conformance/*` case, the bundle's `ir.json` is mutated field by
//! field — every number set out of range (+1, +1000, `u32::MAX`, -1, and type swaps;
//! `site_count` among them), every array shortened, lengthened and emptied, enum and type names
//! swapped — and a bundle whose every hash is right is forged around each mutated IR (manifest
//! fields derived again, the Wasm module recompiled, the source map resized to the IR's
//! `site_count`), as anyone can. The source map, which the reader checks against the IR's
//! sites and, in a bundle with its sources, against their lines and columns, is mutated the
//! same way, alternately in the bundle without and with its sources (`--with-sources`). Each forged
//! bundle is loaded; if it is accepted, the case's rows are scored on every engine (trap sites
//! located through the bundle's site table) and the program is described, inspected, printed,
//! diffed, its sites located and its examples run. Nothing may panic: a mutation is rejected
//! with a `rubric::bundle::*` code, or it runs cleanly. Each mutation runs on a thread of its
//! own with the default stack (named after the mutation, so a stack overflow names it too).
//!
//! The mutations are enumerated in a fixed order and a fixed share of them is tested (every
//! case contributes, spread evenly over its IR and its source map), so that the test stays
//! quick on 2 cores;
//! `RUBRIC_FORGED_ALL=1` tests every one, and `RUBRIC_FORGED_LOG=FILE` writes
//! each one's outcome to `FILE`. `RUBRIC_FORGED_DUMP=DIR` writes every selected
//! forged bundle to `DIR` (with an `index.tsv`) instead of loading it, for running them
//! through a `rubric` binary.

use rubric::api::{bundle_limits as limits, WASM_ABI_VERSION};
use rubric::bundle::container::{self, Entry};
use rubric::bundle::{self, describe, load_bytes};
use rubric::cli::bundle::build_compiled;
use rubric::engine::Engine;
use rubric::interp::Interpreter;
use rubric::ir::Program;
use rubric::runtime::{examples::run_examples, score_line, Identity, VerdictFile};
use rubric::types::{compile_path, facts};
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::common::{crate_root, example_dirs, read_lines};

/// IR mutations tested per case by default (spread evenly over the case's IR).
const PER_CASE: usize = 110;
/// Source-map mutations tested per case by default (spread evenly over its source map).
const PER_CASE_MAP: usize = 20;

/// One rubric and its rows.
pub(crate) struct Case {
    pub(crate) name: String,
    dir: PathBuf,
    program: Program,
    /// The entries of its bundle, as `rubric build` writes it (no sources).
    entries: Vec<Entry>,
    /// The entries of its bundle with its sources (`--with-sources`).
    with_sources: Vec<Entry>,
    pub(crate) ir: Json,
    /// The source map (the same in both bundles).
    source_map: Json,
    rows: Vec<String>,
    verdicts: Option<VerdictFile>,
}

pub(crate) fn cases() -> Vec<Case> {
    let mut dirs = example_dirs();
    let mut conformance: Vec<PathBuf> = std::fs::read_dir(crate_root().join("tests/conformance"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("main.rubric").is_file())
        .collect();
    conformance.sort();
    dirs.extend(conformance);
    dirs.into_iter()
        .map(|dir| {
            let compiled = compile_path(&dir.join("main.rubric"));
            let program = compiled.program.clone().unwrap_or_else(|| panic!("{} does not compile", dir.display()));
            let built = build_compiled(&compiled, false).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let entries = container::read(&built.bytes, 100).unwrap();
            let built = build_compiled(&compiled, true).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let with_sources = container::read(&built.bytes, 100).unwrap();
            let ir = serde_json::from_slice(&entries[1].data).unwrap();
            let source_map = serde_json::from_slice(&entries[3].data).unwrap();
            let verdicts_path = dir.join("verdicts.jsonl");
            let verdicts = verdicts_path.is_file().then(|| VerdictFile::load(&verdicts_path).unwrap());
            let parent = dir.parent().and_then(Path::file_name).unwrap().to_string_lossy().into_owned();
            let name = format!("{parent}/{}", dir.file_name().unwrap().to_string_lossy());
            let rows = read_lines(&dir.join("inputs.jsonl"));
            Case { name, rows, dir, program, entries, with_sources, ir, source_map, verdicts }
        })
        .collect()
}

// ---------------------------------------------------------------- mutations

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn path_text(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

#[derive(Debug, Clone)]
enum Edit {
    Set(Json),
    /// Drop an array's last element.
    Pop,
    /// Repeat an array's last element.
    Dup,
    Clear,
}

/// What a mutation edits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    /// `ir.json` of the bundle without sources.
    Ir,
    /// `source-map.json`, of the bundle with its sources or without.
    SourceMap { with_sources: bool },
}

#[derive(Debug, Clone)]
struct Mutation {
    target: Target,
    path: Vec<Seg>,
    edit: Edit,
}

impl Mutation {
    fn describe(&self) -> String {
        let what = match &self.edit {
            Edit::Set(v) => {
                let s = v.to_string();
                format!("= {}", if s.len() > 40 { format!("{}…", &s[..40]) } else { s })
            }
            Edit::Pop => "pop".into(),
            Edit::Dup => "dup".into(),
            Edit::Clear => "clear".into(),
        };
        let file = match self.target {
            Target::Ir => "",
            Target::SourceMap { with_sources: false } => "source-map.json: ",
            Target::SourceMap { with_sources: true } => "source-map.json (with sources): ",
        };
        format!("{file}{} {what}", path_text(&self.path))
    }
}

/// Families of enum names of the IR's JSON: a name is swapped for the next of its family, and
/// for one of another family.
const FAMILIES: &[&[&str]] = &[
    &["null", "bool", "number", "text", "json", "verdict", "any", "set", "policy"],
    &["add", "sub", "mul", "div", "rem", "concat", "and", "or", "coalesce"],
    &["eq", "ne", "lt", "le", "gt", "ge"],
    &["neg", "not"],
    &["map", "filter", "all", "any", "count"],
    &[
        "weighted_mean",
        "mean",
        "fraction",
        "points_ratio",
        "sum_points",
        "max_points",
        "tree",
        "all",
        "any",
        "at_least",
        "count_met",
        "count",
        "min_value",
        "max_value",
    ],
    &["skip", "unmet", "propagate"],
    &["all", "tier", "block", "each", "group"],
    &["binary", "continuous"],
    &["score", "cap"],
    &["majority", "mean", "unanimous"],
    &["label", "logprob"],
    &["verdict", "level", "label", "value", "extract"],
];

fn enumerate(target: Target, v: &Json, path: &mut Vec<Seg>, out: &mut Vec<Mutation>) {
    let mut set = |path: &[Seg], v: Json| out.push(Mutation { target, path: path.to_vec(), edit: Edit::Set(v) });
    match v {
        Json::Number(n) => {
            if let Some(i) = n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)) {
                let mut seen = vec![i];
                for x in [i.saturating_add(1), i.saturating_add(1000), i64::from(u32::MAX), -1] {
                    if !seen.contains(&x) {
                        seen.push(x);
                        set(path, Json::from(x));
                    }
                }
            } else if let Some(x) = n.as_f64() {
                for y in [x + 1.0, x + 1000.0, f64::from(u32::MAX), -1.0 - x.abs(), 1e308] {
                    if y != x {
                        set(path, Json::from(y));
                    }
                }
            }
            set(path, Json::Null);
            set(path, Json::String("0".into()));
            set(path, Json::Bool(true));
        }
        Json::Bool(b) => set(path, Json::Bool(!b)),
        Json::String(s) => {
            let key = match path.last() {
                Some(Seg::Key(k)) => k.as_str(),
                _ => "",
            };
            for family in FAMILIES {
                if let Some(i) = family.iter().position(|x| x == s) {
                    set(path, Json::String(family[(i + 1) % family.len()].into()));
                }
            }
            if matches!(key, "ty" | "op" | "kind" | "policy") {
                set(path, Json::String("nonsense".into()));
            }
            if matches!(key, "name" | "id" | "file" | "module" | "path") && !s.is_empty() {
                set(path, Json::String(String::new()));
            }
        }
        Json::Array(items) => {
            if !items.is_empty() {
                out.push(Mutation { target, path: path.clone(), edit: Edit::Pop });
                out.push(Mutation { target, path: path.clone(), edit: Edit::Dup });
            }
            if items.len() > 1 {
                out.push(Mutation { target, path: path.clone(), edit: Edit::Clear });
            }
            for (i, x) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                enumerate(target, x, path, out);
                path.pop();
            }
        }
        Json::Object(fields) => {
            for (k, x) in fields {
                path.push(Seg::Key(k.clone()));
                enumerate(target, x, path, out);
                path.pop();
            }
        }
        Json::Null => {}
    }
}

fn apply(json: &Json, m: &Mutation) -> Json {
    let mut out = json.clone();
    let mut at = &mut out;
    for seg in &m.path {
        at = match seg {
            Seg::Key(k) => at.get_mut(k.as_str()).expect("a path into the file"),
            Seg::Index(i) => at.get_mut(*i).expect("a path into the file"),
        };
    }
    match &m.edit {
        Edit::Set(v) => *at = v.clone(),
        Edit::Pop => {
            at.as_array_mut().expect("an array").pop();
        }
        Edit::Dup => {
            let a = at.as_array_mut().expect("an array");
            let last = a.last().cloned().expect("not empty");
            a.push(last);
        }
        Edit::Clear => at.as_array_mut().expect("an array").clear(),
    }
    out
}

/// The mutations tested for a case: all of them, or `per_case` spread evenly.
fn selected(all: Vec<Mutation>, per_case: usize) -> Vec<Mutation> {
    if std::env::var_os("RUBRIC_FORGED_ALL").is_some() || all.len() <= per_case {
        return all;
    }
    let n = all.len();
    (0..per_case).map(|k| all[k * n / per_case].clone()).collect()
}

/// Every mutation of a case enumerated, and those tested: of its IR, then of its source map.
fn mutations(case: &Case) -> (usize, Vec<Mutation>) {
    let (mut ir, mut map) = (Vec::new(), Vec::new());
    enumerate(Target::Ir, &case.ir, &mut Vec::new(), &mut ir);
    enumerate(Target::SourceMap { with_sources: false }, &case.source_map, &mut Vec::new(), &mut map);
    let enumerated = ir.len() + map.len();
    let mut tested = selected(ir, PER_CASE);
    for (k, mut m) in selected(map, PER_CASE_MAP).into_iter().enumerate() {
        m.target = Target::SourceMap { with_sources: k % 2 == 1 };
        tested.push(m);
    }
    (enumerated, tested)
}

/// The forged bundle of a mutation.
fn forge_mutated(case: &Case, m: &Mutation) -> Vec<u8> {
    match m.target {
        Target::Ir => forge(case, serde_json::to_vec(&apply(&case.ir, m)).unwrap()),
        Target::SourceMap { with_sources } => forge_source_map(case, &apply(&case.source_map, m), with_sources),
    }
}

// ---------------------------------------------------------------- the forger

thread_local! {
    /// What the panic hook saw on a forging or mutation thread (those panics are expected to
    /// be caught, and are reported by the test, not printed).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

pub(crate) fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let ours =
                std::thread::current().name().is_some_and(|n| n.starts_with("forged-") || n.starts_with("fuzz-"));
            if !ours {
                return previous(info);
            }
            let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("panicked at {location}: {message}")));
        }));
    });
}

/// Run `f`, turning a panic into its message (with where it happened).
pub(crate) fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|_| LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| "panicked".into()))
}

fn set_file(manifest: &mut Json, path: &str, data: &[u8]) {
    for f in manifest["files"].as_array_mut().unwrap() {
        if f["path"] == path {
            f["size"] = data.len().into();
            f["sha256"] = Json::String(bundle::sha256(data));
        }
    }
}

/// The entries `es` (manifest first, `ir.json`, `module.wasm` and `source-map.json` next, the
/// manifest hash last) with the manifest's sizes and hashes of those three and the manifest
/// hash made right again, as a bundle.
fn rehash(mut es: Vec<Entry>, mut manifest: Json) -> Vec<u8> {
    for e in &es[1..4] {
        set_file(&mut manifest, &e.name, &e.data);
    }
    let mut mbytes = serde_json::to_vec_pretty(&manifest).unwrap();
    mbytes.push(b'\n');
    let last = es.len() - 1;
    es[last].data = format!("{}\n", bundle::sha256(&mbytes)).into_bytes();
    es[0].data = mbytes;
    container::write(&es)
}

/// The bundle, with its sources or without, around a forged source map, every hash right.
fn forge_source_map(case: &Case, source_map: &Json, with_sources: bool) -> Vec<u8> {
    let mut es = if with_sources { case.with_sources.clone() } else { case.entries.clone() };
    let manifest: Json = serde_json::from_slice(&es[0].data).unwrap();
    es[3].data = serde_json::to_vec(source_map).unwrap();
    rehash(es, manifest)
}

/// A bundle around `ir` whose every hash, size and derived field is right: what a forger who
/// has this compiler writes. Parts that cannot be derived from a broken program are kept from
/// the original bundle; the source map gets as many sites as the program says it has (copies
/// of its first, or one at the start of the rubric), up to the most the validator allows (a
/// map of four billion sites would not fit in a bundle).
pub(crate) fn forge(case: &Case, ir: Vec<u8>) -> Vec<u8> {
    let mut es = case.entries.clone();
    let parsed: Option<Program> = serde_json::from_slice(&ir).ok();
    let mut manifest: Json = serde_json::from_slice(&es[0].data).unwrap();
    let mut source_map: Json = serde_json::from_slice(&es[3].data).unwrap();
    if let Some(p) = &parsed {
        if let Ok(Ok(module)) = caught(|| rubric::backend::wasm::compile_module(p)) {
            es[2].data = module;
        }
        if let Ok(d) = caught(|| bundle::derive(p)) {
            manifest["ir_version"] = d.ir_version.into();
            manifest["rubric"] = serde_json::to_value(&d.rubric).unwrap();
            manifest["entry_points"] = serde_json::to_value(&d.entry_points).unwrap();
            manifest["judges"] = serde_json::to_value(&d.judges).unwrap();
            manifest["examples"] = serde_json::to_value(&d.examples).unwrap();
            match d.capabilities.is_empty() {
                true => manifest.as_object_mut().unwrap().remove("capabilities"),
                false => manifest.as_object_mut().unwrap().insert("capabilities".into(), d.capabilities.clone().into()),
            };
        }
        let sites = source_map["sites"].as_array_mut().unwrap();
        let filler = sites.first().cloned().unwrap_or(serde_json::json!([0, 0, 0, 1, 1, 1, 1]));
        if p.site_count as usize <= rubric::ir::validate::MAX_ITEMS {
            sites.resize(p.site_count as usize, filler);
        }
    }
    manifest["ir_hash"] = Json::String(bundle::sha256(&ir));
    es[1].data = ir;
    es[3].data = serde_json::to_vec(&source_map).unwrap();
    rehash(es, manifest)
}

// ---------------------------------------------------------------- loading and running

#[derive(Debug)]
pub(crate) enum Outcome {
    /// Rejected with this code and message.
    Rejected(&'static str, String),
    /// Accepted, and everything ran without a panic.
    Ran,
    /// Something panicked (or a row's record says a panic was caught): where and why.
    Panicked(String),
}

fn engines() -> Vec<Box<dyn Engine>> {
    let mut out: Vec<Box<dyn Engine>> = vec![Box::new(Interpreter)];
    #[cfg(feature = "wasm")]
    out.push(Box::new(rubric::backend::wasm::WasmEngine::new()));
    #[cfg(feature = "jit")]
    out.push(Box::new(rubric::backend::jit::JitEngine::new()));
    out
}

/// Load a forged bundle and, if it is accepted, use it every way a command does.
pub(crate) fn exercise(case: &Case, bytes: &[u8]) -> Outcome {
    let b = match caught(|| load_bytes(bytes, &limits())) {
        Err(why) => return Outcome::Panicked(format!("load: {why}")),
        Ok(Err(e)) => return Outcome::Rejected(e.code, e.message),
        Ok(Ok(b)) => b,
    };
    let p = &b.program;
    let stages: [(&str, &dyn Fn()); 6] = [
        ("describe", &|| drop(describe(p))),
        ("inspect", &|| drop((facts::score_range(p), p.canonical_bytes().len(), b.site_location(0)))),
        ("ir", &|| drop((rubric::ir::print_program(p), rubric::ir::print_sites(&b.sites)))),
        ("sites", &|| {
            let sources = b.sources_map();
            for id in 0..p.site_count {
                drop((b.site_location(id), b.sites.get(id), p.known_site(id)));
            }
            drop(sources);
        }),
        ("diff", &|| drop(bundle::diff::diff(&describe(&case.program), &describe(p)))),
        ("examples", &|| drop(run_examples(&Interpreter, p))),
    ];
    for (stage, f) in stages {
        if let Err(why) = caught(f) {
            return Outcome::Panicked(format!("{stage}: {why}"));
        }
    }
    let ident = Identity::of(p, &b.sites).with_bundle(&b.hash);
    for engine in engines() {
        for (i, line) in case.rows.iter().enumerate() {
            match caught(|| score_line(engine.as_ref(), p, &ident, i, line, case.verdicts.as_ref())) {
                Err(why) => return Outcome::Panicked(format!("{} row {i}: {why}", engine.name())),
                Ok(record) => {
                    if record["error"]["code"] == "rubric::trap::internal" {
                        let message = record["error"]["message"].as_str().unwrap_or_default().to_string();
                        return Outcome::Panicked(format!("{} row {i} (caught at the row): {message}", engine.name()));
                    }
                }
            }
        }
    }
    Outcome::Ran
}

/// Run one mutation on a thread of its own, with the default stack size.
fn run_one(case: &Case, index: usize, m: &Mutation) -> Outcome {
    std::thread::scope(|s| {
        let name = format!("forged-{}-{index}", case.name.replace('/', "-"));
        let job = std::thread::Builder::new().name(name).spawn_scoped(s, || {
            quiet_panics();
            let bytes = forge_mutated(case, m);
            exercise(case, &bytes)
        });
        match job {
            Ok(h) => h.join().unwrap_or_else(|_| Outcome::Panicked("the mutation thread panicked".into())),
            Err(e) => panic!("cannot start a thread: {e}"),
        }
    })
}

#[derive(Default)]
struct Tally {
    enumerated: usize,
    tested: usize,
    rejected: BTreeMap<&'static str, usize>,
    ran: usize,
    panics: Vec<String>,
}

#[test]
fn forged_bundles_are_rejected_or_run_cleanly() {
    let start = std::time::Instant::now();
    let dump = std::env::var_os("RUBRIC_FORGED_DUMP").map(PathBuf::from);
    let mut index_tsv = String::new();
    let log = std::env::var_os("RUBRIC_FORGED_LOG").map(PathBuf::from);
    let mut log_tsv = String::new();
    let mut t = Tally::default();
    for case in cases() {
        // The bundle as built loads.
        load_bytes(&forge(&case, case.entries[1].data.clone()), &limits())
            .unwrap_or_else(|e| panic!("{}: the unmutated bundle is rejected: {e}", case.name));
        load_bytes(&forge_source_map(&case, &case.source_map, true), &limits())
            .unwrap_or_else(|e| panic!("{}: the unmutated bundle with sources is rejected: {e}", case.name));
        let (enumerated, tested) = mutations(&case);
        t.enumerated += enumerated;
        for (k, m) in tested.iter().enumerate() {
            t.tested += 1;
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).unwrap();
                let file = format!("{:05}.rbk", t.tested);
                std::fs::write(dir.join(&file), forge_mutated(&case, m)).unwrap();
                let verdicts = case.dir.join("verdicts.jsonl");
                index_tsv.push_str(&format!(
                    "{file}\t{}\t{}\t{}\t{}\n",
                    case.name,
                    case.dir.join("inputs.jsonl").display(),
                    if verdicts.is_file() { verdicts.display().to_string() } else { "-".into() },
                    m.describe()
                ));
                continue;
            }
            let outcome = run_one(&case, k, m);
            if log.is_some() {
                let (what, detail) = match &outcome {
                    Outcome::Rejected(code, message) => (*code, message.as_str()),
                    Outcome::Ran => ("ran", ""),
                    Outcome::Panicked(why) => ("panicked", why.as_str()),
                };
                log_tsv.push_str(&format!("{:05}\t{}\t{}\t{what}\t{detail}\n", t.tested, case.name, m.describe()));
            }
            match outcome {
                Outcome::Rejected(code, _) => *t.rejected.entry(code).or_default() += 1,
                Outcome::Ran => t.ran += 1,
                Outcome::Panicked(why) => t.panics.push(format!("{} `{}`: {why}", case.name, m.describe())),
            }
        }
    }
    if let Some(dir) = &dump {
        std::fs::write(dir.join("index.tsv"), index_tsv).unwrap();
        eprintln!("forged: wrote {} bundles to {}", t.tested, dir.display());
        return;
    }
    if let Some(path) = &log {
        std::fs::write(path, log_tsv).unwrap();
    }
    let rejected: usize = t.rejected.values().sum();
    eprintln!(
        "forged: {} mutations enumerated, {} tested: {} rejected ({:?}), {} accepted and ran cleanly, {} panicked ({:.1}s)",
        t.enumerated,
        t.tested,
        rejected,
        t.rejected,
        t.ran,
        t.panics.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(t.panics.is_empty(), "{} forged bundles panicked:\n{}", t.panics.len(), t.panics.join("\n"));
    assert!(rejected > 0 && t.ran > 0, "the mutations should both be rejected and run");
}

// ---------------------------------------------------------------- forgeries, one by one

/// A small rubric with one of everything the validator checks.
const SMALL: &str = r#"rubric forge.small @ 1.0.0
input response: Text
input items: List[Text] = ["p", "q"]
judge grader { model "m" sees response }
fn short(t: Text) -> Bool = word_count(t) < 50
let n = word_count(response)
gate nonempty: n >= 1 else score 0
criterion a "A" check short(response)
criterion b "B" by grader
tier core { criterion c "C" check n > 1 }
criteria per each x in items { criterion x by grader }
group g weight 1 { criterion d "D" check a.met }
score = mean(all, unscored: skip)
example "one" {
  response "hello there"
  judge grader says b = met
  expect score 1
}
"#;

fn small() -> rubric::types::Compiled {
    let c = rubric::types::compile_source("small.rubric", SMALL);
    assert!(c.program.is_some(), "{:?}", c.diagnostics);
    c
}

/// A bundle of `program` written by the project's own writer, with the Wasm module compiled
/// from it (or, when that fails, the original's): every hash and derived field right.
fn forged_bundle(c: &rubric::types::Compiled, program: &Program) -> Vec<u8> {
    let original = c.program.as_ref().unwrap();
    let wasm = rubric::backend::wasm::compile_module(program)
        .or_else(|_| rubric::backend::wasm::compile_module(original))
        .unwrap();
    let input = bundle::BuildInput {
        program,
        sites: &c.sites,
        wasm: &wasm,
        wasm_abi_version: WASM_ABI_VERSION,
        stdlib_version: rubric::resolve::STDLIB_VERSION,
        sources: &c.sources,
        with_sources: false,
    };
    bundle::build(&input).unwrap_or_else(|e| panic!("the forger cannot write: {e}")).bytes
}

fn step_of(p: &Program, pick: impl Fn(&rubric::ir::Step) -> bool) -> usize {
    p.steps.iter().position(pick).expect("the step")
}

fn criterion_index(p: &Program, id: &str) -> usize {
    p.criteria.iter().position(|c| c.id == id).expect("the criterion")
}

#[test]
fn validator_accepts_every_program_the_checker_produces() {
    let mut files = Vec::new();
    fn rubrics(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rubrics(&p, out);
            } else if p.extension().is_some_and(|x| x == "rubric") {
                out.push(p);
            }
        }
    }
    for dir in ["examples", "tests/conformance", "tests/ui"] {
        rubrics(&crate_root().join(dir), &mut files);
    }
    files.sort();
    let mut programs = 0;
    for f in &files {
        let Some(p) = compile_path(f).program else { continue };
        programs += 1;
        if let Err(e) = rubric::ir::validate::validate(&p, &rubric::types::CATALOGUE) {
            panic!("{}: the checker's program does not validate: {e}", f.display());
        }
    }
    let p = small().program.unwrap();
    rubric::ir::validate::validate(&p, &rubric::types::CATALOGUE).unwrap();
    assert!(programs >= 40, "only {programs} of {} rubric files compiled", files.len());
}

#[test]
fn forged_programs_are_rejected_naming_the_first_problem() {
    use rubric::ir::{Const, Expr, ExprKind, Member, Step, Type, Verifier};
    let c = small();
    let base = c.program.clone().unwrap();
    let num = |n: f64| Expr::constant(Const::Number(n));
    type Edit = Box<dyn Fn(&mut Program)>;
    let a = criterion_index(&base, "a");
    let b = criterion_index(&base, "b");
    let each = step_of(&base, |s| matches!(s, Step::Each(_)));
    let gate = step_of(&base, |s| matches!(s, Step::Gate(_)));
    let group = base.set_index("g").unwrap();
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "a judge that does not exist",
            Box::new(move |p| p.criteria[b].verifier = Verifier::Judge { judge: 7 }),
            "criteria[1].verifier.judge",
            "judge 7 does not exist (the program has 1 judge)",
        ),
        (
            "a let that reads itself",
            Box::new(|p| p.lets[0].value = Expr { kind: ExprKind::Let(0), ty: Type::Number }),
            "lets[0].value",
            "a let reads only earlier lets",
        ),
        (
            "a function that calls itself",
            Box::new(|p| {
                let arg = Expr { kind: ExprKind::Local(0), ty: Type::Text };
                p.functions[0].body =
                    Expr { kind: ExprKind::Call { func: 0, args: vec![arg], site: 0 }, ty: Type::Bool };
            }),
            "functions[0]",
            "calls itself",
        ),
        (
            "`Member::Each` naming a criterion's step",
            Box::new(move |p| {
                let set = p.set_index("per").unwrap();
                p.sets[set].members = vec![Member::Each(0)];
            }),
            "sets[",
            "is not the `each` block of this set",
        ),
        (
            "a criterion read before it is decided",
            Box::new(move |p| {
                let read = Expr {
                    kind: ExprKind::Field {
                        base: Box::new(Expr { kind: ExprKind::Criterion(b as u32), ty: Type::Verdict }),
                        name: "met".into(),
                        site: 0,
                    },
                    ty: Type::Bool,
                };
                p.criteria[a].verifier = Verifier::Check { expr: read };
            }),
            "criteria[0].verifier.expr.base",
            "after this expression",
        ),
        (
            "an intrinsic given too many arguments",
            Box::new(|p| {
                if let ExprKind::Compare { first, .. } = &mut p.functions[0].body.kind {
                    if let ExprKind::Intrinsic { args, .. } = &mut first.kind {
                        args.push(Expr::constant(Const::Text("x".into())));
                    }
                }
            }),
            "functions[0].body.first",
            "`word_count` takes 1 argument, given 2",
        ),
        (
            "an intrinsic that does not exist",
            Box::new(|p| {
                if let ExprKind::Compare { first, .. } = &mut p.functions[0].body.kind {
                    if let ExprKind::Intrinsic { overload, .. } = &mut first.kind {
                        *overload = 9;
                    }
                }
            }),
            "functions[0].body.first",
            "there is no intrinsic `word_count`#9",
        ),
        (
            "a type that lies about an intrinsic's result",
            Box::new(|p| {
                if let ExprKind::Compare { first, .. } = &mut p.functions[0].body.kind {
                    first.ty = Type::Bool;
                }
            }),
            "functions[0].body.first",
            "`word_count` returns `Number`, not `Bool`",
        ),
        (
            "an `each` element outside the block's locals",
            Box::new(move |p| {
                if let Step::Each(e) = &mut p.steps[each] {
                    e.local = e.locals;
                }
            }),
            "locals",
            "the element is local",
        ),
        (
            "a local read where nothing binds it",
            Box::new(move |p| {
                p.criteria[a].verifier = Verifier::Check { expr: Expr { kind: ExprKind::Local(3), ty: Type::Bool } };
            }),
            "criteria[0].verifier.expr",
            "local 3 is read where nothing binds it",
        ),
        (
            "a judge that takes a million samples",
            Box::new(|p| p.judges[0].samples = 1_000_000),
            "judges[0].samples",
            "a judge takes from 1 to 1000",
        ),
        (
            "a group that holds itself",
            Box::new(move |p| p.sets[group].members.push(Member::Set(group as u32))),
            "members[1]",
            "comes before its parent",
        ),
        (
            "a criterion evaluated twice",
            Box::new(move |p| p.steps.push(Step::Criterion(a as u32))),
            "steps[",
            "is already evaluated by step",
        ),
        (
            "an expression nested deeper than the limit",
            Box::new(move |p| {
                let mut e = num(1.0);
                for _ in 0..rubric::ir::validate::MAX_EXPR_DEPTH {
                    e = Expr {
                        kind: ExprKind::Unary { op: rubric::ir::UnOp::Neg, arg: Box::new(e) },
                        ty: Type::Number,
                    };
                }
                if let Step::Gate(g) = &mut p.steps[gate] {
                    g.value = e;
                }
            }),
            "steps[0].gate.value",
            "nests deeper than 3000 levels",
        ),
        (
            "a site that does not exist",
            Box::new(move |p| p.criteria[a].site = 10_000),
            "criteria[0]",
            "site 10000 does not exist",
        ),
    ];
    for (what, edit, path, words) in cases {
        let mut p = base.clone();
        edit(&mut p);
        let bytes = forged_bundle(&c, &p);
        let e = match load_bytes(&bytes, &limits()) {
            Ok(_) => panic!("{what}: the forged bundle was accepted"),
            Err(e) => e,
        };
        assert_eq!(e.code, "rubric::bundle::ir", "{what}: {e}");
        assert!(e.message.contains(path) && e.message.contains(words), "{what}: the message is `{}`", e.message);
    }
}

/// Forged programs as deep as the validator allows, in the node kinds whose recursive walks
/// take the most stack, load, and every engine, `describe`, `inspect`, the printer, cloning
/// and comparing handle them on a thread with the default stack.
#[test]
fn forged_programs_at_the_depth_limit_run_on_a_default_stack() {
    use rubric::ir::{CmpOp, Const, Expr, ExprKind, Step, Type, UnOp};
    let c = small();
    let gate = step_of(c.program.as_ref().unwrap(), |s| matches!(s, Step::Gate(_)));
    let levels = rubric::ir::validate::MAX_EXPR_DEPTH - 2;
    let zero = || Expr::constant(Const::Number(0.0));
    let any_list = Type::List(Box::new(Type::Any));
    let list_len = rubric::stdlib::lookup("len").position(|(_, i)| i.sig.contains("List")).unwrap() as u32;
    // Each wraps a Number expression in one more level, still a Number (the gate's value).
    let kinds: [(&str, &dyn Fn(Expr) -> Expr); 4] = [
        ("negation", &|e| Expr { kind: ExprKind::Unary { op: UnOp::Neg, arg: Box::new(e) }, ty: Type::Number }),
        ("intrinsic", &|e| Expr {
            kind: ExprKind::Intrinsic { name: "abs".into(), overload: 0, args: vec![e], site: 0 },
            ty: Type::Number,
        }),
        ("if", &|e| Expr {
            kind: ExprKind::If {
                cond: Box::new(Expr {
                    kind: ExprKind::Compare { first: Box::new(zero()), rest: vec![(CmpOp::Eq, zero())] },
                    ty: Type::Bool,
                }),
                then: Box::new(e),
                els: Box::new(zero()),
            },
            ty: Type::Number,
        }),
        ("list", &|e| {
            // `len([[...[e]...]])`: lists of lists (typed `List[_]`), counted at the top.
            let list = |x: Expr| Expr { kind: ExprKind::List(vec![x]), ty: any_list.clone() };
            let inner = match e.kind {
                ExprKind::Intrinsic { name, mut args, .. } if name == "len" => args.remove(0),
                _ => e,
            };
            Expr {
                kind: ExprKind::Intrinsic { name: "len".into(), overload: list_len, args: vec![list(inner)], site: 0 },
                ty: Type::Number,
            }
        }),
    ];
    for (what, wrap) in kinds {
        let mut p = c.program.clone().unwrap();
        let mut e = zero();
        for _ in 0..levels {
            e = wrap(e);
        }
        let want = if what == "list" { 1 } else { 0 };
        if let Step::Gate(g) = &mut p.steps[gate] {
            g.value = e;
        }
        let bytes = forged_bundle(&c, &p);
        std::thread::Builder::new()
            .name(format!("forged-deep-{what}"))
            .spawn(move || {
                let b = load_bytes(&bytes, &limits()).unwrap_or_else(|e| panic!("{what}: {e}"));
                let p = &b.program;
                let copy = p.clone();
                assert!(copy == *p);
                let _ = (describe(p), facts::score_range(p), rubric::ir::print_program(p));
                let ident = Identity::of(p, &b.sites);
                for engine in engines() {
                    let record = score_line(engine.as_ref(), p, &ident, 0, r#"{"response": ""}"#, None);
                    assert_eq!(record["score"], want, "{what} on {}: {record}", engine.name());
                }
            })
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("the deep {what} program fails"));
    }
}

/// `ir.json` nested a million levels deep is rejected from its bytes, before it is parsed.
#[test]
fn forged_ir_nested_a_million_levels_is_rejected_before_parsing() {
    let c = small();
    let built = build_compiled(&c, false).unwrap();
    let entries = container::read(&built.bytes, 100).unwrap();
    let case = Case {
        name: "small".into(),
        dir: PathBuf::new(),
        program: c.program.clone().unwrap(),
        with_sources: entries.clone(),
        entries,
        ir: Json::Null,
        source_map: Json::Null,
        rows: vec![],
        verdicts: None,
    };
    let mut ir = vec![b'['; 1_000_000];
    ir.extend(vec![b']'; 1_000_000]);
    let bytes = forge(&case, ir);
    let e = std::thread::Builder::new()
        .name("forged-json-depth".into())
        .spawn(move || load_bytes(&bytes, &limits()).map(|_| ()))
        .unwrap()
        .join()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code, "rubric::bundle::ir");
    assert!(e.message.contains("nests deeper than"), "{}", e.message);
}

/// `module.wasm` is what this compiler produces from `ir.json`: a stub that carries the right
/// ABI section, or another program's module, is rejected with every hash right.
#[test]
fn forged_module_is_rejected_unless_it_is_the_compilers() {
    let c = small();
    let built = build_compiled(&c, false).unwrap();
    let mut stub = b"\0asm\x01\0\0\0".to_vec();
    let name = bundle::WASM_ABI_SECTION.as_bytes();
    let abi = WASM_ABI_VERSION.to_string().into_bytes();
    stub.push(0);
    stub.push((1 + name.len() + abi.len()) as u8);
    stub.push(name.len() as u8);
    stub.extend_from_slice(name);
    stub.extend_from_slice(&abi);
    let other = rubric::types::compile_source(
        "o.rubric",
        "rubric o @ 1.0.0\ninput r: Text\ncriterion x \"x\" check len(r) > 2\n",
    );
    let other_module = rubric::backend::wasm::compile_module(other.program.as_ref().unwrap()).unwrap();
    for (what, module) in [("a stub", stub), ("another program's module", other_module)] {
        let mut es = container::read(&built.bytes, 100).unwrap();
        es[2].data = module;
        let mut manifest: Json = serde_json::from_slice(&es[0].data).unwrap();
        set_file(&mut manifest, "module.wasm", &es[2].data);
        let mut mbytes = serde_json::to_vec_pretty(&manifest).unwrap();
        mbytes.push(b'\n');
        let last = es.len() - 1;
        es[last].data = format!("{}\n", bundle::sha256(&mbytes)).into_bytes();
        es[0].data = mbytes;
        let e = load_bytes(&container::write(&es), &limits()).err().unwrap_or_else(|| panic!("{what} was accepted"));
        assert_eq!(e.code, "rubric::bundle::wasm", "{what}: {e}");
        assert!(e.message.contains("is not the module `ir.json` compiles to"), "{what}: {}", e.message);
    }
}
