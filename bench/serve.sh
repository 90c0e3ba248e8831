#!/usr/bin/env bash
# Benchmark (not a test): `rubric serve` with a deterministic rubric (examples/ifeval, built
# into a bundle and served on its default engine, Wasm) under CONC concurrent clients: requests
# per second and p50/p90/p99 latency of `POST /v1/score`, each request carrying ROWS rows (the
# example's rows, cycled). Load generator: `hey` (Debian package `hey`), N requests in all.
#
#   bash bench/serve.sh                       # CONC=16 ROWS=16 N=4000
#   ENGINE=interp ROWS=64 bash bench/serve.sh
#   RUBRIC=target/debug/rubric bash bench/serve.sh   # skip the release build
#
# Work files go to target/bench-serve/.
set -euo pipefail
cd "$(dirname "$0")/.."

CONC=${CONC:-16}
ROWS=${ROWS:-16}
N=${N:-4000}
ENGINE=${ENGINE:-}
WORK=target/bench-serve
mkdir -p "$WORK"

command -v hey >/dev/null || { echo "error: needs \`hey\` (apt-get install hey)" >&2; exit 2; }
if [ -z "${RUBRIC:-}" ]; then
  echo "== build (release)" >&2
  cargo build --release -q
  RUBRIC=$PWD/target/release/rubric
fi

"$RUBRIC" build examples/ifeval/main.rubric -o "$WORK/ifeval.rbk" 2>/dev/null
python3 - "$ROWS" > "$WORK/body.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open("examples/ifeval/inputs.jsonl") if l.strip()]
n = int(sys.argv[1])
print(json.dumps({"rows": [rows[i % len(rows)] for i in range(n)]}))
PY

args=("$WORK/ifeval.rbk" --addr 127.0.0.1:0)
[ -n "$ENGINE" ] && args+=(--engine "$ENGINE")
"$RUBRIC" serve "${args[@]}" > "$WORK/url.txt" 2> "$WORK/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$WORK/url.txt" ] && break; sleep 0.1; done
URL=$(head -1 "$WORK/url.txt")

# Check one answer first, then warm up, then measure.
curl -sf "$URL/v1/score" --data-binary @"$WORK/body.json" | python3 -c \
  "import json,sys; r=json.load(sys.stdin)['results']; assert len(r)==$ROWS and all('score' in x for x in r), r[:1]"
hey -n 200 -c "$CONC" -m POST -T application/json -D "$WORK/body.json" "$URL/v1/score" > /dev/null
hey -n "$N" -c "$CONC" -m POST -T application/json -D "$WORK/body.json" "$URL/v1/score" > "$WORK/hey.txt"

rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/hey.txt")
pct() { awk -v p="$1%" '$1 == p && $2 == "in" {printf "%.2f", $3 * 1000}' "$WORK/hey.txt"; }
statuses=$(sed -n '/Status code distribution/,$p' "$WORK/hey.txt" | grep -E '^\s+\[' | tr -s ' ' | tr '\n' ' ')
engine=$(curl -sf "$URL/v1/bundles" | python3 -c "import json,sys; print(json.load(sys.stdin)['rubrics'][0]['engine'])")
echo "rubric serve, examples/ifeval bundle on $engine: $CONC clients, $ROWS rows/request, $N requests"
echo "  requests/s: $rps   rows/s: $(python3 -c "print(round($rps * $ROWS))")"
echo "  latency ms: p50 $(pct 50)  p90 $(pct 90)  p99 $(pct 99)"
echo "  statuses: $statuses"
echo "  server /metrics: $(curl -sf "$URL/metrics" | python3 -c "import json,sys; m=json.load(sys.stdin); print(m['requests_by_status'], m['rows_scored'], 'rows', m['score_latency_ms'])")"
