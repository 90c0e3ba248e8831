"""The Ray Data pipeline of docs/rl.md ("Scale-out on Ray"), python/examples/ray_score.py, on a
local Ray instance: every record equals the one `rubric run` writes for the same row (`row`
aside: Ray hands rows over in blocks), plain, grouped, and judged against `rubric mock-judge`
with the workers sharing one judge cache, which a second pass answers every call from.

A hard timeout (pytest-timeout, thread method) ends the run if Ray ever stalls, as an actor
pool that takes every CPU away from the read tasks would."""

import importlib.util
import json

import pytest
import ray

from support import EXAMPLES, ROOT, read_rows, rubric_run

pytestmark = pytest.mark.timeout(300, method="thread")

# The script, loaded as a module that Ray workers cannot import by name: cloudpickle sends its
# `Scorer` class to them by value, as it does for a script run as `__main__`.
_spec = importlib.util.spec_from_file_location("ray_score_example", ROOT / "python" / "examples" / "ray_score.py")
ray_score = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ray_score)

# Two CPUs in all: each actor asks for half of one, so reading never waits for a free CPU.
WORKERS = dict(workers=2, cpus_per_worker=0.5)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def by_id(records):
    out = {}
    for rec in records:
        rec = dict(rec)
        rec.pop("row", None)
        assert rec["id"] not in out, f"two records for {rec['id']}"
        out[rec["id"]] = rec
    return out


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_ray_scores_ifeval_like_rubric_run(local_ray, rubric_bin, tmp_path):
    file = EXAMPLES / "ifeval" / "main.rubric"
    rows = read_rows(EXAMPLES / "ifeval" / "inputs.jsonl")
    want = rubric_run(rubric_bin, tmp_path, file, rows)
    out = tmp_path / "scored.jsonl"
    # the script's command line, on the running instance
    assert ray_score.main([str(file), str(write_rows(tmp_path / "rows.jsonl", rows)), str(out),
                           "--workers", "2", "--cpus-per-worker", "0.5", "--batch-size", "3"]) == 0
    got = read_rows(out)
    assert len(got) == len(rows)
    assert by_id(got) == by_id(want)


def test_ray_groups_score_like_rubric_run_groups(local_ray, rubric_bin, tmp_path):
    file = EXAMPLES / "ifeval" / "main.rubric"
    rows = [dict(row, prompt_id=f"p{i // 4}") for i, row in enumerate(read_rows(EXAMPLES / "ifeval" / "inputs.jsonl"))]
    want = rubric_run(rubric_bin, tmp_path, file, rows, "--groups", "prompt_id")
    assert any(rec.get("advantage") not in (None, 0) for rec in want)
    ds = ray_score.score_dataset(str(file), str(write_rows(tmp_path / "rows.jsonl", rows)), groups="prompt_id", **WORKERS)
    got = [json.loads(r["record"]) for r in ds.take_all()]
    assert by_id(got) == by_id(want)


def test_ray_workers_share_the_judge_cache(local_ray, rubric_bin, mock_judge, tmp_path):
    file = EXAMPLES / "healthbench" / "main.rubric"
    # the rows Arrow can read as one table (the example's last row has a number for `response`),
    # in three variants: a dozen rows with distinct judge requests
    base = read_rows(EXAMPLES / "healthbench" / "inputs.jsonl")[:4]
    rows = [dict(row, id=f"{row['id']}-{k}", response=f"{row['response']} ({k})") for k in range(3) for row in base]
    want = rubric_run(rubric_bin, tmp_path, file, rows, "--judges", mock_judge.judges, "--no-cache")
    calls = mock_judge.requests()
    assert calls > 0
    data = write_rows(tmp_path / "rows.jsonl", rows)
    cache = tmp_path / "judge-cache.sqlite"
    ds = ray_score.score_dataset(str(file), str(data), judges=str(mock_judge.judges), cache=str(cache),
                                 batch_size=2, **WORKERS)
    got = [json.loads(r["record"]) for r in ds.take_all()]
    assert by_id(got) == by_id(want)
    assert mock_judge.requests() == 2 * calls, "the workers made each call once"
    # a second pass: every reply comes from the shared cache file
    ds = ray_score.score_dataset(str(file), str(data), judges=str(mock_judge.judges), cache=str(cache),
                                 batch_size=2, **WORKERS)
    again = [json.loads(r["record"]) for r in ds.take_all()]
    assert by_id(again) == by_id(want)
    assert mock_judge.requests() == 2 * calls, "the second pass called the judge"
