//! Sandboxed execution of untrusted programs (model output): one program run in isolation on
//! Linux, with limits, and its result. Called by the `exec` intrinsic through
//! [`Executor`] (`stdlib`), never directly by an engine.
//!
//! Layers (docs/sandbox.md, "Code execution"): every inherited descriptor closed; a dedicated
//! unprivileged user per pool slot (when `rubric` runs as root) so that the process limit
//! counts only this run's processes, with no groups and no inheritable capabilities; rlimits
//! (CPU time, address space, processes, file size, open files, no core dumps), all three set in
//! the child between `fork` and `exec` (`child.rs`, the sandbox's only `unsafe`); bubblewrap (`bwrap`): new user, mount, PID, IPC, UTS, cgroup and network
//! namespaces (no network at all), the runtime's files bound read-only, a private scratch
//! directory as the only writable place, `--die-with-parent`, `--new-session`; a seccomp
//! filter (seccompiler) denying the system calls a program under test never needs; a
//! wall-clock kill of the whole process tree (the PID namespace dies with its first process);
//! output read with a cap (the rest drained and dropped); the scratch directory removed after
//! the run. A machine without `bwrap` or without namespaces gets a clear error, never an
//! unsandboxed run.
//!
//! The Linux implementation is `linux.rs` (probe, command line, run), `child.rs` (the child's
//! setup before `exec`), `seccomp.rs` (the filters) and `scratch.rs` (the scratch directory);
//! this file is the portable API.

#[cfg(all(feature = "exec", target_os = "linux"))]
mod child;
#[cfg(all(feature = "exec", target_os = "linux"))]
mod linux;
#[cfg(all(feature = "exec", target_os = "linux"))]
mod scratch;
#[cfg(all(feature = "exec", target_os = "linux"))]
mod seccomp;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod executor;
pub mod submission;

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
    /// Processes (RLIMIT_NPROC of the slot's user; threads count too, bubblewrap's own two
    /// processes are added).
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
    /// Extra files, relative paths in the scratch directory (no `..`, not absolute) → contents
    /// (the `files` of a call as UTF-8, a submission directory's as they are on disk).
    pub files: Vec<(String, Vec<u8>)>,
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

/// The user id of pool slot 0 when `rubric` runs as root; slot N runs as `SLOT_UID_BASE + N`.
/// These ids must belong to no one else on the machine (the process limit counts every process
/// of the user).
pub const SLOT_UID_BASE: u32 = 60_000;

/// Slots are `0..MAX_SLOTS` (their users stay below 65,000 and `nobody`).
pub const MAX_SLOTS: usize = 5_000;

/// Whether this machine can sandbox: `bwrap` (and `sh`, for the probe) are installed and a
/// trivial program runs in a sandbox. Checked once per process; the error says
/// what is missing. Nothing ever runs unsandboxed.
pub fn available() -> Result<(), SandboxError> {
    #[cfg(all(feature = "exec", target_os = "linux"))]
    return linux::available();
    #[cfg(not(all(feature = "exec", target_os = "linux")))]
    return Err(unsupported());
}

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`), for
/// processes that own their whole life, such as the `rubric` command: bubblewrap exits as
/// soon as the program's status is known, leaving its PID namespace's init to exit a moment
/// later as an orphan. Reparented here, it is reaped at once by the run that made it; left to
/// the host's PID 1 (a library inside someone else's process does not change who reaps), it
/// waits as a zombie of the slot's user until PID 1 reaps it, which some container inits do
/// late or never. Failure is ignored: runs then allow for such zombies (docs/sandbox.md).
pub fn adopt_orphans() {
    #[cfg(all(feature = "exec", target_os = "linux"))]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

#[cfg(not(all(feature = "exec", target_os = "linux")))]
fn unsupported() -> SandboxError {
    SandboxError::Unavailable(if cfg!(target_os = "linux") {
        "this build of rubric has no `exec` feature".into()
    } else {
        "sandboxed execution needs Linux (user namespaces, bubblewrap)".into()
    })
}

/// The user id that `run` uses for `slot`: `Some(SLOT_UID_BASE + slot)` when `rubric` runs as
/// root (and those ids exist in its user namespace), `None` when it runs as an ordinary user
/// (then programs run as that user, in a user namespace) or cannot sandbox at all.
pub fn slot_uid(slot: usize) -> Option<u32> {
    #[cfg(all(feature = "exec", target_os = "linux"))]
    if linux::slot_users() && slot < MAX_SLOTS {
        return u32::try_from(slot).ok().map(|s| SLOT_UID_BASE + s);
    }
    let _ = slot;
    None
}

/// A runtime given as `NAME:FILE:COMMAND [ARG...]` (`--exec-runtime`): the program is written to
/// `FILE` and run as `COMMAND ARG... FILE` with the system's read-only paths. The command must be
/// an absolute path (nothing is looked up in `PATH`).
pub fn parse_runtime(text: &str) -> Result<Runtime, String> {
    let bad = |why: &str| format!("--exec-runtime `{text}`: {why} (write NAME:FILE:COMMAND [ARG...])");
    let mut parts = text.splitn(3, ':');
    let (Some(name), Some(file), Some(command)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("three parts separated by `:` are needed"));
    };
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return Err(bad("the name is letters, digits, `.`, `_` and `-`"));
    }
    let file = file.trim();
    if file.is_empty() || file.contains('/') || file.starts_with('.') {
        return Err(bad("the file is a plain file name"));
    }
    let command: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    match command.first() {
        Some(c) if Path::new(c).is_absolute() && Path::new(c).is_file() => {}
        Some(c) => return Err(bad(&format!("`{c}` is not an absolute path to a file"))),
        None => return Err(bad("the command is empty")),
    }
    Ok(Runtime { name: name.into(), command, file: file.into(), read_only: system_read_only() })
}

/// The read-only binds every built-in runtime has: `/usr`, `/etc/alternatives` and
/// `/etc/ld.so.cache` where they exist, and `/bin`, `/sbin`, `/lib*` where they are
/// directories (not links into `/usr`).
pub(crate) fn system_read_only() -> Vec<String> {
    let mut out: Vec<String> = ["/usr", "/etc/alternatives", "/etc/ld.so.cache"]
        .into_iter()
        .filter(|p| Path::new(p).exists())
        .map(String::from)
        .collect();
    for name in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        if std::fs::symlink_metadata(name).is_ok_and(|m| m.is_dir()) {
            out.push(name.into());
        }
    }
    out
}

/// The first of `paths` that is a file.
fn first_file(paths: &[&str]) -> Option<String> {
    paths.iter().find(|p| Path::new(p).is_file()).map(|p| p.to_string())
}

/// The built-in runtime named `name` (`python3`, `node`, `bash`, `sh`), if this machine has it:
/// Python in isolated mode without bytecode files (`-I -B`, `main.py`), Node (`main.js`), bash
/// and sh (`main.sh`), each with [`system_read_only`] binds.
pub fn builtin_runtime(name: &str) -> Option<Runtime> {
    let (command, file) = match name {
        "python3" => {
            let exe = first_file(&["/usr/bin/python3"])?;
            (vec![exe, "-I".into(), "-B".into()], "main.py")
        }
        "node" => (vec![first_file(&["/usr/bin/node", "/usr/bin/nodejs"])?], "main.js"),
        "bash" => (vec![first_file(&["/usr/bin/bash", "/bin/bash"])?], "main.sh"),
        "sh" => (vec![first_file(&["/usr/bin/sh", "/bin/sh"])?], "main.sh"),
        _ => return None,
    };
    Some(Runtime { name: name.into(), command, file: file.into(), read_only: system_read_only() })
}

/// A stable identity of the runtime's binary, for cache keys: the resolved path of its command
/// and the SHA-256 of that file (`/usr/bin/python3.11 sha256:...`). Hashed once per process and
/// again only when the file's size or modification time changes. Only the binary: a library or
/// module it loads from the read-only paths is not part of it. A binary that cannot be read
/// gives `PATH unreadable: ERROR`, which matches no readable binary.
pub fn runtime_identity(runtime: &Runtime) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Seen = HashMap<PathBuf, (u64, Option<std::time::SystemTime>, String)>;
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();

    let Some(command) = runtime.command.first() else { return format!("runtime `{}` has no command", runtime.name) };
    let resolved = match std::fs::canonicalize(command) {
        Ok(p) => p,
        Err(e) => return format!("{command} unreadable: {e}"),
    };
    let meta = match std::fs::metadata(&resolved) {
        Ok(m) => m,
        Err(e) => return format!("{} unreadable: {e}", resolved.display()),
    };
    let stamp = (meta.len(), meta.modified().ok());
    let seen = SEEN.get_or_init(Mutex::default);
    if let Some((len, modified, hash)) = seen.lock().unwrap_or_else(|e| e.into_inner()).get(&resolved) {
        if (*len, *modified) == stamp {
            return format!("{} {hash}", resolved.display());
        }
    }
    let hash = match sha256_of(&resolved) {
        Ok(h) => h,
        Err(e) => return format!("{} unreadable: {e}", resolved.display()),
    };
    seen.lock().unwrap_or_else(|e| e.into_inner()).insert(resolved.clone(), (stamp.0, stamp.1, hash.clone()));
    format!("{} {hash}", resolved.display())
}

fn sha256_of(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::fmt::Write as _;
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    let mut out = String::from("sha256:");
    for b in hasher.finalize() {
        let _ = write!(out, "{b:02x}");
    }
    Ok(out)
}

/// Run `spec` in the sandbox in pool slot `slot` (each slot its own user id when running as
/// root), blocking until it ends. Leaves no process and no file behind: the scratch directory
/// (`rubric-exec-PID-SLOT-N` under the temporary directory) is removed and, as root, nothing of
/// the slot's user still runs when this returns. A slot must not be used by two runs at once.
pub fn run(spec: &ExecSpec, slot: usize) -> Result<ExecResult, SandboxError> {
    #[cfg(all(feature = "exec", target_os = "linux"))]
    return linux::run(spec, slot);
    #[cfg(not(all(feature = "exec", target_os = "linux")))]
    {
        let _ = (spec, slot);
        Err(unsupported())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_runtimes_name_absolute_commands_and_read_only_usr() {
        assert!(builtin_runtime("cobol").is_none());
        for name in ["python3", "node", "bash", "sh"] {
            if let Some(r) = builtin_runtime(name) {
                assert_eq!(r.name, name);
                assert!(r.command[0].starts_with('/'));
                assert!(r.read_only.iter().any(|p| p == "/usr"));
            }
        }
    }

    #[test]
    fn runtime_identity_is_stable_and_names_the_content() {
        let sh =
            Runtime { name: "sh".into(), command: vec!["/bin/sh".into()], file: "main.sh".into(), read_only: vec![] };
        let a = runtime_identity(&sh);
        assert_eq!(a, runtime_identity(&sh));
        assert!(a.contains(" sha256:") && a.len() > 64, "{a}");
        let missing = Runtime { command: vec!["/no/such/binary".into()], ..sh };
        assert!(runtime_identity(&missing).contains("unreadable"));
    }
}
