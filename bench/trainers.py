"""Benchmark (not a test): rows per second of the trainer integrations on one batch of a
deterministic rubric (python/trainer_tests/rubrics/keywords.rubric), each through the trainer's
own code where there is one:

  - TRL: `rubric.trl_reward_fn` and `rubric.trl_async_reward_fn`, called as GRPOTrainer calls
    them (prompts, completions, the dataset's columns);
  - verl 0.9.1: `rubric.verl_compute_score` through NaiveRewardManager (one call per sample)
    and BatchRewardManager (one call per batch) on a DataProto of token ids, which they decode
    (for scale, each also with a compute_score that returns 0.0: verl's own cost), and through
    the reward loop worker its PPO trainer runs (RewardLoopWorker, the function loaded from a
    file; one task per sample);
  - OpenRLHF 0.11.2: its remote reward client (`_fetch_rewards_via_http`) against `rubric
    serve`'s POST /v1/openrlhf, when the binary has that endpoint: a request per sample, all at
    once (as its agents ask), and one request of every sample; and, for comparison, the same
    rows posted to POST /v1/score with aiohttp, a request per row and one request;
  - `Rubric.rewards` on the rows, in process (what every in-process path ends in).

Run it with the trainers' environment (bash python/test-trainers.sh makes it, with the wheel):

    RUBRIC_BIN=target/debug/rubric target/trainers-env/bin/python bench/trainers.py [--rows 256] [--runs 20]

Imports, loading and the first call (warm-up) are left out; each figure is the best of RUNS.
"""

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "trainer_tests"))
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rubric  # noqa: E402
from trainer_support import KEYWORDS, WORDS, make_tokenizer  # noqa: E402


def best_rate(n, runs, fn):
    fn()  # warm-up
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def samples(n, seed=0):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kw = rng.sample(["sun", "rain", "cat", "dog", "red", "blue"], k=rng.randint(0, 2))
        response = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        out.append((f"name the {kw[0] if kw else 'word'}", response, kw))
    return out


def data_proto(tokenizer, rows):
    from verl import DataProto

    n, pad, plen, rlen = len(rows), tokenizer.pad_token_id, 4, 16
    prompts, responses = torch.full((n, plen), pad), torch.full((n, rlen), pad)
    mask = torch.zeros((n, plen + rlen), dtype=torch.long)
    for i, (p, r, _) in enumerate(rows):
        a = tokenizer(p, add_special_tokens=False)["input_ids"]
        b = tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        prompts[i, plen - len(a) :], mask[i, plen - len(a) : plen] = torch.tensor(a), 1
        responses[i, : len(b)], mask[i, plen : plen + len(b)] = torch.tensor(b), 1
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["bench"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": kw} for _, _, kw in rows], dtype=object),
            "extra_info": np.array([{"prompt": p} for p, _, _ in rows], dtype=object),
        },
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    n, runs = args.rows, args.runs
    rows = samples(n)
    r = rubric.load(KEYWORDS)
    tokenizer = make_tokenizer()
    results = []

    def report(name, rate, note=""):
        results.append((name, rate))
        print(f"{name:<66} {rate:>8,.0f} rows/s {note}", flush=True)

    print(f"{n} rows, rubric {r.name} on the {r.engine} engine, best of {runs}; {os.cpu_count()} CPUs", flush=True)
    plain = [{"prompt": p, "response": c, "keywords": kw} for p, c, kw in rows]
    report("Rubric.rewards (in process)", best_rate(n, runs, lambda: r.rewards(plain)))

    prompts, completions, keywords = [p for p, _, _ in rows], [c for _, c, _ in rows], [kw for _, _, kw in rows]
    trl = rubric.trl_reward_fn(r)
    report(
        "TRL: trl_reward_fn",
        best_rate(n, runs, lambda: trl(prompts=prompts, completions=completions, keywords=keywords)),
    )
    trl_async = rubric.trl_async_reward_fn(r)
    loop = asyncio.new_event_loop()
    report(
        "TRL: trl_async_reward_fn (awaited on an event loop)",
        best_rate(
            n,
            runs,
            lambda: loop.run_until_complete(trl_async(prompts=prompts, completions=completions, keywords=keywords)),
        ),
    )
    loop.close()

    from verl.workers.reward_manager import BatchRewardManager, NaiveRewardManager

    score = rubric.verl_compute_score(r, ground_truth="keywords", unscored=0.0)
    data = data_proto(tokenizer, rows)  # the managers only add to it: it can be scored again
    for name, cls in (("NaiveRewardManager", NaiveRewardManager), ("BatchRewardManager", BatchRewardManager)):
        manager = cls(tokenizer=tokenizer, num_examine=0, compute_score=score)
        report(f"verl: {name} + verl_compute_score", best_rate(n, runs, lambda m=manager: m(data)))
        zero = (lambda **kw: 0.0) if cls is NaiveRewardManager else (lambda **kw: [0.0] * len(kw["solution_strs"]))
        manager = cls(tokenizer=tokenizer, num_examine=0, compute_score=zero)
        report(f"verl: {name} + a compute_score returning 0.0", best_rate(n, runs, lambda m=manager: m(data)))

    bench_reward_loop(tokenizer, data, n, runs, report)
    bench_openrlhf(tokenizer, rows, runs, report)
    return 0


def bench_reward_loop(tokenizer, data, n, runs, report):
    """verl 0.9.1's reward loop worker, in process: what each of its PPO trainer's reward actors
    runs, loading compute_score from a file (custom_reward_function.path)."""
    import tempfile

    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        reward_file = os.path.join(tmp, "rubric_reward.py")
        with open(reward_file, "w") as f:
            f.write(
                "import rubric\n"
                f"compute_score = rubric.verl_compute_score(rubric.load({str(KEYWORDS)!r}), ground_truth='keywords')\n"
            )
        config = OmegaConf.create(
            {
                "actor_rollout_ref": {"model": {"path": tmp, "tokenizer_path": None}},
                "reward": {
                    "custom_reward_function": {"path": reward_file, "name": "compute_score", "reward_kwargs": {}},
                    "reward_manager": {"source": "register", "name": "naive", "module": {"path": None, "name": None}},
                    "reward_model": {"enable": False},
                },
            }
        )
        worker = RewardLoopWorker(config)
        loop = worker.reward_manager.loop
        report(
            "verl: RewardLoopWorker.compute_score_batch + verl_compute_score",
            best_rate(n, runs, lambda: loop.run_until_complete(worker.compute_score_batch(data))),
        )


def bench_openrlhf(tokenizer, rows, runs, report):
    import aiohttp
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    binary = os.environ.get("RUBRIC_BIN") or str(ROOT / "target" / "debug" / "rubric")
    n = len(rows)
    proc = subprocess.Popen(
        [binary, "serve", str(KEYWORDS), "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        base = proc.stdout.readline().strip()
        prompts = [p for p, _, _ in rows]
        labels = [{"keywords": kw} for _, _, kw in rows]
        queries = []
        for p, c, _ in rows:
            ids = tokenizer(text=p, add_special_tokens=False)["input_ids"]
            ids += tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            queries.append(tokenizer.decode(ids, skip_special_tokens=False))

        async def post(url, body):
            async with aiohttp.ClientSession() as session:
                async with session.post(url, json=body) as resp:
                    return resp.status, await resp.json(content_type=None)

        status, _ = asyncio.run(
            post(base + "/v1/openrlhf", {"query": queries[:1], "prompts": prompts[:1], "labels": labels[:1]})
        )
        if status == 200:
            executor = SingleTurnAgentExecutor(remote_rm_url=base + "/v1/openrlhf")

            async def per_sample():
                calls = zip(queries, prompts, labels)
                return await asyncio.gather(*(executor._fetch_rewards_via_http([q], [p], [lab]) for q, p, lab in calls))

            report(
                "OpenRLHF: _fetch_rewards_via_http, a request per sample, all at once",
                best_rate(n, runs, lambda: asyncio.run(per_sample())),
            )
            report(
                "OpenRLHF: _fetch_rewards_via_http, one request of every sample",
                best_rate(n, runs, lambda: asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))),
            )
        else:
            print(
                f"OpenRLHF: POST /v1/openrlhf answered {status}: this binary has no such endpoint; not measured",
                flush=True,
            )
        score_rows = [{"prompt": p, "response": c, "keywords": kw, "g": i} for i, (p, c, kw) in enumerate(rows)]

        async def score_per_row():
            return await asyncio.gather(*(post(base + "/v1/score", {"rows": [row]}) for row in score_rows))

        # what OpenRLHF's requests cost the server, without the endpoint: a session per request, as its client opens
        report(
            "rubric serve: POST /v1/score, a request per row, all at once",
            best_rate(n, runs, lambda: asyncio.run(score_per_row())),
        )
        report(
            "rubric serve: POST /v1/score, one request of every row",
            best_rate(n, runs, lambda: asyncio.run(post(base + "/v1/score", {"rows": score_rows, "groups": "g"}))),
        )
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
