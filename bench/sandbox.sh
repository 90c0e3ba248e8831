#!/usr/bin/env bash
# The sandbox's limits against hostile rows (bench/sandbox/bombs.rubric): for each row, the wall
# time and the peak memory of `rubric run BUNDLE` next to the limit it hit, so the overshoot of
# every limit over its setting can be read off. With BASELINE=path/to/old/rubric the same rows
# run on that binary's Wasm engine in the same run.
#
#   bash bench/sandbox.sh                           # release build, 256 MiB and 2 s per row
#   MEMORY_MB=512 TIMEOUT_MS=10000 BASELINE=../main/target/release/rubric bash bench/sandbox.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUBRIC=${RUBRIC:-target/release/rubric}
[ -x "$RUBRIC" ] || cargo build --release -q
bash scripts/fetch-models.sh >/dev/null
export RUBRIC_EMBEDDING_MODEL="$PWD/target/models/all-MiniLM-L6-v2"
dir=target/bench-sandbox
mkdir -p "$dir"
"$RUBRIC" build bench/sandbox/bombs.rubric -o "$dir/bombs.rbk" >/dev/null
args=("$RUBRIC" "$dir/bombs.rbk" "${MEMORY_MB:-256}" "${TIMEOUT_MS:-2000}")
if [ -n "${BASELINE:-}" ]; then
  "$BASELINE" build bench/sandbox/bombs.rubric -o "$dir/bombs-baseline.rbk" >/dev/null
  args+=("$BASELINE" "$dir/bombs-baseline.rbk")
fi
python3 bench/sandbox/measure.py "${args[@]}"
