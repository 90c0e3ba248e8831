#!/usr/bin/env bash
# Sandboxed code execution (docs/exec.md), measured against its baselines in the same run:
#   1. `rubric bench-exec`: executions per second of a trivial Python program and of a 40-test
#      unittest suite, through the sandbox against plain spawning of the same python3, one at a
#      time (target: the sandbox at most 1.5x plain spawning);
#   2. a code-test run of ROWS rows (default 10,000) of examples/code-tests' programs with
#      distinct test inputs per row (every row's tests are executions of their own), on all
#      cores: wall time, executions, and peak memory (GNU time), then the same run again from
#      the execution cache.
#
#   bash bench/exec.sh                       # a release build; about 15 minutes on 2 cores
#   BIN=target/debug/rubric ROWS=1000 bash bench/exec.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-10000}
BIN=${BIN:-target/release/rubric}
if [ "$BIN" = target/release/rubric ]; then cargo build --release -q --bin rubric; fi
bash scripts/install-sandbox.sh >/dev/null
command -v /usr/bin/time >/dev/null || apt-get install -y time >/dev/null
echo "== 1. executions per second: sandbox vs plain spawning ($BIN)"
"$BIN" bench-exec --runs "${RUNS:-50}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$ROWS" "$work/rows.jsonl" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
base = [json.loads(l) for l in open("examples/code-tests/inputs.jsonl")]
with open(out, "w") as f:
    for i in range(n):
        r = dict(base[i % len(base)])
        a, b = i, 2 * i + 1
        r["id"] = f"{r['id']}-{i}"
        r["tests"] = [
            {"name": "sum", "stdin": f"{a}\n{b}\n", "expected": str(a + b)},
            {"name": "negative", "stdin": f"{-a}\n{b}\n", "expected": str(b - a)},
        ]
        f.write(json.dumps(r) + "\n")
PY
echo "== 2. $ROWS code-test rows on all cores, every execution in the sandbox"
for pass in "no cache (every execution runs)" "again, from the execution cache"; do
    echo "-- $pass"
    /usr/bin/time -f "wall %e s, peak RSS %M KiB" "$BIN" run examples/code-tests/main.rubric \
        --input "$work/rows.jsonl" --output "$work/out.jsonl" --no-progress --allow-errors \
        --allow-exec --exec-cache "$work/cache" 2>&1 | grep -E "rows scored|executions:|wall"
done
