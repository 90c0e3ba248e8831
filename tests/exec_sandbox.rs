//! Sandboxed code execution (`rubric::sandbox::run`, issue #15 item 2): a good program's
//! output, and each escape or abuse attempt contained, with an assertion on its outcome. After
//! every run, nothing is left: no scratch directory of the run's slot and no process of the
//! run (as root: none of the slot's user). The sandbox must be available: these tests fail,
//! never skip, where it is not.

use rubric::sandbox::{self, ExecResult, ExecSpec, Limits, SandboxError};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The slots these tests use, one per test (they run in parallel), clear of low slots other
/// tests may use.
const SLOT: usize = 4_000;

fn spec(runtime: &str, program: &str) -> ExecSpec {
    if let Err(e) = sandbox::available() {
        panic!("the sandbox must be available for these tests (run scripts/install-sandbox.sh): {e}");
    }
    let runtime = sandbox::builtin_runtime(runtime).unwrap_or_else(|| panic!("runtime `{runtime}` is not installed"));
    ExecSpec {
        runtime,
        program: program.into(),
        args: Vec::new(),
        stdin: String::new(),
        files: Vec::new(),
        limits: Limits::default(),
    }
}

/// A word no process but this run's carries on its command line.
fn marker(slot: usize) -> String {
    format!("rubric-exec-test-marker-{}-{slot}", std::process::id())
}

/// Live processes whose command line holds `marker`, and (as root) live processes of `uid`.
fn processes_left(marker: &str, uid: Option<u32>) -> Vec<String> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("").trim().to_string();
        if field("State:").starts_with('Z') {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let real_uid: Option<u32> = field("Uid:").split_whitespace().next().and_then(|u| u.parse().ok());
        if cmdline.contains(marker) || (uid.is_some() && real_uid == uid) {
            left.push(format!("{name}: {cmdline}"));
        }
    }
    left
}

fn scratch_dirs_left(slot: usize) -> Vec<PathBuf> {
    let prefix = format!("rubric-exec-{}-{slot}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Runs `spec` in `SLOT + slot` (with a marker argument) and checks that nothing is left.
fn run_clean(mut spec: ExecSpec, slot: usize) -> ExecResult {
    let slot = SLOT + slot;
    let marker = marker(slot);
    spec.args.push(marker.clone());
    let result = sandbox::run(&spec, slot).unwrap_or_else(|e| panic!("the sandbox failed: {e}"));
    check_clean(slot, &marker);
    result
}

fn check_clean(slot: usize, marker: &str) {
    let left = processes_left(marker, sandbox::slot_uid(slot));
    assert!(left.is_empty(), "processes left after the run: {left:?}");
    let dirs = scratch_dirs_left(slot);
    assert!(dirs.is_empty(), "scratch directories left after the run: {dirs:?}");
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn exec_good_program_prints_and_exits_0() {
    let mut s = spec("python3", "import sys\nprint('hello', sys.argv[1])\nprint('warn', file=sys.stderr)\n");
    s.args = vec!["world".into()];
    let r = run_clean(s, 0);
    assert!(r.ok, "{r:?}");
    assert_eq!((r.exit_code, r.signal.as_deref()), (Some(0), None));
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("hello world\n", "warn\n"));
    assert!(!r.timed_out && !r.out_of_memory && !r.stdout_truncated && !r.stderr_truncated);
    assert!(r.duration_ms > 0.0);

    // as root, the slot's own user; otherwise this user, in a user namespace
    let r = run_clean(spec("sh", "echo \"$HOME\" \"$PWD\" \"$TMPDIR\" \"$(id -u)\"\n"), 0);
    assert!(r.ok, "{r:?}");
    let me = std::fs::metadata("/proc/self").unwrap();
    let uid = sandbox::slot_uid(SLOT).unwrap_or(std::os::unix::fs::MetadataExt::uid(&me));
    assert_eq!(r.stdout, format!("/work /work /work {uid}\n"));

    if sandbox::builtin_runtime("node").is_some() {
        // V8 reserves about 700 MiB of address space as it starts
        let mut s = spec("node", "console.log(6 * 7)\n");
        s.limits.memory_mb = 1024;
        let r = run_clean(s, 0);
        assert!(r.ok && r.stdout == "42\n", "{r:?}");
        let r = run_clean(spec("node", "console.log(6 * 7)\n"), 0);
        assert!(r.out_of_memory && !r.ok, "at the default 512 MiB: {r:?}");
    }
}

#[test]
fn exec_exit_code_3_is_not_ok() {
    let r = run_clean(spec("python3", "import sys\nprint('partial')\nsys.exit(3)\n"), 1);
    assert_eq!(r.exit_code, Some(3));
    assert!(!r.ok && !r.timed_out && !r.out_of_memory && r.signal.is_none(), "{r:?}");
    assert_eq!(r.stdout, "partial\n");
}

#[test]
fn exec_stdin_is_echoed_and_unread_stdin_does_not_block() {
    let mut s = spec("python3", "import sys\nsys.stdout.write(sys.stdin.read().upper())\n");
    s.stdin = "abc\nxyz é\n".into();
    let r = run_clean(s, 2);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.stdout, "ABC\nXYZ É\n");

    // 4 MB on stdin to a program that never reads it: the run ends, the writer does not hang
    let mut s = spec("python3", "print('done')\n");
    s.stdin = "x".repeat(4 << 20);
    let r = run_clean(s, 2);
    assert!(r.ok && r.stdout == "done\n", "{r:?}");
}

#[test]
fn exec_extra_files_are_readable() {
    let mut s = spec("bash", "cat data/in.txt; echo; cat notes.md; ls -a data\n");
    s.files = vec![("data/in.txt".into(), "42".into()), ("notes.md".into(), "# n\n".into())];
    let r = run_clean(s, 3);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.stdout, "42\n# n\n.\n..\nin.txt\n");
}

#[test]
fn exec_failures_of_the_sandbox_and_of_the_program_are_told_apart() {
    // a program that imitates bubblewrap's error is still the program's result
    let r = run_clean(spec("sh", "echo 'bwrap: Creating new namespace failed' >&2\nexit 1\n"), 16);
    assert_eq!((r.exit_code, r.ok), (Some(1), false), "{r:?}");
    // a runtime that cannot be executed inside the sandbox is the sandbox's failure
    let mut s = spec("sh", "exit 0\n");
    s.runtime.command = vec!["/usr/bin/no-such-runtime".into()];
    let slot = SLOT + 16;
    match sandbox::run(&s, slot) {
        Err(SandboxError::Failed(m)) => {
            assert!(m.contains("did not start the program") && m.contains("no-such-runtime"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    check_clean(slot, &marker(slot));
}

#[test]
fn exec_path_traversal_in_files_is_rejected() {
    let escape = format!("rubric-escape-{}", std::process::id());
    let cases = [
        format!("../{escape}"),
        format!("/tmp/{escape}"),
        format!("a/../../{escape}"),
        "a//b".into(),
        "./a".into(),
        String::new(),
    ];
    for path in cases {
        let mut s = spec("python3", "print(1)\n");
        s.files = vec![(path.clone(), "x".into())];
        match sandbox::run(&s, SLOT + 4) {
            Err(SandboxError::Invalid(m)) => assert!(m.contains("path"), "{m}"),
            other => panic!("`{path}` was not rejected: {other:?}"),
        }
    }
    // the program's own file name is checked too
    let mut s = spec("python3", "print(1)\n");
    s.runtime.file = "../main.py".into();
    assert!(matches!(sandbox::run(&s, SLOT + 4), Err(SandboxError::Invalid(_))));
    assert!(!std::env::temp_dir().join(&escape).exists());
    assert!(!PathBuf::from("/").join(&escape).exists());
    check_clean(SLOT + 4, &marker(SLOT + 4));
}

#[test]
fn exec_cannot_reach_the_host_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let program = format!(
        r#"
import socket
for host in ["127.0.0.1", "::1", "10.0.0.1"]:
    try:
        s = socket.create_connection((host, {port}), timeout=2)
        print("connected", host)
    except OSError as e:
        print("failed", host, type(e).__name__)
try:
    socket.getaddrinfo("example.com", 80)
    print("resolved")
except OSError as e:
    print("no dns")
print("interfaces", [n for _, n in socket.if_nameindex()])
"#
    );
    let r = run_clean(spec("python3", &program), 5);
    assert!(r.ok, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", r.stdout);
    for line in &lines[..3] {
        assert!(line.starts_with("failed "), "{}", r.stdout);
    }
    assert_eq!(lines[3], "no dns");
    assert_eq!(lines[4], "interfaces ['lo']");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the host's listener accepted a connection: {other:?}"),
    }
}

#[test]
fn exec_cannot_write_outside_the_scratch_directory() {
    let host_dir = std::env::temp_dir().join(format!("rubric-exec-test-host-{}", std::process::id()));
    std::fs::create_dir_all(&host_dir).unwrap();
    let targets = [
        "/usr/x".to_string(),
        "/tmp/../etc/x".into(),
        "/root/x".into(),
        "/x".into(),
        "/etc/x".into(),
        "/dev/x".into(),
        "/dev/shm/x".into(),
        "/proc/x".into(),
        host_dir.join("x").display().to_string(),
    ];
    let program = format!(
        r#"
for p in {targets:?}:
    try:
        with open(p, "w") as f:
            f.write("x")
        print("wrote", p)
    except OSError as e:
        print("denied", p, type(e).__name__)
with open("/work/ok", "w") as f:
    f.write("fine")
with open("/tmp/also-scratch", "w") as f:
    f.write("fine")
print(open("ok").read(), open("also-scratch").read())
"#
    );
    let r = run_clean(spec("python3", &program), 6);
    assert!(r.ok, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), targets.len() + 1, "{}", r.stdout);
    for (line, target) in lines.iter().zip(&targets) {
        assert!(line.starts_with(&format!("denied {target} ")), "{}", r.stdout);
    }
    assert_eq!(lines[targets.len()], "fine fine");
    assert!(
        !PathBuf::from("/usr/x").exists() && !PathBuf::from("/root/x").exists() && !PathBuf::from("/etc/x").exists()
    );
    assert_eq!(std::fs::read_dir(&host_dir).unwrap().count(), 0);
    std::fs::remove_dir(&host_dir).unwrap();
}

#[test]
fn exec_cannot_read_outside_the_allowed_set() {
    let secret = std::env::temp_dir().join(format!("rubric-exec-test-secret-{}", std::process::id()));
    std::fs::write(&secret, "the host's secret").unwrap();
    let mut targets = vec![
        "/etc/shadow".to_string(),
        "/etc/passwd".into(),
        "/etc/hostname".into(),
        "/root/.bashrc".into(),
        "/home".into(),
        "/sys/kernel/hostname".into(),
        secret.display().to_string(),
    ];
    // this process's environment, by its host process id (unless that is also a process id
    // inside the sandbox: this test binary run as PID 1 of a namespace)
    if std::process::id() > 2 {
        targets.push(format!("/proc/{}/environ", std::process::id()));
    }
    let program = format!(
        r#"
import os
for p in {targets:?}:
    try:
        if os.path.isdir(p):
            print("listed", p, os.listdir(p))
        else:
            print("read", p, open(p).read()[:40])
    except OSError as e:
        print("denied", p, type(e).__name__)
print("pids", sorted(int(n) for n in os.listdir("/proc") if n.isdigit()))
print("root", sorted(os.listdir("/")))
"#
    );
    let r = run_clean(spec("python3", &program), 7);
    std::fs::remove_file(&secret).unwrap();
    assert!(r.ok, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), targets.len() + 2, "{}", r.stdout);
    for (line, target) in lines.iter().zip(&targets) {
        assert!(line.starts_with(&format!("denied {target} ")), "{}", r.stdout);
    }
    // its own PID namespace: bubblewrap's init and the program, nothing of the host
    assert_eq!(lines[targets.len()], "pids [1, 2]");
    assert!(!r.stdout.contains("the host's secret"));
    let root = lines[targets.len() + 1];
    for absent in ["'root'", "'home'", "'sys'", "'var'", "'run'"] {
        assert!(!root.contains(absent), "{root}");
    }
}

#[test]
fn exec_seccomp_filter_and_no_privileges() {
    let program = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(f, *args):
    ctypes.set_errno(0)
    rc = f(*args)
    return "ok" if rc == 0 else os.strerror(ctypes.get_errno())
print("unshare", errno_of(libc.unshare, 0x10000000))
print("ptrace", errno_of(libc.ptrace, 16, 1, 0, 0))
print("mount", errno_of(libc.mount, b"none", b"/work", b"tmpfs", 0, None))
print("bpf", errno_of(libc.syscall, 321, 0, 0, 0))
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
print("seccomp", status["Seccomp"].strip(), "nnp", status["NoNewPrivs"].strip(), "caps", status["CapEff"].strip())
print("fds", sorted(int(n) for n in os.listdir("/proc/self/fd")))
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitpid(pid, 0)[1] >> 8)
"#;
    let r = run_clean(spec("python3", program), 8);
    assert!(r.ok, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "unshare Operation not permitted");
    assert_eq!(lines[1], "ptrace Operation not permitted");
    assert_eq!(lines[2], "mount Operation not permitted");
    assert!(cfg!(not(target_arch = "x86_64")) || lines[3] == "bpf Operation not permitted", "{}", lines[3]);
    assert_eq!(lines[4], "seccomp 2 nnp 1 caps 0000000000000000");
    // 0, 1, 2 and the descriptor listing /proc/self/fd: the filters' descriptors are closed
    assert_eq!(lines[5], "fds [0, 1, 2, 3]");
    assert_eq!(lines[6], "fork 7");
}

#[test]
fn exec_fork_bomb_is_stopped_by_the_process_limit() {
    let program = r#"
import errno, os, time
kids = 0
try:
    while True:
        if os.fork() == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.01)
        kids += 1
except OSError as e:
    print("stopped", e.errno == errno.EAGAIN, kids, flush=True)
"#;
    let mut s = spec("python3", program);
    s.limits.processes = 16;
    s.limits.wall_ms = 10_000;
    let started = Instant::now();
    let r = run_clean(s, 9);
    assert!(started.elapsed() < Duration::from_secs(15));
    let words: Vec<&str> = r.stdout.split_whitespace().collect();
    assert_eq!(words.first().copied(), Some("stopped"), "{r:?}");
    assert_eq!(words[1], "True", "the fork failed with EAGAIN (the process limit)");
    let kids: u64 = words[2].parse().unwrap();
    // not root: the limit also counts this user's other processes, which come and go
    let bound = if sandbox::slot_uid(SLOT).is_some() { 16 } else { 64 };
    assert!(kids < bound, "{kids} children");
    assert!(!r.timed_out && r.exit_code == Some(0), "{r:?}");
}

#[test]
fn exec_memory_bomb_ends_out_of_memory() {
    let program = "hog = []\nwhile True:\n    hog.append(bytearray(8 << 20))\n";
    let mut s = spec("python3", program);
    s.limits.memory_mb = 256;
    let r = run_clean(s, 10);
    assert!(r.out_of_memory, "{r:?}");
    assert!(!r.ok && !r.timed_out, "{r:?}");
    assert!(r.stderr.contains("MemoryError"), "{}", r.stderr);
}

#[test]
fn exec_infinite_loop_times_out_within_the_limit_and_a_margin() {
    let mut s = spec("python3", "while True:\n    pass\n");
    s.limits.wall_ms = 1_000;
    let started = Instant::now();
    let r = run_clean(s, 11);
    let elapsed = started.elapsed();
    assert!(r.timed_out && !r.ok && !r.out_of_memory, "{r:?}");
    assert_eq!(r.signal.as_deref(), Some("SIGKILL"));
    assert!(r.duration_ms >= 1_000.0 && r.duration_ms < 2_500.0, "{} ms", r.duration_ms);
    assert!(elapsed < Duration::from_millis(2_500), "{elapsed:?} including the cleanup");
}

#[test]
fn exec_cpu_limit_ends_as_timed_out() {
    // the CPU-time limit (1 s) comes before the wall-clock limit (20 s)
    let mut s = spec("python3", "while True:\n    pass\n");
    s.limits.cpu_s = 1;
    s.limits.wall_ms = 20_000;
    let r = run_clean(s, 12);
    assert!(r.timed_out && !r.ok, "{r:?}");
    assert_eq!(r.signal.as_deref(), Some("SIGXCPU"));
    assert!(r.duration_ms < 10_000.0, "{} ms", r.duration_ms);
}

#[test]
fn exec_file_size_and_open_files_limits() {
    let program = r#"
import errno
try:
    open("big", "wb").write(b"x" * (2 << 20))
    print("wrote")
except OSError as e:
    print("file", errno.errorcode[e.errno])
files = []
try:
    while True:
        files.append(open("main.py"))
except OSError as e:
    print("open", errno.errorcode[e.errno], len(files))
"#;
    let mut s = spec("python3", program);
    s.limits.file_mb = 1;
    s.limits.open_files = 16;
    let r = run_clean(s, 17);
    assert!(r.ok, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "file EFBIG");
    let words: Vec<&str> = lines[1].split(' ').collect();
    assert_eq!(words[..2], ["open", "EMFILE"]);
    assert!(words[2].parse::<u32>().unwrap() < 16, "{}", lines[1]);
}

#[test]
fn exec_100_mb_of_stdout_is_truncated_without_holding_it() {
    let program = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.buffer.write(chunk)\nsys.stderr.write('e' * 3000)\n";
    let mut s = spec("python3", program);
    s.limits.output_bytes = 1 << 20;
    s.limits.wall_ms = 20_000;
    let before = peak_rss_kib();
    let r = run_clean(s, 13);
    let grew_mib = (peak_rss_kib() - before) / 1024;
    assert!(r.ok, "exit {:?} {:?} {}", r.exit_code, r.signal, r.stderr);
    assert_eq!(r.stdout.len(), 1 << 20);
    assert!(r.stdout_truncated);
    assert_eq!((r.stderr.len(), r.stderr_truncated), (3000, false));
    // had the 100 MiB been held, the peak would have grown by more than 100 MiB
    assert!(grew_mib < 64, "peak resident memory grew by {grew_mib} MiB");
}

#[test]
fn exec_leftover_checks_see_what_a_run_leaves_while_it_runs() {
    // the checks of `check_clean` are not vacuous: during a run they see its scratch directory
    // and its processes
    let slot = SLOT + 15;
    let marker = marker(slot);
    let mut s = spec("bash", "sleep 1\n");
    s.args.push(marker.clone());
    let running = std::thread::spawn(move || sandbox::run(&s, slot));
    let until = Instant::now() + Duration::from_secs(5);
    let (mut saw_dir, mut saw_process) = (false, false);
    while !(saw_dir && saw_process) && Instant::now() < until && !running.is_finished() {
        saw_dir |= !scratch_dirs_left(slot).is_empty();
        saw_process |= !processes_left(&marker, sandbox::slot_uid(slot)).is_empty();
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = running.join().unwrap().unwrap();
    assert!(r.ok, "{r:?}");
    assert!(saw_dir && saw_process, "saw the scratch directory: {saw_dir}, a process: {saw_process}");
    check_clean(slot, &marker);
}

#[test]
fn exec_leaves_no_process_and_no_file_behind() {
    // a daemon in its own session that outlives the program, files in the scratch directory,
    // and a directory the program makes unreadable
    let program = r#"
import os, sys
os.makedirs("deep/er", exist_ok=True)
open("deep/er/f", "w").write("x" * 1000)
os.chmod("deep/er", 0)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        import time
        time.sleep(1000)
    os._exit(0)
os.wait()
print("daemon started")
"#;
    let r = run_clean(spec("python3", program), 14);
    assert!(r.ok && r.stdout == "daemon started\n", "{r:?}");

    // the same after a wall-clock kill
    let mut s = spec("bash", "(while true; do sleep 1; done) &\nwhile true; do sleep 1; done\n");
    s.limits.wall_ms = 500;
    let r = run_clean(s, 14);
    assert!(r.timed_out, "{r:?}");
}
