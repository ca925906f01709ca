"""``python -m worker score-file`` as a user meets it: refusals before anything is written, one line each."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson

from tests.integration.kit import REPO

INPUTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 0, 0, 0, 0, 0, 0]  # the churn model's 16 numbers


def score_file(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")} | {"PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "worker", "score-file", *args, "--no-progress", "--log-format", "console"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_scoring_a_file_onto_itself_is_refused_in_one_line_and_the_file_kept(tmp_path):
    same = tmp_path / "same.jsonl"
    same.write_bytes(b"".join(orjson.dumps({"id": f"r{i}", "inputs": INPUTS}) + b"\n" for i in range(1000)))
    before = same.read_bytes()
    result = score_file(str(same), str(same))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: the output {same} is the input {same}: the requests would be replaced by their replies; "
        "write them to another path"]
    assert same.read_bytes() == before
