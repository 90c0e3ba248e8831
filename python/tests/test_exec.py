"""Code execution from Python: ``rubric.configure_exec(allow=True)`` lets a rubric's ``exec``
calls run in the sandbox, and the records equal ``rubric run --allow-exec`` on the same rows
(examples/code-tests); without permission nothing runs and ``exec`` is unscored."""

import rubric
from support import EXAMPLES, read_rows, rubric_run

CODE_TESTS = EXAMPLES / "code-tests"


def _without_engine(records):
    return [{k: v for k, v in r.items() if k != "engine"} for r in records]


def test_exec_scores_like_rubric_run_allow_exec(rubric_bin, tmp_path):
    rows = read_rows(CODE_TESTS / "inputs.jsonl")
    want = rubric_run(rubric_bin, tmp_path, CODE_TESTS / "main.rubric", rows, "--allow-exec", "--no-exec-cache")
    rubric.configure_exec(allow=True, cache=False)
    r = rubric.load(str(CODE_TESTS / "main.rubric"))
    got = r.score(rows)
    assert _without_engine(got) == _without_engine(want)
    stats = rubric.exec_stats()
    assert stats["executed"] > 0 and stats["failed"] == 0, stats
    # The same rows again: every execution is answered in memory, none runs.
    before = stats["executed"]
    assert _without_engine(r.score(rows)) == _without_engine(want)
    assert rubric.exec_stats()["executed"] == before


def test_without_permission_nothing_runs(tmp_path):
    rubric.configure_exec(allow=False, cache=False)
    r = rubric.load(str(CODE_TESTS / "main.rubric"))
    rec = r.score(read_rows(CODE_TESTS / "inputs.jsonl")[:1])[0]
    assert rec["score"] is None, rec
    reasons = [c.get("reason", "") for c in rec["criteria"]] + [rec.get("unscored_reason", "")]
    assert any("exec_not_allowed" in x for x in reasons), rec
    assert rubric.exec_stats()["executed"] == 0
