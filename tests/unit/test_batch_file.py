"""The batch file job: input order kept, the stream's batch limits (size and token budget) honoured."""

from __future__ import annotations

import codecs
import os
import re
import socket
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.fakes import FakeClock
from worker.core.errors import ConfigError, InvalidInput
from worker.core.sections import BatchingSettings
from worker.jobs.batch_file import ScoringStopped, check_files, score_file
from worker.jobs.tables import count_requests
from worker.models.spec import VectorInputs
from worker.ports import Outcome

BATCHING = BatchingSettings(max_batch_size=4)


class WordCounter:
    """A model over strings whose cost is its word count; records every batch it runs."""

    name = "words"
    version = "1"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def prepare(self, inputs: Any) -> str:
        if not isinstance(inputs, str):
            raise InvalidInput("invalid_inputs", "expected a string")
        return inputs

    def cost(self, item: str) -> int:
        return len(item.split())

    def run(self, items: Sequence[Any]) -> list[Outcome]:
        self.batches.append(list(items))
        return [Outcome(self.cost(item)) for item in items]


def write_lines(path, lines):
    path.write_bytes(b"".join((line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines))


def test_replies_come_in_input_order_with_errors_and_dead_letters_in_place(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_lines(source, [{"id": "a", "inputs": "one"}, {"id": "b", "inputs": 7}, b"not json",
                         {"id": "c", "inputs": "two words"}, b"", {"id": "d", "inputs": "x y z"},
                         {"id": "e", "inputs": "a b c d"}, {"id": "f", "inputs": "last"}])
    runner = WordCounter()
    summary = score_file(runner, source, target, BATCHING, progress=False)
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [r["id"] for r in replies] == ["a", "b", "c", "d", "e", "f"]
    assert [r.get("outputs") for r in replies] == [1, None, 2, 3, 4, 1]
    assert replies[1]["error"]["code"] == "invalid_inputs"
    dead = [orjson.loads(line) for line in (tmp_path / "out.jsonl.deadletter.jsonl").read_bytes().splitlines()]
    assert [(d["file"], d["line"], d["error"]["code"]) for d in dead] == [(str(source), 3, "invalid_json")]
    assert (summary.lines, summary.ok, summary.errors, summary.dead_letters) == (7, 5, 1, 1)
    assert [len(b) for b in runner.batches] == [4, 1]


def test_a_byte_order_mark_before_the_first_line_is_no_part_of_it(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "inputs": "one"}\r\n{"id": "b", "inputs": "\xef\xbb\xbf"}\r\n')
    summary = score_file(WordCounter(), source, target, BATCHING, progress=False)
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [(r["id"], r.get("outputs")) for r in replies] == [("a", 1), ("b", 1)]  # a mark inside a line stays
    assert (summary.ok, summary.dead_letters) == (2, 0)


def test_the_token_budget_bounds_every_batch_and_refuses_an_input_too_large_alone(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    texts = ["a b c", "d e", "f g h i", "j", "k l m n o p q", "r s"]
    write_lines(source, [{"id": str(i), "inputs": text} for i, text in enumerate(texts)])
    runner = WordCounter()
    score_file(runner, source, target, replace(BATCHING, max_batch_tokens=6), progress=False)
    assert all(sum(runner.cost(item) for item in batch) <= 6 for batch in runner.batches)
    assert sorted(item for batch in runner.batches for item in batch) == sorted(t for t in texts if len(t.split()) <= 6)
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [r["id"] for r in replies] == [str(i) for i in range(len(texts))]
    assert replies[4]["error"]["code"] == "too_many_tokens"


# Parquet: the same requests as a table, the same replies as a table.

class FieldsEcho:
    """A model over ``fields`` inputs (an object of numbers): records each object, answers with their sum."""

    name = "fields"
    version = "1"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def prepare(self, inputs: Any) -> dict[str, Any]:
        if not isinstance(inputs, dict) or not all(isinstance(v, (int, float)) for v in inputs.values()):
            raise InvalidInput("invalid_inputs", "expected an object of numbers")
        self.seen.append(inputs)
        return inputs

    def run(self, items: Sequence[Any]) -> list[Outcome]:
        return [Outcome(sum(item.values())) for item in items]


def write_requests(path, requests, row_group_size=None):
    """JSONL lines, or a Parquet table whose ``inputs`` column holds each request's inputs as JSON text."""
    if path.suffix == ".jsonl":
        write_lines(path, requests)
        return
    table = pa.table({"id": pa.array([r.get("id") for r in requests], pa.string()),
                      "inputs": [orjson.dumps(r["inputs"]).decode() for r in requests],
                      "deadline_ms": pa.array([r.get("deadline_ms") for r in requests], pa.int64())})
    pq.write_table(table, path, row_group_size=row_group_size)


def read_replies(path):
    """Replies as wire-format dicts, from either format."""
    if path.suffix == ".jsonl":
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]
    replies = []
    for row in pq.read_table(path).to_pylist():
        reply = {"id": row["id"], "status": row["status"]}
        if row["status"] == "ok":
            reply["outputs"] = orjson.loads(row["outputs"])
        else:
            reply["error"] = {"code": row["error_code"], "message": row["error_message"]}
        replies.append(reply | {"model": row["model"], "model_version": row["model_version"]})
    return replies


def score_without_dead_letters(model, source, target):
    score_file(model, source, target, BATCHING, progress=False)
    assert not target.with_name(target.name + ".deadletter.jsonl").exists()
    return read_replies(target)


def dead_letters(target):
    path = target.with_name(target.name + ".deadletter.jsonl")
    return [(d["line"], d["error"]["code"]) for d in map(orjson.loads, path.read_bytes().splitlines())]


MIXED = [{"id": "a", "inputs": "one"}, {"id": "b", "inputs": 7}, {"inputs": "no id"},
         {"id": "c", "inputs": "two words", "deadline_ms": 1_900_000_000_000}, {"id": "d", "inputs": "x y z"},
         {"id": "e", "inputs": "a b c d"}, {"id": "f", "inputs": "last"}]


@pytest.mark.parametrize("suffix_in", [".jsonl", ".parquet"])
@pytest.mark.parametrize("suffix_out", [".jsonl", ".parquet"])
def test_every_combination_of_formats_gives_the_same_replies(tmp_path, suffix_in, suffix_out):
    source, target = tmp_path / f"in{suffix_in}", tmp_path / f"out{suffix_out}"
    write_requests(source, MIXED)
    summary = score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert read_replies(target) == [
        {"id": "a", "status": "ok", "outputs": 1, "model": "words", "model_version": "1"},
        {"id": "b", "status": "error", "error": {"code": "invalid_inputs", "message": "expected a string"},
         "model": "words", "model_version": "1"},
        *({"id": i, "status": "ok", "outputs": n, "model": "words", "model_version": "1"}
          for i, n in [("c", 2), ("d", 3), ("e", 4), ("f", 1)]),
    ]
    assert dead_letters(target) == [(3, "missing_id")]
    assert (summary.lines, summary.ok, summary.errors, summary.dead_letters) == (7, 5, 1, 1)


def test_without_an_inputs_column_the_other_columns_are_the_inputs_fields(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "tenure": [3, 12], "plan_price": [19.9, 5.0],
                             "deadline_ms": [None, 1_900_000_000_000]}), source)
    model = FieldsEcho()
    score_file(model, source, target, BATCHING, progress=False)
    assert model.seen == [{"tenure": 3, "plan_price": 19.9}, {"tenure": 12, "plan_price": 5.0}]
    assert [(r["id"], r["outputs"]) for r in read_replies(target)] == [("a", 22.9), ("b", 17.0)]


def test_model_columns_route_a_row_as_in_the_wire_format_and_are_never_inputs_fields(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.jsonl"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "tenure": [3, 12, 1], "model": ["fields", "other", None],
                             "model_version": ["1", None, None]}), source)
    model = FieldsEcho()
    score_file(model, source, target, BATCHING, progress=False)
    assert model.seen == [{"tenure": 3}, {"tenure": 1}]
    assert [(r["id"], r["status"], r.get("error", {}).get("code")) for r in read_replies(target)] == [
        ("a", "ok", None), ("b", "error", "unknown_model"), ("c", "ok", None)]


def test_a_row_without_a_usable_id_is_a_dead_letter_with_its_row_number(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.jsonl"
    pq.write_table(pa.table({"id": ["a", None, "", "b", "x" * 257], "inputs": ['"one"'] * 5}), source)
    summary = score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert [r["id"] for r in read_replies(target)] == ["a", "b"]
    assert dead_letters(target) == [(2, "missing_id"), (3, "invalid_id"), (5, "invalid_id")]
    assert summary.dead_letters == 3


def test_a_row_that_cannot_be_scored_gets_an_error_reply_in_its_place(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c", "d", "e"],
                             "inputs": ['"one"', "[1,", "7", None, '"three more words"']}), source)
    replies = score_without_dead_letters(WordCounter(), source, target)
    assert [(r["id"], r.get("error", {}).get("code")) for r in replies] == [
        ("a", None), ("b", "invalid_json"), ("c", "invalid_inputs"), ("d", "missing_inputs"), ("e", None)]


def test_an_inputs_column_of_lists_is_taken_as_it_is(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.jsonl"
    pq.write_table(pa.table({"id": ["a"], "inputs": pa.array([[0.5, 1.5]], pa.list_(pa.float64()))}), source)

    class Summer(WordCounter):
        def prepare(self, inputs: Any) -> Any:
            return inputs

        def run(self, items: Sequence[Any]) -> list[Outcome]:
            return [Outcome(sum(item)) for item in items]

    assert score_without_dead_letters(Summer(), source, target)[0]["outputs"] == 2.0


def test_a_file_of_many_chunks_is_scored_completely_in_order_a_row_group_per_chunk(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    # Input row groups of 1,500 rows, read in chunks of 1,000: chunks cross row groups.
    write_requests(source, [{"id": f"r{i}", "inputs": "w " * (i % 5 + 1)} for i in range(5000)], row_group_size=1500)
    runner = WordCounter()
    summary = score_file(runner, source, target, BATCHING, progress=False, chunk_rows=1000)
    replies = read_replies(target)
    assert [r["id"] for r in replies] == [f"r{i}" for i in range(5000)]
    assert [r["outputs"] for r in replies] == [i % 5 + 1 for i in range(5000)]
    assert summary.ok == 5000 and sum(len(b) for b in runner.batches) == 5000
    assert pq.ParquetFile(target).metadata.num_row_groups == 5


@pytest.mark.parametrize("name, chunk_rows, named", [
    ("in.csv", 10, "'.csv'"), ("in.jsonl", 0, "chunk_rows"), ("in.parquet", 10, "not a Parquet file"),
])
def test_an_unknown_format_a_bad_chunk_size_or_not_parquet_is_refused_before_writing(tmp_path, name, chunk_rows, named):
    source, target = tmp_path / name, tmp_path / "out.jsonl"
    source.write_bytes(b"")
    with pytest.raises(ConfigError, match=named):
        score_file(WordCounter(), source, target, BATCHING, progress=False, chunk_rows=chunk_rows)
    assert not target.exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_the_progress_total_counts_the_requests(tmp_path, suffix):
    source = tmp_path / f"in{suffix}"
    write_requests(source, MIXED)
    assert count_requests(source) == len(MIXED)


def test_blank_lines_are_not_counted_as_requests(tmp_path):
    """The progress bar's total, and a stop's "after reading N of M": blank lines are skipped, not counted."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(codecs.BOM_UTF8 + b'{"id": "a", "inputs": []}\n\n  \r\n{"id": "b", "inputs": []}\n\n')
    assert count_requests(source) == 2


# The output is never the input: scoring a file onto itself would replace the requests by their replies.

@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("how", ["the same path", "another spelling", "a symlink", "a hard link"])
def test_an_output_that_is_the_input_is_refused_naming_both_and_the_input_is_kept(tmp_path, suffix, how):
    source = tmp_path / f"in{suffix}"
    write_requests(source, MIXED)
    before = source.read_bytes()
    target = {"the same path": source, "another spelling": tmp_path / "sub" / ".." / source.name,
              "a symlink": tmp_path / f"link{suffix}", "a hard link": tmp_path / f"hard{suffix}"}[how]
    if how == "another spelling":
        (tmp_path / "sub").mkdir()
    elif how == "a symlink":
        target.symlink_to(source)
    elif how == "a hard link":
        target.hardlink_to(source)
    with pytest.raises(ConfigError) as refused:
        score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert f"the output {target} is the input {source}" in str(refused.value)
    assert source.read_bytes() == before


def test_an_output_in_a_directory_that_does_not_exist_is_refused_naming_it(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "nope" / "out.jsonl"
    write_requests(source, MIXED)
    with pytest.raises(ConfigError, match=f"the output {target} cannot be written: no directory {target.parent}"):
        check_files(source, target)


def test_an_output_whose_dead_letter_file_is_the_input_is_refused(tmp_path):
    source, target = tmp_path / "out.jsonl.deadletter.jsonl", tmp_path / "out.jsonl"
    write_requests(source, MIXED)
    before = source.read_bytes()
    with pytest.raises(ConfigError, match=f"the dead-letter file {source} of output {target} is the input"):
        score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert source.read_bytes() == before and not target.exists()


# Outputs are published whole or not at all: written beside the output, renamed onto it once complete.

class FailingOnBatch(WordCounter):
    """Raises on its ``n``-th batch, after recording what the output directory held meanwhile."""

    def __init__(self, n: int, directory, error: BaseException) -> None:
        super().__init__()
        self.n, self.directory, self.error, self.seen = n, directory, error, set()

    def run(self, items: Sequence[Any]) -> list[Outcome]:
        self.seen.update(path.name for path in self.directory.iterdir())
        if len(self.batches) + 1 == self.n:
            raise self.error
        return super().run(items)


def many_requests(n):
    return [{"id": f"r{i}", "inputs": "w " * (i % 5 + 1)} if i % 7 else {"inputs": "no id"} for i in range(n)]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("error", [RuntimeError("the model broke"), KeyboardInterrupt()])  # a second Ctrl-C
def test_a_run_that_fails_part_way_leaves_the_previous_output_as_it_was_and_no_partial_file(tmp_path, suffix, error):
    source, target = tmp_path / f"in{suffix}", tmp_path / f"out{suffix}"
    write_requests(source, many_requests(100))
    target.write_bytes(b"the replies of yesterday")
    runner = FailingOnBatch(5, tmp_path, error)
    with pytest.raises(type(error)):
        score_file(runner, source, target, BATCHING, progress=False, chunk_rows=4)
    writer = f"{socket.gethostname()}-{os.getpid()}"
    partial = f".out{suffix}.partial-{writer}"
    assert {partial, f".out{suffix}.deadletter.jsonl.partial-{writer}"} <= runner.seen  # written meanwhile
    assert target.read_bytes() == b"the replies of yesterday"
    assert sorted(path.name for path in tmp_path.iterdir()) == [source.name, target.name]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_stop_asked_for_ends_the_run_between_batches_saying_how_far_it_got_and_writes_nothing(tmp_path, suffix):
    source, target = tmp_path / f"in{suffix}", tmp_path / "out.parquet"
    write_requests(source, many_requests(100))
    runner = WordCounter()
    with pytest.raises(ScoringStopped) as stopped:
        score_file(runner, source, target, BATCHING, progress=False, chunk_rows=4,
                   stop=lambda: len(runner.batches) == 3)
    assert len(runner.batches) == 3  # no batch after the stop
    summary = stopped.value.summary
    # The stop is seen before the record after the third batch: 12 requests batched, 2 dead letters among them.
    assert (summary.read, summary.lines, summary.ok, summary.dead_letters) == (14, 14, 12, 2)
    assert summary.total == (100 if suffix == ".parquet" else None)  # known without a pass over a JSONL file
    assert sorted(path.name for path in tmp_path.iterdir()) == [source.name]


def test_a_stop_asked_for_after_the_last_batch_still_writes_nothing(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_requests(source, many_requests(10))
    runner = WordCounter()
    with pytest.raises(ScoringStopped) as stopped:
        score_file(runner, source, target, BATCHING, progress=False, stop=lambda: sum(map(len, runner.batches)) == 8)
    assert stopped.value.summary.lines == 10
    assert sorted(path.name for path in tmp_path.iterdir()) == [source.name]


def test_through_a_symlink_the_file_it_names_is_replaced_and_the_link_kept(tmp_path):
    source, real, link = tmp_path / "in.jsonl", tmp_path / "real.jsonl", tmp_path / "out.jsonl"
    write_requests(source, [{"id": "a", "inputs": "one"}])
    real.write_bytes(b"old")
    link.symlink_to(real)
    score_file(WordCounter(), source, link, BATCHING, progress=False)
    assert link.is_symlink() and [r["id"] for r in read_replies(real)] == ["a"]


def test_an_output_replaced_keeps_its_mode(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_requests(source, [{"id": "a", "inputs": "one"}])
    target.write_bytes(b"old")
    target.chmod(0o640)
    score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert [r["id"] for r in read_replies(target)] == ["a"] and target.stat().st_mode & 0o777 == 0o640


def test_a_dead_letter_file_of_an_earlier_run_goes_when_this_run_has_none(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_requests(source, [{"id": "a", "inputs": "one"}])
    (tmp_path / "out.jsonl.deadletter.jsonl").write_bytes(b"an old dead letter\n")
    score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


# Deadlines: a request whose deadline_ms has passed when its batch is scored is answered expired, as by the stream.

class TakingTenMs(WordCounter):
    """Each batch takes 10 ms of ``clock``."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def run(self, items: Sequence[Any]) -> list[Outcome]:
        self.clock.advance(0.010)
        return super().run(items)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_request_whose_deadline_passed_when_its_batch_is_scored_is_answered_expired(tmp_path, suffix):
    clock = FakeClock()
    now = clock.wall_ms()
    cases = {"a": (None, "ok"), "b": (now - 1, "expired"), "c": (now + 5, "ok"), "d": (now, "expired"),  # at now
             "e": (now + 5, "expired"), "f": (now + 100, "ok"), "g": (now + 10, "expired"), "h": (None, "ok"),  # +10 ms
             "i": (now + 15, "expired"), "j": (now + 19, "expired")}  # at now + 20 ms: all expired, nothing to run
    source, target = tmp_path / "in.jsonl", tmp_path / f"out{suffix}"
    write_lines(source, [{"id": i, "inputs": i} | ({"deadline_ms": d} if d else {}) for i, (d, _) in cases.items()])
    runner = TakingTenMs(clock)
    summary = score_file(runner, source, target, BATCHING, progress=False, clock=clock)
    expired = {"code": "deadline_exceeded", "message": "the deadline passed before scoring"}
    assert [(r["id"], r["status"], r.get("error")) for r in read_replies(target)] == [
        (i, status, expired if status == "expired" else None) for i, (_, status) in cases.items()]
    assert runner.batches == [["a", "c"], ["f", "h"]]
    assert (summary.ok, summary.errors, summary.expired, summary.dead_letters) == (4, 0, 6, 0)


# A line over the size limit is answered when its id can be read; only one without is a dead letter.

BIG = "w " * 100
TOO_LARGE = [{"id": "small", "inputs": "one"}, {"id": "big", "inputs": BIG}, {"inputs": BIG}]
TOO_LARGE_LINES = [{"id": "no inputs", "padding": BIG},  # a readable id, and another error: the size is reported
                   {"id": 7, "inputs": BIG},  # an id, but not a usable one
                   b'{"id": "cut", "inputs": "' + b"w" * 200]  # not JSON: no id to read


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_request_over_the_size_limit_is_answered_record_too_large_when_its_id_can_be_read(tmp_path, suffix):
    source, target = tmp_path / f"in{suffix}", tmp_path / "out.jsonl"
    write_requests(source, TOO_LARGE + (TOO_LARGE_LINES if suffix == ".jsonl" else []))
    summary = score_file(WordCounter(), source, target, replace(BATCHING, max_record_bytes=100), progress=False)
    replies = read_replies(target)
    assert [(r["id"], r["status"], r.get("error", {}).get("code")) for r in replies] == [
        ("small", "ok", None), ("big", "error", "record_too_large"),
        *([("no inputs", "error", "record_too_large")] if suffix == ".jsonl" else [])]
    assert re.fullmatch(r"record value is \d+ bytes, the limit is 100", replies[1]["error"]["message"])
    assert dead_letters(target) == [(3, "record_too_large")] + (
        [(5, "record_too_large"), (6, "record_too_large")] if suffix == ".jsonl" else [])
    assert (summary.errors, summary.dead_letters) == ((2, 3) if suffix == ".jsonl" else (1, 1))


# A Parquet file without a string id column would dead-letter every row: it is refused at start.

@pytest.mark.parametrize("columns, refused", [
    ({"request_id": ["a"], "inputs": ['"one"']},
     r"in.parquet has no 'id' column: score-file needs each row's request id in a string column named 'id' "
     r"\(the file's columns: request_id, inputs\)"),
    ({"tenure": [3], "plan_price": [19.9]}, r"\(the file's columns: tenure, plan_price\)"),
    ({"id": [1], "inputs": ['"one"']}, r"in.parquet: column 'id' is int64; score-file needs strings .* cast it"),
    ({"id": pa.array([None], pa.null()), "inputs": ['"one"']}, r"column 'id' is null"),
])
def test_a_parquet_file_without_a_string_id_column_is_refused_at_start_naming_its_columns(tmp_path, columns, refused):
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table(columns), source)
    with pytest.raises(ConfigError, match=refused):
        check_files(source, target)  # what the command line asks before the model loads
    with pytest.raises(ConfigError, match=refused):
        score_file(WordCounter(), source, target, BATCHING, progress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.parquet"]


@pytest.mark.parametrize("ids", [pa.array(["a", "b"], pa.large_string()), pa.array(["a", "b"]).dictionary_encode()])
def test_an_id_column_of_any_string_type_is_taken(tmp_path, ids):
    source, target = tmp_path / "in.parquet", tmp_path / "out.jsonl"
    pq.write_table(pa.table({"id": ids, "inputs": ['"one"', '"two words"']}), source)
    assert [(r["id"], r["outputs"]) for r in score_without_dead_letters(WordCounter(), source, target)] == [
        ("a", 1), ("b", 2)]


def test_a_nan_or_infinite_input_cell_is_answered_invalid_inputs_naming_it_null(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.jsonl"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "inputs": pa.array(
        [[0.5, 1.5], [0.5, float("nan")], [float("inf"), 1.0]], pa.list_(pa.float64()))}), source)

    class Pairs(WordCounter):
        def prepare(self, inputs: Any) -> Any:
            return VectorInputs(2).prepare(inputs)

        def run(self, items: Sequence[Any]) -> list[Outcome]:
            return [Outcome(sum(item)) for item in items]

    replies = score_without_dead_letters(Pairs(), source, target)
    assert [(r["id"], r.get("error")) for r in replies] == [
        ("a", None),
        ("b", {"code": "invalid_inputs", "message": "inputs[1] must be a number, got null"}),
        ("c", {"code": "invalid_inputs", "message": "inputs[0] must be a number, got null"})]
