#!/usr/bin/env bash
# Benchmark (not a test): Wasm engine vs reference interpreter throughput, in rows per second,
# on every `examples/` directory, in the same run. Each example's `inputs.jsonl` (and its
# `verdicts.jsonl`, row indices shifted) is replicated to ROWS rows, then scored end to end as
# a user runs it (`rubric run --engine interp|wasm`, start-up, JSON in and out included), RUNS
# times per engine, alternating, best time kept; both engines' output files must be identical
# but for the `engine` field.
#
#   bash bench/engines.sh                       # ROWS=20000 RUNS=3, all cores
#   THREADS=1 ROWS=5000 bash bench/engines.sh   # one rayon thread
#
# Work files go to target/bench-engines/.
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-20000}
RUNS=${RUNS:-3}
WORK=target/bench-engines
mkdir -p "$WORK"

echo "== build (release)" >&2
cargo build --release -q
RUBRIC=target/release/rubric
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
           "--engine", engine, "--no-progress"]
    if has_verdicts:
        cmd += ["--verdicts", f"{work}/{name}.verdicts.jsonl"]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, out

def neutral(path):
    return [l.replace('"engine":"wasm"', '"engine":"interp"') for l in open(path)]

print(f"threads: {os.environ.get('RAYON_NUM_THREADS', 'all cores')}, best of {runs} runs per engine")
print(f"{'example':<16} {'rows':>7} {'interp rows/s':>14} {'wasm rows/s':>12} {'wasm/interp':>12}")
total = {"interp": 0.0, "wasm": 0.0}
total_rows = 0
for d in sorted(os.listdir("examples")):
    path = os.path.join("examples", d)
    main = os.path.join(path, "main.rubric")
    if not os.path.isfile(main):
        continue
    n = replicate(path)
    has_verdicts = os.path.exists(os.path.join(path, "verdicts.jsonl"))
    best = {"interp": float("inf"), "wasm": float("inf")}
    outs = {}
    for _ in range(runs):
        for engine in ("interp", "wasm"):
            t, outs[engine] = run(d, main, engine, has_verdicts)
            best[engine] = min(best[engine], t)
    if neutral(outs["interp"]) != neutral(outs["wasm"]):
        sys.exit(f"{d}: the engines' results differ")
    for e in best:
        total[e] += best[e]
    total_rows += n
    print(f"{d:<16} {n:>7} {n / best['interp']:>14.0f} {n / best['wasm']:>12.0f} "
          f"{best['interp'] / best['wasm']:>11.2f}x")
print(f"{'all':<16} {total_rows:>7} {total_rows / total['interp']:>14.0f} {total_rows / total['wasm']:>12.0f} "
      f"{total['interp'] / total['wasm']:>11.2f}x")
EOF
