#!/usr/bin/env bash
# Installs the RL trainers the Python package's trainer tests (python/trainer_tests/) run against
# into a virtual environment of their own, target/trainers-env, from PyPI, at pinned versions:
#   TRL (GRPOTrainer) with PyTorch, Transformers, Accelerate and Datasets;
#   verl 0.9.1 without its dependencies (it declares transformers < 5.11, older than the 5.23
#     pinned here, and wandb, peft, torchdata...), plus what its DataProto, reward managers and
#     reward loop import;
#   OpenRLHF 0.11.2 without its dependencies (it declares transformers == 5.15.0, DeepSpeed,
#     flash-attn...), plus what openrlhf.utils.agent imports (its package __init__ imports
#     torch and transformers too).
# PyTorch is the PyPI wheel (it pulls the CUDA libraries, ~3 GB; the tests run on the CPU).
# Idempotent: a stamp file in the environment records the pinned spec, and a run whose spec
# matches it does nothing; any other run builds the environment afresh. Needs python3 (3.10+)
# with venv, and PyPI. Prints the environment's directory.
#
#   bash scripts/install-trainers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
ENV_DIR="$PWD/target/trainers-env"
STAMP="$ENV_DIR/.rubric-trainers-spec"

# Installed with their dependencies (which pip resolves against these pins).
PINNED=(
    torch==2.15.0
    trl==1.16.0
    transformers==5.23.0
    accelerate==1.16.0
    datasets==5.2.0
    pytest==9.2.0
    pytest-timeout==2.4.0
    # verl: `verl.protocol` imports ray and tensordict (verl 0.9.1 wants tensordict <= 0.10.0),
    # its reward loop omegaconf, aiohttp and codetiming; ray 2.55.0 is the version OpenRLHF
    # 0.11.2 pins (verl wants >= 2.41)
    ray==2.55.0
    tensordict==0.10.0
    omegaconf==2.4.0
    codetiming==1.4.0
    # OpenRLHF: openrlhf.utils.agent (aiohttp) and openrlhf.utils.math_utils (pylatexenc, sympy)
    aiohttp==3.14.5
    pylatexenc==2.11
    sympy==1.14.0
)
# Installed with --no-deps (their declared dependencies conflict with the pins above).
NO_DEPS=(
    verl==0.9.1
    openrlhf==0.11.2
)
SPEC="$(printf '%s\n' "$("$PY" --version 2>&1)" "${PINNED[@]}" -- "${NO_DEPS[@]}")"

# Only the environment's directory goes to standard output (callers read it with `$(...)`):
# everything else, pip's output included, goes to standard error.
exec 3>&1 1>&2

say() { echo "install-trainers.sh: $*" >&2; }
fail() {
    echo "install-trainers.sh: error: $*" >&2
    exit 1
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SPEC" ] && [ -x "$ENV_DIR/bin/python" ]; then
    say "up to date ($ENV_DIR)"
    echo "$ENV_DIR" >&3
    exit 0
fi

command -v "$PY" >/dev/null || fail "$PY not found (set PYTHON to a Python 3.10+ interpreter)"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    fail "$("$PY" --version 2>&1) is too old: TRL 1.16 needs Python 3.10+ (set PYTHON)"
start=$(date +%s)
say "making a fresh virtual environment in $ENV_DIR"
rm -rf "$ENV_DIR"
mkdir -p "$(dirname "$ENV_DIR")"
"$PY" -m venv "$ENV_DIR" || fail "could not make a virtual environment with $PY -m venv (install python3-venv?)"
PIP=("$ENV_DIR/bin/python" -m pip --disable-pip-version-check)
say "installing ${PINNED[*]} (PyTorch's wheel and its CUDA libraries are ~3 GB)"
"${PIP[@]}" install --progress-bar off "${PINNED[@]}" ||
    fail "pip could not install the pinned trainers (see pip's message above; PyPI must be reachable)"
say "installing ${NO_DEPS[*]} without their dependencies"
"${PIP[@]}" install --progress-bar off --no-deps "${NO_DEPS[@]}" ||
    fail "pip could not install ${NO_DEPS[*]}"

say "checking that the trainers' modules import"
(cd "$ENV_DIR" && "$ENV_DIR/bin/python" - <<'PY') || fail "the trainers do not import (above: the module and why); the environment is left in $ENV_DIR without its stamp"
import importlib, sys
mods = [
    "torch", "transformers", "trl", "trl.trainer.grpo_trainer", "accelerate", "datasets",
    "tokenizers", "pytest", "pytest_timeout",
    "verl", "verl.workers.reward_manager", "verl.trainer.ppo.reward",
    "verl.experimental.reward_loop.reward_loop",
    "openrlhf.utils.agent",
]
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as e:
        sys.exit(f"import {m}: {type(e).__name__}: {e}")
import torch, transformers, trl, verl, openrlhf
print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
      f"verl {verl.__version__}, openrlhf {getattr(openrlhf, '__version__', '0.11.2')}", file=sys.stderr)
PY
echo "$SPEC" >"$STAMP"
say "installed in $(( $(date +%s) - start ))s"
echo "$ENV_DIR" >&3
