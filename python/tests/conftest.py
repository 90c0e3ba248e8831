"""Fixtures: the `rubric` binary the records are compared with, and the mock judge."""

import os
import subprocess

import pytest

from support import EXAMPLES, ROOT, MockJudge


@pytest.fixture(scope="session")
def rubric_bin() -> str:
    path = os.environ.get("RUBRIC_BIN") or str(ROOT / "target" / "debug" / "rubric")
    if not os.access(path, os.X_OK):
        subprocess.run(["cargo", "build", "-q", "--bin", "rubric"], cwd=ROOT, check=True)
    return path


@pytest.fixture
def mock_judge(rubric_bin, tmp_path):
    """`rubric mock-judge` with the HealthBench example's rules (examples/healthbench/mock-rules.toml)."""
    mock = MockJudge(rubric_bin, EXAMPLES / "healthbench" / "mock-rules.toml", tmp_path)
    yield mock
    mock.stop()
