"""``python -m worker score-file`` as a user meets it: refusals before anything is written, one line each."""

from __future__ import annotations

import os
import re
import signal
import socket
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


def test_the_streaming_workers_flags_are_said_to_do_nothing_here(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(request) + b"\n" for request in ONE_OF_EACH))
    result = score_file(str(source), str(target), "--log-format", "json", "--processes", "4", "--http-port", "9100",
                        "--liveness-timeout-s", "0.001")  # a probe that would fail at once: there is none
    assert result.returncode == 0, result.stderr
    ignored, summary = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert (ignored["event"], ignored["flags"]) == ("flags_ignored",
                                                    ["--processes", "--http-port", "--liveness-timeout-s"])
    assert "--shard I/N" in ignored["reason"] and summary["ok"] == 2


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
        partial = data / f".out.parquet.partial-{socket.gethostname()}-{worker.pid}"
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


# A dataset in shards: each process scores its share into a part of its own; the parts are one run's replies.

def churn_requests(name, rows):
    ids = [None if i == 17 else f"{name}:{i}" for i in range(rows)]  # one dead letter
    inputs = [orjson.dumps([(i % 13) / 13, *INPUTS[1:]]).decode() for i in range(rows)]
    return pa.table({"id": pa.array(ids, pa.string()), "inputs": inputs})


@pytest.fixture
def dataset(tmp_path):
    """Three files of 300, 250 and 120 rows in row groups of 100 (8 row groups), and their rows as one file."""
    tables = [churn_requests(name, rows) for name, rows in (("a", 300), ("b", 250), ("c", 120))]
    (tmp_path / "in" / "day=2").mkdir(parents=True)
    for name, table in zip(("day=1.parquet", "day=2/b.parquet", "day=2/c.parquet"), tables, strict=True):
        pq.write_table(table, tmp_path / "in" / name, row_group_size=100)
    pq.write_table(pa.concat_tables(tables), tmp_path / "whole.parquet")
    return tmp_path / "in"


def replies_of(*paths):
    return [row for path in paths for row in pq.read_table(path).to_pylist()]


def test_two_shards_of_a_dataset_give_the_replies_of_one_run_over_it(tmp_path, dataset):
    whole = score_file(str(tmp_path / "whole.parquet"), str(tmp_path / "whole-replies.parquet"))
    assert whole.returncode == 0, whole.stderr
    out = tmp_path / "out"
    first = score_file(str(dataset), str(out), "--shard", "0/2")
    second = score_file(str(dataset), str(out), "--shard=1/2", "--log-format", "json")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr

    (line,) = first.stderr.splitlines()
    assert re.fullmatch(rf"shard 0/2: rows 1-300 in 3 of the dataset's 8 row groups, 670 rows \(plan [0-9a-f]{{12}}\): "
                        rf"scored 300 requests in \d+\.\d s -> {out}/part-00000-of-00002.parquet: ok 299, error 0, "
                        rf"expired 0, dead-lettered 1 \(in {out}/part-00000-of-00002.parquet.deadletter.jsonl\)",
                        line), line
    (logged,) = [orjson.loads(line) for line in second.stderr.splitlines()]
    assert {k: logged[k] for k in ("event", "shard", "shards", "row_groups", "rows_before", "dataset_rows")} == {
        "event": "file_scored", "shard": 1, "shards": 2, "row_groups": 5, "rows_before": 300, "dataset_rows": 670}
    assert logged["plan"] in line  # both processes planned over the same files

    parts = sorted(out.glob("part-*.parquet"))
    assert [p.name for p in parts] == ["part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]
    expected, got = replies_of(tmp_path / "whole-replies.parquet"), replies_of(*parts)
    assert [(r["id"], r["status"]) for r in got] == [(r["id"], r["status"]) for r in expected]
    assert len(got) == 667 and {r["status"] for r in got} == {"ok"}
    # Batches differ between the runs, and a float's last bits with them.
    assert [orjson.loads(r["outputs"])["churn_probability"] for r in got] == pytest.approx(
        [orjson.loads(r["outputs"])["churn_probability"] for r in expected], rel=1e-5)


def test_a_shard_with_nothing_to_score_writes_an_empty_part_and_says_so(tmp_path, dataset):
    out = tmp_path / "out"
    result = score_file(str(dataset), str(out), "--shard", "1/12")  # 8 row groups in 12 shards: this one is empty
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(rf"shard 1/12 is empty \(the dataset's 8 row groups, 670 rows went to the other shards; "
                        rf"plan [0-9a-f]{{12}}\): scored 0 requests in \d+\.\d s -> {out}/part-00001-of-00012.parquet: "
                        r"ok 0, error 0, expired 0, dead-lettered 0", line), line
    assert pq.read_table(out / "part-00001-of-00012.parquet").num_rows == 0


@pytest.mark.parametrize("args, message", [
    (["--shard", "4/4"], "error: --shard 4/4: the index must be 0 to 3 for 4 shards (shards count from 0), got 4"),
    (["--shard", "four"], "error: --shard 'four': expected I/N, this shard's index and the number of shards "
                          "(e.g. --shard 0/4 for the first of four)"),
])
def test_a_bad_shard_is_refused_in_one_line_naming_the_flag_before_anything_is_written(tmp_path, dataset, args,
                                                                                         message):
    result = score_file(str(dataset), str(tmp_path / "out"), *args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message]
    assert not (tmp_path / "out").exists()


def test_one_model_of_a_configuration_file_answers_with_its_name_and_version(tmp_path):
    config = tmp_path / "worker.toml"
    config.write_text('[models.churn]\nmodel = "churn"\ncanary = "churn-next"\ncanary_weight = 0.5\n'
                      '[models.churn-next]\nmodel = "churn"\nversion = "next"\nmax_batch_size = 4\n')
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps({"id": f"r{i}", "inputs": INPUTS}) + b"\n" for i in range(6)))
    result = score_file(str(source), str(target), "--config", str(config), "--model", "churn-next")
    assert result.returncode == 0, result.stderr
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert {(r["status"], r["model"], r["model_version"]) for r in replies} == {("ok", "churn-next", "next")}
    unknown = score_file(str(source), str(target), "--config", str(config), "--model", "text")
    assert unknown.returncode == 2 and "no model 'text' in the configuration file" in unknown.stderr
