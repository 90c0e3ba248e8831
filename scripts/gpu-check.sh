#!/usr/bin/env bash
# The one prepared script for the GPU machine (no network, no Rust toolchain): runs, from the
# executables scripts/build-cuda.sh left in target/cuda-dist, the device tests (CUDA against
# the CPU: the numeric stage, embeddings, the local judge) and the GPU benchmarks, and writes
# every figure to $OUT/gpu-figures.txt (or target/gpu-check/ when $OUT is not set).
#
#   bash scripts/gpu-check.sh            # exit 0: all checks ran and passed
#                                        # exit 3: no CUDA device (nothing was checked)
#                                        # exit 1: a check failed; exit 2: the carry is incomplete
#
# CUDA 13 libraries (cuBLAS, cuRAND, NVRTC, the runtime) are looked for in $CUDA_LIBS, then in
# Python's nvidia/cu13 packages (PyTorch's), then /usr/local/cuda/lib64.
set -uo pipefail
cd "$(dirname "$0")/.."
DIST="${DIST:-$PWD/target/cuda-dist}"
OUTDIR="${OUT:-$PWD/target/gpu-check}"
mkdir -p "$OUTDIR"
FIG="$OUTDIR/gpu-figures.txt"
: > "$FIG"
say() { echo "$@" | tee -a "$FIG"; }

for f in rubric.xz integration.xz models/minilm-shape/config.json models/minilm-shape/tokenizer.json; do
    if [ ! -e "$DIST/$f" ]; then
        say "gpu-check: $DIST/$f is missing: run scripts/build-cuda.sh where there is a Rust toolchain and carry target/cuda-dist"
        exit 2
    fi
done
BIN="$OUTDIR/bin"
mkdir -p "$BIN"
xz -dc "$DIST/rubric.xz" > "$BIN/rubric" && xz -dc "$DIST/integration.xz" > "$BIN/integration"
chmod +x "$BIN/rubric" "$BIN/integration"

libs="${CUDA_LIBS:-}"
if [ -z "$libs" ]; then
    libs=$(python3 -c 'import glob, os, sys
for p in sys.path:
    for d in glob.glob(os.path.join(p, "nvidia", "cu13", "lib")) + glob.glob(os.path.join(p, "nvidia", "*", "lib")):
        print(d)' 2>/dev/null | paste -sd: -)
fi
[ -d /usr/local/cuda/lib64 ] && libs="${libs:+$libs:}/usr/local/cuda/lib64"
export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "gpu-check: $(cat "$DIST/COMMIT" 2>/dev/null || echo 'unknown commit') on $(hostname), $(date -u +%FT%TZ)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$FIG"

"$BIN/rubric" devices --require-cuda > "$OUTDIR/devices.txt" 2>&1
status=$?
cat "$OUTDIR/devices.txt" | tee -a "$FIG"
if [ "$status" -eq 127 ] && grep -q "libcuda.so.1" "$OUTDIR/devices.txt"; then
    say "gpu-check: no CUDA driver (libcuda.so.1) on this machine: nothing checked"
    exit 3
elif [ "$status" -eq 3 ]; then
    say "gpu-check: no CUDA device: nothing checked"
    exit 3
elif [ "$status" -ne 0 ]; then
    say "gpu-check: \`rubric devices\` failed ($status): the binary does not run here (missing CUDA libraries? LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    exit 1
fi
failed=0
export RUBRIC_GPU_MINILM_SHAPE="$DIST/models/minilm-shape" RUBRIC_BIN="$BIN/rubric"

say "== device tests (CUDA against the CPU)"
"$BIN/integration" --include-ignored --test-threads 1 gpu_ 2>&1 | tee -a "$FIG" | tail -n 30
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1

say "== (a) embedding throughput, random weights of all-MiniLM-L6-v2's shape"
for dev in cuda cpu; do
    n=4096; [ "$dev" = cpu ] && n=512
    "$BIN/rubric" bench-embed --device "$dev" --random --model "$DIST/models/minilm-shape" \
        --batch-sizes 1,8,32,128,256 --sentences "$n" 2>&1 | tee -a "$FIG" || failed=1
done

say "== (b) local judge: random-weight Qwen3-0.6B shape, ~300-token responses x 20 criteria, prefix-shared vs naive vs transformers"
RUBRIC_BIN="$BIN/rubric" PYTHON="${PYTHON:-python3}" bash bench/local_judge.sh --device cuda --rows 64 \
    --out "$OUTDIR/local-judge" 2>&1 | tee -a "$FIG" || failed=1

say "== (c) numeric stage: 1,000,000 rows x 50 criteria, scalar CPU vs tensor CPU vs CUDA"
RUBRIC="$BIN/rubric" RUBRIC_DEVICE=cuda bash bench/numeric.sh 2>&1 | tee -a "$FIG" || failed=1

say "gpu-check: done (failures: $failed); figures in $FIG"
exit "$failed"
