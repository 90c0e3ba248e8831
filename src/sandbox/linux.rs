//! The Linux sandbox behind [`super::run`] (`exec` feature): the machine probed once per
//! process, the command line built (`bwrap` → the runtime, its first process set up between
//! `fork` and `exec` by [`super::child`]: the slot's user when root, inherited descriptors
//! closed, rlimits), the program run with its output capped and a wall-clock kill of its
//! process tree, and nothing left behind.

use super::child::{self, ChildSetup, Rlimits};
use super::scratch::Scratch;
use super::{seccomp, ExecResult, ExecSpec, Limits, Runtime, SandboxError, MAX_SLOTS, SLOT_UID_BASE};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The user the probe runs as when `rubric` is root (just below the slots' users).
const PROBE_UID: u32 = SLOT_UID_BASE - 1;

/// Where the tools are looked for, in order (not `PATH`: the same tool on every run).
const TOOL_DIRS: &[&str] = &["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"];

/// Top-level names that merged-`/usr` systems make links into `/usr`; the same links are
/// made in the sandbox.
const USR_LINKS: &[&str] = &["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Bytes of the end of stderr kept (beyond the capped output) to recognise an out-of-memory
/// message printed after the cap.
const STDERR_TAIL: usize = 4096;

/// What the probe found: the tools and the seccomp filters, ready for every run.
struct Machine {
    /// Each slot runs as its own user (`rubric` is root): see [`slot_users`].
    slot_users: bool,
    bwrap: PathBuf,
    /// The seccomp programs, in unlinked files held open for the life of the process; each run
    /// opens them again through `/proc/self/fd/N` and gives bubblewrap those descriptors.
    filters: Vec<File>,
}

static MACHINE: OnceLock<Result<Machine, String>> = OnceLock::new();

fn machine() -> Result<&'static Machine, SandboxError> {
    MACHINE.get_or_init(probe).as_ref().map_err(|e| SandboxError::Unavailable(e.clone()))
}

pub(super) fn available() -> Result<(), SandboxError> {
    machine().map(|_| ())
}

/// Whether runs use a user per slot: `rubric` is root and the slots' user ids exist in its user
/// namespace (not so in a rootless container, where root is an ordinary user outside: then it
/// runs as that user, like any non-root user).
pub(super) fn slot_users() -> bool {
    static SLOT_USERS: OnceLock<bool> = OnceLock::new();
    *SLOT_USERS.get_or_init(|| {
        let (low, high) = (u64::from(PROBE_UID), u64::from(SLOT_UID_BASE) + MAX_SLOTS as u64);
        nix::unistd::geteuid().is_root()
            && fs::read_to_string("/proc/self/uid_map").is_ok_and(|map| {
                map.lines().any(|l| {
                    let n: Vec<u64> = l.split_whitespace().filter_map(|w| w.parse().ok()).collect();
                    n.len() == 3 && n[0] <= low && high <= n[0].saturating_add(n[2])
                })
            })
    })
}

pub(super) fn run(spec: &ExecSpec, slot: usize) -> Result<ExecResult, SandboxError> {
    let m = machine()?;
    if slot >= MAX_SLOTS {
        return Err(SandboxError::Invalid(format!("slot {slot} is out of range (fewer than {MAX_SLOTS})")));
    }
    if !m.slot_users {
        return execute(m, spec, &slot.to_string(), None);
    }
    // A slot's user id must run one program on the whole machine at a time (the process limit
    // counts its processes, and the cleanup kills every one of them): other `rubric` processes
    // use slots too, so the slot is claimed machine-wide, from `slot` on, for the run.
    let (slot, _claim) = claim_slot(slot)?;
    let uid = u32::try_from(slot).ok().map(|s| SLOT_UID_BASE + s);
    execute(m, spec, &slot.to_string(), uid)
}

/// Where slots are claimed: one lock file per slot, the same path for every process of the
/// machine whatever its `TMPDIR` (only root uses it, with slot users).
const CLAIMS: &str = "/tmp/rubric-exec-slots";

/// Claim the user of slot `name` for this process: an exclusive lock on its file, held while
/// the returned file is open. With `wait`, block until it is free; else `None` when another
/// process holds it.
fn claim_user(name: &str, wait: bool) -> Result<Option<fs::File>, SandboxError> {
    let failed = |e: io::Error| SandboxError::Failed(format!("cannot claim sandbox slot {name} in {CLAIMS}: {e}"));
    fs::create_dir_all(CLAIMS).map_err(failed)?;
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(Path::new(CLAIMS).join(format!("{name}.lock")))
        .map_err(failed)?;
    if wait {
        f.lock().map_err(failed)?;
        return Ok(Some(f));
    }
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(failed(e)),
    }
}

/// The first slot from `from` (wrapping) that no process of the machine holds, claimed.
fn claim_slot(from: usize) -> Result<(usize, fs::File), SandboxError> {
    for k in 0..MAX_SLOTS {
        let slot = (from + k) % MAX_SLOTS;
        if let Some(f) = claim_user(&slot.to_string(), false)? {
            return Ok((slot, f));
        }
    }
    Err(SandboxError::Failed(format!("all {MAX_SLOTS} sandbox slots of this machine are in use")))
}

fn find_tool(name: &str) -> Option<PathBuf> {
    TOOL_DIRS.iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// Finds the tools, writes the filters, and runs a trivial program in a sandbox: only if it
/// prints what it should is the machine usable.
fn probe() -> Result<Machine, String> {
    let root = slot_users();
    let need = |name: &str, package: &str| {
        find_tool(name).ok_or_else(|| {
            format!(
                "`{name}` is not installed (package `{package}`); run scripts/install-sandbox.sh \
                 (Debian and Ubuntu: `apt-get install {package}`)"
            )
        })
    };
    let bwrap = need("bwrap", "bubblewrap")?;
    let shell = need("sh", "dash")?;
    let filters = seccomp::programs()?
        .iter()
        .enumerate()
        .map(|(i, program)| filter_file(i, program))
        .collect::<Result<Vec<_>, _>>()?;
    let machine = Machine { slot_users: root, bwrap, filters };
    let spec = ExecSpec {
        runtime: Runtime {
            name: "sh".into(),
            command: vec![shell.to_string_lossy().into_owned()],
            file: "probe.sh".into(),
            read_only: super::system_read_only(),
        },
        program: "echo ok\n".into(),
        args: Vec::new(),
        stdin: String::new(),
        files: Vec::new(),
        limits: Limits { wall_ms: 30_000, ..Limits::default() },
    };
    let uid = root.then_some(PROBE_UID);
    // Another process may be probing with the same user id at this moment: one at a time.
    let _claim = match root {
        true => Some(claim_user("probe", true).map_err(|e| e.to_string())?),
        false => None,
    };
    match execute(&machine, &spec, "probe", uid) {
        Ok(r) if r.ok && r.stdout == "ok\n" => Ok(machine),
        Ok(r) => Err(format!(
            "bubblewrap could not run a program (are user namespaces disabled? \
             see `sysctl kernel.unprivileged_userns_clone` and `user.max_user_namespaces`): \
             exit {}, stderr: {}",
            r.exit_code.map_or_else(|| r.signal.unwrap_or_default(), |c| c.to_string()),
            r.stderr.trim()
        )),
        Err(e) => Err(format!("bubblewrap could not run a program: {e}")),
    }
}

/// A seccomp program in a file only this process can reach: created private, written, unlinked
/// at once, and kept open.
fn filter_file(i: usize, program: &[u8]) -> Result<File, String> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("rubric-seccomp-{}-{i}-{nanos}", std::process::id()));
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("could not write the seccomp filter `{}`: {e}", path.display()))?;
    let written = file.write_all(program);
    let _ = fs::remove_file(&path);
    written.map_err(|e| format!("could not write the seccomp filter `{}`: {e}", path.display()))?;
    Ok(file)
}

fn execute(m: &Machine, spec: &ExecSpec, slot: &str, uid: Option<u32>) -> Result<ExecResult, SandboxError> {
    let runtime = &spec.runtime;
    let invalid = |why: String| Err(SandboxError::Invalid(why));
    match runtime.command.first() {
        None => return invalid(format!("runtime `{}` has no command", runtime.name)),
        Some(c) if !c.starts_with('/') => {
            return invalid(format!("runtime `{}`: the command `{c}` must be an absolute path", runtime.name))
        }
        Some(_) => {}
    }
    for p in &runtime.read_only {
        if !p.starts_with('/') || p.split('/').any(|c| c == "..") {
            return invalid(format!("runtime `{}`: read-only path `{p}` must be absolute, without `..`", runtime.name));
        }
    }
    let mut files = vec![(runtime.file.as_str(), spec.program.as_bytes())];
    files.extend(spec.files.iter().map(|(p, c)| (p.as_str(), c.as_slice())));
    let scratch = Scratch::create(slot, uid, &files)?;
    let mut attempt = 0;
    let result = loop {
        let nproc = match uid {
            // the slot's user runs nothing else but, perhaps, the zombies of earlier runs'
            // namespace inits that the host's PID 1 has not reaped yet (see `adopt_orphans`),
            // counted only when a first start failed for the limit
            Some(uid) if attempt > 0 => tasks_of(uid).saturating_add(spec.limits.processes),
            Some(_) => spec.limits.processes,
            // RLIMIT_NPROC counts every process and thread of the user
            None => tasks_of(nix::unistd::getuid().as_raw()).saturating_add(spec.limits.processes),
        }
        // bwrap's own two processes (outside and as the PID namespace's init)
        .saturating_add(2);
        match run_in(m, spec, &scratch, uid, nproc) {
            // the user's other processes (not root), or zombies of earlier runs (root), left
            // bubblewrap no room to start: count them, and again
            Ok(Started::Not(why)) if attempt < 3 && why.contains("Resource temporarily unavailable") => {
                attempt += 1;
                thread::sleep(Duration::from_millis(20 * attempt));
            }
            Ok(Started::Not(why)) => break Err(SandboxError::Failed(why)),
            Ok(Started::Ran(r, ended)) => break Ok((r, ended)),
            Err(e) => break Err(e),
        }
    };
    let ended = match (uid, &result) {
        // the PID namespace's init exited, which the kernel allows only once every other
        // process of the namespace is gone: nothing of the run is left
        (_, Ok((_, true))) | (None, _) => Ok(()),
        (Some(uid), _) => end_processes_of(uid),
    };
    let removed = scratch.remove();
    let (result, _) = result?;
    ended?;
    removed?;
    Ok(result)
}

/// The rlimits of a run whose user may have `nproc` processes and threads.
fn rlimits(l: &Limits, nproc: u64) -> Rlimits {
    let mib = 1u64 << 20;
    Rlimits {
        // SIGXCPU at the limit, SIGKILL a second later if the program ignores it
        cpu_s: l.cpu_s,
        address_space: l.memory_mb.saturating_mul(mib),
        processes: nproc,
        file_size: l.file_mb.saturating_mul(mib),
        open_files: l.open_files,
    }
}

/// bubblewrap's arguments; `filters` and `status` are the descriptor numbers of the seccomp
/// programs and of the status pipe.
fn bwrap_args(runtime: &Runtime, scratch: &Path, filters: &[i32], status: i32) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&dyn AsRefOs]| a.extend(items.iter().map(|i| i.os()));
    push(&[&"--unshare-all", &"--die-with-parent", &"--new-session", &"--hostname", &"rubric"]);
    // no capability even where the sandbox's user is root of its namespace (rubric run as root
    // inside a rootless container), where bubblewrap would otherwise keep them
    push(&[&"--cap-drop", &"ALL"]);
    for p in &runtime.read_only {
        push(&[&"--ro-bind-try", p, p]);
    }
    for name in USR_LINKS {
        let host = Path::new("/").join(name);
        if runtime.read_only.iter().any(|p| Path::new(p) == host) {
            continue;
        }
        if let Ok(target) = fs::read_link(&host) {
            push(&[&"--symlink", &target, &host]);
        }
    }
    push(&[&"--proc", &"/proc", &"--dev", &"/dev", &"--bind", &scratch, &"/work"]);
    if !runtime.read_only.iter().any(|p| p == "/tmp") {
        // programs that write to /tmp write to the scratch directory
        push(&[&"--symlink", &"work", &"/tmp"]);
    }
    push(&[&"--chdir", &"/work", &"--remount-ro", &"/dev", &"--remount-ro", &"/"]);
    push(&[&"--clearenv", &"--setenv", &"PATH", &"/usr/local/bin:/usr/bin:/bin"]);
    push(&[&"--setenv", &"HOME", &"/work", &"--setenv", &"TMPDIR", &"/work", &"--setenv", &"LANG", &"C.UTF-8"]);
    for fd in filters {
        push(&[&"--add-seccomp-fd", &fd.to_string()]);
    }
    push(&[&"--json-status-fd", &status.to_string()]);
    a
}

/// Anything that is an OS string, for building argument lists of mixed types.
trait AsRefOs {
    fn os(&self) -> OsString;
}
impl<T: AsRef<std::ffi::OsStr> + ?Sized> AsRefOs for T {
    fn os(&self) -> OsString {
        self.as_ref().to_os_string()
    }
}

/// What a reader thread kept of a stream.
#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    truncated: bool,
    /// The last [`STDERR_TAIL`] bytes of the stream, when they were not all kept.
    tail: Vec<u8>,
}

/// Reads `r` to its end, keeping the first `cap` bytes (and the last few); the rest is read
/// and dropped, so the writer never blocks and memory stays bounded.
fn read_capped(mut r: impl Read, cap: usize) -> Captured {
    let mut out = Captured::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        let room = cap.saturating_sub(out.kept.len());
        out.kept.extend_from_slice(&chunk[..room.min(n)]);
        if n > room {
            out.truncated = true;
            out.tail.extend_from_slice(chunk);
            let excess = out.tail.len().saturating_sub(STDERR_TAIL);
            out.tail.drain(..excess);
        }
    }
    out
}

/// A thread reading `r` with [`read_capped`]; it says on `closed` when the stream has ended.
fn reader<R: Read + Send + 'static>(
    r: Option<R>,
    cap: usize,
    name: &str,
    closed: &mpsc::Sender<()>,
) -> io::Result<Option<JoinHandle<Captured>>> {
    r.map(|r| {
        let closed = closed.clone();
        thread::Builder::new().name(name.into()).spawn(move || {
            let captured = read_capped(r, cap);
            let _ = closed.send(());
            captured
        })
    })
    .transpose()
}

fn joined(h: Option<JoinHandle<Captured>>) -> Captured {
    h.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// Kept bytes as text: cut back to a whole character when the cap split one, then lossy UTF-8.
fn text(kept: &[u8], truncated: bool) -> String {
    let mut end = kept.len();
    if truncated {
        if let Err(e) = std::str::from_utf8(kept) {
            if e.error_len().is_none() {
                end = e.valid_up_to();
            }
        }
    }
    String::from_utf8_lossy(&kept[..end]).into_owned()
}

/// Whether bubblewrap executed the program.
enum Started {
    /// It did, with this result; and whether the end of the PID namespace (so of every process
    /// of the run) was seen.
    Ran(ExecResult, bool),
    /// It did not (what it said): a failure of the sandbox, not of the program.
    Not(String),
}

fn run_in(
    m: &Machine,
    spec: &ExecSpec,
    scratch: &Scratch,
    uid: Option<u32>,
    nproc: u64,
) -> Result<Started, SandboxError> {
    let limits = &spec.limits;
    // bubblewrap's status (`--json-status-fd`): it reports an exit code only if the program was
    // executed, and no process inside the sandbox holds this pipe, so a program cannot pass
    // itself off as a sandbox that failed to start, nor the reverse
    let (status_reader, status_writer) =
        io::pipe().map_err(|e| SandboxError::Failed(format!("could not make a pipe: {e}")))?;
    // each filter opened afresh for this run (its own offset: bubblewrap reads it to its end,
    // and runs at once must not share a file position)
    let opened = m
        .filters
        .iter()
        .map(|f| File::open(format!("/proc/self/fd/{}", f.as_raw_fd())))
        .collect::<io::Result<Vec<File>>>()
        .map_err(|e| SandboxError::Failed(format!("could not open the seccomp filter: {e}")))?;
    let filters: Vec<i32> = opened.iter().map(AsRawFd::as_raw_fd).collect();
    let status = status_writer.as_raw_fd();
    let mut cmd = Command::new(&m.bwrap);
    cmd.args(bwrap_args(&spec.runtime, scratch.path(), &filters, status)).arg("--");
    cmd.args(&spec.runtime.command).arg(&spec.runtime.file).args(&spec.args);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // its own process group, so that the whole tree outside the PID namespace can be killed
        .process_group(0);
    if let Some(uid) = uid {
        // also clears the supplementary groups (std does when root and none are given)
        cmd.uid(uid).gid(uid);
    }
    let keep = filters.iter().copied().chain([status]).collect();
    child::install(&mut cmd, ChildSetup { limits: rlimits(limits, nproc), keep });

    let start = Instant::now();
    let mut child =
        cmd.spawn().map_err(|e| SandboxError::Failed(format!("could not start `{}`: {e}", m.bwrap.display())))?;
    // From here on the child is always waited for.
    let cap = usize::try_from(limits.output_bytes).unwrap_or(usize::MAX);
    let (closed_tx, closed_rx) = mpsc::channel();
    let threads = (|| -> io::Result<_> {
        let stdout: Option<ChildStdout> = child.stdout.take();
        let stderr: Option<ChildStderr> = child.stderr.take();
        let out = reader(stdout, cap, "exec-stdout", &closed_tx)?;
        let err = reader(stderr, cap, "exec-stderr", &closed_tx)?;
        let input = spec.stdin.as_bytes().to_vec();
        let writer = child
            .stdin
            .take()
            // no input: the pipe is closed at once (no thread)
            .filter(|_| !input.is_empty())
            // a program that never reads its stdin ends the write with EPIPE: ignored
            .map(|mut w| thread::Builder::new().name("exec-stdin".into()).spawn(move || drop(w.write_all(&input))))
            .transpose()?;
        Ok((out, err, writer))
    })();
    let (out, err, writer) = match threads {
        Ok(t) => t,
        Err(e) => {
            let _ = kill_tree(&mut child);
            return Err(SandboxError::Failed(format!("could not start the output threads: {e}")));
        }
    };

    let deadline = start + Duration::from_millis(limits.wall_ms);
    // Both output streams end when every process holding them has exited: bubblewrap, the
    // namespace's init and the program (and whatever it started, killed with the namespace).
    // Waiting for that wakes at once when a run ends, with no polling; a program that closes
    // its output and runs on is then waited for by polling, up to the deadline.
    let streams = usize::from(out.is_some()) + usize::from(err.is_some());
    for _ in 0..streams {
        if closed_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).is_err() {
            break;
        }
    }
    let (status, wall_killed) = wait_until(&mut child, deadline)
        .map_err(|e| SandboxError::Failed(format!("could not wait for the program: {e}")))?;
    let duration = start.elapsed();
    // every other writer of the status pipe has exited: it reads to its end
    drop(status_writer);
    let mut status_json = String::new();
    let _ = status_reader.take(1 << 16).read_to_string(&mut status_json);
    let ended = child_pid(&status_json).is_some_and(await_namespace_end);
    let out = joined(out);
    let err = joined(err);
    if let Some(w) = writer {
        let _ = w.join();
    }
    if !wall_killed && !status_json.contains("\"exit-code\"") {
        return Ok(Started::Not(format!(
            "the sandbox did not start the program ({status}): {}",
            text(&err.kept, err.truncated).trim()
        )));
    }

    let (exit_code, signal) = exit_of(status);
    let signal_name =
        signal.map(|n| Signal::try_from(n).map_or_else(|_| format!("signal {n}"), |s| s.as_str().to_string()));
    let cpu_killed = signal == Some(Signal::SIGXCPU as i32)
        || (signal == Some(Signal::SIGKILL as i32) && duration >= Duration::from_secs(limits.cpu_s));
    let timed_out = wall_killed || cpu_killed;
    let out_of_memory = !timed_out && exit_code != Some(0) && says_out_of_memory(&err.kept, &err.tail);
    Ok(Started::Ran(
        ExecResult {
            ok: exit_code == Some(0) && !timed_out && !out_of_memory,
            exit_code,
            signal: signal_name,
            stdout: text(&out.kept, out.truncated),
            stderr: text(&err.kept, err.truncated),
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            timed_out,
            out_of_memory,
            duration_ms: duration.as_secs_f64() * 1000.0,
        },
        ended,
    ))
}

/// The program's exit code or signal from bubblewrap's status. bubblewrap exits with the
/// program's code, or 128 + N when the program died of signal N (as shells do), so an exit
/// code of 129 to 192 is read as a signal; bubblewrap itself killed is its own signal.
fn exit_of(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    match (status.code(), status.signal()) {
        (Some(c), _) if (129..=192).contains(&c) => (None, Some(c - 128)),
        (Some(c), _) => (Some(c), None),
        (None, s) => (None, s),
    }
}

/// The `"child-pid"` of bubblewrap's status: the PID namespace's init, as this process sees it.
fn child_pid(status_json: &str) -> Option<i32> {
    let rest = &status_json[status_json.find("\"child-pid\"")? + "\"child-pid\"".len()..];
    let digits = rest.trim_start_matches([':', ' ']);
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Waits (up to 5 s) until the PID namespace's init has exited, which the kernel allows only
/// once every other process of the namespace is gone. bubblewrap exits as soon as its init
/// reports the program's status, so the init may still be exiting when bubblewrap has been
/// reaped. The init is then an orphan, reaped by the host's PID 1 (or the nearest subreaper);
/// when that is this process, it is reaped here. Only a process that is a namespace's init
/// (its `NSpid` ends in 1) and this process's child is ever reaped. Whether the end was seen
/// (false when its status could not be read, or after 5 s).
fn await_namespace_end(init: i32) -> bool {
    let me = std::process::id().to_string();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let status = match fs::read_to_string(format!("/proc/{init}/status")) {
            Ok(status) => status,
            // gone, and reaped
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(_) => return false,
        };
        let nspid: Vec<&str> = status_field(&status, "NSpid:").unwrap_or("").split_whitespace().collect();
        if nspid.len() < 2 || nspid.last() != Some(&"1") {
            // gone, and its process id already reused
            return true;
        }
        if status_field(&status, "State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
            if status_field(&status, "PPid:") == Some(me.as_str()) {
                let _ = nix::sys::wait::waitpid(Pid::from_raw(init), Some(nix::sys::wait::WaitPidFlag::WNOHANG));
            }
            return true;
        }
        // it usually ends within a millisecond of bubblewrap
        let waited = until.saturating_duration_since(Instant::now());
        thread::sleep(Duration::from_micros(if waited > Duration::from_millis(4998) { 50 } else { 200 }));
    }
    false
}

/// Case-insensitive markers of a runtime's out-of-memory error in stderr.
const OOM_MARKERS: &[&str] = &[
    "memoryerror",            // Python
    "heap out of memory",     // Node: "JavaScript heap out of memory"
    "out of memory",          // Go, V8 ("Fatal process out of memory"), many C programs
    "process oom",            // V8: "Fatal process OOM in Failed to reserve virtual memory"
    "bad_alloc",              // C++: std::bad_alloc
    "cannot allocate memory", // strerror(ENOMEM)
    "memory allocation of",   // Rust: "memory allocation of N bytes failed"
    "cannot allocate",        // bash: "xmalloc: cannot allocate N bytes"
];

fn says_out_of_memory(kept: &[u8], tail: &[u8]) -> bool {
    let start = kept.len().saturating_sub(STDERR_TAIL);
    [&kept[start..], tail].iter().any(|b| {
        let s = String::from_utf8_lossy(b).to_lowercase();
        OOM_MARKERS.iter().any(|m| s.contains(m))
    })
}

/// Waits for the child until `deadline`, then kills its tree; `true` when it was killed.
fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<(ExitStatus, bool)> {
    // Most programs under test end within tens of milliseconds: poll every 200 µs for the
    // first 100 ms (a `waitpid` each, cheap), then back off to 10 ms.
    let started = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status, false));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok((kill_tree(child)?, true));
        }
        thread::sleep(pause.min(deadline - now));
        if now - started > Duration::from_millis(100) {
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }
}

/// Kills the program's whole tree and reaps bubblewrap. The PID namespace's init (bubblewrap's
/// child) is killed first, so the kernel kills every process in the namespace and bubblewrap
/// reaps its child and exits; if bubblewrap has not exited a second later (or has no child
/// yet), its process group is killed. The child is unreaped while this runs, so its process
/// id (and group id) cannot name another process.
fn kill_tree(child: &mut Child) -> io::Result<ExitStatus> {
    let Ok(pid) = i32::try_from(child.id()) else {
        child.kill()?;
        return child.wait();
    };
    let inits: Vec<i32> = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default();
    for &init in &inits {
        let _ = kill(Pid::from_raw(init), Signal::SIGKILL);
    }
    if !inits.is_empty() {
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            thread::sleep(Duration::from_millis(2));
        }
    }
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    child.wait()
}

/// One line of a `/proc/PID/status` file.
fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim)
}

/// `(pid, threads)` of each process whose real or effective user is `uid`; zombies (which
/// still count against RLIMIT_NPROC until reaped) only if `zombies`.
fn processes_of(uid: u32, zombies: bool) -> Vec<(i32, u64)> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(status) = fs::read_to_string(entry.path().join("status")) else { continue };
        let mut ids = status_field(&status, "Uid:").unwrap_or("").split_whitespace();
        let (real, effective) = (ids.next(), ids.next());
        if real != Some(uid.to_string().as_str()) && effective != Some(uid.to_string().as_str()) {
            continue;
        }
        if !zombies && status_field(&status, "State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
            continue;
        }
        let threads = status_field(&status, "Threads:").and_then(|t| t.parse().ok()).unwrap_or(1);
        out.push((pid, threads));
    }
    out
}

/// Processes and threads of `uid` now (what RLIMIT_NPROC counts).
fn tasks_of(uid: u32) -> u64 {
    processes_of(uid, true).iter().map(|(_, t)| t).sum()
}

/// Root only: kills whatever still runs as the slot's user and waits until nothing does
/// (a tree killed a moment ago may still be exiting).
fn end_processes_of(uid: u32) -> Result<(), SandboxError> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_of(uid, false);
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(SandboxError::Failed(format!(
                "processes of the slot's user {uid} remain after the run: {:?}",
                left.iter().map(|(p, _)| p).collect::<Vec<_>>()
            )));
        }
        for (pid, _) in left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_dropped_and_the_tail_kept() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let c = read_capped(&data[..], 1000);
        assert_eq!(c.kept, &data[..1000]);
        assert!(c.truncated);
        assert_eq!(c.tail, &data[data.len() - STDERR_TAIL..]);
        let c = read_capped(&data[..10], 10);
        assert!(!c.truncated && c.kept.len() == 10 && c.tail.is_empty());
    }

    #[test]
    fn text_cut_inside_a_character_ends_before_it() {
        let bytes = "aé".as_bytes();
        assert_eq!(text(&bytes[..2], true), "a");
        assert_eq!(text(bytes, false), "aé");
        assert_eq!(text(b"a\xffb", false), "a\u{fffd}b");
    }

    #[test]
    fn exit_codes_past_128_are_signals() {
        let s = |raw| ExitStatus::from_raw(raw);
        assert_eq!(exit_of(s(3 << 8)), (Some(3), None));
        assert_eq!(exit_of(s(137 << 8)), (None, Some(9)));
        assert_eq!(exit_of(s(9)), (None, Some(9)));
    }

    #[test]
    fn child_pid_is_read_from_the_status() {
        assert_eq!(child_pid("{ \"child-pid\": 4242 }\n{ \"exit-code\": 0 }\n"), Some(4242));
        assert_eq!(child_pid("{ \"exit-code\": 0 }\n"), None);
    }

    #[test]
    fn out_of_memory_markers() {
        assert!(says_out_of_memory(b"Traceback ...\nMemoryError\n", b""));
        assert!(says_out_of_memory(b"", b"terminate called after throwing an instance of 'std::bad_alloc'"));
        assert!(!says_out_of_memory(b"ValueError: nope", b""));
    }

    #[test]
    fn bubblewrap_is_given_each_filter_and_the_status_by_number() {
        let runtime = Runtime { name: "x".into(), command: vec!["/bin/x".into()], file: "m".into(), read_only: vec![] };
        let args: Vec<String> = bwrap_args(&runtime, Path::new("/s"), &[5, 9], 12)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let line = args.join(" ");
        assert!(line.ends_with("--add-seccomp-fd 5 --add-seccomp-fd 9 --json-status-fd 12"), "{line}");
        assert!(line.contains("--unshare-all") && line.contains("--bind /s /work"), "{line}");
    }

    #[test]
    fn rlimits_in_the_kernel_units() {
        let l = Limits { memory_mb: 512, file_mb: 2, cpu_s: 3, open_files: 40, ..Limits::default() };
        let r = rlimits(&l, 66);
        assert_eq!((r.cpu_s, r.address_space, r.processes), (3, 512 << 20, 66));
        assert_eq!((r.file_size, r.open_files), (2 << 20, 40));
    }
}
