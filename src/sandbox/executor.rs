//! The process's executor of the `exec` intrinsic: it turns an execution into its result once
//! (identical executions of a run share one result, in flight included), from a replayed
//! transcript, the on-disk cache or the sandbox, on a bounded pool of sandbox slots of its own;
//! it records what it ran. Configured once per process (`rubric ... --allow-exec`); without a
//! configuration nothing is ever executed.
//!
//! An execution's identity is the SHA-256 of everything that determines its result: the
//! runtime (name, command, file name and the identity of its binary), the program, the
//! arguments, stdin, the extra files and the limits, with the sandbox's version. The cache holds
//! one JSON file per identity; a transcript holds one line per execution, `{"exec": HASH,
//! "portable": HASH, "runtime": NAME, "result": {...}}`, where the portable identity leaves out
//! the runtime's binary: a transcript replays on a machine whose `python3` is another build
//! (the point of a transcript is to give the recorded results), the cache never does.

use super::{ExecResult, ExecSpec, Runtime, SandboxError};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};

/// The most output the memo of finished executions holds before it forgets them (a run of many
/// distinct executions with large outputs keeps flat memory).
pub const MEMO_BYTES: usize = 64 << 20;

/// Bumped when the sandbox changes what a program can see or do: cached results of another
/// version are not reused.
pub const SANDBOX_VERSION: &str = "rubric-sandbox/1";

/// How executions are made in this process.
#[derive(Debug, Clone, Default)]
pub struct ExecConfig {
    /// Programs may run in the sandbox (`--allow-exec`). Without it, only a replayed transcript
    /// answers, and an execution it lacks is unscored.
    pub allow: bool,
    /// Sandboxes at once (`--exec-concurrency`); 0: the machine's cores.
    pub concurrency: usize,
    /// The result cache (`--exec-cache DIR`); `None`: no cache (`--no-exec-cache`).
    pub cache: Option<PathBuf>,
    /// Write every execution to this transcript (`--exec-record FILE`).
    pub record: Option<PathBuf>,
    /// Answer executions from this transcript (`--exec-replay FILE`).
    pub replay: Option<PathBuf>,
    /// Runtimes besides the built-in ones, by name.
    pub runtimes: Vec<Runtime>,
    /// Where submission directories (`exec(..., dir: PATH)`) are read from (`--exec-dir-root`);
    /// `None`: nowhere, a `dir` is unscored.
    pub dir_root: Option<PathBuf>,
}

/// What the executor did, for the run report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExecStats {
    /// Programs run in the sandbox.
    pub executed: u64,
    /// Answered by the on-disk cache.
    pub cache_hits: u64,
    /// Answered by the replayed transcript.
    pub replayed: u64,
    /// Asked again in this process: answered by the first asking's result.
    pub deduplicated: u64,
    /// Could not be answered (the sandbox refused or failed, not recorded in the transcript).
    pub failed: u64,
}

/// A result, or why there is none (an `exec_*` reason).
type Outcome = Result<ExecResult, String>;

pub struct Executor {
    config: ExecConfig,
    /// Free sandbox slots (each its own user id as root).
    slots: Mutex<Vec<usize>>,
    freed: Condvar,
    memo: Mutex<HashMap<String, Arc<OnceLock<Outcome>>>>,
    /// Bytes of output the memo's finished results hold (bounded by [`MEMO_BYTES`]).
    memo_bytes: std::sync::atomic::AtomicUsize,
    /// [`MEMO_BYTES`] (smaller in tests).
    memo_limit: usize,
    /// Executions answered from transcripts (`--exec-replay`, an example's `executions.jsonl`),
    /// by identity; `None` when no transcript is replayed.
    replay: RwLock<Option<HashMap<String, ExecResult>>>,
    record: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
    stats: Mutex<ExecStats>,
}

static EXECUTOR: RwLock<Option<Arc<Executor>>> = RwLock::new(None);

/// Set the process's executor (replacing one set before).
pub fn configure(config: ExecConfig) -> Result<(), String> {
    let e = Arc::new(Executor::new(config)?);
    match EXECUTOR.write() {
        Ok(mut slot) => *slot = Some(e),
        Err(poisoned) => *poisoned.into_inner() = Some(e),
    }
    Ok(())
}

/// The process's executor, if one is configured.
pub fn current() -> Option<Arc<Executor>> {
    match EXECUTOR.read() {
        Ok(e) => e.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// The default cache directory: `$XDG_CACHE_HOME/rubric/exec` or `~/.cache/rubric/exec`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("rubric").join("exec"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Executor {
    pub fn new(config: ExecConfig) -> Result<Executor, String> {
        let replay = match &config.replay {
            Some(p) => Some(read_transcript(p)?),
            None => None,
        };
        let record = match &config.record {
            Some(p) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("--exec-record {}: {e}", p.display()))?;
                Some(Mutex::new(std::io::BufWriter::new(f)))
            }
            None => None,
        };
        let n = match config.concurrency {
            0 => std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            n => n,
        };
        Ok(Executor {
            slots: Mutex::new((0..n).rev().collect()),
            freed: Condvar::new(),
            memo: Mutex::new(HashMap::new()),
            memo_bytes: std::sync::atomic::AtomicUsize::new(0),
            memo_limit: MEMO_BYTES,
            replay: RwLock::new(replay),
            record,
            stats: Mutex::new(ExecStats::default()),
            config,
        })
    }

    /// Replay the executions of the transcript at `path` too (identities are content hashes, so
    /// transcripts merge without conflict).
    pub fn add_transcript(&self, path: &Path) -> Result<(), String> {
        let more = read_transcript(path)?;
        let mut replay = self.replay.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        replay.get_or_insert_with(HashMap::new).extend(more);
        Ok(())
    }

    pub fn stats(&self) -> ExecStats {
        *lock(&self.stats)
    }

    /// Whether programs may run in the sandbox.
    pub fn allowed(&self) -> bool {
        self.config.allow
    }

    /// The execution root of submission directories, if the run named one.
    pub fn dir_root(&self) -> Option<&Path> {
        self.config.dir_root.as_deref()
    }

    /// The runtime named `name`: a configured one first, then a built-in one.
    pub fn runtime(&self, name: &str) -> Option<Runtime> {
        self.config.runtimes.iter().find(|r| r.name == name).cloned().or_else(|| super::builtin_runtime(name))
    }

    /// The result of `spec`, or why there is none (`exec_not_allowed: ...`,
    /// `exec_not_recorded: ...`, `exec_unavailable: ...`, `exec_invalid: ...`, `exec_failed: ...`).
    pub fn run(&self, spec: &ExecSpec) -> Outcome {
        let key = identity(spec);
        let (cell, first) = {
            let mut memo = lock(&self.memo);
            match memo.get(&key) {
                Some(c) => (c.clone(), false),
                None => {
                    let c = Arc::new(OnceLock::new());
                    memo.insert(key.clone(), c.clone());
                    (c, true)
                }
            }
        };
        if !first {
            lock(&self.stats).deduplicated += 1;
        }
        let outcome = cell.get_or_init(|| self.resolve(spec, &key)).clone();
        if first {
            self.bound_memo(&outcome);
        }
        outcome
    }

    /// [`Executor::run`] by `deadline` (the row's, `runtime::RowPolicy::deadline`): past it,
    /// `exec_deadline: ...` instead of the result. The execution itself goes on to its own
    /// limits on a thread of its own, and its result is kept (memo, cache, transcript) for
    /// whoever asks for it next: a trainer's retry of the row gets it at once.
    pub fn run_by(self: &Arc<Self>, spec: &ExecSpec, deadline: Option<std::time::Instant>) -> Outcome {
        let Some(deadline) = deadline else { return self.run(spec) };
        let late = || {
            format!(
                "exec_deadline: the row's deadline passed before the `{}` program ended (it runs on to its own \
                 limits; its result is kept for the next asking)",
                spec.runtime.name
            )
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let (me, owned) = (Arc::clone(self), spec.clone());
        let spawned = std::thread::Builder::new().name("rubric-exec".into()).spawn(move || {
            let _ = tx.send(me.run(&owned));
        });
        if let Err(e) = spawned {
            return Err(format!("exec_failed: cannot start a thread for the execution: {e}"));
        }
        rx.recv_timeout(left).unwrap_or_else(|_| Err(late()))
    }

    /// Keep the memo's finished results within [`MEMO_BYTES`] of output: past it, the finished
    /// ones are forgotten (an execution still in flight keeps its entry, so that whoever waits
    /// for it gets its result); later askings go to the cache.
    fn bound_memo(&self, outcome: &Outcome) {
        use std::sync::atomic::Ordering;
        let size = outcome.as_ref().map_or(0, |r| r.stdout.len() + r.stderr.len()) + 256;
        if self.memo_bytes.fetch_add(size, Ordering::Relaxed) + size > self.memo_limit {
            lock(&self.memo).retain(|_, cell| cell.get().is_none());
            self.memo_bytes.store(0, Ordering::Relaxed);
        }
    }

    fn resolve(&self, spec: &ExecSpec, key: &str) -> Outcome {
        let (replayed, replaying) = {
            let replay = self.replay.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let found = replay.as_ref().and_then(|r| r.get(key).or_else(|| r.get(&portable_key(spec))).cloned());
            (found, replay.is_some())
        };
        if let Some(r) = replayed {
            lock(&self.stats).replayed += 1;
            return Ok(r);
        }
        if let Some(r) = self.cached(key) {
            lock(&self.stats).cache_hits += 1;
            self.write_record(key, spec, &r);
            return Ok(r);
        }
        if !self.config.allow {
            lock(&self.stats).failed += 1;
            return Err(if replaying {
                format!(
                    "exec_not_recorded: the replayed transcript has no execution {} of runtime `{}` (run with \
                     `--allow-exec` to run it in the sandbox)",
                    &key[..key.len().min(19)],
                    spec.runtime.name
                )
            } else {
                "exec_not_allowed: this run may not execute programs (run with `--allow-exec` to run them \
                 in the sandbox, or `--exec-replay FILE` to answer from a transcript)"
                    .into()
            });
        }
        let slot = self.take_slot();
        let r = super::run(spec, slot);
        self.give_slot(slot);
        match r {
            Ok(r) => {
                lock(&self.stats).executed += 1;
                self.store(key, &r);
                self.write_record(key, spec, &r);
                Ok(r)
            }
            Err(e) => {
                lock(&self.stats).failed += 1;
                Err(match e {
                    SandboxError::Unavailable(m) => format!("exec_unavailable: {m}"),
                    SandboxError::Invalid(m) => format!("exec_invalid: {m}"),
                    SandboxError::Failed(m) => format!("exec_failed: {m}"),
                })
            }
        }
    }

    fn take_slot(&self) -> usize {
        let mut free = lock(&self.slots);
        loop {
            if let Some(s) = free.pop() {
                return s;
            }
            free = self.freed.wait(free).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn give_slot(&self, slot: usize) {
        lock(&self.slots).push(slot);
        self.freed.notify_one();
    }

    fn cache_path(&self, key: &str) -> Option<PathBuf> {
        let dir = self.config.cache.as_ref()?;
        Some(dir.join(format!("{}.json", key.trim_start_matches("sha256:"))))
    }

    fn cached(&self, key: &str) -> Option<ExecResult> {
        let text = std::fs::read_to_string(self.cache_path(key)?).ok()?;
        let v: Json = serde_json::from_str(&text).ok()?;
        // An entry is its identity and its result; one that does not say so is not used.
        (v.get("exec").and_then(Json::as_str) == Some(key))
            .then(|| serde_json::from_value(v.get("result")?.clone()).ok())
            .flatten()
    }

    /// Write the result to the cache: to a temporary file renamed into place, so that a reader
    /// never sees half an entry. A cache that cannot be written is skipped.
    fn store(&self, key: &str, r: &ExecResult) {
        let Some(path) = self.cache_path(key) else { return };
        let Some(dir) = path.parent() else { return };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), key.trim_start_matches("sha256:")));
        let body = json!({ "exec": key, "result": r }).to_string();
        if std::fs::write(&tmp, body).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    fn write_record(&self, key: &str, spec: &ExecSpec, r: &ExecResult) {
        let Some(w) = &self.record else { return };
        let line =
            json!({ "exec": key, "portable": portable_identity(spec), "runtime": spec.runtime.name, "result": r });
        let mut w = lock(w);
        let _ = writeln!(w, "{line}");
        let _ = w.flush();
    }
}

/// An execution's identity: `sha256:` of its canonical description.
pub fn identity(spec: &ExecSpec) -> String {
    describe(spec, Some(super::runtime_identity(&spec.runtime)))
}

/// An execution's identity without its runtime's binary (what a transcript also replays by).
pub fn portable_identity(spec: &ExecSpec) -> String {
    describe(spec, None)
}

/// The key a portable identity has among a transcript's entries.
fn portable_key(spec: &ExecSpec) -> String {
    format!("portable:{}", portable_identity(spec))
}

fn describe(spec: &ExecSpec, binary: Option<String>) -> String {
    let mut files: Vec<(&str, Json)> = spec
        .files
        .iter()
        .map(|(path, bytes)| {
            // text as itself (the identity of every execution before binary files existed);
            // other bytes by their hash
            let content = match std::str::from_utf8(bytes) {
                Ok(text) => json!(text),
                Err(_) => {
                    json!({ "sha256": Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>() })
                }
            };
            (path.as_str(), content)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(b.0).then_with(|| a.1.to_string().cmp(&b.1.to_string())));
    let doc = json!({
        "sandbox": SANDBOX_VERSION,
        "runtime": {
            "name": spec.runtime.name,
            "command": spec.runtime.command,
            "file": spec.runtime.file,
            "binary": binary,
        },
        "program": spec.program,
        "args": spec.args,
        "stdin": spec.stdin,
        "files": files,
        "limits": spec.limits,
    });
    let digest = Sha256::digest(doc.to_string().as_bytes());
    format!("sha256:{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// A transcript's executions by identity.
fn read_transcript(path: &Path) -> Result<HashMap<String, ExecResult>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--exec-replay {}: {e}", path.display()))?;
    let mut out = HashMap::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |why: String| format!("--exec-replay {} line {}: {why}", path.display(), n + 1);
        let v: Json = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let key = v.get("exec").and_then(Json::as_str).ok_or_else(|| bad("no `exec` identity".into()))?;
        let result = v.get("result").cloned().ok_or_else(|| bad("no `result`".into()))?;
        let result: ExecResult = serde_json::from_value(result).map_err(|e| bad(e.to_string()))?;
        if let Some(p) = v.get("portable").and_then(Json::as_str) {
            out.insert(format!("portable:{p}"), result.clone());
        }
        out.insert(key.to_string(), result);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(program: &str) -> ExecSpec {
        ExecSpec {
            runtime: Runtime {
                name: "sh".into(),
                command: vec!["/bin/sh".into()],
                file: "main.sh".into(),
                read_only: vec![],
            },
            program: program.into(),
            args: vec![],
            stdin: String::new(),
            files: vec![],
            limits: super::super::Limits::default(),
        }
    }

    fn result(stdout: &str) -> ExecResult {
        ExecResult {
            ok: true,
            exit_code: Some(0),
            signal: None,
            stdout: stdout.into(),
            stderr: String::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            timed_out: false,
            out_of_memory: false,
            duration_ms: 1.0,
        }
    }

    /// An executor that replays `entries` (program, stdout), never runs anything.
    fn replaying(entries: &[(&str, &str)], memo_limit: usize) -> Executor {
        let dir = std::env::temp_dir().join(format!("rubric-executor-test-{}-{memo_limit}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let lines: String = entries
            .iter()
            .map(|(p, out)| {
                let s = spec(p);
                format!("{}\n", json!({"exec": identity(&s), "portable": portable_identity(&s), "result": result(out)}))
            })
            .collect();
        std::fs::write(&path, lines).unwrap();
        let mut e = Executor::new(ExecConfig { replay: Some(path), ..ExecConfig::default() }).unwrap();
        e.memo_limit = memo_limit;
        let _ = std::fs::remove_dir_all(&dir);
        e
    }

    #[test]
    fn identical_executions_share_one_result_until_the_memo_is_full() {
        let big = "x".repeat(1000);
        let e = replaying(&[("a", &big), ("b", &big), ("c", &big)], 1 << 20);
        for p in ["a", "b", "a", "a", "c"] {
            assert_eq!(e.run(&spec(p)).unwrap().stdout, big);
        }
        let s = e.stats();
        assert_eq!((s.replayed, s.deduplicated, s.executed), (3, 2, 0));
        // A memo of 2,500 bytes holds two of these: the third empties it, and `a` is asked again.
        let e = replaying(&[("a", &big), ("b", &big), ("c", &big)], 2500);
        for p in ["a", "b", "c", "a"] {
            assert_eq!(e.run(&spec(p)).unwrap().stdout, big);
        }
        let s = e.stats();
        assert_eq!((s.replayed, s.deduplicated), (4, 0));
    }

    #[test]
    fn nothing_runs_without_permission_and_a_transcript_matches_by_portable_identity() {
        let e = replaying(&[("a", "1")], MEMO_BYTES);
        assert!(e.run(&spec("b")).unwrap_err().starts_with("exec_not_recorded"));
        // Recorded on a machine whose runtime binary was another: its full identity differs, the
        // portable one (what was run) is the same, and answers.
        let path = std::env::temp_dir().join(format!("rubric-executor-portable-{}.jsonl", std::process::id()));
        let line =
            json!({"exec": "sha256:elsewhere", "portable": portable_identity(&spec("a")), "result": result("2")});
        std::fs::write(&path, format!("{line}\n")).unwrap();
        let moved = Executor::new(ExecConfig { replay: Some(path.clone()), ..ExecConfig::default() }).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_ne!(identity(&spec("a")), "sha256:elsewhere");
        assert_eq!(moved.run(&spec("a")).unwrap().stdout, "2");
        let none = Executor::new(ExecConfig::default()).unwrap();
        assert!(none.run(&spec("a")).unwrap_err().starts_with("exec_not_allowed"));
        assert_eq!(none.stats().executed, 0);
    }
}
