"""Benchmark (not a test): latency of `rubric serve` under load when a judge stalls, with and
without a row deadline. `rubric serve` scores the HealthBench example's rows through
`rubric mock-judge` (5 ms per reply); one request in STALL_EVERY carries a row whose judge call
stalls for 30 s (the mock's `timeout` fault). CONC clients send N requests of ROWS rows each
(every row's response made distinct, so that no judge call is answered from memory), first to
a server without a deadline, then to one with `--row-deadline-ms DEADLINE_MS`. Prints, for
each: requests/s, rows/s, latency p50/p90/p99/max, and how many rows came back unscored with
reason `timeout`.

    python3 bench/never_block.py RUBRIC_BINARY [CONC=16 N=400 ROWS=8 STALL_EVERY=50 DEADLINE_MS=1000]
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "healthbench"


def env(name, default):
    return int(os.environ.get(name, default))


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("http://"):
        p.kill()
        sys.exit(f"error: {cmd[1]} printed no address: {url!r}")
    return p, url


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def load(url, requests, conc):
    """Send `requests` (bodies) from `conc` threads; per request (latency s, results)."""
    out = [None] * len(requests)
    next_i = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= len(requests):
                return
            t = time.monotonic()
            results = post(url + "/v1/score", requests[i])["results"]
            out[i] = (time.monotonic() - t, results)

    threads = [threading.Thread(target=worker) for _ in range(conc)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.monotonic() - t0, out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    binary = sys.argv[1]
    conc, n, rows_per, stall_every, deadline = (
        env("CONC", 16), env("N", 400), env("ROWS", 8), env("STALL_EVERY", 50), env("DEADLINE_MS", 1000))
    work = Path(tempfile.mkdtemp(prefix="never-block-"))
    rules = work / "rules.toml"
    rules.write_text((EXAMPLE / "mock-rules.toml").read_text()
                     + '\n[[fault]]\nkind = "timeout"\nprompt = "SLOWROW"\ndelay_ms = 30000\n')
    mock, base = start([binary, "mock-judge", "--rules", str(rules), "--addr", "127.0.0.1:0"])
    judges = work / "judges.toml"
    judges.write_text(f'default = "mock"\n[endpoints.mock]\nbase_url = "{base}"\nconcurrency = 64\n')
    rows = [json.loads(l) for l in (EXAMPLE / "inputs.jsonl").read_text().splitlines() if l.strip()]
    rows = [r for r in rows if isinstance(r.get("response"), str)]

    def bodies(tag):
        out = []
        for q in range(n):
            batch = []
            for k in range(rows_per):
                r = dict(rows[(q * rows_per + k) % len(rows)])
                r["response"] = f'{r["response"]} ({tag} request {q}, row {k})'
                if q % stall_every == 0 and k == 0:
                    r["response"] = "SLOWROW " + r["response"]
                batch.append(r)
            out.append({"rows": batch})
        return out

    print(f"rubric serve, examples/healthbench through rubric mock-judge: {conc} clients, {n} requests of "
          f"{rows_per} rows, one request in {stall_every} with a row whose judge stalls 30 s")
    try:
        for label, extra in [("no deadline", []), (f"--row-deadline-ms {deadline}", ["--row-deadline-ms", str(deadline)])]:
            server, url = start([binary, "serve", str(EXAMPLE / "main.rubric"), "--judges", str(judges),
                                 "--no-cache", "--addr", "127.0.0.1:0", *extra])
            try:
                wall, out = load(url, bodies(label), conc)
            finally:
                server.kill()
                server.wait()
            lat = [o[0] * 1000 for o in out]
            timeouts = sum(1 for o in out for r in o[1] if str(r.get("unscored_reason", "")).startswith("timeout"))
            print(f"  {label:>24}: {n / wall:7.1f} requests/s, {n * rows_per / wall:8.1f} rows/s; latency ms p50 "
                  f"{pct(lat, 50):.1f}, p90 {pct(lat, 90):.1f}, p99 {pct(lat, 99):.1f}, max {max(lat):.1f}; "
                  f"rows unscored by the deadline: {timeouts}")
    finally:
        mock.kill()
        mock.wait()


if __name__ == "__main__":
    main()
