"""``python -m worker score-file`` as a user meets it: refusals before anything is written, one line each."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.integration.kit import REPO, wait_until

INPUTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 0, 0, 0, 0, 0, 0]  # the churn model's 16 numbers


ENV = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")} | {"PYTHONPATH": str(REPO)}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "worker", "score-file", "--no-progress", "--log-format", "console", *args]


def score_file(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)


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


def test_a_parquet_file_without_an_id_column_is_refused_in_one_line_naming_its_columns(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"request_id": ["a"], "inputs": [orjson.dumps(INPUTS).decode()]}), source)
    result = score_file(str(source), str(target))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {source} has no 'id' column: score-file needs each row's request id in a string column named 'id' "
        "(the file's columns: request_id, inputs)"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.parquet"]


ONE_OF_EACH = [{"id": "ok", "inputs": INPUTS}, {"id": "short", "inputs": [1]},  # wrong_input_length
               {"id": "late", "inputs": INPUTS, "deadline_ms": 1},  # 1 ms after 1970
               {"inputs": INPUTS},  # no id
               {"id": "ok too", "inputs": INPUTS}]


def test_the_summary_says_how_many_requests_were_ok_error_expired_and_dead_lettered(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(request) + b"\n" for request in ONE_OF_EACH))
    result = score_file(str(source), str(target))
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(rf"scored 5 requests in \d+\.\d s -> {target}: ok 2, error 1, expired 1, "
                        rf"dead-lettered 1 \(in {target}.deadletter.jsonl\)", line), line



def test_with_json_logs_the_summary_is_one_log_line_with_the_same_counts(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(request) + b"\n" for request in ONE_OF_EACH))
    result = score_file(str(source), str(target), "--log-format", "json")
    assert result.returncode == 0, result.stderr
    (summary,) = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert {k: summary[k] for k in ("event", "requests", "ok", "errors", "expired", "dead_letters")} == {
        "event": "file_scored", "requests": 5, "ok": 2, "errors": 1, "expired": 1, "dead_letters": 1}
    assert summary["dead_letter_file"] == f"{target}.deadletter.jsonl"


ROWS = 1_000_000  # at tens of thousands of rows a second, far more than scored between seeing progress and the signal


@pytest.mark.parametrize("signum, log_format", [(signal.SIGINT, "console"), (signal.SIGTERM, "console"),
                                               (signal.SIGTERM, "json")], ids=["SIGINT", "SIGTERM", "SIGTERM-json"])
def test_a_signal_stops_the_run_between_batches_saying_how_far_it_got_and_leaves_the_output_as_it_was(
        tmp_path, signum, log_format):
    data = tmp_path / "data"
    data.mkdir()
    source, target = data / "in.parquet", data / "out.parquet"
    pq.write_table(pa.table({"id": pa.array(f"r{i}" for i in range(ROWS)),
                             "inputs": pa.array([orjson.dumps(INPUTS).decode()] * ROWS).dictionary_encode()}), source)
    pq.write_table(pa.table({"id": ["yesterday"]}), target)
    before = target.read_bytes()
    with (tmp_path / "stderr").open("w+") as stderr:
        worker = subprocess.Popen(command(str(source), str(target), "--chunk-rows", "1000", "--log-format", log_format),
                                  cwd=REPO, env=ENV, stderr=stderr)
        partial = data / f".out.parquet.partial-{worker.pid}"
        try:
            wait_until(lambda: worker.poll() is not None or _size(partial) > 10_000, 120, "replies written")
            assert worker.poll() is None, f"score-file exited before the signal, {partial.name} not seen growing"
            worker.send_signal(signum)
            code = worker.wait(timeout=60)
        finally:
            worker.kill()
        stderr.seek(0)
        (line,) = stderr.read().splitlines()  # one line: no traceback, no log lines
    assert code == 128 + signum
    name = signal.Signals(signum).name
    if log_format == "json":
        stopped = orjson.loads(line)
        assert {k: stopped[k] for k in ("event", "signal", "total", "output", "output_written", "exit_code")} == {
            "event": "file_scoring_stopped", "signal": name, "total": ROWS, "output": str(target),
            "output_written": False, "exit_code": code}
        read, answered = stopped["read"], stopped["answered"]
    else:
        said = re.fullmatch(rf"score-file stopped by {name} after reading (\d+) of {ROWS} requests \((\d+) answered\): "
                            rf"no output written, {target} left as it was", line)
        assert said, line
        read, answered = map(int, said.groups())
    assert 0 < answered <= read < ROWS
    assert target.read_bytes() == before
    assert sorted(path.name for path in data.iterdir()) == ["in.parquet", "out.parquet"]


def _size(path):
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
