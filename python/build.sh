#!/usr/bin/env bash
# Builds the `rubric` Python package (this directory: PyO3 + maturin) as a wheel, installs the
# wheel with pip into a fresh virtual environment at python/target/pyenv, then runs its tests
# (pytest, python/tests/) there, against the installed wheel and nothing else.
#
#   bash python/build.sh             # debug build (dependencies at opt-level 1), then pytest
#   bash python/build.sh --release   # optimised build (benchmarks), then pytest
#   NO_TEST=1 bash python/build.sh   # build and install only
#
# The wheel: python/target/wheels/rubric_py-VERSION-cp39-abi3-PLATFORM.whl (abi3: one wheel for
# every CPython from 3.9); `pip install` it anywhere. The environment: python/target/pyenv
# (made afresh on every run), e.g.
#   python/target/pyenv/bin/python -c 'import rubric; print(rubric.load("examples/ifeval/main.rubric"))'
# maturin itself lives in its own environment, python/target/build-env. The tests compare with
# the `rubric` binary (RUBRIC_BIN, default target/debug/rubric at the root, built here when
# missing). Needs python3 (3.9+) with venv, and PyPI for maturin and the wheel's `test` and
# `ray` extras (pytest, pytest-timeout, NumPy, Ray Data: the tests of token offsets as arrays
# and of the Ray pipeline, python/examples/ray_score.py).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
TOOLS="$PWD/target/build-env"
if [ ! -x "$TOOLS/bin/python" ]; then
    "$PY" -m venv "$TOOLS"
fi
echo "python/build.sh: installing maturin into $TOOLS" >&2
"$TOOLS/bin/pip" install -q "maturin>=1.7,<2"
start=$(date +%s)
# cargo's own progress (crate by crate) goes to stderr: a first build takes minutes.
echo "python/build.sh: building the wheel with maturin (cargo's progress below)" >&2
rm -rf target/wheels
"$TOOLS/bin/maturin" build "$@" --interpreter "$TOOLS/bin/python" --out target/wheels
wheels=(target/wheels/rubric_py-*.whl)
if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
    echo "error: expected one wheel in python/target/wheels, found: ${wheels[*]}" >&2
    exit 1
fi
WHEEL="$PWD/${wheels[0]}"
echo "python/build.sh: built $WHEEL in $(( $(date +%s) - start ))s" >&2

# A fresh environment with the wheel and its extras, nothing else.
VENV="$PWD/target/pyenv"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
echo "python/build.sh: installing the wheel (with its test and ray extras) into $VENV" >&2
"$VENV/bin/pip" install -q "$WHEEL[test,ray]"
# The package must come from the wheel, not from this source directory.
(cd /tmp && "$VENV/bin/python" - "$VENV" <<'PY'
import os, sys, rubric
venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(rubric.__file__)
if not where.startswith(venv + os.sep):
    sys.exit(f"error: rubric was imported from {where}, not from the wheel installed in {venv}")
print(f"python/build.sh: rubric {where}", file=sys.stderr)
PY
)
if [ -z "${NO_TEST:-}" ]; then
    if [ -z "${RUBRIC_BIN:-}" ] && [ ! -x ../target/debug/rubric ]; then
        (cd .. && cargo build -q --bin rubric)
    fi
    # From the environment's directory, with `pytest` (not `python -m pytest`): neither this
    # directory (with its `rubric/` source, no native module in it) nor the working directory
    # Ray adds to its workers' import path may shadow the installed wheel.
    here="$PWD"
    (cd "$VENV" && "$VENV/bin/pytest" -q -c "$here/pyproject.toml" --rootdir "$here" "$here/tests")
fi
