"""Fixtures of the trainer tests: the `rubric` binary the rewards are compared with, the mock
judge that grades the judged rubric, and the tiny model.

These tests run against the real trainer packages (TRL, verl, OpenRLHF) installed by
scripts/install-trainers.sh; `bash python/test-trainers.sh` installs them and runs this
directory. Nothing is downloaded from a model hub: the Hugging Face libraries are put offline."""

import os
import sys
from pathlib import Path

# before any Hugging Face library is imported: a test that tried to download would fail
for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

# the helpers of the package's own tests (`rubric run`, `rubric mock-judge`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import ROOT, MockJudge  # noqa: E402
from trainer_support import MANNERS_RULES, make_tiny_lm  # noqa: E402


@pytest.fixture(scope="session")
def rubric_bin() -> str:
    path = os.environ.get("RUBRIC_BIN") or str(ROOT / "target" / "debug" / "rubric")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no rubric binary at {path}: build it (cargo build --bin rubric) or set RUBRIC_BIN")
    return path


@pytest.fixture
def mock_judge(rubric_bin, tmp_path):
    """`rubric mock-judge` with the manners rubric's rules, and `judges` (a judges.toml bound to it)."""
    mock = MockJudge(rubric_bin, MANNERS_RULES, tmp_path)
    yield mock
    mock.stop()


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    """(directory, tokenizer): a freshly made tiny model and its tokenizer, saved in the directory."""
    directory = tmp_path_factory.mktemp("tiny-lm")
    tokenizer = make_tiny_lm(directory)
    return directory, tokenizer
