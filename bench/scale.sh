#!/usr/bin/env bash
# Benchmark (not a test): the batch path end to end (`rubric run`: rows streamed in, parsed,
# bound, scored in parallel, written in order) on the synthetic 100-criterion rubric of
# bench/synthetic.py at 10k, 100k and 1M rows: throughput and peak RSS (GNU time's %M) per
# engine (records written `--compact`: 0.4 KB a row instead of 11 KB), and the cold start of
# `rubric run` on one row of the largest example (IFEval).
#
#   bash bench/scale.sh                          # SIZES="10000 100000 1000000"
#   ENGINES="interp wasm jit" SIZES=100000 bash bench/scale.sh
#
# Work files go to target/bench-scale/ (the 1M-row input is about 400 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"10000 100000 1000000"}
ENGINES=${ENGINES:-"interp wasm jit"}
WORK=target/bench-scale
mkdir -p "$WORK"

echo "== build (release)" >&2
cargo build --release -q
RUBRIC=target/release/rubric
# Engines this build has (the JIT is a Cargo feature).
known=$("$RUBRIC" run --help | sed -n 's/^ *- \([a-z]*\):.*/\1/p')
ENGINES=$(for e in $ENGINES; do if grep -qx "$e" <<< "$known"; then echo "$e"; fi; done | tr '\n' ' ')
command -v /usr/bin/time >/dev/null || { echo "error: GNU time (/usr/bin/time) is needed for peak RSS" >&2; exit 2; }

max=0
for n in $SIZES; do [ "$n" -gt "$max" ] && max=$n; done
if [ ! -f "$WORK/rows-$max.jsonl" ]; then
  python3 bench/synthetic.py "$WORK" 100 "$max"
  mv "$WORK/rows.jsonl" "$WORK/rows-$max.jsonl"
fi
for n in $SIZES; do
  [ -f "$WORK/rows-$n.jsonl" ] || head -n "$n" "$WORK/rows-$max.jsonl" > "$WORK/rows-$n.jsonl"
done

printf '%-8s %10s %10s %12s %12s\n' engine rows seconds rows/s "peak RSS MB"
for e in $ENGINES; do
  for n in $SIZES; do
    /usr/bin/time -f '%e %M' -o "$WORK/time.txt" "$RUBRIC" run "$WORK/main.rubric" --input "$WORK/rows-$n.jsonl" \
      --output "$WORK/out.jsonl" --engine "$e" --no-progress --compact --allow-errors 2>/dev/null
    read -r secs kb < "$WORK/time.txt"
    python3 -c "import sys; n,s,kb=int(sys.argv[2]),float(sys.argv[3]),int(sys.argv[4]); print(f'{sys.argv[1]:<8} {n:>10} {s:>10.2f} {n/s:>12.0f} {kb/1024:>12.1f}')" "$e" "$n" "$secs" "$kb"
  done
done

echo
echo "cold start: rubric run on one row of examples/ifeval (process start, compile, engine build)"
head -n 1 examples/ifeval/inputs.jsonl > "$WORK/ifeval-1.jsonl"
for e in $ENGINES; do
  best=999
  for _ in 1 2 3; do
    /usr/bin/time -f '%e' -o "$WORK/time.txt" "$RUBRIC" run examples/ifeval/main.rubric --input "$WORK/ifeval-1.jsonl" \
      --output "$WORK/out.jsonl" --engine "$e" --no-progress --allow-errors 2>/dev/null
    t=$(cat "$WORK/time.txt")
    best=$(python3 -c "print(min($best, $t))")
  done
  printf '%-8s %8.3f s\n' "$e" "$best"
done
