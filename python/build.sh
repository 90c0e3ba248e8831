#!/usr/bin/env bash
# Builds the `rubric` Python package (this directory: PyO3 + maturin) into a virtual environment
# at python/target/pyenv, then runs its tests (pytest, python/tests/).
#
#   bash python/build.sh             # debug build (dependencies at opt-level 1), then pytest
#   bash python/build.sh --release   # optimised build (benchmarks), then pytest
#   NO_TEST=1 bash python/build.sh   # build only
#
# Then: python/target/pyenv/bin/python -c 'import rubric; print(rubric.load("examples/ifeval/main.rubric"))'
# A wheel instead: (cd python && maturin build --release), into python/target/wheels/.
# The tests compare with the `rubric` binary (RUBRIC_BIN, default target/debug/rubric at the
# root, built here when missing). Needs python3 (3.9+) with venv, and PyPI for maturin, pytest,
# pytest-timeout, NumPy and Ray Data (the tests of token offsets as arrays and of the Ray
# pipeline, python/examples/ray_score.py).
set -euo pipefail
cd "$(dirname "$0")"
VENV="$PWD/target/pyenv"
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
echo "python/build.sh: installing maturin, pytest, NumPy and Ray Data into $VENV" >&2
"$VENV/bin/pip" install -q "maturin>=1.7,<2" pytest pytest-timeout numpy "ray[data]"
start=$(date +%s)
# cargo's own progress (crate by crate) goes to stderr: a first build takes minutes.
echo "python/build.sh: building the extension module with maturin (cargo's progress below)" >&2
VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" maturin develop "$@"
echo "python/build.sh: built and installed in $(( $(date +%s) - start ))s ($VENV)"
if [ -z "${NO_TEST:-}" ]; then
    if [ -z "${RUBRIC_BIN:-}" ] && [ ! -x ../target/debug/rubric ]; then
        (cd .. && cargo build -q --bin rubric)
    fi
    "$VENV/bin/python" -m pytest -q tests
fi
