#!/usr/bin/env bash
# Tests the Python package's trainer integrations against the real trainers, on the CPU: installs
# TRL, verl and OpenRLHF into target/trainers-env (scripts/install-trainers.sh: pinned versions
# from PyPI, once), installs the `rubric` wheel there, and runs pytest on python/trainer_tests/.
#
#   bash python/test-trainers.sh                 # the wheel of python/build.sh, target/debug/rubric
#   WHEEL=rubric_py-0.1.0-cp39-abi3-manylinux_2_34_x86_64.whl RUBRIC_BIN=target/release/rubric \
#       bash python/test-trainers.sh
#   bash python/test-trainers.sh -k verl         # further arguments go to pytest
#
# WHEEL: the wheel to test (default: the one wheel in python/target/wheels/, which
# python/build.sh builds). RUBRIC_BIN: the `rubric` binary whose `rubric run` the rewards are
# compared with, and which serves the mock judge and the OpenRLHF endpoint (default:
# target/debug/rubric at the root). The first run downloads ~3 GB (PyTorch with its CUDA
# libraries); later runs reuse the environment.
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")"
here="$PWD"
root="$(cd .. && pwd)"
abs() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }

if [ -n "${WHEEL:-}" ]; then
    WHEEL="$(abs "$WHEEL")"
else
    wheels=(target/wheels/rubric_py-*.whl)
    if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
        echo "error: expected one wheel in python/target/wheels (bash python/build.sh builds it), found: ${wheels[*]}; or set WHEEL" >&2
        exit 1
    fi
    WHEEL="$here/${wheels[0]}"
fi
[ -f "$WHEEL" ] || { echo "error: no wheel at $WHEEL" >&2; exit 1; }
RUBRIC_BIN="$(abs "${RUBRIC_BIN:-$root/target/debug/rubric}")"
[ -x "$RUBRIC_BIN" ] || { echo "error: no rubric binary at $RUBRIC_BIN (cargo build --bin rubric, or set RUBRIC_BIN)" >&2; exit 1; }
export RUBRIC_BIN

ENV_DIR="$(bash "$root/scripts/install-trainers.sh")"
echo "python/test-trainers.sh: installing $WHEEL into $ENV_DIR" >&2
"$ENV_DIR/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
# The package must come from the wheel, not from this source directory.
(cd "$ENV_DIR" && "$ENV_DIR/bin/python" - "$ENV_DIR" <<'PY'
import os, sys, rubric
env = os.path.realpath(sys.argv[1])
where = os.path.realpath(rubric.__file__)
if not where.startswith(env + os.sep):
    sys.exit(f"error: rubric was imported from {where}, not from the wheel installed in {env}")
print(f"python/test-trainers.sh: rubric {where}", file=sys.stderr)
PY
)
# From the environment's directory, as python/build.sh runs its tests: neither this directory
# (the `rubric/` source, without its native module) nor the working directory, which Ray adds to
# its workers' import path (the verl test's reward workers), may shadow the installed wheel.
start=$(date +%s)
(cd "$ENV_DIR" && "$ENV_DIR/bin/pytest" -q -c "$here/pyproject.toml" --rootdir "$here" "$here/trainer_tests" "$@")
echo "python/test-trainers.sh: trainer tests passed in $(( $(date +%s) - start ))s" >&2
