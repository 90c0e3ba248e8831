//! Stage 6, the runtime: binds JSON rows to a program's inputs, evaluates them in parallel
//! with rayon in constant memory (chunks of rows, written in input order), attaches recorded
//! verdicts, writes one result line per row, and resumes an interrupted run from its output.

mod bind;
pub mod credit;
#[cfg(feature = "judges")]
pub mod dispatch;
pub mod examples;
#[cfg(feature = "judges")]
pub mod generate;
pub mod groups;
pub mod verdicts;

pub use bind::{bind_row, bind_row_in, BindError};
pub use verdicts::{Unmatched, VerdictFile};

use crate::engine::{Engine, RowResult, TrapInfo, VerdictSource};
use crate::ir::{Program, SiteTable};
use crate::stdlib::TrapKind;
use crate::value::Value;
use rayon::prelude::*;
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Rows evaluated together; memory is bounded by one chunk of rows and results.
pub const CHUNK: usize = 512;

/// Identity of the program every result carries, and where its sites lie (to write a trap's
/// location in the sources; not part of the identity, which does not depend on layout).
#[derive(Debug, Clone)]
pub struct Identity {
    pub rubric: String,
    pub version: String,
    pub ir_hash: String,
    /// The bundle's hash when the program was loaded from a bundle (`bundle` in results).
    pub bundle: Option<String>,
    /// The site table beside the program (`types::Compiled::sites`, a bundle's source map).
    pub sites: SiteTable,
    /// The row field that names a row in records and verdict files (`--id-field`; `id` when
    /// unset).
    pub id_field: Option<String>,
    /// The directory of the rows file, which `Image` paths are relative to; `None` (rows that
    /// come from no file: `rubric serve`, the Python binding) refuses image paths.
    pub rows_dir: Option<std::path::PathBuf>,
}

impl Identity {
    /// The identity of program `p`, whose sites lie where `sites` says.
    pub fn of(p: &Program, sites: &SiteTable) -> Identity {
        Identity {
            rubric: p.rubric.name.clone(),
            version: p.rubric.version.clone(),
            ir_hash: p.hash(),
            bundle: None,
            sites: sites.clone(),
            id_field: None,
            rows_dir: None,
        }
    }

    /// Rows come from a file in `dir`: `Image` paths are read relative to it.
    pub fn with_rows_dir(mut self, dir: Option<&std::path::Path>) -> Identity {
        self.rows_dir = dir.map(std::path::Path::to_path_buf);
        self
    }

    /// [`Identity::with_rows_dir`] for the rows file `rows` ([`rows_dir`]).
    pub fn with_rows_file(self, rows: &std::path::Path) -> Identity {
        self.with_rows_dir(Some(rows_dir(rows)))
    }

    /// Records and verdict files name rows by this field instead of `id`.
    pub fn with_id_field(mut self, field: Option<&str>) -> Identity {
        self.id_field = field.map(String::from);
        self
    }

    /// The identity of a program loaded from the bundle whose hash is `bundle`.
    pub fn with_bundle(mut self, bundle: &str) -> Identity {
        self.bundle = Some(bundle.to_string());
        self
    }
}

/// The directory `Image` paths in the rows file `rows` are relative to: its parent, or `.` for
/// a bare file name and for standard input (`-`).
pub fn rows_dir(rows: &std::path::Path) -> &std::path::Path {
    match rows.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    }
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Summary {
    pub rows: usize,
    pub scored: usize,
    pub unscored: usize,
    pub errors: usize,
    pub skipped_resume: usize,
    pub score_sum: f64,
    /// Rows of this run that failed somewhere: an error record, or a criterion, gate or the
    /// score unscored.
    pub failed_rows: usize,
    /// For each failure code, the rows of this run it occurred in: an error record's code, an
    /// unscored criterion's reason code (`no_verdict`, `judge_timeout`, `rubric::trap::limit`).
    pub failures: BTreeMap<String, usize>,
    /// The scored lines a resume kept from the output (empty without `--resume`).
    pub kept: Kept,
    /// The slowest rows, slowest first (`RunOptions::slow_rows` of them; empty without).
    pub slow_rows: Vec<SlowRow>,
}

/// A row of the slow-row report: where it is and where its time went.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowRow {
    pub row: usize,
    pub id: Option<Json>,
    pub ms: f64,
    /// The record's `timing` object ([`RowTiming::to_json`]).
    pub timing: Json,
    /// The record's `unscored_reason`, when the row was unscored.
    pub unscored: Option<String>,
}

impl SlowRow {
    /// One line of the report: `row 3 (id "a"): 2041.2 ms: judges 2003.1 ms (`accuracy`
    /// 2003.1 ms, `tone` 412.0 ms), evaluating 1.2 ms`, with the row's timeout when it had one.
    pub fn line(&self) -> String {
        let t = &self.timing;
        let f = |k: &str| t.get(k).and_then(Json::as_f64).unwrap_or(0.0);
        let mut crit: Vec<(&String, f64)> = t
            .get("criteria")
            .and_then(Json::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k, v.as_f64().unwrap_or(0.0)))
            .collect();
        crit.sort_by(|a, b| b.1.total_cmp(&a.1));
        let shown: Vec<String> = crit.iter().take(3).map(|(k, v)| format!("`{k}` {v:.1} ms")).collect();
        let more = if crit.len() > 3 { format!(", {} more", crit.len() - 3) } else { String::new() };
        let id = self.id.as_ref().map(|i| format!(" (id {i})")).unwrap_or_default();
        let judges = if crit.is_empty() {
            String::new()
        } else {
            format!("judges {:.1} ms ({}{more}), ", f("judges_ms"), shown.join(", "))
        };
        let timeout = match &self.unscored {
            Some(r) if r.starts_with("timeout") => format!("; {r}"),
            _ => String::new(),
        };
        format!("row {}{id}: {:.1} ms: {judges}evaluating {:.1} ms{timeout}", self.row, self.ms, f("evaluate_ms"))
    }
}

impl Summary {
    /// The mean score of the rows this run scored.
    pub fn mean_score(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.score_sum / self.scored as f64)
    }

    /// The mean score of every scored line of the output: those a resume kept and this run's.
    pub fn mean_score_of_file(&self) -> Option<f64> {
        let n = self.scored + self.kept.scored;
        (n > 0).then(|| (self.score_sum + self.kept.score_sum) / n as f64)
    }

    /// The failure codes, most frequent first (ties by code).
    pub fn top_failures(&self) -> Vec<(&str, usize)> {
        let mut v: Vec<(&str, usize)> = self.failures.iter().map(|(c, n)| (c.as_str(), *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }

    fn count(&mut self, outcome: &RowOutcome) {
        self.rows += 1;
        match outcome.score {
            Err(()) => self.errors += 1,
            Ok(Some(s)) => {
                self.scored += 1;
                self.score_sum += s;
            }
            Ok(None) => self.unscored += 1,
        }
        if !outcome.codes.is_empty() {
            self.failed_rows += 1;
        }
        for code in &outcome.codes {
            *self.failures.entry(code.clone()).or_default() += 1;
        }
    }

    /// Keep `slow` among the `keep` slowest rows.
    fn keep_slow(&mut self, slow: Option<SlowRow>, keep: usize) {
        let Some(slow) = slow else { return };
        if keep == 0 {
            return;
        }
        let at = self.slow_rows.partition_point(|s| s.ms >= slow.ms);
        if at < keep {
            self.slow_rows.insert(at, slow);
            self.slow_rows.truncate(keep);
        }
    }
}

/// What a record says for the run's summary: its score (`Err` for an error record) and the
/// distinct failure codes in it.
struct RowOutcome {
    score: Result<Option<f64>, ()>,
    codes: Vec<String>,
    /// The row's timing, when its record has one.
    slow: Option<SlowRow>,
}

impl RowOutcome {
    fn of(record: &Json) -> RowOutcome {
        let mut codes = std::collections::BTreeSet::new();
        let score = if let Some(e) = record.get("error") {
            codes.insert(e.get("code").and_then(Json::as_str).unwrap_or("error").to_string());
            Err(())
        } else {
            Ok(record.get("score").and_then(Json::as_f64))
        };
        for key in ["criteria", "gates"] {
            for c in record.get(key).and_then(Json::as_array).into_iter().flatten() {
                if c.get("status").and_then(Json::as_str) == Some("unscored") {
                    let code = reason_code(c.get("reason").and_then(Json::as_str).unwrap_or(""));
                    if !UNSCORED_BY_DESIGN.contains(&code.as_str()) {
                        codes.insert(code);
                    }
                }
            }
        }
        if let Some(t) = record.get("trap") {
            codes.insert(t.get("code").and_then(Json::as_str).unwrap_or("trap").to_string());
        }
        let unscored = record.get("unscored_reason").and_then(Json::as_str);
        if score == Ok(None) && (codes.is_empty() || unscored.is_some_and(|r| r.starts_with("timeout:"))) {
            codes.insert(reason_code(unscored.unwrap_or("")));
        }
        let slow = record.get("timing").map(|t| SlowRow {
            row: record.get("row").and_then(Json::as_u64).unwrap_or(0) as usize,
            id: record.get("id").cloned(),
            ms: t.get("ms").and_then(Json::as_f64).unwrap_or(0.0),
            timing: t.clone(),
            unscored: unscored.map(str::to_string),
        });
        RowOutcome { score, codes: codes.into_iter().collect(), slow }
    }

    /// [`RowOutcome::of`] the record of `result` (not an error record, without timing), read
    /// from the result instead of the record.
    fn of_result(result: &RowResult) -> RowOutcome {
        let mut codes = std::collections::BTreeSet::new();
        // The score as the record writes it and `of` reads it back.
        let score = result.score.and_then(|x| crate::value::JsonNumber::of(x).read_back());
        for c in result.criteria.iter().filter(|c| c.status == crate::engine::Status::Unscored) {
            let code = reason_code(c.reason.as_deref().unwrap_or(""));
            if !UNSCORED_BY_DESIGN.contains(&code.as_str()) {
                codes.insert(code);
            }
        }
        if let Some(t) = &result.trap {
            codes.insert(t.code.to_string());
        }
        let unscored = result.unscored_reason.as_deref();
        if score.is_none() && (codes.is_empty() || unscored.is_some_and(|r| r.starts_with("timeout:"))) {
            codes.insert(reason_code(unscored.unwrap_or("")));
        }
        RowOutcome { score: Ok(score), codes: codes.into_iter().collect(), slow: None }
    }
}

/// Unscored criteria that are the rubric working as written, not failures: a gate stopped
/// evaluation before the criterion (`gated`), a judge's samples split evenly (`vote_tie`).
const UNSCORED_BY_DESIGN: &[&str] = &["gated", "vote_tie"];

/// The code an unscored reason starts with (`no_verdict: judge ...` → `no_verdict`), or
/// `unscored` for a reason without one.
fn reason_code(reason: &str) -> String {
    match reason.split_once(": ") {
        Some((code, _)) if !code.is_empty() && !code.contains(char::is_whitespace) => code.to_string(),
        _ => "unscored".to_string(),
    }
}

/// `-` as a path: standard input or output.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Whether `path` is a regular file, which can be read more than once (not `-`, a pipe, a
/// terminal or a process substitution, which are read once, by scoring).
pub fn is_regular_file(path: &Path) -> bool {
    !is_stdio(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The rows of `path`, or of standard input for `-`.
fn open_rows(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    if is_stdio(path) {
        return Ok(Box::new(BufReader::new(std::io::stdin().lock())));
    }
    Ok(Box::new(BufReader::new(File::open(path)?)))
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read `{path}`: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write `{path}`: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("cannot resume: {0}")]
    Resume(String),
}

/// The row's identity: its 0-based index among non-blank lines, and its id: the `id` field, or
/// the field `--id-field` names, when it is a string or a number.
pub fn row_id(row: &Json, field: Option<&str>) -> Option<Json> {
    row.get(field.unwrap_or("id")).filter(|v| v.is_string() || v.is_number()).cloned()
}

/// The text of a caught panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// An engine whose rows cannot panic: a panic anywhere while a row is evaluated (the engine,
/// the step driver, an intrinsic) is caught at the row and becomes a result with the
/// `rubric::trap::internal` trap, which [`finish_record`] writes as that row's error record.
/// The other rows of the batch go on, and nothing unwinds into rayon (which aborts the
/// process on a panic that escapes a spawned task). Every batch path of this module evaluates
/// through it.
pub struct Contained<'e>(pub &'e dyn Engine);

impl Engine for Contained<'_> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn evaluate(&self, program: &Program, inputs: &[Value], verdicts: &dyn VerdictSource) -> RowResult {
        // Every engine starts each row from fresh per-row state (the Wasm engine resets its
        // store's fuel, deadline and value table), so the rows after a caught panic are
        // evaluated as any other.
        catch_unwind(AssertUnwindSafe(|| self.0.evaluate(program, inputs, verdicts)))
            .unwrap_or_else(|payload| internal_result(&panic_message(&*payload)))
    }
}

/// The result of a row whose evaluation panicked.
fn internal_result(message: &str) -> RowResult {
    let message =
        format!("evaluating the row panicked (a bug; please report it with the rubric and the row): {message}");
    RowResult {
        unscored_reason: Some(format!("{}: {message}", TrapKind::Internal.code())),
        trap: Some(TrapInfo { code: TrapKind::Internal.code(), message, site: None }),
        ..RowResult::default()
    }
}

/// One row as it arrives: a line of JSONL text (`rubric run`, the Python package), parsed when
/// it is prepared, or a JSON value parsed already (the rows of a `rubric serve` request, the
/// rows a grouped batch parsed once for scoring and grouping both). A row is parsed once.
#[derive(Debug, Clone, Copy)]
pub enum RowIn<'a> {
    Line(&'a str),
    Value(&'a Json),
    /// A line that was parsed and is not JSON: why (its error record's message).
    Malformed(&'a str),
    /// A line whose bytes are not UTF-8: the offset of its first bad byte.
    NotUtf8(usize),
}

/// Evaluate one line into its output record. A panic while the row is bound or evaluated
/// becomes its `rubric::trap::internal` error record.
pub fn score_line(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    index: usize,
    line: &str,
    verdicts: Option<&VerdictFile>,
) -> Json {
    score_row(engine, program, ident, index, RowIn::Line(line), verdicts)
}

/// [`score_line`] for a row as it arrived (text or value).
pub fn score_row(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    index: usize,
    row: RowIn<'_>,
    verdicts: Option<&VerdictFile>,
) -> Json {
    match prepare_contained(program, ident, index, row, verdicts) {
        Ok(row) => {
            let result = evaluate_prepared(engine, program, &row, verdicts);
            finish_record(row.out, ident, engine.name(), &result)
        }
        Err(record) => record,
    }
}

/// Evaluate a prepared row (a panic becomes its result's internal trap), noting which of its
/// recorded verdicts the result used.
fn evaluate_prepared(
    engine: &dyn Engine,
    program: &Program,
    row: &PreparedRow,
    verdicts: Option<&VerdictFile>,
) -> RowResult {
    let result = Contained(engine).evaluate(program, &row.inputs, &row.verdicts);
    if let Some(v) = verdicts {
        v.note_result(&row.verdicts, result.criteria.iter().map(|c| &*c.id));
    }
    result
}

/// [`prepare_row`], with a panic (while an input's default is evaluated, say) turned into the
/// row's `rubric::trap::internal` error record.
fn prepare_contained(
    program: &Program,
    ident: &Identity,
    index: usize,
    row: RowIn<'_>,
    verdicts: Option<&VerdictFile>,
) -> Result<PreparedRow, Json> {
    catch_unwind(AssertUnwindSafe(|| prepare_row(program, ident, index, row, verdicts))).unwrap_or_else(|payload| {
        let mut out = Map::new();
        out.insert("row".into(), json!(index));
        let message = format!("binding the row panicked (a bug; please report it): {}", panic_message(&*payload));
        Err(error_record(out, ident, TrapKind::Internal.code(), message))
    })
}

/// A parsed and bound row, ready to evaluate: its output record so far (`row`, `id`), its
/// inputs and its recorded verdicts.
pub struct PreparedRow {
    pub out: Map<String, Json>,
    pub inputs: Vec<crate::value::Value>,
    pub verdicts: Vec<(String, Json)>,
}

/// Parse and bind one line; a malformed line becomes its error record.
pub fn prepare_line(
    program: &Program,
    ident: &Identity,
    index: usize,
    line: &str,
    verdicts: Option<&VerdictFile>,
) -> Result<PreparedRow, Json> {
    prepare_row(program, ident, index, RowIn::Line(line), verdicts)
}

/// Parse (a line) and bind one row; a malformed line or a value that is not an object becomes
/// its error record.
pub fn prepare_row(
    program: &Program,
    ident: &Identity,
    index: usize,
    row: RowIn<'_>,
    verdicts: Option<&VerdictFile>,
) -> Result<PreparedRow, Json> {
    let mut out = Map::new();
    out.insert("row".into(), json!(index));
    if let Some(v) = verdicts {
        v.saw_index(index);
    }
    let parsed;
    let row = match row {
        RowIn::Value(v) => v,
        RowIn::Line(line) => match parse_row(line) {
            Ok(v) => {
                parsed = v;
                &parsed
            }
            Err(e) => return Err(malformed(out, ident, &e.to_string())),
        },
        RowIn::Malformed(why) => return Err(malformed(out, ident, why)),
        RowIn::NotUtf8(at) => {
            return Err(error_record(
                out,
                ident,
                "rubric::row::not_utf8",
                format!("line is not valid UTF-8: the byte at offset {at} of the line starts no character"),
            ))
        }
    };
    if !row.is_object() {
        return Err(error_record(
            out,
            ident,
            "rubric::row::not_an_object",
            format!("a row must be a JSON object, found {}", kind_of(row)),
        ));
    }
    let id = row_id(row, ident.id_field.as_deref());
    if let Some(id) = &id {
        out.insert("id".into(), id.clone());
        if let Some(v) = verdicts {
            v.saw_id(id);
        }
    }
    #[cfg(feature = "judges")]
    if let Some(hashes) = generate::record_hashes(program, row) {
        // The generated items this record scored (`rubric generate`'s `generated.*.sha256`).
        out.insert("generated".into(), hashes);
    }
    let inputs = match bind_row_in(program, row, ident.rows_dir.as_deref()) {
        Ok(v) => v,
        Err(e) => {
            // An input `rubric generate` could not write: say why, not only that it is missing.
            #[cfg(feature = "judges")]
            if let Some(why) = generate::not_generated(program, row) {
                return Err(error_record(out, ident, "rubric::row::not_generated", why));
            }
            return Err(error_record(out, ident, e.code, e.message));
        }
    };
    let verdicts = verdicts.map(|v| v.for_row(index, id.as_ref())).unwrap_or_default();
    Ok(PreparedRow { out, inputs, verdicts })
}

fn malformed(out: Map<String, Json>, ident: &Identity, why: &str) -> Json {
    error_record(out, ident, "rubric::row::malformed_json", format!("line is not valid JSON: {why}"))
}

/// A row handed to a [`ChunkJudge`]: its bound inputs, the verdicts recorded for it and, under
/// `--groups`, its group's key (what a group judge's requests are made of).
#[derive(Debug, Clone)]
pub struct JudgeRow {
    pub inputs: BoundRow,
    pub verdicts: Vec<(String, Json)>,
    pub group: Option<String>,
}

/// A row's inputs, bound to the program's declared types (`bind_row`).
pub type BoundRow = Vec<crate::value::Value>;

/// What answered each dispatched criterion of a row, by criterion id.
pub type ModelsByCriterion = std::collections::BTreeMap<String, Dispatched>;

/// A dispatched criterion: the models that answered it and what its verdict cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dispatched {
    pub models: Vec<String>,
    pub cost: CostShare,
    /// For a cascade's criterion, the members asked, in order (the last one decided).
    pub cascade: Vec<String>,
}

/// A criterion's share of the price of the replies that decided it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum CostShare {
    /// No model is priced: cost accounting is off, and records carry no cost.
    #[default]
    NotAccounted,
    Usd(f64),
    /// Some reply behind it reported no usage, or its model has no price.
    Unknown,
}

/// A row a [`ChunkJudge`] evaluated: its result, what answered each dispatched criterion and
/// where its time went.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    pub result: RowResult,
    pub models: ModelsByCriterion,
    pub timing: RowTiming,
}

/// Where a row's time went (records' `timing` when asked for, `rubric run --slow-rows`):
/// evaluating it, every round included (and the programs `exec` ran for it), and waiting for
/// its judges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowTiming {
    pub evaluate_ms: f64,
    /// Per round of judge calls, the longest wait among the row's requests, summed (the row's
    /// requests of one round fly together).
    pub judges_ms: f64,
    /// Per dispatched criterion, how long its verdicts took (summed over rounds and cascade
    /// tiers), in the order first answered.
    pub criteria: Vec<(String, f64)>,
}

impl RowTiming {
    /// Count `ms` of waiting for criterion `id`.
    pub fn add_wait(&mut self, id: &str, ms: f64) {
        match self.criteria.iter_mut().find(|(c, _)| c == id) {
            Some((_, t)) => *t += ms,
            None => self.criteria.push((id.to_string(), ms)),
        }
    }

    pub fn total_ms(&self) -> f64 {
        self.evaluate_ms + self.judges_ms
    }

    /// The record's `timing` object: milliseconds, to the microsecond.
    pub fn to_json(&self) -> Json {
        let ms = |x: f64| json!((x * 1000.0).round() / 1000.0);
        let criteria: Map<String, Json> = self.criteria.iter().map(|(id, t)| (id.clone(), ms(*t))).collect();
        json!({
            "ms": ms(self.total_ms()),
            "evaluate_ms": ms(self.evaluate_ms),
            "judges_ms": ms(self.judges_ms),
            "criteria": criteria,
        })
    }
}

/// Per-call scoring settings beside the rows: the rows' deadline and whether records carry
/// their timing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RowPolicy {
    /// Each row is decided within this of the start of its batch (`score_batch`: the call;
    /// `run_batch`: its chunk of [`CHUNK`] rows, which are scored together): judge calls still
    /// unanswered then are given up, and a row that lost one is `unscored` with reason
    /// `timeout` (its score and reward `null`), the rest of the batch unchanged.
    pub deadline: Option<std::time::Duration>,
    /// Add each row's `timing` ([`RowTiming`]) to its record. Timings differ from run to run:
    /// records with them are not reproducible.
    pub timings: bool,
}

/// Something that decides the judged criteria of a chunk of rows by calling judges (the
/// `judges` feature's dispatcher), evaluating each row with `engine` until it needs no more.
/// `Send` as well as `Sync`: the reward server and the Python bindings hold one for as long as
/// their rubrics and share it between threads.
pub trait ChunkJudge: Sync + Send {
    /// Evaluates every row; returns, per row, its result and the models that answered each
    /// dispatched criterion.
    fn evaluate_chunk(
        &self,
        engine: &dyn Engine,
        program: &Program,
        rows: Vec<JudgeRow>,
        deadline: Option<std::time::Instant>,
    ) -> Vec<Judged>;

    /// Counters for the run summary (calls, cache hits, tokens...), as JSON.
    fn stats(&self) -> Json;

    /// The counters as the lines `rubric run` prints.
    fn report(&self) -> String {
        format!("judges: {}", self.stats())
    }
}

/// The batch numeric stage on a tensor backend (`rubric run --numeric tensor`; implemented by
/// the `numeric` module under the `models` feature): what is arithmetic over a chunk's
/// criterion results — the scores, the group trees, and for `--groups` the rewards,
/// advantages, group statistics and token credit — computed as tensor operations. It must give
/// exactly what the scalar path gives on the CPU; when it fails (a device error), the runtime
/// keeps the scalar results and warns once.
pub trait ChunkNumeric: Sync {
    /// Recompute, in place, the scores of the rows whose score came from the score expression
    /// (`RowResult::score_evaluated`) and every row's group trees. All or nothing: on an error
    /// the results are left as they were.
    fn finish_chunk(&self, program: &Program, results: &mut [RowResult]) -> Result<(), String>;

    /// Annotate complete groups as `groups::annotate_scalar` does. All or nothing.
    fn annotate_groups(
        &self,
        program: &Program,
        decl: &crate::ir::RewardDecl,
        groups: &mut [groups::PendingGroup],
    ) -> Result<(), String>;
}

/// Report a failure of the numeric stage once per process: the chunk is computed on the scalar
/// path instead.
pub fn numeric_warning(e: &str) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!("warning: the tensor numeric stage failed ({e}); results are computed on the scalar path");
    }
}

fn kind_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn stamp(out: &mut Map<String, Json>, ident: &Identity) {
    out.insert("rubric".into(), json!(ident.rubric));
    out.insert("version".into(), json!(ident.version));
    out.insert("ir_hash".into(), json!(ident.ir_hash));
    if let Some(b) = &ident.bundle {
        out.insert("bundle".into(), json!(b));
    }
}

fn error_record(mut out: Map<String, Json>, ident: &Identity, code: &str, message: String) -> Json {
    stamp(&mut out, ident);
    out.insert("error".into(), json!({ "code": code, "message": message }));
    Json::Object(out)
}

/// The record of an evaluated row; a row whose evaluation panicked ([`Contained`]) gets its
/// `rubric::trap::internal` error record instead.
pub fn finish_record(out: Map<String, Json>, ident: &Identity, engine: &str, result: &RowResult) -> Json {
    if let Some(t) = result.trap.as_ref().filter(|t| t.code == TrapKind::Internal.code()) {
        return error_record(out, ident, t.code, t.message.clone());
    }
    #[expect(clippy::expect_used, reason = "a record's parts have string keys and no failing Serialize")]
    serde_json::to_value(RecordLine { out: &out, ident, engine, result, form: crate::engine::RecordForm::Full })
        .expect("a record serialises")
}

/// The record of an evaluated row, in order: `out`'s fields, the identity, the engine and the
/// result's fields. [`finish_record`] makes a JSON value of it; the plain batch path
/// ([`score_row_line`]) serialises it straight to its line, without a JSON tree in between.
/// For a result without an internal trap (whose record is an error record).
struct RecordLine<'a> {
    out: &'a Map<String, Json>,
    ident: &'a Identity,
    engine: &'a str,
    result: &'a RowResult,
    /// Which record: the full one (as a JSON value or as text) or the compact one.
    form: crate::engine::RecordForm,
}

impl serde::Serialize for RecordLine<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.out {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("rubric", &self.ident.rubric)?;
        m.serialize_entry("version", &self.ident.version)?;
        m.serialize_entry("ir_hash", &self.ident.ir_hash)?;
        if let Some(b) = &self.ident.bundle {
            m.serialize_entry("bundle", b)?;
        }
        m.serialize_entry("engine", self.engine)?;
        self.result.serialize_fields_as(&self.ident.sites, self.form, &mut m)?;
        m.end()
    }
}

/// A record as its line (with its newline) and what it says for the summary.
fn record_line(record: &Json) -> (String, RowOutcome) {
    (json_line(record), RowOutcome::of(record))
}

thread_local! {
    /// The length of the last line this thread wrote: the next line's first capacity.
    static LINE_HINT: std::cell::Cell<usize> = const { std::cell::Cell::new(256) };
}

/// `record` as a line of JSONL, with its newline. The line starts with room for one as long as
/// this thread's last, so that a batch's lines (alike in length) are not grown by doubling.
fn json_line(record: &impl serde::Serialize) -> String {
    let mut line = Vec::with_capacity(LINE_HINT.get() + 64);
    #[expect(clippy::expect_used, reason = "records have string keys and no failing Serialize")]
    serde_json::to_writer(&mut line, record).expect("a record serialises");
    line.push(b'\n');
    LINE_HINT.set(line.len());
    #[expect(clippy::expect_used, reason = "serde_json writes UTF-8")]
    String::from_utf8(line).expect("JSON text is UTF-8")
}

/// [`score_row`] made into the line `run_batch_as` writes for it when records are written
/// without timings: the record (`compact`: the compact record) is serialised straight from the
/// row's result, the same text as [`record_line`] of `score_row`'s record (after [`compact`])
/// without building that record.
fn score_row_line(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    index: usize,
    row: RowIn<'_>,
    verdicts: Option<&VerdictFile>,
    compact: bool,
) -> (String, RowOutcome) {
    let row = match prepare_contained(program, ident, index, row, verdicts) {
        Ok(row) => row,
        Err(record) => return record_line(&record),
    };
    let result = evaluate_prepared(engine, program, &row, verdicts);
    if result.trap.as_ref().is_some_and(|t| t.code == TrapKind::Internal.code()) {
        // An error record: nothing of it is compacted.
        return record_line(&finish_record(row.out, ident, engine.name(), &result));
    }
    let form = if compact { crate::engine::RecordForm::Compact } else { crate::engine::RecordForm::Text };
    let record = RecordLine { out: &row.out, ident, engine: engine.name(), result: &result, form };
    (json_line(&record), RowOutcome::of_result(&result))
}

/// Options of a batch run.
pub struct RunOptions<'a> {
    pub input: &'a Path,
    pub output: &'a Path,
    pub verdicts: Option<&'a VerdictFile>,
    pub resume: bool,
    pub progress: bool,
    /// Judge dispatch for criteria without a recorded verdict; `None`: recorded verdicts only.
    pub judges: Option<&'a dyn ChunkJudge>,
    /// Write compact records: the criteria list, gates and groups replaced by `values`.
    pub compact: bool,
    /// Group rows by this field (consecutive rows with the same value) and add rewards and
    /// group-relative advantages (`runtime::groups`).
    pub groups: Option<&'a str>,
    /// Compute scores, group trees, advantages and token credit with the tensor numeric
    /// stage; `None`: the scalar path.
    pub numeric: Option<&'a dyn ChunkNumeric>,
    /// What determines the records beside the rubric (the inputs' hashes, verdict files, judge
    /// configuration, options): written beside a file output as [`provenance_path`], and a
    /// resume whose provenance differs is refused.
    pub provenance: Option<&'a Json>,
    /// The rows' deadline and whether records carry their timing ([`RowPolicy`]).
    pub policy: RowPolicy,
    /// Keep the timing of this many slowest rows for the summary's slow-row report
    /// ([`Summary::slow_rows`]); 0: none.
    pub slow_rows: usize,
}

/// The file beside an output that records what made it: `OUTPUT.run.json`.
pub fn provenance_path(output: &Path) -> std::path::PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".run.json");
    std::path::PathBuf::from(name)
}

/// Refuse to resume `output` unless the provenance recorded beside it is `want`.
fn check_provenance(output: &Path, want: &Json) -> Result<(), RunError> {
    let path = provenance_path(output);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RunError::Resume(format!(
                "`{}` has no record of the run that wrote `{}`, so nothing says this run would write the same; \
                 run again without --resume",
                path.display(),
                output.display()
            )))
        }
        Err(e) => return Err(RunError::Read { path: path.display().to_string(), source: e }),
    };
    let had: Json = serde_json::from_str(&text)
        .map_err(|e| RunError::Resume(format!("`{}` is not the record of a run: {e}", path.display())))?;
    if had == *want {
        return Ok(());
    }
    if had.get("ir_hash") != want.get("ir_hash") {
        let show = |v: &Json| v.get("ir_hash").and_then(Json::as_str).unwrap_or("missing").to_string();
        return Err(RunError::Resume(format!(
            "`{}` was written by another rubric (ir_hash {}); this rubric is {}",
            output.display(),
            show(&had),
            show(want)
        )));
    }
    let (had_map, want_map) = (had.as_object(), want.as_object());
    let mut keys: Vec<&str> = want_map.into_iter().flatten().map(|(k, _)| k.as_str()).collect();
    keys.extend(had_map.into_iter().flatten().map(|(k, _)| k.as_str()));
    keys.sort_unstable();
    keys.dedup();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| had.get(*k) != want.get(*k))
        .map(|k| {
            let show = |v: Option<&Json>| v.map_or("nothing".to_string(), Json::to_string);
            format!("{k}: {} then, {} now", show(had.get(k)), show(want.get(k)))
        })
        .collect();
    Err(RunError::Resume(format!(
        "`{}` was written by a run with other settings ({}); resume with the same ones, or run again without --resume",
        output.display(),
        differ.join("; ")
    )))
}

/// A compact record: `values` holds each criterion's value in the order of the full record's
/// `criteria` list (`null` when unscored or skipped); `criteria`, `gates` and `groups` go.
fn compact(record: &mut Json) {
    let Some(o) = record.as_object_mut() else { return };
    // Rebuilt in order, `values` in the place of `criteria`: the other keys keep the full
    // record's order (as `RowResult::serialize_fields_as` writes a compact record).
    *o = std::mem::take(o)
        .into_iter()
        .filter_map(|(k, v)| match (k.as_str(), v) {
            ("gates" | "groups", _) => None,
            ("criteria", Json::Array(cs)) => {
                let values = cs
                    .iter()
                    .map(|c| match c.get("status").and_then(Json::as_str) {
                        Some("met" | "unmet") => c.get("value").cloned().unwrap_or(Json::Null),
                        _ => Json::Null,
                    })
                    .collect();
                Some(("values".to_string(), Json::Array(values)))
            }
            (_, v) => Some((k, v)),
        })
        .collect();
}

/// Count complete result lines already in `output` (resume), truncating a torn last line.
/// Fails if a line was written by a different program.
/// With groups, the last group written is dropped and redone: its lines may be incomplete.
fn resume_point(output: &Path, ident: &Identity, groups: bool) -> Result<(usize, Kept), RunError> {
    let mut f = match OpenOptions::new().read(true).write(true).open(output) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, Kept::default())),
        Err(e) => return Err(RunError::Read { path: output.display().to_string(), source: e }),
    };
    // Streamed line by line: an output of millions of rows is never held in memory.
    let mut reader = BufReader::new(&mut f);
    let mut line = String::new();
    let mut good_bytes = 0usize;
    let mut done = 0usize;
    // Where the run of lines of the last group seen starts: (bytes, lines, group, scores).
    let mut group_start = (0usize, 0usize, Json::Null, Kept::default());
    let mut kept = Kept::default();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| RunError::Read { path: output.display().to_string(), source: e })?;
        if n == 0 || !line.ends_with('\n') {
            break; // end, or a torn write: dropped and redone
        }
        let v: Json = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => break,
        };
        if v.get("ir_hash").and_then(Json::as_str) != Some(ident.ir_hash.as_str()) {
            return Err(RunError::Resume(format!(
                "`{}` line {} was written by another rubric (ir_hash {}); this rubric is {}",
                output.display(),
                done + 1,
                v.get("ir_hash").and_then(Json::as_str).unwrap_or("missing"),
                ident.ir_hash
            )));
        }
        if v.get("row").and_then(Json::as_u64) != Some(done as u64) {
            return Err(RunError::Resume(format!("`{}` line {} is not row {done}", output.display(), done + 1)));
        }
        if let Some(g) = v.get("group").filter(|g| **g != group_start.2) {
            group_start = (good_bytes, done, g.clone(), kept);
        }
        good_bytes += line.len();
        done += 1;
        if let Some(s) = v.get("score").and_then(Json::as_f64).filter(|_| v.get("error").is_none()) {
            kept.scored += 1;
            kept.score_sum += s;
        }
    }
    if groups {
        (good_bytes, done, kept) = (group_start.0, group_start.1, group_start.3);
    }
    drop(reader);
    f.set_len(good_bytes as u64).map_err(|e| RunError::Write { path: output.display().to_string(), source: e })?;
    f.seek(SeekFrom::End(0)).map_err(|e| RunError::Write { path: output.display().to_string(), source: e })?;
    Ok((done, kept))
}

/// The scored lines a resume kept: their number and the sum of their scores.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Kept {
    pub scored: usize,
    pub score_sum: f64,
}

/// Score every row of `opts.input` into `opts.output`; `sites` locates traps in the sources.
pub fn run_batch(
    engine: &dyn Engine,
    program: &Program,
    sites: &SiteTable,
    opts: &RunOptions<'_>,
) -> Result<Summary, RunError> {
    run_batch_as(engine, program, &Identity::of(program, sites), opts)
}

/// `run_batch` with the identity stamped on every line given (a bundle's, with its hash).
pub fn run_batch_as(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    opts: &RunOptions<'_>,
) -> Result<Summary, RunError> {
    let read_err = |e| RunError::Read { path: opts.input.display().to_string(), source: e };
    let write_err = |e| RunError::Write { path: opts.output.display().to_string(), source: e };
    if opts.resume && is_stdio(opts.output) {
        return Err(RunError::Resume("the output is standard output (`-`); resume needs a file".into()));
    }
    let resuming = opts.resume && std::fs::metadata(opts.output).is_ok_and(|m| m.len() > 0);
    if let (true, Some(want)) = (resuming, opts.provenance) {
        check_provenance(opts.output, want)?;
    }
    let (skip, kept) =
        if opts.resume { resume_point(opts.output, ident, opts.groups.is_some())? } else { (0, Kept::default()) };
    let grouper =
        std::cell::RefCell::new(opts.groups.map(|f| groups::Grouper::new(program, f).with_numeric(opts.numeric)));
    let out_file: Box<dyn Write> = if is_stdio(opts.output) {
        Box::new(std::io::stdout().lock())
    } else if opts.resume {
        Box::new(OpenOptions::new().create(true).append(true).open(opts.output).map_err(write_err)?)
    } else {
        Box::new(File::create(opts.output).map_err(write_err)?)
    };
    let mut out = BufWriter::new(out_file);
    if let (false, Some(p), false) = (resuming, opts.provenance, is_stdio(opts.output)) {
        let path = provenance_path(opts.output);
        let text = format!("{p:#}\n");
        std::fs::write(&path, text).map_err(|e| RunError::Write { path: path.display().to_string(), source: e })?;
    }
    // Rows are counted ahead only for a bar that is shown (a read of the whole input before the
    // first row: not for a run whose bar is hidden), and only in a regular file; elsewhere the
    // bar counts as it goes.
    let shown = opts.progress && std::io::stderr().is_terminal();
    let total = if shown && is_regular_file(opts.input) { count_rows(opts.input).ok() } else { None };
    let bar = progress_bar(shown, total);
    let reader = open_rows(opts.input).map_err(read_err)?;
    let mut summary = Summary { skipped_resume: skip, kept, ..Summary::default() };
    let mut chunk: Vec<(usize, LineRead)> = Vec::with_capacity(CHUNK);
    let mut index = 0usize;
    // Timings are collected when records carry them or the slow-row report needs them.
    let timings = opts.policy.timings || opts.slow_rows > 0;
    // The plain path (rows scored one by one) has neither timings nor a deadline.
    let plain = !timings && opts.policy.deadline.is_none();
    bar.inc(skip as u64);
    let flush = |chunk: &mut Vec<(usize, LineRead)>,
                 summary: &mut Summary,
                 out: &mut BufWriter<Box<dyn Write>>|
     -> Result<(), RunError> {
        // Each record becomes its line on the worker that scored it: a chunk holds 512
        // lines of text, not 512 JSON trees (ten times the memory for wide rubrics).
        let line_of = |r: Json| written_line(r, opts);
        let mut grouper = grouper.borrow_mut();
        let rows: Vec<(usize, RowIn<'_>)> = chunk.iter().map(|(i, line)| (*i, line.row())).collect();
        // A chunk's rows are scored together: the deadline counts from the chunk's start.
        let deadline = opts.policy.deadline.map(|d| std::time::Instant::now() + d);
        let chunked = |judges, numeric, group_field| Chunked { judges, numeric, group_field, deadline, timings };
        let mut lines: Vec<(String, RowOutcome)> =
            with_judge_progress(&bar, opts.judges, || match (opts.judges, opts.numeric, grouper.as_mut()) {
                // (no judges, numeric stage or groups on the plain path: `stream_plain`)
                (judges, numeric, None) => {
                    score_chunk_results(engine, program, ident, &rows, opts.verdicts, chunked(judges, numeric, None))
                        .into_par_iter()
                        .map(line_of)
                        .collect()
                }
                (judges, numeric, Some(g)) => {
                    // Each line parsed once, for scoring and for its group both.
                    let parsed = parse_lines(&rows);
                    let rows = parsed_rows(&rows, &parsed);
                    // Records wait for the rest of their group; a group may span chunks.
                    let records: Vec<Json> = match (judges, numeric) {
                        (None, None) if plain => rows
                            .par_iter()
                            .map(|(i, row)| score_row(engine, program, ident, *i, *row, opts.verdicts))
                            .collect(),
                        _ => score_chunk_results(
                            engine,
                            program,
                            ident,
                            &rows,
                            opts.verdicts,
                            chunked(judges, numeric, opts.groups),
                        ),
                    };
                    for ((_, row), record) in rows.iter().zip(records) {
                        g.enqueue(record, row_value(row));
                    }
                    if chunk.is_empty() {
                        g.end_group();
                    }
                    // Every group the chunk completed, annotated together.
                    g.take_ready().into_par_iter().map(line_of).collect()
                }
            });
        write_records(&mut lines, summary, opts.slow_rows, out).map_err(write_err)?;
        bar.inc(chunk.len() as u64);
        chunk.clear();
        Ok(())
    };
    let mut reader = reader;
    if opts.judges.is_none() && opts.numeric.is_none() && opts.groups.is_none() && plain {
        stream_plain(engine, program, ident, opts, &mut *reader, skip, &bar, &mut out, &mut summary)?;
        bar.finish_and_clear();
        return Ok(summary);
    }
    let mut bytes = Vec::new();
    // A group judge asks about a group's members together: chunks end between groups.
    let whole_groups = opts.groups.filter(|_| opts.judges.is_some() && judges_groups(program));
    // The group key of the chunk's last line, when it was read to compare (each line's key is
    // read once, past `CHUNK`).
    let mut last_key: Option<Option<String>> = None;
    while let Some(line) = read_row_line(&mut reader, &mut bytes).map_err(read_err)? {
        if line.is_blank() {
            continue;
        }
        if index >= skip {
            let mut key = None;
            let full = chunk.len() >= CHUNK
                && whole_groups.is_none_or(|f| {
                    let last = last_key.take().unwrap_or_else(|| chunk.last().and_then(|(_, l)| line_group(l, f)));
                    let new = key.insert(line_group(&line, f)).clone();
                    last != new
                });
            if full {
                flush(&mut chunk, &mut summary, &mut out)?;
            }
            chunk.push((index, line));
            last_key = key;
        }
        index += 1;
    }
    flush(&mut chunk, &mut summary, &mut out)?;
    if grouper.borrow().is_some() {
        // An empty chunk ends the last group.
        flush(&mut chunk, &mut summary, &mut out)?;
    }
    bar.finish_and_clear();
    Ok(summary)
}

/// Score a batch of rows held in memory (the reward server `rubric serve`, the Python
/// bindings): each `(index, row)` gets exactly the record `run_batch_as` writes for it, with
/// the recorded `verdicts`, judges dispatched a chunk of `CHUNK` rows at a time, and with
/// `group_field` the records annotated as `--groups` annotates them (token credit included,
/// for rows that carry `token_offsets`). Records come back in input order, one per row. Each
/// row is parsed at most once: lines that must also be grouped are parsed up front, and the
/// same value is scored and grouped.
#[expect(clippy::too_many_arguments, reason = "the batch's settings, as the server and the Python package give them")]
pub fn score_batch(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    rows: &[(usize, RowIn<'_>)],
    verdicts: Option<&VerdictFile>,
    judges: Option<&dyn ChunkJudge>,
    group_field: Option<&str>,
    policy: RowPolicy,
) -> Vec<Json> {
    // The deadline counts from the call: its rows are scored together, so that the whole
    // batch is back by then.
    let deadline = policy.deadline.map(|d| std::time::Instant::now() + d);
    let parsed = group_field.map(|_| parse_lines(rows));
    let rows: Vec<(usize, RowIn<'_>)> = match &parsed {
        Some(parsed) => parsed_rows(rows, parsed),
        None => rows.to_vec(),
    };
    let mut records = Vec::with_capacity(rows.len());
    let whole_groups = group_field.filter(|_| judges.is_some() && judges_groups(program));
    for chunk in chunks_of(&rows, whole_groups) {
        match (judges, policy.timings || deadline.is_some()) {
            (None, false) => records
                .par_extend(chunk.par_iter().map(|(i, row)| score_row(engine, program, ident, *i, *row, verdicts))),
            (judges, _) => records.extend(score_chunk_results(
                engine,
                program,
                ident,
                chunk,
                verdicts,
                Chunked { judges, numeric: None, group_field, deadline, timings: policy.timings },
            )),
        }
    }
    let Some(field) = group_field else { return records };
    let mut grouper = groups::Grouper::new(program, field);
    let mut out = Vec::with_capacity(records.len());
    for ((_, row), record) in rows.iter().zip(records) {
        out.extend(grouper.push(record, row_value(row)));
    }
    out.extend(grouper.flush());
    out
}

/// Whether a judge of `program` judges groups (`rollouts X`).
fn judges_groups(program: &Program) -> bool {
    program.judges.iter().any(|j| j.rollouts.is_some())
}

/// A line's group key (`None` when it is not JSON or has none).
pub fn line_group(line: &LineRead, field: &str) -> Option<String> {
    match line {
        LineRead::Text(t) => groups::key_of(&serde_json::from_str::<Json>(t).ok()?, field),
        LineRead::NotUtf8(_) => None,
    }
}

/// `rows` in chunks of `CHUNK`; with `whole_groups`, a chunk that reaches `CHUNK` ends only where
/// the next row starts another group, so that no group is split between chunks.
fn chunks_of<'a, 'r>(rows: &'a [(usize, RowIn<'r>)], whole_groups: Option<&str>) -> Vec<&'a [(usize, RowIn<'r>)]> {
    let Some(field) = whole_groups else { return rows.chunks(CHUNK).collect() };
    let key = |r: &RowIn<'_>| row_value(r).and_then(|v| groups::key_of(v, field));
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=rows.len() {
        let ends = i == rows.len() || (i - start >= CHUNK && key(&rows[i - 1].1) != key(&rows[i].1));
        if ends {
            out.push(&rows[start..i]);
            start = i;
        }
    }
    out
}

/// Every line of `rows` parsed, in parallel: its value, or why it is not JSON (a row that is not
/// a line needs nothing: `None`).
fn parse_lines(rows: &[(usize, RowIn<'_>)]) -> Vec<Option<Result<Json, String>>> {
    rows.par_iter()
        .map(|(_, r)| match r {
            RowIn::Line(line) => Some(parse_row(line).map_err(|e| e.to_string())),
            RowIn::Value(_) | RowIn::Malformed(_) | RowIn::NotUtf8(_) => None,
        })
        .collect()
}

/// `rows` with each line replaced by what [`parse_lines`] made of it.
fn parsed_rows<'a>(rows: &[(usize, RowIn<'a>)], parsed: &'a [Option<Result<Json, String>>]) -> Vec<(usize, RowIn<'a>)> {
    rows.iter()
        .zip(parsed)
        .map(|((i, r), p)| {
            let row = match p {
                Some(Ok(v)) => RowIn::Value(v),
                Some(Err(why)) => RowIn::Malformed(why),
                None => *r,
            };
            (*i, row)
        })
        .collect()
}

#[cfg(test)]
static PARSED_ROWS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A row's line parsed: the only place a row's text becomes JSON (counted in tests).
fn parse_row(line: &str) -> serde_json::Result<Json> {
    #[cfg(test)]
    PARSED_ROWS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    serde_json::from_str(line)
}

/// A row's value, when it is one.
fn row_value<'a>(row: &RowIn<'a>) -> Option<&'a Json> {
    match row {
        RowIn::Value(v) => Some(v),
        RowIn::Line(_) | RowIn::Malformed(_) | RowIn::NotUtf8(_) => None,
    }
}

/// Row `n` (0-based among the non-blank lines, as `rubric run` numbers them) of the rows file
/// at `path`, or `None` when it has fewer rows.
pub fn nth_row(path: &Path, n: usize) -> std::io::Result<Option<LineRead>> {
    let mut reader = BufReader::new(File::open(path)?);
    let (mut seen, mut bytes) = (0, Vec::new());
    while let Some(line) = read_row_line(&mut reader, &mut bytes)? {
        if line.is_blank() {
            continue;
        }
        if seen == n {
            return Ok(Some(line));
        }
        seen += 1;
    }
    Ok(None)
}

/// Every row of the rows file at `path` (its non-blank lines, numbered as `rubric run`
/// numbers them).
pub fn read_rows(path: &Path) -> std::io::Result<Vec<LineRead>> {
    let mut reader = BufReader::new(File::open(path)?);
    let (mut rows, mut bytes) = (Vec::new(), Vec::new());
    while let Some(line) = read_row_line(&mut reader, &mut bytes)? {
        if !line.is_blank() {
            rows.push(line);
        }
    }
    Ok(rows)
}

fn count_rows(path: &Path) -> std::io::Result<u64> {
    let mut reader = BufReader::new(File::open(path)?);
    let (mut n, mut bytes) = (0, Vec::new());
    while let Some(line) = read_row_line(&mut reader, &mut bytes)? {
        if !line.is_blank() {
            n += 1;
        }
    }
    Ok(n)
}

/// One line of a rows file as read: rows are bytes until proven text, so a line that is not
/// UTF-8 is that line's error record (`rubric::row::not_utf8`), never the end of the batch.
#[derive(Debug)]
pub enum LineRead {
    Text(String),
    /// The offset in the line of its first byte that starts no UTF-8 character.
    NotUtf8(usize),
}

impl LineRead {
    fn is_blank(&self) -> bool {
        matches!(self, LineRead::Text(t) if t.trim().is_empty())
    }

    pub fn row(&self) -> RowIn<'_> {
        match self {
            LineRead::Text(t) => RowIn::Line(t),
            LineRead::NotUtf8(at) => RowIn::NotUtf8(*at),
        }
    }
}

/// The next line of `reader` without its line ending (`\n` or `\r\n`), `None` at the end;
/// `bytes` is the reused buffer. Only a failing read is an error.
fn read_row_line(reader: &mut dyn BufRead, bytes: &mut Vec<u8>) -> std::io::Result<Option<LineRead>> {
    bytes.clear();
    if reader.read_until(b'\n', bytes)? == 0 {
        return Ok(None);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    }
    Ok(Some(match std::str::from_utf8(bytes) {
        Ok(text) => LineRead::Text(text.to_owned()),
        Err(e) => LineRead::NotUtf8(e.valid_up_to()),
    }))
}

/// A record as the line the run writes, and the outcome the summary counts: read before `--compact`
/// drops the criteria; the timings, collected for the slow-row report only, are dropped unless
/// the records carry them.
fn written_line(mut r: Json, opts: &RunOptions<'_>) -> (String, RowOutcome) {
    let outcome = RowOutcome::of(&r);
    if !opts.policy.timings {
        if let Some(o) = r.as_object_mut() {
            o.remove("timing");
        }
    }
    if opts.compact {
        compact(&mut r);
    }
    (json_line(&r), outcome)
}

/// Write scored records in order, counting each in the summary and keeping the slowest rows'
/// timings for its report, then flush: records reach the file a chunk at a time.
fn write_records(
    lines: &mut [(String, RowOutcome)],
    summary: &mut Summary,
    slow_rows: usize,
    out: &mut impl Write,
) -> std::io::Result<()> {
    for (line, outcome) in lines.iter_mut() {
        summary.count(outcome);
        summary.keep_slow(outcome.slow.take(), slow_rows);
        out.write_all(line.as_bytes())?;
    }
    out.flush()
}

/// Chunks the pool may score at once on the plain path: the one whose last rows are finishing
/// and the next, so that no worker waits at a chunk's end.
const CHUNKS_IN_FLIGHT: usize = 2;

/// The plain path (no judges, numeric stage, groups, timings or deadline), pipelined: this
/// thread reads a chunk of [`CHUNK`] rows and hands it to the pool, then writes the records of
/// the oldest chunk in flight, in row order, once it is scored; meanwhile the pool scores the
/// chunks in flight, so that reading, writing and the slow last rows of a chunk overlap the
/// scoring of the next. At most [`CHUNKS_IN_FLIGHT`] chunks are scored at once (memory stays
/// bounded), and records, summary and progress are those of scoring chunk by chunk.
#[expect(clippy::too_many_arguments, reason = "the run's state, shared with run_batch_as's own loop")]
fn stream_plain(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    opts: &RunOptions<'_>,
    reader: &mut dyn BufRead,
    skip: usize,
    bar: &indicatif::ProgressBar,
    out: &mut BufWriter<Box<dyn Write>>,
    summary: &mut Summary,
) -> Result<(), RunError> {
    type Lines = Vec<(String, RowOutcome)>;
    let read_err = |e| RunError::Read { path: opts.input.display().to_string(), source: e };
    let write_err = |e| RunError::Write { path: opts.output.display().to_string(), source: e };
    let score = |chunk: Vec<(usize, LineRead)>| -> Lines {
        let rows: Vec<(usize, RowIn<'_>)> = chunk.iter().map(|(i, line)| (*i, line.row())).collect();
        rows.par_iter()
            .map(|(i, row)| score_row_line(engine, program, ident, *i, *row, opts.verdicts, opts.compact))
            .collect()
    };
    let mut write = |mut lines: Lines| -> Result<(), RunError> {
        write_records(&mut lines, summary, opts.slow_rows, out).map_err(write_err)?;
        bar.inc(lines.len() as u64);
        Ok(())
    };
    rayon::in_place_scope(|scope| {
        let mut in_flight: std::collections::VecDeque<std::sync::mpsc::Receiver<Lines>> = Default::default();
        let mut bytes = Vec::new();
        let mut index = 0usize;
        let mut read_all = false;
        while !read_all || !in_flight.is_empty() {
            if !read_all {
                let mut chunk = Vec::with_capacity(CHUNK);
                while chunk.len() < CHUNK {
                    let Some(line) = read_row_line(reader, &mut bytes).map_err(read_err)? else {
                        read_all = true;
                        break;
                    };
                    if line.is_blank() {
                        continue;
                    }
                    if index >= skip {
                        chunk.push((index, line));
                    }
                    index += 1;
                }
                if !chunk.is_empty() {
                    let (tx, rx) = std::sync::mpsc::sync_channel(1);
                    scope.spawn(move |_| {
                        // A receiver gone (a write failed) leaves the records unwritten.
                        let _ = tx.send(score(chunk));
                    });
                    in_flight.push_back(rx);
                }
            }
            if in_flight.len() >= CHUNKS_IN_FLIGHT || (read_all && !in_flight.is_empty()) {
                // A chunk whose scoring panicked sends nothing: the scope's end re-raises it.
                let Some(Ok(lines)) = in_flight.pop_front().map(|rx| rx.recv()) else { break };
                write(lines)?;
            }
        }
        Ok(())
    })
}

/// Run `work` (scoring one chunk) while, on a visible bar, a ticker shows how many of the judge
/// requests planned so far are answered: the bar counts rows a chunk (512) at a time, which
/// judging can take minutes to finish.
fn with_judge_progress<T>(
    bar: &indicatif::ProgressBar,
    judges: Option<&dyn ChunkJudge>,
    work: impl FnOnce() -> T,
) -> T {
    let Some(judges) = judges.filter(|_| !bar.is_hidden()) else { return work() };
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                bar.set_message(judge_progress(&judges.stats()));
                std::thread::park_timeout(std::time::Duration::from_millis(200));
            }
        });
        let out = work();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        bar.set_message(judge_progress(&judges.stats()));
        out
    })
}

/// The bar's judge message from [`ChunkJudge::stats`]: requests answered (by HTTP, a local
/// model, the cache, a replay or an identical earlier request) of the distinct ones planned,
/// and those still in flight or queued.
fn judge_progress(stats: &Json) -> String {
    let n = |k: &str| stats.get(k).and_then(Json::as_u64).unwrap_or(0);
    let planned = n("unique");
    let answered = n("http_requests") + n("local_requests") + n("cache_hits") + n("replayed") + n("memo_hits");
    format!("· judge requests: {answered} of {planned} answered, {} in flight", planned.saturating_sub(answered))
}

/// The run's progress bar: hidden unless `shown` (asked for, and stderr is a terminal).
fn progress_bar(shown: bool, total: Option<u64>) -> indicatif::ProgressBar {
    if !shown {
        return indicatif::ProgressBar::hidden();
    }
    let bar = match total {
        Some(t) => indicatif::ProgressBar::new(t),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let template = match total {
        Some(_) => "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} rows ({per_sec}, eta {eta}) {msg}",
        None => "{spinner} [{elapsed_precise}] {pos} rows ({per_sec}) {msg}",
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(template).unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Evaluate one row value directly (tests, `explain`).
pub fn evaluate_row(
    engine: &dyn Engine,
    program: &Program,
    row: &Json,
    verdicts: &dyn crate::engine::VerdictSource,
) -> Result<RowResult, BindError> {
    let inputs: Vec<Value> = bind_row(program, row)?;
    Ok(engine.evaluate(program, &inputs, verdicts))
}

/// How a chunk is scored by [`score_chunk_results`]: its judges, numeric stage, group field,
/// the rows' deadline and whether records carry timings.
#[derive(Clone, Copy)]
struct Chunked<'a> {
    judges: Option<&'a dyn ChunkJudge>,
    numeric: Option<&'a dyn ChunkNumeric>,
    group_field: Option<&'a str>,
    deadline: Option<std::time::Instant>,
    timings: bool,
}

/// What a criterion's reason says when the row's deadline cut it: a judge call given up, or
/// an execution waited for no longer.
const DEADLINE_REASONS: &[&str] = &["judge_deadline:", "exec_deadline:"];

/// Make `r` a timed-out row when one of its judged criteria was given up at the deadline
/// (`judge_deadline`): score and reward `null`, `unscored_reason` `timeout: ...` naming them.
/// The criteria keep their own reasons. A row the deadline cut nothing from is left as it is,
/// so that a fast batch's records are the records without a deadline.
fn timed_out(r: &mut RowResult, program: &Program) {
    let cut: Vec<&str> = r
        .criteria
        .iter()
        .filter(|c| c.reason.as_deref().is_some_and(|x| DEADLINE_REASONS.iter().any(|p| x.contains(p))))
        .map(|c| &*c.id)
        .collect();
    if cut.is_empty() {
        return;
    }
    let shown: Vec<String> = cut.iter().take(5).map(|id| format!("`{id}`")).collect();
    let more = if cut.len() > 5 { format!(" and {} more", cut.len() - 5) } else { String::new() };
    let why = format!("timeout: the row's deadline passed before it could decide {}{more}", shown.join(", "));
    r.score = None;
    r.unscored_reason = Some(why.clone());
    // not the score expression's: the numeric stage leaves it alone
    r.score_evaluated = false;
    if program.reward.is_some() {
        r.reward = Some(None);
        r.reward_reason = Some(why);
    }
}

/// A chunk evaluated as a whole: prepare every row; evaluate them (with `judges`, together: one
/// round of calls for the whole chunk; else in parallel); let the numeric stage recompute the
/// chunk's scores and group trees (`numeric`); then write each row's record, with the model
/// that answered each dispatched criterion. Under `--groups` (`group_field`), each row's group
/// key goes to the judges (a group judge asks about a group's members together).
fn score_chunk_results(
    engine: &dyn Engine,
    program: &Program,
    ident: &Identity,
    chunk: &[(usize, RowIn<'_>)],
    verdicts: Option<&VerdictFile>,
    how: Chunked<'_>,
) -> Vec<Json> {
    let Chunked { judges, numeric, group_field, deadline, timings } = how;
    let prepared: Vec<Result<PreparedRow, Json>> =
        chunk.par_iter().map(|(i, row)| prepare_contained(program, ident, *i, *row, verdicts)).collect();
    let mut outs = Vec::new();
    let engine = &Contained(engine);
    let judged: Vec<Judged> = match judges {
        Some(judges) => {
            let rows = chunk
                .iter()
                .zip(&prepared)
                .filter_map(|((_, row), p)| {
                    let r = p.as_ref().ok()?;
                    let group = group_field.and_then(|f| groups::key_of(row_value(row)?, f));
                    Some(JudgeRow { inputs: r.inputs.clone(), verdicts: r.verdicts.clone(), group })
                })
                .collect();
            judges.evaluate_chunk(engine, program, rows, deadline)
        }
        None => {
            let rows: Vec<&PreparedRow> = prepared.iter().flatten().collect();
            rows.par_iter()
                .map(|r| {
                    let start = std::time::Instant::now();
                    let result =
                        crate::stdlib::with_row_deadline(deadline, || engine.evaluate(program, &r.inputs, &r.verdicts));
                    let timing =
                        RowTiming { evaluate_ms: start.elapsed().as_secs_f64() * 1000.0, ..RowTiming::default() };
                    Judged { result, models: ModelsByCriterion::new(), timing }
                })
                .collect()
        }
    };
    let mut results = Vec::with_capacity(judged.len());
    let mut models = Vec::with_capacity(judged.len());
    let mut times = Vec::with_capacity(judged.len());
    for j in judged {
        results.push(j.result);
        models.push(j.models);
        times.push(j.timing);
    }
    if deadline.is_some() {
        for r in &mut results {
            timed_out(r, program);
        }
    }
    if let Some(n) = numeric {
        // All or nothing: a failure, or a panic, leaves the chunk's scalar results.
        let scalar = results.clone();
        match catch_unwind(AssertUnwindSafe(|| n.finish_chunk(program, &mut results))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => numeric_warning(&e),
            Err(payload) => {
                results = scalar;
                numeric_warning(&format!("it panicked: {}", panic_message(&*payload)));
            }
        }
    }
    let mut evaluated = results.into_iter().zip(models).zip(times);
    for p in prepared {
        match p {
            Err(record) => outs.push(record),
            Ok(r) => {
                let Some(((result, models), timing)) = evaluated.next() else {
                    outs.push(error_record(r.out, ident, "rubric::row::internal", "the row was not evaluated".into()));
                    continue;
                };
                if let Some(v) = verdicts {
                    v.note_result(&r.verdicts, result.criteria.iter().map(|c| &*c.id));
                }
                let mut record = finish_record(r.out, ident, engine.name(), &result);
                let (mut usd, mut unknown, mut dispatched) = (0.0, 0u64, false);
                if let Some(list) = record.get_mut("criteria").and_then(Json::as_array_mut) {
                    for c in list {
                        let id = c.get("id").and_then(Json::as_str).unwrap_or_default().to_string();
                        if let (Some(d), Some(obj)) = (models.get(&id), c.as_object_mut()) {
                            if !d.models.is_empty() {
                                obj.insert("model".into(), json!(d.models.join(",")));
                            }
                            if !d.cascade.is_empty() {
                                obj.insert("cascade".into(), json!(d.cascade));
                            }
                            match d.cost {
                                CostShare::NotAccounted => {}
                                CostShare::Usd(x) => {
                                    dispatched = true;
                                    usd += x;
                                    obj.insert("cost_usd".into(), json!(x));
                                }
                                CostShare::Unknown => {
                                    dispatched = true;
                                    unknown += 1;
                                    obj.insert("cost_usd".into(), Json::Null);
                                }
                            }
                        }
                    }
                }
                // What the row's verdicts cost (criteria of unknown cost counted apart).
                if let (true, Some(o)) = (dispatched, record.as_object_mut()) {
                    o.insert("cost_usd".into(), json!(usd));
                    if unknown > 0 {
                        o.insert("cost_unknown".into(), json!(unknown));
                    }
                }
                if let (true, Some(o)) = (timings, record.as_object_mut()) {
                    o.insert("timing".into(), timing.to_json());
                }
                outs.push(record);
            }
        }
    }
    outs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// Held by a test that counts parsed rows ([`PARSED_ROWS`], a process-wide counter) and by
    /// the tests that parse rows beside it: the count is then of that test's calls only.
    static COUNTING_PARSES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn failure_codes_come_from_error_records_and_unscored_reasons() {
        assert_eq!(reason_code("no_verdict: judge `g` has no recorded verdict"), "no_verdict");
        assert_eq!(reason_code("rubric::trap::limit: memory limit"), "rubric::trap::limit");
        assert_eq!(reason_code("criterion `a` is unscored (x: y)"), "unscored");
        assert_eq!(reason_code(""), "unscored");
        let o = RowOutcome::of(&json!({"error": {"code": "rubric::row::malformed_json", "message": "m"}}));
        assert_eq!((o.score, o.codes), (Err(()), vec!["rubric::row::malformed_json".to_string()]));
        let o = RowOutcome::of(&json!({"score": 0.5, "criteria": [
            {"status": "met"},
            {"status": "unscored", "reason": "judge_timeout: t"},
            {"status": "unscored", "reason": "judge_timeout: u"},
            {"status": "unscored", "reason": "no_verdict: v"},
        ]}));
        assert_eq!((o.score, o.codes), (Ok(Some(0.5)), vec!["judge_timeout".to_string(), "no_verdict".to_string()]));
        let o = RowOutcome::of(&json!({"score": 1.0, "criteria": [{"status": "met"}, {"status": "skipped"}]}));
        assert!(o.codes.is_empty());
        let o = RowOutcome::of(&json!({"score": 0.0, "criteria": [
            {"status": "unscored", "reason": "gated: gate `g` stopped evaluation before this criterion"},
            {"status": "unscored", "reason": "vote_tie: 2 samples split evenly"},
        ]}));
        assert!(o.codes.is_empty(), "{:?}", o.codes);
        let o = RowOutcome::of(&json!({"score": null, "trap": {"code": "rubric::trap::limit"}, "criteria": []}));
        assert_eq!((o.score, o.codes), (Ok(None), vec!["rubric::trap::limit".to_string()]));
        let mut s = Summary::default();
        for r in
            [json!({"score": 1.0}), json!({"error": {"code": "e"}}), json!({"score": null, "unscored_reason": "x"})]
        {
            s.count(&RowOutcome::of(&r));
        }
        assert_eq!((s.rows, s.scored, s.errors, s.unscored, s.failed_rows), (3, 1, 1, 1, 2));
        assert_eq!(s.top_failures(), vec![("e", 1), ("unscored", 1)]);
    }

    /// A record written straight from its result is the record `score_row` builds, written
    /// out: the same line and the same outcome, on every bundled example's rows (with their
    /// recorded verdicts and without, so that judged criteria are met, unmet and unscored),
    /// rows that fail to bind, malformed lines, traps and every optional field of a result.
    #[test]
    fn records_written_straight_are_the_records_built() {
        // It parses rows: not while `rows_are_parsed_once` counts them.
        let _one = COUNTING_PARSES.lock().unwrap_or_else(|e| e.into_inner());
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut compared = 0;
        let mut dirs: Vec<_> = std::fs::read_dir(&root).expect("examples/").flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs.iter().filter(|d| d.join("main.rubric").is_file() && d.join("inputs.jsonl").is_file()) {
            let c = crate::types::compile_path(&dir.join("main.rubric"));
            let program = c.program.unwrap_or_else(|| panic!("{} compiles", dir.display()));
            let ident = Identity::of(&program, &c.sites).with_rows_file(&dir.join("inputs.jsonl"));
            let text = std::fs::read_to_string(dir.join("inputs.jsonl")).expect("inputs.jsonl");
            let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            lines.extend(["not json", "[1, 2]", "{\"id\": \"empty\"}"]);
            let verdicts = dir.join("verdicts.jsonl");
            let verdicts = verdicts.is_file().then(|| VerdictFile::load(&verdicts).expect("verdicts.jsonl loads"));
            for v in [verdicts.as_ref(), None] {
                for (i, line) in lines.iter().enumerate() {
                    let record = score_row(&crate::interp::Interpreter, &program, &ident, i, RowIn::Line(line), v);
                    let mut compacted = record.clone();
                    compact(&mut compacted);
                    for (built, compact) in [(record_line(&record), false), (record_line(&compacted), true)] {
                        let straight = score_row_line(
                            &crate::interp::Interpreter,
                            &program,
                            &ident,
                            i,
                            RowIn::Line(line),
                            v,
                            compact,
                        );
                        assert_eq!(straight.0, built.0, "{} row {i}, compact {compact}", dir.display());
                        assert_eq!(
                            (straight.1.score, &straight.1.codes),
                            (record_line(&record).1.score, &record_line(&record).1.codes),
                            "{} row {i}",
                            dir.display()
                        );
                    }
                    compared += 1;
                }
            }
        }
        assert!(compared > 100, "only {compared} rows compared");
        // What the examples do not reach: scores, rewards and groups that are unscored or not
        // integers, a trap with and without a site, every optional field of a criterion.
        let mut r = RowResult {
            score: Some(f64::NAN),
            unscored_reason: Some("timeout: the row's deadline passed".into()),
            failure_class: Some("format".into()),
            gates: vec![crate::engine::GateResult {
                name: "g".into(),
                passed: None,
                action: "score",
                value: Some(0.25),
                reason: Some("r".into()),
            }],
            groups: vec![("a".into(), Some(1.0 / 3.0)), ("b".into(), None)],
            trap: Some(TrapInfo { code: "rubric::trap::limit", message: "fuel".into(), site: Some(0) }),
            reward: Some(None),
            reward_reason: Some("penalty unscored".into()),
            scores: vec![
                crate::engine::NamedScoreResult { name: "x".into(), value: Some(-0.0), reason: None },
                crate::engine::NamedScoreResult { name: "y".into(), value: None, reason: Some("no_verdict: j".into()) },
            ],
            over_steps: true,
            ..RowResult::default()
        };
        let full = crate::engine::CriterionResult {
            id: "c".into(),
            text: Some("t".into()),
            kind: "ordinal",
            status: crate::engine::Status::Unscored,
            reason: Some("judge_timeout: 30 s".into()),
            value: None,
            points: Some(-3.5),
            weight: 1e17,
            axis: Some("ax".into()),
            tags: vec!["t1".into()],
            source: "judge:j".into(),
            sets: crate::engine::intern_names(&["s".into()]),
            judged: Some(Box::new(crate::engine::Judged {
                level: Some(2.0),
                label: Some("good".into()),
                evidence: Some("quote \"\u{1}\" é".into()),
                extracted: Some(Box::new(json!({"k": [1, 2.5]}))),
                p_yes: Some(0.125),
                votes: Some(crate::engine::Votes { samples: 5, voted: 4, agreed: 3 }),
                calibrated: Some(crate::engine::Calibrated { p: 0.7, raw: crate::engine::Status::Met }),
                position: Some(2),
                preference: Some(Box::new(crate::engine::Preference {
                    preferred: Some("a".into()),
                    asks: vec![crate::engine::PreferenceAsk { first: None, preferred: Some("tie".into()) }],
                    inconsistent: Some(1),
                })),
                shown: Vec::new(),
            })),
            step: Some(1),
        };
        let met = crate::engine::CriterionResult {
            status: crate::engine::Status::Met,
            value: Some(1.0),
            points: Some(2.0),
            judged: None,
            ..full.clone()
        };
        r.criteria = vec![full, met];
        let sites = SiteTable::new(vec![crate::ir::Site { file: "main".into(), start: 3, end: 9 }]);
        let program =
            crate::types::compile_source("<t>", "rubric t @ 1.0.0\ninput a: Text\ncriterion c \"c\" check a == \"\"\n")
                .program
                .expect("compiles");
        let ident =
            Identity { sites, bundle: Some("sha256:b".into()), ..Identity::of(&program, &SiteTable::default()) };
        for site in [Some(0), None] {
            r.trap.as_mut().expect("trap").site = site;
            let mut out = Map::new();
            out.insert("row".into(), json!(7));
            out.insert("id".into(), json!("r7"));
            let full = finish_record(out.clone(), &ident, "interp", &r);
            let built = record_line(&full);
            let record = RecordLine {
                out: &out,
                ident: &ident,
                engine: "interp",
                result: &r,
                form: crate::engine::RecordForm::Full,
            };
            let straight = serde_json::to_string(&record).expect("serialises") + "\n";
            assert_eq!(straight, built.0);
            // As text, twice: the second time from the criterion texts the first wrote.
            for _ in 0..2 {
                let text = RecordLine { form: crate::engine::RecordForm::Text, ..record };
                assert_eq!(serde_json::to_string(&text).expect("serialises") + "\n", built.0);
            }
            // Compact: `values` where `criteria` was, then the fields after it in their order.
            let mut compacted = full.clone();
            compact(&mut compacted);
            let record = RecordLine { form: crate::engine::RecordForm::Compact, ..record };
            let straight = serde_json::to_string(&record).expect("serialises") + "\n";
            assert_eq!(straight, record_line(&compacted).0);
            let keys: Vec<&str> = compacted.as_object().expect("a record").keys().map(String::as_str).collect();
            let at = |k: &str| keys.iter().position(|x| *x == k);
            assert!(at("gates").is_none() && at("criteria").is_none() && at("groups").is_none(), "{keys:?}");
            assert!(at("failure_class").is_some() && at("trap").is_some(), "{keys:?}");
            assert!(at("failure_class") < at("values") && at("values") < at("step_rewards"), "{keys:?}");
            assert!(at("step_rewards") < at("axes") && at("axes") < at("trap"), "{keys:?}");
            let outcome = RowOutcome::of_result(&r);
            assert_eq!((outcome.score, outcome.codes), (built.1.score, built.1.codes));
        }
    }

    #[test]
    fn the_judge_message_counts_answered_and_in_flight_requests() {
        let stats = json!({"unique": 10, "http_requests": 3, "cache_hits": 2, "memo_hits": 1, "replayed": 0});
        assert_eq!(judge_progress(&stats), "· judge requests: 6 of 10 answered, 4 in flight");
        assert_eq!(judge_progress(&json!({})), "· judge requests: 0 of 0 answered, 0 in flight");
    }

    /// Every row is parsed once, grouped or not; a row given as a value is not parsed at all;
    /// and values and lines give the same records.
    #[test]
    fn rows_are_parsed_once() {
        let c = crate::types::compile_source(
            "<parse-once>",
            "rubric t.parse @ 1.0.0\ninput response: Text\ncriterion long \"Long\" check len(response) > 3\n",
        );
        let (program, sites) = (c.program.expect("compiles"), c.sites);
        let ident = Identity::of(&program, &sites);
        let texts: Vec<String> = (0..40)
            .map(|i| serde_json::json!({"group": i / 4, "response": "x".repeat(i % 7)}).to_string())
            .chain(["not json".to_string()])
            .collect();
        let values: Vec<Json> = texts.iter().filter_map(|t| serde_json::from_str(t).ok()).collect();
        let lines: Vec<(usize, RowIn<'_>)> = texts.iter().enumerate().map(|(i, t)| (i, RowIn::Line(t))).collect();
        let rows: Vec<(usize, RowIn<'_>)> = values.iter().enumerate().map(|(i, v)| (i, RowIn::Value(v))).collect();
        let _one = COUNTING_PARSES.lock().unwrap_or_else(|e| e.into_inner());
        for group in [None, Some("group")] {
            let before = PARSED_ROWS.load(Ordering::SeqCst);
            let from_lines = score_batch(
                &crate::interp::Interpreter,
                &program,
                &ident,
                &lines,
                None,
                None,
                group,
                RowPolicy::default(),
            );
            assert_eq!(PARSED_ROWS.load(Ordering::SeqCst) - before, texts.len(), "{group:?}: lines parsed once each");
            let before = PARSED_ROWS.load(Ordering::SeqCst);
            let from_values = score_batch(
                &crate::interp::Interpreter,
                &program,
                &ident,
                &rows,
                None,
                None,
                group,
                RowPolicy::default(),
            );
            assert_eq!(PARSED_ROWS.load(Ordering::SeqCst), before, "{group:?}: values are not parsed");
            assert_eq!(from_lines.len(), texts.len());
            assert_eq!(from_lines[..values.len()], from_values[..], "{group:?}");
            assert_eq!(from_lines[values.len()]["error"]["code"], "rubric::row::malformed_json");
        }
    }
}
