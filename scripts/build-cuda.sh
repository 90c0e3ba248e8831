#!/usr/bin/env bash
# Builds the `cuda` variant of rubric on a machine WITHOUT a GPU, for the GPU machine (which has
# no network, no crates.io and no Rust toolchain): the release binary and the release test
# executable (`cargo test --release --no-run`), compressed with xz into target/cuda-dist/,
# together with what scripts/gpu-check.sh needs there. See ../shared/notes/toolchain.md,
# "Building the CUDA variant without a GPU", and docs/devices.md.
#
#   bash scripts/build-cuda.sh            # ~650 MiB of wheels once, then a 20-25 min build on 2 cores
#   bash scripts/build-cuda.sh --prepare  # only the toolkit and the libcuda stub (steps 1-3)
#
# The CUDA 13.0 toolkit comes from PyPI (nvcc, NVVM, headers, runtime libraries); candle's
# `cuda` feature links libcuda.so, which only the driver provides, so the link uses a stub
# generated here from cudarc's driver API (same SONAME, libcuda.so.1: the GPU machine's real
# driver library is loaded at run time). Kept out of the default CI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
WORK="$ROOT/target/cuda"
SITE="$WORK/site"
export CUDA_HOME="$SITE/nvidia/cu13"
mkdir -p "$WORK/wheels" "$SITE"

# 1. The toolkit (wheels are zips; the toolkit lands in nvidia/cu13/{bin,nvvm,include,lib}).
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$WORK/wheels" \
        nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85 \
        nvidia-curand==10.4.0.35 nvidia-cublas==13.0.2.14
    for w in "$WORK"/wheels/*.whl; do
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$SITE"
    done
    chmod +x "$CUDA_HOME"/bin/* "$CUDA_HOME"/nvvm/bin/* 2>/dev/null || true
fi
test -x "$CUDA_HOME/bin/nvcc" || { echo "build-cuda: no nvcc in $CUDA_HOME/bin" >&2; exit 1; }

# 2. Unversioned library names for the linker.
cd "$CUDA_HOME/lib"
for lib in nvrtc cublas cublasLt cudart curand; do
    real=$(ls "lib$lib.so."* 2>/dev/null | sort | head -1 || true)
    [ -n "$real" ] && ln -sf "$real" "lib$lib.so"
done

# 3. A link-time stub of libcuda.so: every driver function cudarc declares, SONAME libcuda.so.1.
STUB="$WORK/stub"
mkdir -p "$STUB"
if [ ! -f "$STUB/libcuda.so" ]; then
    cd "$ROOT"
    cargo fetch -q
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs | head -1)
    grep -oE '^\s*fn cu[A-Za-z0-9_]+\(' "$src" | sed -E 's/^\s*fn (cu[A-Za-z0-9_]+)\(/\1/' | sort -u \
        | awk '{print "int " $1 "(void) { return 100; }"}' > "$STUB/cuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$STUB/libcuda.so" "$STUB/cuda_stub.c"
    ln -sf libcuda.so "$STUB/libcuda.so.1"
fi

if [ "${1:-}" = "--prepare" ]; then
    echo "build-cuda: toolkit in $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version | tail -1)), stub in $STUB"
    exit 0
fi

# 4. The build: the binary and the test executable, for compute capability 9.0 (H100/H200).
cd "$ROOT"
export PATH="$CUDA_HOME/bin:$PATH"
export LD_LIBRARY_PATH="$CUDA_HOME/lib:$STUB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LIBRARY_PATH="$CUDA_HOME/lib:$STUB${LIBRARY_PATH:+:$LIBRARY_PATH}"
export CUDA_COMPUTE_CAP=90 CUDA_PATH="$CUDA_HOME" CUDA_ROOT="$CUDA_HOME"
export CARGO_TARGET_DIR="$ROOT/target/cuda-build"
start=$(date +%s)
cargo build --release --features cuda --bin rubric
tests=$(cargo test --release --features cuda --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "integration":
        print(m["executable"])')
echo "build-cuda: built in $(( $(date +%s) - start ))s"

# 5. The carry: compressed executables, the check script, and the small model files it needs.
DIST="$ROOT/target/cuda-dist"
rm -rf "$DIST" && mkdir -p "$DIST/models/minilm-shape"
strip -o "$DIST/rubric" "$CARGO_TARGET_DIR/release/rubric"
strip -o "$DIST/integration" "$tests"
xz -9 -T2 -f "$DIST/rubric" "$DIST/integration"
MINILM=$(bash scripts/fetch-models.sh)
cp "$MINILM/config.json" "$MINILM/tokenizer.json" "$MINILM/sentence_bert_config.json" "$DIST/models/minilm-shape/"
git rev-parse HEAD > "$DIST/COMMIT" 2>/dev/null || true
ls -la "$DIST" && du -sh "$DIST"
echo "build-cuda: carry target/cuda-dist to the GPU machine and run: bash scripts/gpu-check.sh"
