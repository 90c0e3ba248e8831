//! Code execution: `exec` runs a program (text from the response, a code block) with a declared
//! runtime in the sandbox (`sandbox`: namespaces, rlimits, seccomp, no network) through the
//! process's executor, which answers identical executions once, from its cache or a replayed
//! transcript. Without `--allow-exec` (or a transcript that has it) nothing is run and the
//! result is unscored with the reason, never a silent failure.

use super::{list_arg, num_arg, text_arg, Intrinsic, Trap, TrapKind};
use crate::stdlib::EvalCtx;
use crate::value::{Record, Value};
use std::sync::Arc;

pub(super) const EXEC: Intrinsic = Intrinsic {
    name: "exec",
    sig: "(runtime: Text, program: Text, stdin: Text = \"\", args: List[Text]? = null, files: Json? = null, \
          timeout_ms: Number = 5000, memory_mb: Number = 512, output_kb: Number = 1024, processes: Number = 64, \
          dir: Text? = null) \
          -> {ok: Bool, exit_code: Number?, signal: Text?, stdout: Text, stderr: Text, stdout_truncated: Bool, \
          stderr_truncated: Bool, timed_out: Bool, out_of_memory: Bool, duration_ms: Number, \
          limits: {wall_ms: Number, cpu_s: Number, memory_mb: Number, output_bytes: Number, processes: Number, \
          file_mb: Number, open_files: Number}}",
    doc: "Runs `program` with `runtime` (`\"python3\"`, `\"node\"`, `\"bash\"`, `\"sh\"`, or one the \
          configuration adds) in the sandbox: its own user, mount, PID, IPC and network namespaces (no \
          network), a scratch directory as the only writable place, limits on wall time (`timeout_ms`), CPU \
          time, address space (`memory_mb`), kept output (`output_kb` of stdout and of stderr each), \
          processes, file size and open files, and a seccomp filter. `stdin` is its standard input, `args` \
          its arguments, `files` a JSON object of extra files (relative path → text) written beside it, \
          `dir` a submission directory on disk whose files (bytes and all) are written beside it too: a path \
          relative to the execution root the run names (`--exec-dir-root`), with no `..`, no symbolic link \
          and at most 10,000 files and 64 MiB. The \
          result is a record: `ok` (exit 0 within every limit), `exit_code`, `signal`, `stdout`, `stderr` \
          (with `*_truncated`), `timed_out`, `out_of_memory`, `duration_ms` and the `limits` it ran under. \
          A run executes programs only with `--allow-exec` (`rubric run`, `test`, `serve`); identical \
          executions run once, and are answered from the execution cache or a transcript \
          (`--exec-replay`). An execution that cannot be made (not allowed, no sandbox on this machine, \
          an unknown runtime, a file path outside the scratch directory, a `dir` outside the execution root or \
          without one) is unscored with the reason \
          (`exec_not_allowed`, `exec_unavailable`, ...), so checks on it are unscored, never false.",
    examples: &[
        r##"exec("python3", "print(6 * 7)").stdout == "42\n""##,
        r##"exec("python3", "import sys; sys.exit(3)").exit_code == 3"##,
        r##"exec("sh", "read x; echo \"got $x\"", stdin: "hi").stdout == "got hi\n""##,
        r##"exec("python3", "while True: pass", timeout_ms: 500).timed_out"##,
    ],
    imp: exec,
};

#[cfg(all(feature = "exec", target_os = "linux"))]
fn exec(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    use crate::sandbox::{executor, ExecSpec, Limits};
    let name = text_arg(a, 0)?;
    let program = text_arg(a, 1)?.to_string();
    let stdin = text_arg(a, 2)?.to_string();
    let args = match a.get(3) {
        None | Some(Value::Null) => Vec::new(),
        Some(_) => list_arg(a, 3)?
            .iter()
            .map(|v| v.as_text().map(str::to_string).ok_or_else(|| bad("`args` is a list of texts")))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let files = match a.get(4) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Json(j)) => match j.as_ref() {
            serde_json::Value::Null => Vec::new(),
            serde_json::Value::Object(o) => o
                .iter()
                .map(|(k, v)| match v.as_str() {
                    Some(t) => Ok((k.clone(), t.as_bytes().to_vec())),
                    None => Err(bad(&format!("`files`: the content of `{k}` is not text"))),
                })
                .collect::<Result<Vec<_>, _>>()?,
            other => return Err(bad(&format!("`files` is a JSON object of path → text, not `{other}`"))),
        },
        Some(other) => return Err(bad(&format!("`files` is a JSON object of path → text, not `{other}`"))),
    };
    let whole = |i: usize, what: &str, lo: f64, hi: f64| -> Result<u64, Trap> {
        let x = num_arg(a, i)?;
        if x.fract() != 0.0 || !(lo..=hi).contains(&x) {
            return Err(bad(&format!("`{what}` is a whole number from {lo} to {hi}, not {x}")));
        }
        Ok(x as u64)
    };
    let wall_ms = whole(5, "timeout_ms", 1.0, 600_000.0)?;
    let limits = Limits {
        wall_ms,
        cpu_s: wall_ms.div_ceil(1000),
        memory_mb: whole(6, "memory_mb", 16.0, 65_536.0)?,
        output_bytes: whole(7, "output_kb", 1.0, 1_048_576.0)? * 1024,
        processes: whole(8, "processes", 1.0, 4096.0)?,
        ..Limits::default()
    };
    let Some(ex) = executor::current() else {
        return Ok(unscored("exec_not_allowed: this run may not execute programs (run with `--allow-exec`)"));
    };
    let Some(runtime) = ex.runtime(name) else {
        return Ok(unscored(&format!(
            "exec_runtime: no runtime `{name}` on this machine (built in: python3, node, bash, sh; more in the \
             configuration)"
        )));
    };
    let mut files = files;
    match a.get(9) {
        None | Some(Value::Null) => {}
        Some(_) => {
            let dir = text_arg(a, 9)?;
            let Some(root) = ex.dir_root() else {
                return Ok(unscored(&format!(
                    "exec_dir: `{dir}` cannot be read: this run names no execution root for submission \
                     directories (`--exec-dir-root DIR`)"
                )));
            };
            match crate::sandbox::submission::read(root, dir) {
                Ok(found) => {
                    // held for the call: the row's memory budget counts it
                    ctx.reserve(found.iter().map(|(p, c)| p.len() + c.len()).sum())?;
                    files.extend(found);
                }
                Err(why) => return Ok(unscored(&format!("exec_dir: {why}"))),
            }
        }
    }
    let spec = ExecSpec { runtime, program, args, stdin, files, limits };
    // The row's own time limit does not count the time its executions take: each has its own.
    let started = std::time::Instant::now();
    let outcome = ex.run_by(&spec, crate::stdlib::row_deadline());
    ctx.budget.pause(started.elapsed());
    match outcome {
        Ok(r) => {
            let bytes = r.stdout.len() + r.stderr.len();
            ctx.reserve(bytes)?;
            ctx.work(bytes)?;
            Ok(record(&r, &limits))
        }
        Err(reason) => Ok(unscored(&reason)),
    }
}

#[cfg(not(all(feature = "exec", target_os = "linux")))]
fn exec(_: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    Ok(unscored("exec_unavailable: this build of rubric runs no programs (it was built without the `exec` feature, or not for Linux)"))
}

fn bad(why: &str) -> Trap {
    Trap::new(TrapKind::InvalidArgument, format!("exec: {why}"))
}

fn unscored(reason: &str) -> Value {
    Value::Unscored(Arc::from(reason))
}

/// The result as the language sees it.
#[cfg(all(feature = "exec", target_os = "linux"))]
fn record(r: &crate::sandbox::ExecResult, l: &crate::sandbox::Limits) -> Value {
    let n = |x: u64| Value::Number(x as f64);
    let text = |t: &str| Value::text(t);
    let limits: Record = [
        ("wall_ms", n(l.wall_ms)),
        ("cpu_s", n(l.cpu_s)),
        ("memory_mb", n(l.memory_mb)),
        ("output_bytes", n(l.output_bytes)),
        ("processes", n(l.processes)),
        ("file_mb", n(l.file_mb)),
        ("open_files", n(l.open_files)),
    ]
    .into_iter()
    .map(|(k, v)| (Arc::from(k), v))
    .collect();
    let fields: Record = [
        ("ok", Value::Bool(r.ok)),
        ("exit_code", r.exit_code.map_or(Value::Null, |c| Value::Number(f64::from(c)))),
        ("signal", r.signal.as_deref().map_or(Value::Null, text)),
        ("stdout", text(&r.stdout)),
        ("stderr", text(&r.stderr)),
        ("stdout_truncated", Value::Bool(r.stdout_truncated)),
        ("stderr_truncated", Value::Bool(r.stderr_truncated)),
        ("timed_out", Value::Bool(r.timed_out)),
        ("out_of_memory", Value::Bool(r.out_of_memory)),
        ("duration_ms", Value::Number(r.duration_ms)),
        ("limits", Value::Record(Arc::new(limits))),
    ]
    .into_iter()
    .map(|(k, v)| (Arc::from(k), v))
    .collect();
    Value::Record(Arc::new(fields))
}
