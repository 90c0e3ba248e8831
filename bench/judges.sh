#!/usr/bin/env bash
# Benchmark (not a test): judge dispatch against `rubric mock-judge` (a real HTTP server on
# loopback) with LAT ms of latency per call. Workload: ITEMS responses x CRITERIA judged binary
# criteria = one verdict, and one call, each (2,000 by default), at most CONC calls in flight.
# Measured in the same run:
#   1. `rubric run --judges` with an empty cache, wall time vs the ideal calls x latency / CONC;
#   2. the same run again, answered from the SQLite cache (zero calls expected);
#   3. Autorubric (PyPI `autorubric`, per-criterion LLM calls, max_parallel_requests=CONC)
#      driving the same mock endpoint on the same workload (bench/autorubric_driver.py).
#
#   bash bench/judges.sh                    # ITEMS=200 CRITERIA=10 CONC=64 LAT=20 RUNS=3
#
# Autorubric is installed into target/bench-judges/venv on first use (pip, from PyPI).
# Work files go to target/bench-judges/.
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${ITEMS:-200}
CRITERIA=${CRITERIA:-10}
CONC=${CONC:-64}
LAT=${LAT:-20}
RUNS=${RUNS:-3}
AUTORUBRIC=${AUTORUBRIC:-autorubric==1.6.1}
WORK=target/bench-judges
mkdir -p "$WORK"

echo "== build (release)" >&2
cargo build --release -q
RUBRIC=$PWD/target/release/rubric

if [ ! -x "$WORK/venv/bin/python" ]; then
  echo "== installing $AUTORUBRIC into $WORK/venv" >&2
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q "$AUTORUBRIC"
fi

python3 - "$RUBRIC" "$WORK" "$ITEMS" "$CRITERIA" "$CONC" "$LAT" "$RUNS" <<'PY'
import json, os, subprocess, sys, time

rubric, work, items, criteria, conc, lat, runs = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
calls = items * criteria
ideal = calls * lat / 1000 / conc

# One mock for everything: met when the prompt mentions topics, with labels for Autorubric.
with open(f"{work}/rules.toml", "w") as f:
    f.write(f'latency_ms = {lat}\nmodel = "mock-grader-1"\n[default]\nverdict = "unmet"\nlabel = "UNMET"\n'
            '[[rule]]\nprompt = "topics? [0-9]"\nverdict = "met"\nlabel = "MET"\n')
mock = subprocess.Popen([rubric, "mock-judge", "--rules", f"{work}/rules.toml", "--addr", "127.0.0.1:0"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
base = mock.stdout.readline().strip()

def mock_requests():
    import urllib.request
    return json.load(urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/stats"))["requests"]

lines = [f"rubric bench.judges @ 1.0.0", "input response: Text",
         'judge grader {\n  model "mock-grader-1"\n  temperature 0\n  sees response\n  returns verdict(met: Bool, rationale: Text)\n}']
lines += [f'criterion c{c} "Criterion {c}: the reply mentions topic number {c}." by grader' for c in range(criteria)]
lines.append("score = fraction(all)")
with open(f"{work}/main.rubric", "w") as f:
    f.write("\n".join(lines) + "\n")
with open(f"{work}/rows.jsonl", "w") as f:
    for i in range(items):
        f.write(json.dumps({"id": f"r{i}", "response": f"Reply {i}: it mentions topics {i % criteria} and {(i * 7) % criteria}."}) + "\n")
with open(f"{work}/judges.toml", "w") as f:
    f.write(f'default = "mock"\n[endpoints.mock]\nbase_url = "{base}"\nconcurrency = {conc}\ntimeout_s = 30\n')

def run_rubric(cache):
    t = time.perf_counter()
    p = subprocess.run([rubric, "run", f"{work}/main.rubric", "--input", f"{work}/rows.jsonl", "--judges",
                        f"{work}/judges.toml", "--cache", cache, "--output", f"{work}/out.jsonl", "--no-progress", "--allow-errors"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"rubric run failed: {p.stderr}")
    return wall, p.stderr

try:
    best = None
    for r in range(runs):
        cache = f"{work}/cache-{r}.sqlite"
        if os.path.exists(cache):
            os.remove(cache)
        before = mock_requests()
        wall, err = run_rubric(cache)
        made = mock_requests() - before
        assert made == calls, f"expected {calls} calls, the mock received {made}"
        if best is None or wall < best[0]:
            best = (wall, err, cache)
    wall, err, cache = best
    out1 = open(f"{work}/out.jsonl", "rb").read()
    before = mock_requests()
    cached_wall, _ = run_rubric(cache)
    cached_calls = mock_requests() - before
    out2 = open(f"{work}/out.jsonl", "rb").read()

    ar_best = None
    for r in range(runs):
        before = mock_requests()
        p = subprocess.run([f"{work}/venv/bin/python", "bench/autorubric_driver.py", base, str(items), str(criteria), str(conc)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"autorubric failed: {p.stderr[-2000:]}")
        res = json.loads(p.stdout.strip().splitlines()[-1])
        res["calls"] = mock_requests() - before
        if ar_best is None or res["wall_s"] < ar_best["wall_s"]:
            ar_best = res
finally:
    mock.terminate()

print(f"workload: {items} rows x {criteria} judged criteria = {calls} verdicts, {lat} ms per call, concurrency {conc}; best of {runs}")
print(f"ideal (calls x latency / concurrency): {ideal:.3f} s")
print(f"rubric run, empty cache: {wall:.3f} s wall ({calls} calls) = {wall / ideal:.2f}x ideal (target <= 1.15x)")
for l in err.splitlines():
    if l.startswith(("judges:", "latency", "planning")):
        print("   " + l)
print(f"rubric run, from cache:  {cached_wall:.3f} s wall, {cached_calls} calls, output identical: {out1 == out2}")
print(f"autorubric {ar_best['calls']} calls: {ar_best['wall_s']:.3f} s inside asyncio.gather ({ar_best['verdicts']} verdicts) "
      f"= {ar_best['wall_s'] / ideal:.2f}x ideal; rubric is {ar_best['wall_s'] / wall:.2f}x faster (target >= 2x)")
PY
