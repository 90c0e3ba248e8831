#!/usr/bin/env bash
# The local judge benchmark: a random-weight model shaped like Qwen3-0.6B (written by
# `rubric model init`, so no weights are needed), responses of about 300 tokens with 20 criteria
# each, scored by
#   1. rubric, prefix-shared and batched (`rubric model bench`, mode shared),
#   2. rubric, each prompt alone with a full prefill (mode naive),
#   3. Hugging Face transformers on the same model directory, device and messages
#      (bench/local_judge.py: left-padded batches, one per response),
# in one run, with criteria per second for each and the largest score difference between
# transformers and rubric (an independent check of the model code).
#
#   bash bench/local_judge.sh                       # CPU, 1 response (a few minutes on 2 cores)
#   bash bench/local_judge.sh --device cuda --rows 64
#   RUBRIC_BIN=./rubric PYTHON=python3 bash bench/local_judge.sh --device cuda   # no cargo there
#
# Options: --device cpu|cuda[:N], --rows N, --criteria N, --words N (per response), --model DIR
# (default target/bench/models/qwen3-0.6b-random, created if missing), --out DIR (default
# target/bench/local-judge), --modes shared,naive, --no-hf. Without PYTHON, torch and
# transformers come from PyPI into the virtual environment target/bench-venv (about 7 GB
# installed: PyPI's torch wheels carry the CUDA libraries); a python3 that already imports both
# is used as is.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=cpu
ROWS=1
CRITERIA=20
WORDS=300
MODEL=target/bench/models/qwen3-0.6b-random
OUT=target/bench/local-judge
MODES=shared,naive
HF=1
while [ $# -gt 0 ]; do
  case $1 in
    --device) DEVICE=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --criteria) CRITERIA=$2; shift 2 ;;
    --words) WORDS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --no-hf) HF=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"

BIN=${RUBRIC_BIN:-}
if [ -z "$BIN" ] && ! command -v cargo >/dev/null; then
  echo "error: no cargo here: set RUBRIC_BIN to a rubric binary (a \`cuda\` build for --device cuda)" >&2
  exit 2
fi
if [ -z "$BIN" ]; then
  features=""
  case $DEVICE in cuda*) features="--features cuda" ;; esac
  # shellcheck disable=SC2086
  cargo build --release -q --bin rubric $features
  BIN=target/release/rubric
fi

if [ ! -f "$MODEL/model.safetensors" ]; then
  "$BIN" model init --family qwen3 --shape qwen3-0.6b --seed 1 --dtype bf16 "$MODEL"
fi

echo "# local judge benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, device $DEVICE, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# model $MODEL, $ROWS responses x $CRITERIA criteria, $WORDS words per response"
"$BIN" model bench "$MODEL" --rows "$ROWS" --criteria "$CRITERIA" --words "$WORDS" --modes "$MODES" \
  --device "$DEVICE" --out "$OUT/rubric.json"

if [ "$HF" = 1 ]; then
  PY=${PYTHON:-}
  if [ -z "$PY" ]; then
    if python3 -c 'import torch, transformers' 2>/dev/null; then
      PY=python3
    else
      if [ ! -x target/bench-venv/bin/python ]; then
        echo "installing torch and transformers from PyPI into target/bench-venv (disk: $(df -h --output=avail . | tail -1) free)" >&2
        python3 -m venv target/bench-venv
        start=$(date +%s)
        target/bench-venv/bin/pip install -q torch transformers safetensors
        echo "installed in $(( $(date +%s) - start ))s" >&2
      fi
      PY=target/bench-venv/bin/python
    fi
  fi
  "$PY" bench/local_judge.py --model "$MODEL" --rubric-json "$OUT/rubric.json" --device "$DEVICE" \
    --threads "$(nproc)" --out "$OUT/hf.json"
fi

python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
r = json.load(open(os.path.join(out, "rubric.json")))
hf_path = os.path.join(out, "hf.json")
hf = json.load(open(hf_path)) if os.path.exists(hf_path) else None
print(f"\nprompts: {r['prompts']} ({r['rows']} responses x {r['criteria']} criteria), "
      f"{r['mean_prompt_tokens']:.0f} tokens each on average; device {r['device']}, dtype {r['dtype']}; "
      f"model load {r['load_s']:.1f}s")
rows = []
for mode in ("shared", "naive"):
    if mode in r:
        rows.append((f"rubric, {'prefix-shared + batched' if mode == 'shared' else 'each prompt alone'}",
                     r[mode]["seconds"], r[mode].get("cpu_seconds"), r[mode]["criteria_per_s"]))
if hf:
    rows.append((f"transformers {hf['transformers']} (batches of {hf['batch']})", hf["seconds"],
                 hf.get("cpu_seconds"), hf["criteria_per_s"]))
n = r["prompts"]
base = hf["criteria_per_s"] if hf else None
base_cpu = n / hf["cpu_seconds"] if hf and hf.get("cpu_seconds") else None
print("| scorer | seconds | criteria/s | x transformers | CPU seconds | criteria per CPU-s | x transformers (CPU) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, secs, cpu, cps in rows:
    ratio = f"{cps / base:.2f}" if base else "-"
    per_cpu = n / cpu if cpu else None
    ratio_cpu = f"{per_cpu / base_cpu:.2f}" if per_cpu and base_cpu else "-"
    cpu_s = f"{cpu:.1f}" if cpu else "-"
    per_cpu_s = f"{per_cpu:.3f}" if per_cpu else "-"
    print(f"| {name} | {secs:.2f} | {cps:.3f} | {ratio} | {cpu_s} | {per_cpu_s} | {ratio_cpu} |")
scores = r.get("shared", r.get("naive", {})).get("scores", [])
if scores:
    print(f"P(yes) ranges over [{min(scores):.4f}, {max(scores):.4f}]")
if "max_abs_diff_shared_naive" in r:
    print(f"max |shared - naive| = {r['max_abs_diff_shared_naive']:.2e}")
if hf:
    diffs = ", ".join(f"max |transformers - {m}| = {hf[k]:.2e}" for m, k in
                      (("shared", "max_abs_diff_vs_shared"), ("naive", "max_abs_diff_vs_naive")) if k in hf)
    print(f"{diffs}; token ids equal for {hf['same_token_ids']}/{hf['prompts']} prompts")
EOF
