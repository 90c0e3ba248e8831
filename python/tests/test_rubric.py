"""Tests of the `rubric` Python package: the records equal `rubric run`'s on the same rows (plain,
with verdicts, with groups, from a bundle on the Wasm engine), load errors carry the diagnostic,
the TRL- and verl-shaped reward functions (TRL's asynchronous one scoring off the event loop),
and the GIL is released while scoring. The trainers themselves are in python/trainer_tests/."""

import asyncio
import inspect
import json
import math
import subprocess
import threading
import time

import pytest

import rubric
from support import EXAMPLES, read_rows, rubric_run

RL_DEMO = """rubric rl.demo @ 1.0.0
input response: Text
criterion short "At most 20 words" check word_count(response) <= 20
criterion polite "Says please" check contains_ci(response, "please")
score = fraction(all)

reward {
  advantage mean
  penalty 0.01 * max(0, word_count(response) - 10)
}
"""

# `ranged` is unscored when `v` is outside [0, 1], and then so is the score
UNSCORED = """rubric un.demo @ 1.0.0
input response: Text
input v: Number
criterion polite "Says please" check contains_ci(response, "please")
criterion ranged "In range" value v
score = fraction(all)
"""


def test_score_equals_rubric_run_on_ifeval(rubric_bin, tmp_path):
    file = EXAMPLES / "ifeval" / "main.rubric"
    rows = read_rows(EXAMPLES / "ifeval" / "inputs.jsonl")
    r = rubric.load(str(file))
    assert r.engine == "interp" and r.bundle is None
    got = r.score(rows)
    assert got == rubric_run(rubric_bin, tmp_path, file, rows)
    assert all(rec["ir_hash"] == r.ir_hash and rec["rubric"] == r.name for rec in got)
    assert r.scores(rows) == [rec.get("score") for rec in got]


@pytest.mark.parametrize("engine", ["interp", "wasm", "jit"])
def test_score_with_verdicts_equals_rubric_run_on_every_engine(rubric_bin, tmp_path, engine):
    file, verdicts = EXAMPLES / "tiers" / "main.rubric", EXAMPLES / "tiers" / "verdicts.jsonl"
    rows = read_rows(EXAMPLES / "tiers" / "inputs.jsonl")
    got = rubric.load(str(file), engine=engine).score(rows, verdicts=str(verdicts))
    want = rubric_run(rubric_bin, tmp_path, file, rows, "--verdicts", str(verdicts), "--engine", engine)
    assert got == want
    assert {rec["engine"] for rec in got if "error" not in rec} == {engine}


def test_groups_equal_rubric_run_groups(rubric_bin, tmp_path):
    file = EXAMPLES / "ifeval" / "main.rubric"
    rows = read_rows(EXAMPLES / "ifeval" / "inputs.jsonl")
    rows = [dict(row, prompt_id=f"p{i // 4}") for i, row in enumerate(rows)]
    rows[5].pop("prompt_id")  # a row without its group id: an error record, as in `rubric run`
    got = rubric.load(str(file)).score(rows, groups="prompt_id")
    assert got == rubric_run(rubric_bin, tmp_path, file, rows, "--groups", "prompt_id")
    assert [rec["row"] for rec in got] == list(range(len(rows)))
    assert got[5]["error"]["code"] == "rubric::row::missing_group"
    assert "advantage" in got[0] and "group_stats" in got[0]


def test_groups_worked_example_of_docs_rl():
    r = rubric.load(RL_DEMO)
    rows = [
        {"group": "g", "response": "Please wait."},
        {"group": "g", "response": "No."},
        {"group": "g", "response": " ".join(["please"] * 13)},
    ]
    recs = r.score(rows, groups=True)
    assert [rec["reward"] for rec in recs] == pytest.approx([1.0, 0.5, 0.97])
    assert [rec["advantage"] for rec in recs] == pytest.approx([0.1767, -0.3233, 0.1467], abs=1e-4)
    assert recs[0]["group_stats"]["saturated_met"] == ["short"]


def test_bundle_loads_and_scores_on_wasm_as_rubric_run(rubric_bin, tmp_path):
    file = EXAMPLES / "ifeval" / "main.rubric"
    rbk = tmp_path / "ifeval.rbk"
    subprocess.run([rubric_bin, "build", str(file), "-o", str(rbk)], check=True, capture_output=True)
    r = rubric.load(str(rbk))
    assert r.engine == "wasm" and r.bundle and r.ir_hash == rubric.load(str(file)).ir_hash
    rows = read_rows(EXAMPLES / "ifeval" / "inputs.jsonl")
    got = r.score(rows)
    assert got == rubric_run(rubric_bin, tmp_path, rbk, rows, "--engine", "wasm")
    assert got[0]["bundle"] == r.bundle


QUADRATIC = """rubric sandbox.quadratic @ 1.0.0
input response: Text
let ws = words(response)
criterion repeats "Some word occurs twice" check count(ws, a => count(ws, b => a == b) > 1) > 0
"""


def test_a_bundle_runs_in_the_sandbox_under_the_row_limits_given(rubric_bin, tmp_path):
    src = tmp_path / "q.rubric"
    src.write_text(QUADRATIC)
    rbk = tmp_path / "q.rbk"
    subprocess.run([rubric_bin, "build", str(src), "-o", str(rbk)], check=True, capture_output=True)
    r = rubric.load(str(rbk), row_timeout_ms=300)
    assert r.engine == "wasm"
    start = time.monotonic()
    small, huge = r.score([{"response": "a a"}, {"response": "alpha beta gamma delta " * 20_000}])
    assert time.monotonic() - start < 60
    assert small["score"] == 1
    assert huge["trap"]["code"] == "rubric::trap::limit"
    assert huge["trap"]["message"].startswith("time limit: the row ran longer than 300 ms")
    # a memory limit, likewise
    tight = rubric.load(str(rbk), row_memory_mb=1)
    (rec,) = tight.score([{"response": "word " * 100_000}])
    assert rec["trap"]["message"].startswith("memory limit"), rec


def test_bad_source_raises_with_the_diagnostic():
    with pytest.raises(ValueError) as e:
        rubric.load("rubric bad @ 1.0.0\ninput response: Txt\nscore = 1\n")
    assert "rubric::" in str(e.value) and "Txt" in str(e.value)
    with pytest.raises(ValueError, match="no/such"):
        rubric.load("no/such/file.rubric")
    with pytest.raises(ValueError, match="unknown engine"):
        rubric.load(RL_DEMO, engine="gpu")


def test_rows_that_cannot_be_scored_are_error_records():
    r = rubric.load(RL_DEMO)
    recs = r.score([{"text": "hi"}, "not an object"])
    assert recs[0]["error"]["code"] == "rubric::row::missing_input"
    assert recs[1]["error"]["code"] == "rubric::row::not_an_object"
    with pytest.raises(rubric.RowError, match="missing_input"):
        r.rewards([{"text": "hi"}])


def test_trl_reward_fn_takes_strings_and_chat_messages():
    reward = rubric.trl_reward_fn(RL_DEMO)
    assert reward.__name__ == "rubric_rl_demo"
    prompts = ["Ask nicely."] * 3
    texts = ["Please wait.", "No.", " ".join(["please"] * 13)]
    got = reward(prompts=prompts, completions=texts, ground_truth=["x"] * 3, trainer_state=object())
    assert got == pytest.approx([1.0, 0.5, 0.97]) and all(isinstance(x, float) for x in got)
    chat_prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Ask."}]] * 3
    chat = [[{"role": "assistant", "content": t}] for t in texts]
    assert reward(prompts=chat_prompts, completions=chat) == got


def test_trl_reward_fn_maps_columns_and_gives_none_when_unscored():
    # `v` outside [0, 1] leaves `ranged` unscored, hence the score; the rubric does not say
    # `reward { unscored zero }`, so the reward is None (never a silent 0)
    r = rubric.load(UNSCORED)
    assert r.reward_unscored == "exclude"
    reward = rubric.trl_reward_fn(r, prompt="question")
    got = reward(prompts=["q", "q"], completions=["Please.", "Please."], v=[2, 0.5], id=["a", "b"])
    assert got == [None, 1.0]
    with pytest.raises(rubric.RowError, match="missing_input"):
        reward(prompts=["q"], completions=["Please."])  # no `v` column
    only = rubric.trl_reward_fn(r, columns=["v"])
    assert only(prompts=["q"], completions=["No."], v=[0.5], other=[object()]) == [0.5]


def test_trl_async_reward_fn_gives_the_sync_rewards_off_the_event_loop():
    r = rubric.load(UNSCORED)
    sync = rubric.trl_reward_fn(r, prompt="question")
    reward = rubric.trl_async_reward_fn(r, prompt="question")
    assert inspect.iscoroutinefunction(reward) and reward.__name__ == sync.__name__ == "rubric_un_demo"
    kwargs = dict(prompts=["q", "q"], completions=["Please.", "Please."], v=[2, 0.5], id=["a", "b"])
    assert asyncio.run(reward(**kwargs)) == sync(**kwargs) == [None, 1.0]
    with pytest.raises(rubric.RowError, match="missing_input"):
        asyncio.run(reward(prompts=["q"], completions=["Please."]))  # no `v` column

    # while it scores, other tasks of the loop run (a reward function that scored on the loop
    # would let the ticker run once, before and after)
    big = rubric.trl_async_reward_fn(RL_DEMO)

    async def score_beside_a_ticker():
        done, ticks = False, [0]

        async def ticker():
            while not done:
                ticks[0] += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        got = await big(prompts=["q"] * 2000, completions=["Please wait. " * 20] * 2000)
        done = True
        await task
        return got, ticks[0]

    got, ticks = asyncio.run(score_beside_a_ticker())
    assert got == [pytest.approx(0.5 - 0.01 * 30)] * 2000
    assert ticks > 100, f"the loop ran another task {ticks} times while scoring 2000 rows"

def test_unscored_zero_makes_unscored_rewards_zero():
    r = rubric.load(UNSCORED + "\nreward {\n  unscored zero\n}\n")
    assert r.reward_unscored == "zero"
    assert r.rewards([{"response": "Please.", "v": 2}, {"response": "Please.", "v": 0.5}]) == [0.0, 1.0]
    reward = rubric.trl_reward_fn(r)
    assert reward(prompts=["q"], completions=["Please."], v=[2]) == [0.0]
    assert rubric.verl_compute_score(r)("d", "Please.", None, extra_info={"v": 2}) == 0.0


def test_verl_compute_score_single_and_batch():
    compute_score = rubric.verl_compute_score(rubric.load(RL_DEMO))
    got = compute_score("demo", "Please wait.", "unused", extra_info={"index": 3})
    assert isinstance(got, float) and got == 1.0
    assert compute_score(data_source="demo", solution_str="No.", ground_truth=None) == 0.5
    batch = compute_score(
        data_sources=["demo"] * 2, solution_strs=["Please wait.", "No."], ground_truths=[None, None], extra_infos=[{}, {}]
    )
    assert batch == [1.0, 0.5]
    unscored = rubric.verl_compute_score(UNSCORED)
    assert math.isnan(unscored("d", "Please.", None, extra_info={"v": 2}))  # NaN by default, never a silent 0
    assert unscored("d", "Please.", None, extra_info={"v": 0.5}) == 1.0
    assert rubric.verl_compute_score(UNSCORED, unscored=-1.0)("d", "Please.", None, extra_info={"v": 2}) == -1.0


def test_scoring_releases_the_gil():
    r = rubric.load(str(EXAMPLES / "ifeval" / "main.rubric"))
    rows = read_rows(EXAMPLES / "ifeval" / "inputs.jsonl")
    lines = [json.dumps(row) for row in rows] * 300
    r._native.score_lines(lines[:50])  # warm up
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=counter)
    t.start()
    try:
        time.sleep(0.05)
        before, start = count[0], time.perf_counter()
        r._native.score_lines(lines)
        during, elapsed = count[0] - before, time.perf_counter() - start
    finally:
        stop.set()
        t.join()
    # with the GIL held for the whole call the counter could not move (beyond one switch interval)
    assert elapsed > 0.05, f"batch too small to measure ({elapsed:.3f}s)"
    assert during > 10_000, f"the counter thread advanced {during} times in {elapsed:.3f}s"


def test_embedding_verifiers_score_as_rubric_run(rubric_bin, tmp_path):
    # The package has local models: the nuggets example's coverage checks (sentence embeddings,
    # all-MiniLM-L6-v2 from RUBRIC_EMBEDDING_MODEL, as .ci/run sets it) are scored, not unscored.
    import os

    model = os.environ.get("RUBRIC_EMBEDDING_MODEL")
    assert model and os.path.isdir(model), (
        "RUBRIC_EMBEDDING_MODEL must name all-MiniLM-L6-v2 (bash scripts/fetch-models.sh puts it in target/models/)"
    )
    file = EXAMPLES / "nuggets" / "main.rubric"
    rows = read_rows(EXAMPLES / "nuggets" / "inputs.jsonl")
    got = rubric.load(str(file)).score(rows)
    assert got == rubric_run(rubric_bin, tmp_path, file, rows, "--embedding-model", model)
    assert all(rec.get("status") == "scored" for rec in got), got
