"""Helpers shared by the tests: the repository's paths, `rubric run` on the built binary, JSONL
reading, and `rubric mock-judge` (the binary's loopback judge server) with a `judges.toml` bound
to it."""

import json
import subprocess
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def rubric_run(rubric_bin, tmp_path, file, rows, *args, name="run"):
    """The records `rubric run` writes for `rows` (extra arguments: `--groups`, `--judges`...)."""
    inp, out = tmp_path / f"{name}-in.jsonl", tmp_path / f"{name}-out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = subprocess.run(
        [rubric_bin, "run", str(file), "--input", str(inp), "--output", str(out), "--no-progress", *map(str, args)],
        capture_output=True,
    )
    # 3: the run went through and some rows failed (error records, unscored criteria): the
    # records are what is compared.
    if p.returncode not in (0, 3):
        raise RuntimeError(f"rubric run exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return [json.loads(line) for line in out.read_text().splitlines()]


def read_rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class MockJudge:
    """A running `rubric mock-judge --rules RULES --addr 127.0.0.1:0`, and `judges` (a
    `judges.toml` binding every judge to it)."""

    def __init__(self, rubric_bin, rules, tmp_path):
        self.proc = subprocess.Popen(
            [rubric_bin, "mock-judge", "--rules", str(rules), "--addr", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"rubric mock-judge did not print its address: {self.base_url!r}")
        self.judges = tmp_path / "judges.toml"
        self.judges.write_text(
            f'default = "mock"\n[endpoints.mock]\nbase_url = "{self.base_url}"\nconcurrency = 16\n'
        )

    def stats(self):
        url = self.base_url[: -len("/v1")] + "/stats"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.loads(resp.read())

    def requests(self):
        """Chat-completion requests the mock has received."""
        return self.stats()["requests"]

    def stop(self):
        self.proc.kill()
        self.proc.wait()
