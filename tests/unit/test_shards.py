"""The shard rule (worker/jobs/shards.py): every row group in exactly one shard, in order, balanced by rows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.errors import ConfigError
from worker.jobs.shards import Shard, Unit, assign, fingerprint, parse_shard, shard_units


def units_of(rows: list[int]) -> list[Unit]:
    """One unit per row count, two row groups a file, in the dataset's order."""
    return [Unit(f"f{i // 2:03d}.parquet", i % 2, 0, n) for i, n in enumerate(rows)]


@pytest.mark.parametrize("text, shard", [("0/1", Shard(0, 1)), ("3/8", Shard(3, 8)), ("7/8", Shard(7, 8)),
                                         (" 2/4\n", Shard(2, 4)), ("99998/99999", Shard(99998, 99999))])
def test_a_shard_is_its_index_and_count(text, shard):
    assert parse_shard(text) == shard


@pytest.mark.parametrize("text, says", [
    ("", "expected I/N"), ("3", "expected I/N"), ("a/b", "expected I/N"), ("1/2/3", "expected I/N"),
    ("1.0/2", "expected I/N"),
    ("4/4", "the index must be 0 to 3 for 4 shards (shards count from 0), got 4"),
    ("-1/4", "the index must be 0 to 3 for 4 shards (shards count from 0), got -1"),
    ("0/0", "the number of shards must be 1 to 99999, got 0"),
    ("0/100000", "the number of shards must be 1 to 99999, got 100000"),
])
def test_a_bad_shard_is_refused_naming_the_flag_and_the_value(text, says):
    with pytest.raises(ConfigError) as refused:
        parse_shard(text)
    assert str(refused.value).startswith(f"--shard {text!r}:" if "expected" in says else f"--shard {text}:")
    assert says in str(refused.value)


def test_part_names_sort_in_shard_order():
    names = [Shard(i, 12).part_name for i in range(12)]
    assert names[3] == "part-00003-of-00012.parquet" and sorted(names) == names


@given(st.lists(st.integers(0, 500), max_size=40), st.integers(1, 60))
def test_every_unit_goes_to_exactly_one_shard_in_order_and_shards_are_balanced_to_a_unit(rows, count):
    units = units_of(rows)
    shards = [shard_units(units, Shard(i, count)) for i in range(count)]
    # Union and disjointness at once: the shards, in order, are the units, in order, each once.
    assert [unit for shard in shards for unit in shard] == units
    assigned = assign(units, count)
    assert assigned == sorted(assigned) and all(0 <= s < count for s in assigned)
    total, largest = sum(rows), max(rows, default=0)
    for shard in shards:
        assert sum(unit.rows for unit in shard) <= total / count + largest


@pytest.mark.parametrize("count", [1, 2, 3, 4, 6, 12])
def test_equal_row_groups_split_evenly_when_the_count_divides_them(count):
    units = units_of([100] * 12)
    assert [len(shard_units(units, Shard(i, count))) for i in range(count)] == [12 // count] * count


def test_more_shards_than_row_groups_leaves_some_shards_empty():
    units = units_of([100, 100, 100])
    sizes = [len(shard_units(units, Shard(i, 5))) for i in range(5)]
    assert sorted(sizes) == [0, 0, 1, 1, 1] and sum(sizes) == 3


def test_a_row_group_goes_to_the_shard_holding_its_middle_row():
    # 10 then 1,000 rows: the big one's middle row (510 of 1,010) is in the second half.
    assert assign(units_of([10, 1000]), 2) == [0, 1]
    assert assign(units_of([1000, 10]), 2) == [0, 1]
    assert assign(units_of([1000, 10]), 3) == [1, 2]  # shard 0 is empty: no row group's middle is in its third


def test_a_dataset_of_empty_row_groups_is_all_in_shard_0():
    assert assign(units_of([0, 0, 0]), 4) == [0, 0, 0]


def test_the_fingerprint_follows_paths_row_groups_and_rows():
    units = units_of([10, 20, 30])
    assert fingerprint(units) == fingerprint(units_of([10, 20, 30]))
    assert fingerprint(units) != fingerprint(units_of([10, 20, 31]))
    assert fingerprint(units) != fingerprint(units[:2])
