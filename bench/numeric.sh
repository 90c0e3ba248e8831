#!/usr/bin/env bash
# The batch numeric stage (`rubric run --numeric tensor`, src/numeric):
#   1. `rubric bench-numeric`: 1,000,000 rows × 50 criteria in RL groups of 8, the score and
#      group trees, group advantages and per-criterion advantages on the scalar path (1 thread,
#      all cores), on the tensor stage on the CPU and, with RUBRIC_DEVICE=cuda (a `cuda` build),
#      on CUDA; agreement checked (exit 1 on any disagreement);
#   2. end to end: `rubric run --groups` on the synthetic 100-criterion rubric (bench/synthetic.py,
#      20,000 rows in groups of 8; and its first 2,000 rows with token offsets, for token
#      credit), `--numeric scalar` against `tensor`, best of 3, outputs compared byte for byte.
#
#   bash bench/numeric.sh                 # both; RUBRIC=target/release/rubric by default
#   bash bench/numeric.sh run             # only part 2
#   RUBRIC_DEVICE=cuda bash bench/numeric.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUBRIC=${RUBRIC:-target/release/rubric}
[ -x "$RUBRIC" ] || cargo build --release -q
if [ "${1:-}" != run ]; then
  echo "### bench-numeric (device: ${RUBRIC_DEVICE:-cpu})"
  "$RUBRIC" bench-numeric
fi
DIR=target/bench-numeric
mkdir -p "$DIR"
[ -f "$DIR/main.rubric" ] || python3 bench/synthetic.py "$DIR" 100 20000 > /dev/null
python3 - "$DIR" <<'PY'
import json, re, sys
d = sys.argv[1]
with open(d + "/rows.jsonl") as f, open(d + "/grouped.jsonl", "w") as g, open(d + "/tokens.jsonl", "w") as t:
    for i, line in enumerate(f):
        row = json.loads(line)
        row["group"] = f"g{i // 8}"
        g.write(json.dumps(row) + "\n")
        if i < 2000:
            row["token_offsets"] = [[m.start(), m.end()] for m in re.finditer(r"\S+", row["response"])]
            t.write(json.dumps(row) + "\n")
PY
# both TITLE INPUT ROWS: both paths, best of 3, outputs compared
both() {
  echo
  echo "### rubric run --groups, $1 (best of 3)"
  for mode in scalar tensor; do
    best=""
    for _ in 1 2 3; do
      start=$(date +%s.%N)
      "$RUBRIC" run "$DIR/main.rubric" --input "$2" --output "$DIR/out-$mode.jsonl" \
        --groups --numeric "$mode" --no-progress --allow-errors 2> /dev/null
      t=$(echo "$(date +%s.%N) - $start" | bc)
      if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
    done
    printf '%-7s %7.2f s  %8.0f rows/s\n' "$mode" "$best" "$(echo "$3 / $best" | bc -l)"
  done
  if cmp -s "$DIR/out-scalar.jsonl" "$DIR/out-tensor.jsonl"; then
    echo "outputs: identical"
  else
    echo "outputs: DIFFERENT"
    exit 1
  fi
}
both "20,000 rows × 100 criteria, groups of 8" "$DIR/grouped.jsonl" 20000
both "2,000 rows × 100 criteria, groups of 8, token offsets (token credit)" "$DIR/tokens.jsonl" 2000
