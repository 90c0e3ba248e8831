//! `rubric bench-exec`: executions per second through the sandbox against plain spawning of the
//! same runtime on the same program, measured in the same run: a trivial Python program and one
//! that runs a unit-test suite. Both sides write the program to a fresh directory, spawn the
//! runtime with the input on stdin, read its output and remove the directory; the sandbox side
//! adds the namespaces, rlimits, seccomp filter and the kill of its process tree. No cache: every
//! execution really runs.

use crate::sandbox::{self, ExecSpec, Limits};
use std::io::Write;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// The benchmark's settings.
pub struct ExecBench {
    /// Executions per side and program.
    pub runs: usize,
}

/// A program that runs a suite of 40 unit tests of a small function.
const SUITE: &str = r"import unittest

def add(a, b):
    return a + b

class T(unittest.TestCase):
    pass

for i in range(40):
    setattr(T, 'test_%d' % i, lambda self, i=i: self.assertEqual(add(i, i), 2 * i))

unittest.main(argv=['x'], exit=True, verbosity=0)
";

pub fn run(b: &ExecBench) -> ExitCode {
    if let Err(e) = sandbox::available() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let Some(runtime) = sandbox::builtin_runtime("python3") else {
        eprintln!("error: no python3 runtime on this machine");
        return ExitCode::from(2);
    };
    let runs = b.runs.max(1);
    outln!("bench-exec: {runs} executions per side, one at a time, runtime `python3` ({})", runtime.command.join(" "));
    outln!("{:<12} {:>14} {:>14} {:>8}", "program", "plain exec/s", "sandbox exec/s", "ratio");
    for (name, program) in [("trivial", "print(1)\n"), ("unit tests", SUITE)] {
        let spec = ExecSpec {
            runtime: runtime.clone(),
            program: program.to_string(),
            args: Vec::new(),
            stdin: String::new(),
            files: Vec::new(),
            limits: Limits::default(),
        };
        // One of each first, unmeasured: the page cache holds the runtime on both sides.
        if let Err(e) = plain(&spec).and(sandbox::run(&spec, 0).map_err(|e| e.to_string()).map(|_| ())) {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
        let start = Instant::now();
        for _ in 0..runs {
            if let Err(e) = plain(&spec) {
                eprintln!("error: plain spawn: {e}");
                return ExitCode::from(1);
            }
        }
        let plain_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        for _ in 0..runs {
            match sandbox::run(&spec, 0) {
                Ok(r) if r.ok => {}
                Ok(r) => {
                    eprintln!("error: the program failed in the sandbox: {}", r.stderr);
                    return ExitCode::from(1);
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        let sandboxed_s = start.elapsed().as_secs_f64();
        outln!(
            "{name:<12} {:>14.1} {:>14.1} {:>7.2}x",
            runs as f64 / plain_s,
            runs as f64 / sandboxed_s,
            sandboxed_s / plain_s
        );
    }
    outln!("ratio: the sandbox's time per execution over plain spawning's (target <= 1.5x)");
    ExitCode::SUCCESS
}

/// The program run the plain way: written to a fresh directory, the runtime spawned there with
/// stdin, its output read, the directory removed.
fn plain(spec: &ExecSpec) -> Result<(), String> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("rubric-bench-plain-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = (|| {
        std::fs::write(dir.join(&spec.runtime.file), &spec.program).map_err(|e| e.to_string())?;
        let (cmd, args) = spec.runtime.command.split_first().ok_or("an empty runtime command")?;
        let mut child = Command::new(cmd)
            .args(args)
            .arg(&spec.runtime.file)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(spec.stdin.as_bytes());
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr)))
        }
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
