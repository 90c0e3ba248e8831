#!/usr/bin/env bash
# Benchmark (not a test): throughput of the reference interpreter, the Wasm engine and the JIT,
# in rows per second, on every `examples/` directory, in the same run. Each example's
# `inputs.jsonl` (and its `verdicts.jsonl`, row indices shifted) is replicated to ROWS rows,
# then scored end to end as a user runs it (`rubric run --engine interp|wasm|jit`, start-up,
# JSON in and out included), RUNS times per engine, alternating, best time kept; every
# engine's output file must be identical to the interpreter's but for the `engine` field.
# The ratio columns are interp time / engine time (above 1: faster than the interpreter).
# A last, synthetic case, `expr`, scores `bench/expr/main.rubric` (numeric folds, functions
# and logic, no text intrinsics or judges) on generated rows: the part of a row that an
# engine's code generation can speed up, which the examples mostly spend in shared code.
#
#   bash bench/engines.sh                       # ROWS=20000 RUNS=3, all cores
#   THREADS=1 ROWS=5000 bash bench/engines.sh   # one rayon thread
#   RUBRIC_BIN=target/debug/rubric ROWS=200 RUNS=1 bash bench/engines.sh   # no release build
#
# Work files go to target/bench-engines/.
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-20000}
RUNS=${RUNS:-3}
WORK=target/bench-engines
mkdir -p "$WORK"

if [ -n "${RUBRIC_BIN:-}" ]; then
  RUBRIC=$RUBRIC_BIN # a binary built elsewhere (e.g. a debug build, to try this script)
else
  echo "== build (release)" >&2
  cargo build --release -q
  RUBRIC=target/release/rubric
fi
if [ -n "${THREADS:-}" ]; then export RAYON_NUM_THREADS=$THREADS; fi

python3 - "$RUBRIC" "$WORK" "$ROWS" "$RUNS" <<'EOF'
import json, os, subprocess, sys, time

rubric, work, rows_wanted, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def replicate(d):
    """Write d's rows (and verdicts) replicated to about rows_wanted rows; return the row count."""
    lines = [l for l in open(os.path.join(d, "inputs.jsonl")) if l.strip()]
    verdicts = []
    vpath = os.path.join(d, "verdicts.jsonl")
    if os.path.exists(vpath):
        verdicts = [json.loads(l) for l in open(vpath) if l.strip()]
    copies = max(1, rows_wanted // len(lines))
    name = os.path.basename(d.rstrip("/"))
    with open(f"{work}/{name}.rows.jsonl", "w") as out:
        for _ in range(copies):
            out.writelines(l if l.endswith("\n") else l + "\n" for l in lines)
    with open(f"{work}/{name}.verdicts.jsonl", "w") as out:
        for k in range(copies):
            for v in verdicts:
                v = dict(v)
                if isinstance(v.get("row"), int):
                    v["row"] += k * len(lines)
                elif k > 0:
                    continue  # rows with an `id` share it across copies: one line is enough
                out.write(json.dumps(v) + "\n")
    return copies * len(lines)

def run(name, main, engine, has_verdicts):
    out = f"{work}/{name}.{engine}.out.jsonl"
    cmd = [rubric, "run", main, "--input", f"{work}/{name}.rows.jsonl", "--output", out,
           "--engine", engine, "--no-progress", "--allow-errors"]
    if has_verdicts:
        cmd += ["--verdicts", f"{work}/{name}.verdicts.jsonl"]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, out

ENGINES = ("interp", "wasm", "jit")

def neutral(path):
    out = []
    for l in open(path):
        for e in ENGINES:
            l = l.replace(f'"engine":"{e}"', '"engine":"-"')
        out.append(l)
    return out

print(f"threads: {os.environ.get('RAYON_NUM_THREADS', 'all cores')}, best of {runs} runs per engine")
print(f"{'example':<16} {'rows':>7} {'interp rows/s':>14} {'wasm rows/s':>12} {'jit rows/s':>11} "
      f"{'wasm/interp':>12} {'jit/interp':>11}")
total = {e: 0.0 for e in ENGINES}
total_rows = 0

def report(name, n, t):
    print(f"{name:<16} {n:>7} {n / t['interp']:>14.0f} {n / t['wasm']:>12.0f} {n / t['jit']:>11.0f} "
          f"{t['interp'] / t['wasm']:>11.2f}x {t['interp'] / t['jit']:>10.2f}x")

def synthetic_rows():
    """Rows for bench/expr: 40 numbers and a threshold each, from a fixed seed."""
    import random
    rng = random.Random(1)
    with open(f"{work}/expr.rows.jsonl", "w") as out:
        for _ in range(rows_wanted):
            xs = [round(rng.uniform(-5, 25), 2) for _ in range(40)]
            out.write(json.dumps({"xs": xs, "k": rng.randint(1, 20)}) + "\n")
    return rows_wanted

cases = [(d, os.path.join("examples", d)) for d in sorted(os.listdir("examples"))]
cases.append(("expr", "bench/expr"))
for d, path in cases:
    main = os.path.join(path, "main.rubric")
    if not os.path.isfile(main):
        continue
    n = synthetic_rows() if d == "expr" else replicate(path)
    has_verdicts = os.path.exists(os.path.join(path, "verdicts.jsonl"))
    best = {e: float("inf") for e in ENGINES}
    outs = {}
    for _ in range(runs):
        for engine in ENGINES:
            t, outs[engine] = run(d, main, engine, has_verdicts)
            best[engine] = min(best[engine], t)
    for engine in ENGINES[1:]:
        if neutral(outs["interp"]) != neutral(outs[engine]):
            sys.exit(f"{d}: the {engine} engine's results differ from the interpreter's")
    report(d, n, best)
    if d == "expr":
        continue  # synthetic: not in the total
    for e in best:
        total[e] += best[e]
    total_rows += n
report("examples", total_rows, total)
EOF
