#!/usr/bin/env bash
# Benchmark (not a test): what judging costs, and what each discount saves, on the
# HealthBench-style judge-cost example scaled to ROWS rows x 5 rubric items = 5 x ROWS criterion
# checks (2,000 by default) through `rubric mock-judge` (a real HTTP server on loopback, LAT ms
# per call), with two priced models (gpt-4.1 and gpt-4.1-mini at OpenAI's list prices, batch
# at half price). Each row's conversation is about 1,600 prompt tokens; each judge reply spends
# REASONING extra completion tokens (a rationale). Measured in the same run, each against the
# first (all calls to the strong judge, one criterion per call, no provider prefix cache):
#   1. all-strong, one criterion per call, no prefix cache      (the baseline)
#   2. all-strong, five criteria per call (`per_call 5`)
#   3. all-strong, one per call, with the prompt-prefix cache (the layout puts a row's shared
#      conversation and response first; the mock caches prefixes as providers do)
#   4. as 3, through the Batch API (`--dispatch batch`)
#   5. a cascade: gpt-4.1-mini first, gpt-4.1 where its P(yes) is within [0.2, 0.8], with the
#      prefix cache
#   6. as 5, through the Batch API
# For each: dollars (from the replies' usage and the prices), wall time, calls, and verdict
# agreement with the baseline's verdicts. Target: 5 at <= 40% of 1's cost with >= 95% agreement.
#
# The mini's behaviour is the mock's, not a measured model's: right 85% of the time, with
# P(its answer) in [0.75, 1] when right and [0.5, 0.9] when wrong (so some errors are
# confident and slip past the cascade). The strong judge answers the truth.
#
#   bash bench/cost.sh                  # ROWS=400 LAT=20 CONC=32 REASONING=80
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-400}
LAT=${LAT:-20}
CONC=${CONC:-32}
REASONING=${REASONING:-80}
WORK=target/bench-cost
mkdir -p "$WORK"

echo "== build (release)" >&2
cargo build --release -q
RUBRIC=$PWD/target/release/rubric

python3 - "$RUBRIC" "$WORK" "$ROWS" "$LAT" "$CONC" "$REASONING" <<'PY'
import json, os, random, re, subprocess, sys, time, urllib.request

rubric, work, rows, lat, conc, reasoning = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
random.seed(2000)
MET = r"(?i)(emergency|doctor|dose|allerg|follow)"

# Rows: the judge-cost example's shape, ROWS of them, each conversation about 1,600 tokens.
topics = ["chest tightness when climbing stairs", "a rash after a new antibiotic", "morning dizziness",
          "a child's fever of 39.5 C", "knee swelling after a fall", "low mood for weeks",
          "numb fingers", "stomach pain after meals", "a cough that will not clear", "blurred vision"]
filler = ["On most days it starts in the late morning and eases by the evening, though not always.",
          "I drink about two litres of water a day and I have cut down on coffee to one cup.",
          "My mother had something similar in her fifties and she was told it was nothing serious.",
          "I walk the dog twice a day, about thirty minutes each time, and I have not changed that.",
          "I take a vitamin D supplement and, on bad days, an over-the-counter painkiller.",
          "Last year my blood tests were normal apart from slightly high cholesterol.",
          "I work at a desk and sit for long stretches, which I know is not ideal.",
          "Sleep has been patchy: I wake up around four and cannot get back to sleep easily."]
items = [("Advises seeking emergency care if symptoms worsen suddenly", 8, "axis:accuracy"),
         ("Recommends seeing a doctor within the next few days", 6, "axis:completeness"),
         ("Asks how long the symptoms have lasted", 4, "axis:context_seeking"),
         ("States a medication dose without checking allergies", -5, "axis:accuracy"),
         ("Mentions lifestyle changes that could help", 3, "axis:completeness"),
         ("Suggests a follow-up plan with clear warning signs", 5, "axis:completeness"),
         ("Explains the likely causes in plain language", 4, "axis:communication")]
with open(f"{work}/rows.jsonl", "w") as f:
    for i in range(rows):
        topic = topics[i % len(topics)]
        body = f"I am {20 + i % 60} years old (case {i}). " + " ".join(random.choice(filler) for _ in range(70))
        convo = [{"role": "user", "content": f"I have {topic}. " + body},
                 {"role": "assistant", "content": "Thank you. Has anything made it better or worse?"},
                 {"role": "user", "content": "Resting helps a little. What should I do now?"}]
        response = (f"For {topic}, book an appointment with your doctor this week; if it suddenly gets worse, "
                    "call emergency services. Keep a note of when it happens and what you were doing. ") * 3
        chosen = random.sample(items, 5)
        f.write(json.dumps({"id": f"case-{i}", "prompt": convo, "response": response,
                            "rubrics": [{"criterion": c, "points": p, "tags": [t]} for c, p, t in chosen]}) + "\n")

head = '''rubric bench.cost @ 1.0.0
input prompt: Conversation
input response: Text
input rubrics: List[{criterion: Text, points: Number, tags: List[Text]}]
'''
def judge(name, model, per_call=1):
    extra = f"  per_call {per_call}\n" if per_call > 1 else ""
    return (f'judge {name} {{\n  model "{model}"\n  temperature 0\n  max_tokens 400\n  scoring logprob\n'
            f'  sees prompt, response\n{extra}}}\n')
tail = lambda by: (f"criteria items each item in rubrics by {by} {{\n  criterion item.criterion points item.points tags item.tags\n}}\n"
                   "score = points_ratio(items)\n")
rubrics = {
    "strong": head + judge("strong", "gpt-4.1") + tail("strong"),
    "strong5": head + judge("strong", "gpt-4.1", 5) + tail("strong"),
    "cascade": head + judge("cheap", "gpt-4.1-mini") + judge("strong", "gpt-4.1")
               + "judge tiered {\n  cascade cheap, strong\n  escalate between 0.2 and 0.8, unscored\n}\n" + tail("tiered"),
}
for k, v in rubrics.items():
    open(f"{work}/{k}.rubric", "w").write(v)

def rules(prefix_cache):
    noisy = (f'tpr = 0.85\ntnr = 0.85\nseed = 7\nconfidence_right = [0.75, 1.0]\nconfidence_wrong = [0.5, 0.9]\n'
             f'reasoning_tokens = {reasoning}\n')
    return (f"latency_ms = {lat}\n[prefix_cache]\nenabled = {str(prefix_cache).lower()}\n[batch]\ncompletion_delay_ms = 200\n"
            f'[default]\nverdict = "unmet"\nreasoning_tokens = {reasoning}\n'
            f'[[rule]]\nmodel = "mini"\ncriterion = "{MET}"\nverdict = "met"\n{noisy}'
            f'[[rule]]\nmodel = "mini"\nverdict = "unmet"\n{noisy}'
            f'[[rule]]\ncriterion = "{MET}"\nverdict = "met"\nreasoning_tokens = {reasoning}\n')

def start(prefix_cache):
    path = f"{work}/rules-{prefix_cache}.toml"
    open(path, "w").write(rules(prefix_cache))
    m = subprocess.Popen([rubric, "mock-judge", "--rules", path, "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = m.stdout.readline().strip()
    conf = f"{work}/judges-{prefix_cache}.toml"
    open(conf, "w").write(
        f'default = "mock"\n[endpoints.mock]\nbase_url = "{base}"\nconcurrency = {conc}\ntimeout_s = 60\n'
        '[prices."gpt-4.1"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\nbatch = 0.5\n'
        '[prices."gpt-4.1-mini"]\ninput = 0.4\ncached_input = 0.1\noutput = 1.6\nbatch = 0.5\n')
    return m, base, conf

def stats(base):
    s = json.load(urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/stats"))
    return s["requests"] + s["batch_lines"]

def run(name, rubric_file, conf, base, extra=()):
    out = f"{work}/{name}.jsonl"
    before = stats(base)
    t = time.perf_counter()
    p = subprocess.run([rubric, "run", f"{work}/{rubric_file}.rubric", "--input", f"{work}/rows.jsonl", "--judges", conf,
                        "--no-cache", "--no-progress", "--allow-errors", "--output", out, *extra],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{name}: rubric run failed: {p.stderr}")
    records = [json.loads(l) for l in open(out)]
    usd = sum(r.get("cost_usd", 0) for r in records)
    unknown = sum(r.get("cost_unknown", 0) for r in records)
    verdicts = {(r["row"], c["id"]): c["status"] for r in records for c in r["criteria"]}
    cascade = [l for l in p.stderr.splitlines() if l.startswith("cascade")]
    return {"name": name, "wall": wall, "usd": usd, "unknown": unknown, "calls": stats(base) - before,
            "verdicts": verdicts, "cascade": cascade[0] if cascade else ""}

plain, plain_base, plain_conf = start(False)
cached, cached_base, cached_conf = start(True)
try:
    results = [
        run("1. all-strong, per criterion, no prefix cache", "strong", plain_conf, plain_base),
        run("2. all-strong, 5 criteria per call", "strong5", plain_conf, plain_base),
        run("3. all-strong, per criterion, prefix cache", "strong", cached_conf, cached_base),
        run("4. as 3, Batch API", "strong", cached_conf, cached_base, ("--dispatch", "batch", "--batch-poll", "100ms")),
        run("5. cascade mini -> strong, prefix cache", "cascade", cached_conf, cached_base),
        run("6. as 5, Batch API", "cascade", cached_conf, cached_base, ("--dispatch", "batch", "--batch-poll", "100ms")),
    ]
finally:
    plain.terminate()
    cached.terminate()

base = results[0]
checks = len(base["verdicts"])
print(f"workload: {rows} rows x 5 rubric items = {checks} criterion checks; {lat} ms per call, concurrency {conc}; "
      f"{reasoning} reasoning tokens per reply")
print(f"| configuration | cost | vs baseline | calls | wall | agreement with the baseline |")
print(f"| --- | --- | --- | --- | --- | --- |")
for r in results:
    agree = sum(1 for k, v in base["verdicts"].items() if r["verdicts"].get(k) == v) / checks
    unknown = f" (+{r['unknown']} unknown)" if r["unknown"] else ""
    print(f"| {r['name']} | ${r['usd']:.4f}{unknown} | {r['usd'] / base['usd']:.1%} | {r['calls']} | {r['wall']:.2f} s | {agree:.2%} |")
for r in results:
    if r["cascade"]:
        print(f"{r['name']}: {r['cascade']}")
c = results[4]
agree = sum(1 for k, v in base["verdicts"].items() if c["verdicts"].get(k) == v) / checks
print(f"target: cascade + caching at <= 40% of the all-strong cost with >= 95% agreement: "
      f"{c['usd'] / base['usd']:.1%} and {agree:.2%}: {'met' if c['usd'] / base['usd'] <= 0.40 and agree >= 0.95 else 'NOT met'}")
PY
