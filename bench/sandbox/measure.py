"""bench/sandbox.sh's driver: each hostile row of bombs.rubric through `rubric run BUNDLE`, one
row per process, with the wall time and the peak resident memory of that process (getrusage
of the child, measured from a fresh Python process each time so that the maximum is this
run's), and what stopped the row. With a baseline binary, the same rows run there with
`--engine wasm` (its sandbox), so that both are measured in one run.

    python3 measure.py RUBRIC BUNDLE MEMORY_MB TIMEOUT_MS [BASELINE_RUBRIC BASELINE_BUNDLE]
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROWS = {
    "none": {"response": "fine", "kind": "none"},
    "replace, 40 KB": {"response": "a" * 40_000, "kind": "replace"},
    "split, 16 MB": {"response": "a" * (16 << 20), "kind": "split"},
    "word_count, 16 MB": {"response": "a " * (8 << 20), "kind": "words"},
    "concat in a map, 90 KB": {"response": "ab " * 30_000, "kind": "concat"},
    "self-referencing schema": {"response": "x", "kind": "schema"},
    "quadratic loop, 80 KB": {"response": "alpha beta gamma delta " * 4_000, "kind": "loop"},
    "covers, 3,000 sentences": {
        "response": "".join(f"Sentence number {i} talks about topic {i * 7919 % 1000} at length. " for i in range(3000)),
        "kind": "embed",
    },
}


def one(binary, bundle, row, extra):
    """Run one row in a child process; print `wall | peak RSS | outcome |`."""
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(inp, "w") as f:
            f.write(json.dumps(row) + "\n")
        t = time.monotonic()
        p = subprocess.run([binary, "run", bundle, "--input", inp, "--output", out, "--no-progress", "--allow-errors"] + extra,
                           capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - t
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if p.returncode:
            outcome = "the process failed: " + ((p.stderr.strip().splitlines() or ["?"])[-1])[:60]
        else:
            rec = json.loads(open(out).read())
            hit = [c.get("reason", "") for c in rec.get("criteria", []) if c["status"] != "met"]
            outcome = (hit[0].split(": ", 1)[-1] if hit else "scored")[:70]
        print(f"{wall:.2f} | {rss:.0f} | {outcome} |")


def table(binary, bundle, extra, label):
    print(f"\n{label}\n")
    print("| row | wall s | peak RSS MiB | what stopped it |")
    print("| --- | ---: | ---: | --- |")
    for name in ROWS:
        r = subprocess.run([sys.executable, __file__, "--one", binary, bundle, name, json.dumps(extra)],
                           capture_output=True, text=True)
        print(f"| {name} | {r.stdout.strip() or r.stderr.strip()[-80:]}")


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        one(sys.argv[2], sys.argv[3], ROWS[sys.argv[4]], json.loads(sys.argv[5]))
        sys.exit(0)
    rubric, bundle, memory_mb, timeout_ms = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    limits = ["--row-memory-mb", memory_mb, "--row-timeout-ms", timeout_ms]
    table(rubric, bundle, limits, f"this build, a bundle on its default engine (Wasm), {' '.join(limits)}")
    if len(sys.argv) > 6:
        table(sys.argv[5], sys.argv[6], ["--engine", "wasm"],
              "baseline binary, `--engine wasm` (its limits: 512 MiB of values in its own accounting, 10 s)")
