"""score-file over a Parquet dataset in shards: the shards together are one run, each part whole or not at all."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.test_batch_file import BATCHING, FailingOnBatch, WordCounter, read_replies
from worker.core.errors import ConfigError
from worker.jobs.batch_file import score_file
from worker.jobs.batch_shards import other_shardings, plan_shard, score_shard
from worker.jobs.datasets import dataset_files, dataset_units, read_units
from worker.jobs.shards import Shard
from worker.jobs.tables import REPLY_SCHEMA, read_requests

# Three files of 37, 50 and 23 rows in row groups of 10: 4 + 5 + 3 = 12 row groups of 1 to 10 rows.
FILES = {"2026-12-01/a.parquet": 37, "2026-12-01/b.parquet": 50, "2026-12-02/a.parquet": 23}


def requests(name: str, rows: int) -> pa.Table:
    """Rows of words, every 9th without an id (a dead letter), every 11th not a string (an error reply)."""
    ids = [None if i % 9 == 4 else f"{name}:{i}" for i in range(rows)]
    inputs = [orjson.dumps(7 if i % 11 == 3 else "w " * (i % 5 + 1)).decode() for i in range(rows)]
    return pa.table({"id": pa.array(ids, pa.string()), "inputs": inputs})


def make_dataset(root: Path) -> list[pa.Table]:
    """The dataset under ``root``, written in reverse order of path (the order on disk must not matter), beside
    files a dataset skips; its tables in dataset order."""
    tables = {name: requests(name, rows) for name, rows in FILES.items()}
    for name in sorted(FILES, reverse=True):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(tables[name], root / name, row_group_size=10)
    (root / "_SUCCESS").write_bytes(b"")
    (root / ".a.parquet.crc").write_bytes(b"")
    (root / "_temporary").mkdir()
    pq.write_table(requests("skipped", 5), root / "_temporary" / "c.parquet")
    return [tables[name] for name in sorted(FILES)]


def score_all_shards(source: Path, out: Path, count: int, model: WordCounter | None = None) -> list[Path]:
    parts = []
    for index in range(count):
        plan = plan_shard(source, out, Shard(index, count), chunk_rows=7)
        score_shard(model or WordCounter(), plan, BATCHING, progress=False, chunk_rows=7)
        parts.append(plan.part)
    return parts


def dead_letters(part: Path) -> list[dict]:
    path = part.with_name(part.name + ".deadletter.jsonl")
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, list[pa.Table]]:
    (tmp_path / "in").mkdir()
    return tmp_path / "in", make_dataset(tmp_path / "in")


def test_the_dataset_is_its_parquet_files_sorted_by_path_each_cut_at_its_row_groups(dataset):
    source, _ = dataset
    assert dataset_files(source) == sorted(FILES)
    units = dataset_units(source)
    assert [(u.file, u.row_group, u.first_row, u.rows) for u in units][:5] == [
        ("2026-12-01/a.parquet", 0, 0, 10), ("2026-12-01/a.parquet", 1, 10, 10), ("2026-12-01/a.parquet", 2, 20, 10),
        ("2026-12-01/a.parquet", 3, 30, 7), ("2026-12-01/b.parquet", 0, 0, 10)]
    assert len(units) == 12 and sum(u.rows for u in units) == sum(FILES.values())


def test_the_rows_of_row_groups_are_numbered_as_a_run_over_their_file_alone_numbers_them(dataset):
    source, _ = dataset
    units = dataset_units(source)
    middle = [u for u in units if u.file == "2026-12-01/b.parquet"][1:4]
    whole = list(read_requests(source / "2026-12-01/b.parquet", 7))
    read = list(read_units(source, middle, 7))
    assert [(r.position.topic, r.position.offset, r.value) for r in read] == [
        ("2026-12-01/b.parquet", r.position.offset, r.value) for r in whole[10:40]]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 12, 20])
def test_the_shards_in_order_give_the_replies_of_one_run_over_the_dataset_concatenated(tmp_path, dataset, count):
    source, tables = dataset
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.concat_tables(tables), whole)
    score_file(WordCounter(), whole, tmp_path / "whole-replies.parquet", BATCHING, progress=False, chunk_rows=7)
    expected = read_replies(tmp_path / "whole-replies.parquet")

    parts = score_all_shards(source, tmp_path / "out", count)

    assert sorted(path.name for path in (tmp_path / "out").iterdir() if path.suffix == ".parquet") == [
        f"part-{i:05d}-of-{count:05d}.parquet" for i in range(count)]
    assert [reply for part in parts for reply in read_replies(part)] == expected
    assert any(r["status"] == "error" for r in expected) and len(expected) < sum(FILES.values())  # not all ok
    # Dead letters: the single run's, each named by its file in the dataset and its row there.
    whole_dead = orjson.loads(b"[" + b",".join((tmp_path / "whole-replies.parquet.deadletter.jsonl")
                                                .read_bytes().splitlines()) + b"]")
    shard_dead = [letter for part in parts for letter in dead_letters(part)]
    assert [d["raw"] for d in shard_dead] == [d["raw"] for d in whole_dead]
    starts = {"2026-12-01/a.parquet": 0, "2026-12-01/b.parquet": 37, "2026-12-02/a.parquet": 87}
    assert [starts[d["file"]] + d["line"] for d in shard_dead] == [d["line"] for d in whole_dead]


def test_a_shard_with_no_row_group_writes_an_empty_part(tmp_path, dataset):
    source, _ = dataset
    plans = [plan_shard(source, tmp_path / "out", Shard(i, 20)) for i in range(20)]
    empty = next(plan for plan in plans if not plan.units)
    summary = score_shard(WordCounter(), empty, BATCHING, progress=False)
    assert (summary.lines, summary.total) == (0, 0)
    table = pq.read_table(empty.part)
    assert table.num_rows == 0 and table.schema.equals(REPLY_SCHEMA)
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [empty.part.name]


def test_a_single_parquet_file_is_cut_at_its_row_groups(tmp_path):
    source = tmp_path / "in.parquet"
    pq.write_table(requests("one", 95), source, row_group_size=10)
    score_file(WordCounter(), source, tmp_path / "whole.parquet", BATCHING, progress=False)
    parts = score_all_shards(source, tmp_path / "out", 4)
    # 9 row groups of 10 rows and one of 5, in shards of about 95 / 4 rows.
    assert [plan_shard(source, tmp_path / "out", Shard(i, 4)).rows for i in range(4)] == [20, 30, 20, 25]
    assert [reply for part in parts for reply in read_replies(part)] == read_replies(tmp_path / "whole.parquet")


def test_a_rerun_of_a_shard_replaces_its_part_and_leaves_the_others(tmp_path, dataset):
    source, _ = dataset
    out = tmp_path / "out"
    first = score_all_shards(source, out, 3)
    before = {part: part.read_bytes() for part in first}

    class Version2(WordCounter):
        version = "2"

    plan = plan_shard(source, out, Shard(1, 3))
    score_shard(Version2(), plan, BATCHING, progress=False)
    assert {r["model_version"] for r in read_replies(first[1])} == {"2"}
    assert first[0].read_bytes() == before[first[0]] and first[2].read_bytes() == before[first[2]]
    assert not [path.name for path in out.iterdir() if ".partial-" in path.name]


def test_a_shard_that_fails_part_way_leaves_its_previous_part_and_no_partial_file(tmp_path, dataset):
    source, _ = dataset
    out = tmp_path / "out"
    (part,) = score_all_shards(source, out, 1)
    before = sorted(path.name for path in out.iterdir())
    yesterday = part.read_bytes()
    runner = FailingOnBatch(3, out, RuntimeError("the model broke"))
    with pytest.raises(RuntimeError):
        score_shard(runner, plan_shard(source, out, Shard(0, 1)), BATCHING, progress=False, chunk_rows=4)
    assert f".{part.name}.partial-{socket.gethostname()}-{os.getpid()}" in runner.seen
    assert part.read_bytes() == yesterday and sorted(path.name for path in out.iterdir()) == before


def test_parts_of_another_number_of_shards_are_named(tmp_path, dataset):
    source, _ = dataset
    score_all_shards(source, tmp_path / "out", 2)
    plan = plan_shard(source, tmp_path / "out", Shard(0, 3))
    assert other_shardings(plan) == ["part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]


def refusal(source: Path, out: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        plan_shard(source, out, Shard(0, 2))
    return str(refused.value)


def test_an_output_inside_the_input_is_refused(dataset):
    source, _ = dataset
    assert "is inside the input" in refusal(source, source / "replies")
    assert "is inside the input" in refusal(source, source)


def test_an_output_that_is_a_file_or_named_like_one_is_refused(tmp_path, dataset):
    source, _ = dataset
    (tmp_path / "out").write_bytes(b"")
    assert refusal(source, tmp_path / "out").startswith(f"the output {tmp_path / 'out'} is a file")
    assert "is named like a file" in refusal(source, tmp_path / "out.parquet")
    assert f"no directory {tmp_path / 'nope'}" in refusal(source, tmp_path / "nope" / "out")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in", "out"]  # nothing created


def test_a_dataset_with_jsonl_files_or_without_parquet_files_is_refused(tmp_path):
    (tmp_path / "in").mkdir()
    assert "no *.parquet file" in refusal(tmp_path / "in", tmp_path / "out")
    (tmp_path / "in" / "x.jsonl").write_bytes(b"{}\n")
    pq.write_table(requests("a", 3), tmp_path / "in" / "a.parquet")
    assert "1 JSONL file(s) are there (x.jsonl)" in refusal(tmp_path / "in", tmp_path / "out")


def test_a_dataset_file_without_an_id_column_is_refused_naming_it(tmp_path, dataset):
    source, _ = dataset
    pq.write_table(pa.table({"request_id": ["a"]}), source / "2026-12-03.parquet")
    assert refusal(source, tmp_path / "out").startswith(f"{source / '2026-12-03.parquet'} has no 'id' column")


def test_a_jsonl_file_cannot_be_sharded(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(b'{"id": "a", "inputs": "x"}\n')
    assert "--shard needs Parquet" in refusal(tmp_path / "in.jsonl", tmp_path / "out")
