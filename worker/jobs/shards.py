"""Which rows of a Parquet dataset shard ``i`` of ``N`` scores: the rule, pure, the same on every machine.

A dataset is cut into units, one per row group of each of its files, in the
order of the files' paths relative to the dataset (sorted by code point, as
``sorted`` sorts strings), then of the row groups within each file. Only
paths and row counts (from the files' footers) decide: the same dataset gives
every process, on any machine, the same units.

The rule: the dataset's ``T`` rows, in unit order, are cut into ``N`` equal
runs of ``T / N`` rows, and each unit goes to the shard whose run holds its
middle row. For a unit with ``before`` rows ahead of it and ``rows`` of its
own, that is shard ``(2 * before + rows) * N // (2 * T)`` (at most ``N - 1``;
with ``T`` zero, every unit goes to shard 0). Hence:

- every unit belongs to exactly one shard;
- each shard's units are consecutive, and shard 0's come first: the shards'
  outputs, in shard order, are the replies of one run over the whole dataset,
  in its order;
- a shard holds ``T / N`` rows give or take one unit (a row group is never
  split): balanced when row groups are small beside ``T / N``, and empty
  shards where ``N`` exceeds the units.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from worker.core.errors import ConfigError

MAX_SHARDS = 99_999  # part names keep five digits, so that they sort in shard order
_SHARD = re.compile(r"(-?\d+)/(-?\d+)")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``0 <= index < count``)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def part_name(self) -> str:
        """The file name of this shard's replies: ``part-00003-of-00008.parquet``."""
        return f"part-{self.index:05d}-of-{self.count:05d}.parquet"


@dataclass(frozen=True)
class Unit:
    """One row group of one file: what a shard is made of. ``file`` is relative to the dataset (POSIX
    separators); ``first_row`` counts the file's rows before this row group."""

    file: str
    row_group: int
    first_row: int
    rows: int


def parse_shard(text: str) -> Shard:
    """The shard ``I/N`` names; ConfigError naming ``--shard``, the value and what would be valid. Pure."""
    found = _SHARD.fullmatch(text.strip())
    if found is None:
        raise ConfigError(f"--shard {text!r}: expected I/N, this shard's index and the number of shards "
                          "(e.g. --shard 0/4 for the first of four)")
    index, count = int(found[1]), int(found[2])
    if not 1 <= count <= MAX_SHARDS:
        raise ConfigError(f"--shard {text}: the number of shards must be 1 to {MAX_SHARDS}, got {count}")
    if not 0 <= index < count:
        raise ConfigError(f"--shard {text}: the index must be 0 to {count - 1} for {count} shards "
                          f"(shards count from 0), got {index}")
    return Shard(index, count)


def assign(units: Sequence[Unit], count: int) -> list[int]:
    """The shard of each of ``units`` (the dataset's, in its order) among ``count`` shards, by the rule of the
    module: never decreasing, from 0 to at most ``count - 1``. Pure."""
    total = sum(unit.rows for unit in units)
    shards, before = [], 0
    for unit in units:
        shards.append(0 if total == 0 else min(count - 1, (2 * before + unit.rows) * count // (2 * total)))
        before += unit.rows
    return shards


def shard_units(units: Sequence[Unit], shard: Shard) -> list[Unit]:
    """The units of ``shard``, in their order in ``units`` (the dataset's, see the module). Pure."""
    return [unit for unit, index in zip(units, assign(units, shard.count), strict=True) if index == shard.index]


def fingerprint(units: Sequence[Unit]) -> str:
    """A short digest of the whole dataset's units (paths, row groups, rows): the shards of one job print the
    same one; another means they planned over different files. Pure."""
    digest = hashlib.sha256()
    for unit in units:
        digest.update(f"{unit.file}\0{unit.row_group}\0{unit.rows}\n".encode())
    return digest.hexdigest()[:12]
