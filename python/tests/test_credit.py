"""Token credit through the bindings: `Rubric.score(rows, groups=..., token_offsets=...)` gives
the records of `rubric run --groups` on the same rows carrying `token_offsets`, whether the
offsets come in the rows, as lists beside them, or as NumPy arrays."""

import numpy as np
import pytest

import rubric
from support import rubric_run

CREDIT = r"""rubric py.credit @ 1.0.0
input response: Text
criterion cite "Cites a source" check matches(response, "\\[\\d+\\]")
criterion polite "Says please" check contains_ci(response, "please")
criterion short "At most 12 words" check word_count(response) <= 12
score = fraction(all)

reward {
  advantage mean
  uncovered row
}
"""

RESPONSES = [
    ("g1", "Please see [1] and [2], please."),
    ("g1", "Café au lait [3]: ask nicely, please."),
    ("g1", "No."),
    ("g2", "A long answer that never cites anything at all and keeps going on and on."),
    ("g2", "Please [4]"),
]


def word_offsets(text):
    """[start, end] in characters of each whitespace-separated token."""
    out, start = [], None
    for i, ch in enumerate(text + " "):
        if not ch.isspace() and start is None:
            start = i
        elif ch.isspace() and start is not None:
            out.append([start, i])
            start = None
    return out


def rows_and_offsets():
    rows = [{"group": g, "response": r} for g, r in RESPONSES]
    offsets = [word_offsets(r) for _, r in RESPONSES]
    offsets[2] = None  # a row without offsets: no credit
    offsets[3] = [[5, 2]]  # a token that ends before it starts: token_credit_error
    return rows, offsets


@pytest.fixture
def expected(rubric_bin, tmp_path):
    """`rubric run --groups` on the rows with their offsets in them."""
    path = tmp_path / "credit.rubric"
    path.write_text(CREDIT)
    rows, offsets = rows_and_offsets()
    inline = [dict(row, token_offsets=o) if o is not None else row for row, o in zip(rows, offsets)]
    want = rubric_run(rubric_bin, tmp_path, path, inline, "--groups")
    assert [len(rec.get("token_credit", [])) for rec in want] == [6, 7, 0, 0, 2], want
    assert "token_credit_error" in want[3] and "cite" in want[1]["criterion_spans"]
    return path, inline, want


def test_token_offsets_give_the_token_credit_of_rubric_run(expected):
    path, inline, want = expected
    r = rubric.load(str(path))
    rows, offsets = rows_and_offsets()
    assert r.score(inline, groups="group") == want
    assert r.score(rows, groups="group", token_offsets=offsets) == want
    # tuples for pairs, and an iterator of rows
    tuples = [None if o is None else [tuple(p) for p in o] for o in offsets]
    assert r.score(iter(rows), groups="group", token_offsets=tuples) == want
    # the worked figures: in g2's second row both tokens are covered by `cite` and `polite`
    assert want[4]["token_credit"][0] == pytest.approx(want[4]["token_credit"][1])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16])
def test_numpy_offsets_give_the_same_records(expected, dtype):
    path, _, want = expected
    rows, offsets = rows_and_offsets()
    arrays = [None if o is None else np.array(o, dtype=dtype).reshape(-1, 2) for o in offsets]
    assert arrays[0].shape == (6, 2)
    assert rubric.load(str(path)).score(rows, groups="group", token_offsets=arrays) == want


def test_token_offsets_that_do_not_fit_are_refused(expected):
    path, inline, _ = expected
    r = rubric.load(str(path))
    rows, offsets = rows_and_offsets()
    with pytest.raises(ValueError, match="needs groups"):
        r.score(rows, token_offsets=offsets)
    with pytest.raises(ValueError, match="4 entries for 5 rows"):
        r.score(rows, groups="group", token_offsets=offsets[:4])
    with pytest.raises(ValueError, match="row 0 has a token_offsets field"):
        r.score(inline, groups="group", token_offsets=offsets)
    # offsets that are not pairs of ints: the row's `token_credit_error`, as in `rubric run`
    recs = r.score(rows, groups="group", token_offsets=[[[0.5, 2]], None, None, None, "all"])
    assert "token_credit_error" in recs[0] and "token_credit_error" in recs[4]
    assert "token_credit" not in recs[0]
