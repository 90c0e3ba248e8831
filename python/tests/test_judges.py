"""Judges from Python: `rubric.load(..., judges=, cache=, replay=)` dispatches judged criteria as
`rubric run --judges` does (same records, against `rubric mock-judge`), a second load with the
same cache makes no HTTP call, processes share one cache file, and `judge_stats()` counts."""

import json
import multiprocessing
import subprocess

import pytest

import rubric
from support import EXAMPLES, read_rows, rubric_run

HEALTHBENCH = EXAMPLES / "healthbench" / "main.rubric"


def healthbench_rows():
    rows = read_rows(EXAMPLES / "healthbench" / "inputs.jsonl")
    return [dict(row, group=f"p{i // 2}") if isinstance(row, dict) else row for i, row in enumerate(rows)]


def test_judged_scores_equal_rubric_run_and_the_cache_saves_every_call(rubric_bin, mock_judge, tmp_path):
    rows = healthbench_rows()
    want = rubric_run(rubric_bin, tmp_path, HEALTHBENCH, rows, "--judges", mock_judge.judges, "--no-cache")
    calls = mock_judge.requests()
    assert calls > 0 and any(c.get("model") == "mock-grader-1" for rec in want for c in rec.get("criteria", []))
    want_grouped = rubric_run(
        rubric_bin, tmp_path, HEALTHBENCH, rows, "--groups", "--judges", mock_judge.judges, "--no-cache", name="g"
    )
    assert mock_judge.requests() == 2 * calls

    cache = tmp_path / "judge-cache.sqlite"
    r = rubric.load(str(HEALTHBENCH), judges=str(mock_judge.judges), cache=str(cache))
    assert r.has_judges
    assert r.score(rows) == want
    assert mock_judge.requests() == 3 * calls, "the bindings made the calls `rubric run` made"
    stats = r.judge_stats()
    assert stats["http_requests"] == calls and stats["cache_hits"] == 0, stats
    assert r.score(rows, groups="group") == want_grouped
    assert mock_judge.requests() == 3 * calls, "the same requests again are answered from memory"

    # A second load with the same cache: the same records and not one HTTP call.
    again = rubric.load(HEALTHBENCH, judges=mock_judge.judges, cache=cache)
    assert again.score(rows, groups="group") == want_grouped
    assert again.score(rows) == want
    assert mock_judge.requests() == 3 * calls
    stats = again.judge_stats()
    assert stats["http_requests"] == 0 and stats["cache_hits"] == calls, stats


def test_without_judges_judged_criteria_are_unscored():
    r = rubric.load(str(HEALTHBENCH))
    assert not r.has_judges and r.judge_stats() is None
    rec = r.score(healthbench_rows()[:1])[0]
    assert rec["score"] is None and {c["status"] for c in rec["criteria"]} == {"unscored"}, rec


def test_replay_answers_from_a_transcript_offline(rubric_bin, mock_judge, tmp_path):
    rows = healthbench_rows()
    transcript = tmp_path / "transcript.jsonl"
    want = rubric_run(
        rubric_bin, tmp_path, HEALTHBENCH, rows, "--judges", mock_judge.judges, "--no-cache", "--record", transcript
    )
    calls = mock_judge.requests()
    r = rubric.load(str(HEALTHBENCH), replay=str(transcript), cache=False)
    assert r.score(rows) == want
    assert mock_judge.requests() == calls
    stats = r.judge_stats()
    assert stats["http_requests"] == 0 and stats["replayed"] == calls, stats


def test_bad_judge_options_raise(tmp_path):
    with pytest.raises(ValueError, match="nope.toml"):
        rubric.load(str(HEALTHBENCH), judges=str(tmp_path / "nope.toml"))
    bad = tmp_path / "judges.toml"
    bad.write_text('default = "x"\n[endpoints.x]\nbase_url = "http://127.0.0.1:1/v1"\napi_key = "sk-123"\n')
    with pytest.raises(ValueError, match="api_key"):
        rubric.load(str(HEALTHBENCH), judges=str(bad))
    with pytest.raises(ValueError, match="transcript|missing.jsonl"):
        rubric.load(str(HEALTHBENCH), replay=str(tmp_path / "missing.jsonl"))


def _score_part(args):
    """In a separate process: score rows with judges, through the shared cache."""
    judges, cache, rows = args
    r = rubric.load(str(HEALTHBENCH), judges=judges, cache=cache)
    records = r.score(rows)
    return [json.dumps(rec) for rec in records], r.judge_stats()


def test_processes_share_one_cache_file(mock_judge, tmp_path):
    # Eight variants of the rows (different responses, so different requests), scored by four
    # processes at once, each writing its replies into the same new cache file.
    base = [row for row in healthbench_rows() if isinstance(row, dict) and isinstance(row.get("response"), str)]
    variants = [[dict(row, response=row["response"] + f" (variant {k})") for row in base] for k in range(8)]
    cache = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        parts = pool.map(_score_part, [(str(mock_judge.judges), cache, rows) for rows in variants])
    calls = mock_judge.requests()
    assert sum(stats["http_requests"] for _, stats in parts) == calls
    assert all(stats.get("cache_errors", 0) == 0 for _, stats in parts), [s for _, s in parts]
    # Every reply reached the file: a fresh load answers all of them from it.
    r = rubric.load(str(HEALTHBENCH), judges=str(mock_judge.judges), cache=cache)
    everything = [row for rows in variants for row in rows]
    got = r.score(everything)
    assert mock_judge.requests() == calls, "a reply of some process was lost"
    assert r.judge_stats()["cache_hits"] == calls
    want = [json.loads(line) for lines, _ in parts for line in lines]
    for rec in want + got:
        rec.pop("row")
    assert got == want


def test_a_budget_caps_what_a_loaded_rubric_spends(rubric_bin, tmp_path):
    """`rubric.load(..., budget=USD)`: no request whose worst case could pass the budget is sent;
    what is held back comes back unscored with reason `budget`, and what was paid is priced."""
    from support import MockJudge

    example = EXAMPLES / "judge-cost"
    mock = MockJudge(rubric_bin, example / "mock-rules.toml", tmp_path)
    try:
        judges = tmp_path / "priced.toml"
        judges.write_text(
            mock.judges.read_text() + '[prices."gpt-4.1"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n'
        )
        rows = read_rows(example / "inputs.jsonl")
        r = rubric.load(example / "main.rubric", judges=judges, cache=False, budget=0.01)
        records = r.score(rows)
        criteria = [c for rec in records for c in rec["criteria"]]
        held = [c for c in criteria if c["status"] == "unscored"]
        paid = [c for c in criteria if c["status"] != "unscored"]
        assert held and paid, criteria
        assert all(c["reason"].startswith("budget: ") for c in held), held
        spent = sum(c["cost_usd"] for c in paid)
        assert 0 < spent <= 0.01
        assert mock.requests() == len(paid)
        stats = r.judge_stats()
        assert stats["budget"]["limit_usd"] == 0.01 and stats["budget"]["refused"] == len(held), stats
        assert abs(stats["budget"]["spent_usd"] - spent) < 1e-9, stats
        with pytest.raises(ValueError, match="budget"):
            rubric.load(example / "main.rubric", judges=judges, cache=False, budget=-1)
    finally:
        mock.stop()


def test_group_judging_asks_once_per_group_like_rubric_run_groups(rubric_bin, tmp_path):
    """A group judge (`rollouts response`) through the bindings: one request per group and judge,
    and the records `rubric run --groups prompt_id --judges` writes, rewards and advantages
    included."""
    from support import MockJudge

    ex = EXAMPLES / "group-judging"
    mock = MockJudge(rubric_bin, ex / "mock-rules.toml", tmp_path)
    try:
        rows = read_rows(ex / "inputs.jsonl")
        want = rubric_run(
            rubric_bin, tmp_path, ex / "main.rubric", rows, "--groups", "prompt_id", "--judges", mock.judges, "--no-cache"
        )
        # 3 prompts x 2 group judges; the empty rollout is stopped by the gate.
        assert mock.requests() == 6
        assert [r["advantage"] is not None for r in want] == [True] * 12, want
        r = rubric.load(str(ex / "main.rubric"), judges=str(mock.judges), cache=False)
        assert r.score(rows, groups="prompt_id") == want
        assert mock.requests() == 12, "the bindings asked once per group and judge too"
        # Without groups, no group judge is asked: its criteria are unscored with the reason.
        rec = r.score(rows[:1])[0]
        assert mock.requests() == 12
        reasons = [c.get("reason", "") for c in rec["criteria"] if c["id"] in ("explains", "correct")]
        assert all(x.startswith("judge_group:") for x in reasons), rec
    finally:
        mock.stop()


def test_a_row_deadline_returns_the_batch_on_time_with_the_slow_row_unscored(rubric_bin, tmp_path):
    """`load(..., row_deadline_ms=)`: a judge that stalls 30 s on one row makes that row
    unscored (reason `timeout`, `None` to TRL) when the deadline passes; the call returns then,
    and every other row's record is the record without a deadline."""
    import time

    from support import MockJudge

    rules = tmp_path / "rules.toml"
    rules.write_text(
        (EXAMPLES / "healthbench" / "mock-rules.toml").read_text()
        + '\n[[fault]]\nkind = "timeout"\nprompt = "SLOWROW"\ndelay_ms = 30000\n'
    )
    mock = MockJudge(rubric_bin, rules, tmp_path)
    try:
        fast = [r for r in read_rows(EXAMPLES / "healthbench" / "inputs.jsonl") if isinstance(r.get("response"), str)]
        slow = dict(fast[0], id="slow", response="SLOWROW: rest and drink water.")
        want = rubric.load(HEALTHBENCH, judges=mock.judges, cache=False).score(fast)

        r = rubric.load(HEALTHBENCH, judges=mock.judges, cache=False, row_deadline_ms=1500)
        start = time.monotonic()
        got = r.score(fast + [slow], timings=True)
        assert time.monotonic() - start < 15, "the call came back at the deadline, not after the stall"
        assert got[-1]["score"] is None and got[-1]["unscored_reason"].startswith("timeout: "), got[-1]
        assert got[-1]["timing"]["judges_ms"] >= 1000, got[-1]["timing"]
        for g in got[:-1]:
            assert g.pop("timing")["ms"] >= 0
        assert got[:-1] == want

        # Through TRL's reward function: the timed-out completion is None, the rest numbers.
        fn = rubric.trl_reward_fn(r, prompt=None, columns=["prompt", "rubrics", "id"])
        rows = fast + [slow]
        rewards = fn(
            completions=[x["response"] for x in rows],
            **{k: [x[k] for x in rows] for k in ("prompt", "rubrics", "id")},
        )
        assert rewards[-1] is None
        assert rewards[:-1] == [w.get("reward", w["score"]) for w in want]
    finally:
        mock.stop()
