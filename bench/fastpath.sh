#!/usr/bin/env bash
# Benchmark (not a test): the fast path against a baseline build, in the same run (issue 22).
# The 100-criterion synthetic rubric (bench/synthetic.py) on bound rows, one thread and all
# cores (`rubric bench`), scored by this checkout's release build and by a release build of
# BASE (a git revision, default `main`), each engine's rows/s divided by the baseline
# interpreter's.
#
#   bash bench/fastpath.sh [BASE=main] [ROWS=20000]
#
# The baseline is built once per revision into target/bench-fastpath/ (a `git worktree` of BASE
# and a target directory of its own: the first run costs a second release build).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${1:-main}
ROWS=${2:-20000}
RUNS=${RUNS:-3}
WORK=$PWD/target/bench-fastpath
REV=$(git rev-parse --short "$BASE")
BASE_BIN=$WORK/rubric-$REV
mkdir -p "$WORK"

if [ ! -x "$BASE_BIN" ]; then
    echo "== baseline: release build of $BASE ($REV)"
    rm -rf "$WORK/src"
    git worktree prune
    git worktree add --detach "$WORK/src" "$REV" > /dev/null
    (cd "$WORK/src" && CARGO_TARGET_DIR="$WORK/target" cargo build --release -q)
    cp "$WORK/target/release/rubric" "$BASE_BIN"
    git worktree remove --force "$WORK/src"
fi
echo "== this checkout: release build"
cargo build --release -q
NEW_BIN=target/release/rubric

python3 bench/synthetic.py "$WORK/syn" 100 5000
bench() {
    "$1" bench "$WORK/syn/main.rubric" --input "$WORK/syn/rows.jsonl" --rows "$ROWS" \
        --engines interp,jit --runs "$RUNS"
}
echo "== baseline ($REV)"
bench "$BASE_BIN" | tee "$WORK/base.txt"
echo "== this checkout ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes'))"
bench "$NEW_BIN" | tee "$WORK/new.txt"

python3 - "$WORK/base.txt" "$WORK/new.txt" "$REV" <<'EOF'
import sys

def table(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if f and f[0] in ("interp", "wasm", "jit") and "ms" in f:
            rows[f[0]] = (float(f[3]), float(f[4]))
    return rows

base, new, rev = table(sys.argv[1]), table(sys.argv[2]), sys.argv[3]
one, all_ = base["interp"]
print(f"== against the baseline interpreter ({rev}: {one:,.0f} rows/s on 1 thread, {all_:,.0f} on all)")
print(f"   {'engine':<8} {'build':<10} {'rows/s 1 thread':>16} {'x base interp':>14} {'rows/s all':>12} {'x base interp':>14}")
for name, t in (("base", base), ("new", new)):
    for engine, (o, a) in t.items():
        print(f"   {engine:<8} {name:<10} {o:>16,.0f} {o / one:>13.2f}x {a:>12,.0f} {a / all_:>13.2f}x")
if "jit" in new:
    print(f"   jit / interp in this checkout: {new['jit'][0] / new['interp'][0]:.2f}x on 1 thread")
EOF
