//! Sandboxed execution of untrusted programs (model output): one program run in isolation on
//! Linux, with limits, and its result. Called by the `exec` intrinsic through
//! [`Executor`] (`stdlib`), never directly by an engine.
//!
//! Layers (docs/sandbox.md, "Code execution"): a dedicated unprivileged user per pool slot
//! (`setpriv`, when `rubric` runs as root) so that the process limit counts only this run's
//! processes; rlimits (`prlimit`: CPU time, address space, processes, file size, open files, no
//! core dumps); bubblewrap (`bwrap`): new user, mount, PID, IPC, UTS, cgroup and network
//! namespaces (no network at all), the runtime's files bound read-only, a private scratch
//! directory as the only writable place, `--die-with-parent`, `--new-session`; a seccomp
//! filter (seccompiler) denying the system calls a program under test never needs; a
//! wall-clock kill of the whole process tree (the PID namespace dies with its first process);
//! output read with a cap (the rest drained and dropped); the scratch directory removed after
//! the run. A machine without `bwrap` or without namespaces gets a clear error, never an
//! unsandboxed run.

use serde::{Deserialize, Serialize};

pub mod executor;

/// The limits of one execution. Every field is part of the execution's identity (its cache key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock time, from the start of the runtime to its exit; past it the whole process tree
    /// is killed and the result is `timed_out`.
    pub wall_ms: u64,
    /// CPU time of each process (RLIMIT_CPU), seconds.
    pub cpu_s: u64,
    /// Address space of each process (RLIMIT_AS), MiB.
    pub memory_mb: u64,
    /// Bytes kept of stdout and of stderr each; the rest is read and dropped (`*_truncated`).
    pub output_bytes: u64,
    /// Processes (RLIMIT_NPROC of the slot's user).
    pub processes: u64,
    /// Largest file a process may write (RLIMIT_FSIZE), MiB.
    pub file_mb: u64,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            wall_ms: 5_000,
            cpu_s: 5,
            memory_mb: 512,
            output_bytes: 1 << 20,
            processes: 64,
            file_mb: 16,
            open_files: 64,
        }
    }
}

/// A runtime: how a program is run. `python3`, `node`, `bash` and `sh` are built in; others come
/// from the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runtime {
    /// The name a rubric uses (`python3`).
    pub name: String,
    /// The command, with its arguments before the program file (`["/usr/bin/python3"]`).
    pub command: Vec<String>,
    /// The program's file name in the scratch directory (`main.py`).
    pub file: String,
    /// Host paths bound read-only into the sandbox, at the same place (`/usr`, `/etc/alternatives`).
    pub read_only: Vec<String>,
}

/// One execution: everything that determines its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecSpec {
    pub runtime: Runtime,
    /// The program text, written to `runtime.file` in the scratch directory.
    pub program: String,
    /// Arguments after the program file.
    pub args: Vec<String>,
    pub stdin: String,
    /// Extra files, relative paths in the scratch directory (no `..`, not absolute) → contents.
    pub files: Vec<(String, String)>,
    pub limits: Limits,
}

/// What an execution did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecResult {
    /// Exited with status 0, within every limit.
    pub ok: bool,
    /// The exit status, when the program exited (not killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended it (`SIGKILL`, `SIGSEGV`, `SIGXCPU`...), if one did.
    pub signal: Option<String>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Ended by the wall-clock limit or the CPU-time limit.
    pub timed_out: bool,
    /// Ended for want of memory (the address-space limit: an allocation failed and the runtime
    /// said so, or the process died of it).
    pub out_of_memory: bool,
    /// Wall-clock milliseconds from spawn to exit.
    pub duration_ms: f64,
}

/// Why an execution could not be run at all (not the program's fault).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxError {
    /// No sandbox on this machine: `bwrap` missing, namespaces refused; the message says how to
    /// get one. Nothing was run.
    #[error("no sandbox: {0}")]
    Unavailable(String),
    /// The spec is not runnable (a file path that escapes the scratch directory, an unknown
    /// runtime).
    #[error("invalid execution: {0}")]
    Invalid(String),
    /// The sandbox failed while running (could not create the scratch directory, spawn...).
    #[error("sandbox failure: {0}")]
    Failed(String),
}

/// Whether this machine can sandbox: `bwrap`, `prlimit` (and `setpriv` as root) are installed and
/// a namespace can be made. Checked once per process.
pub fn available() -> Result<(), SandboxError> {
    Err(SandboxError::Unavailable("not implemented yet".into()))
}

/// The built-in runtime named `name` (`python3`, `node`, `bash`, `sh`), if this machine has it.
pub fn builtin_runtime(name: &str) -> Option<Runtime> {
    let _ = name;
    None
}

/// A stable identity of the runtime's binary for cache keys: its resolved path and a hash of its
/// contents.
pub fn runtime_identity(runtime: &Runtime) -> String {
    runtime.command.first().cloned().unwrap_or_default()
}

/// Run `spec` in the sandbox in pool slot `slot` (each slot its own user id when running as
/// root), blocking until it ends. Leaves no process and no file behind.
pub fn run(spec: &ExecSpec, slot: usize) -> Result<ExecResult, SandboxError> {
    let _ = (spec, slot);
    Err(SandboxError::Unavailable("not implemented yet".into()))
}
