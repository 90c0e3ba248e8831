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


SUBMISSION = """rubric t.dir @ 1.0.0
input sub: Text
let run = exec("python3", "print(open('solution.py').read().strip())", dir: sub)
criterion says "Prints the solution" check run.stdout == "answer = 42\\n"
score = fraction(all)
"""


def test_a_submission_directory_is_read_under_dir_root_only(tmp_path):
    root = tmp_path / "submissions"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "solution.py").write_text("answer = 42\n")
    main = tmp_path / "main.rubric"
    main.write_text(SUBMISSION)
    rows = [{"id": "alice", "sub": "alice"}, {"id": "out", "sub": "../submissions/alice"}]
    rubric.configure_exec(allow=True, cache=False, dir_root=root)
    got = rubric.load(str(main)).score(rows)
    assert got[0]["score"] == 1.0, got[0]
    assert got[1]["score"] is None and "exec_dir" in str(got[1]), got[1]
    # No root: nothing is read from disk.
    rubric.configure_exec(allow=True, cache=False)
    got = rubric.load(str(main)).score(rows[:1])
    assert got[0]["score"] is None and "--exec-dir-root" in str(got[0]), got[0]
