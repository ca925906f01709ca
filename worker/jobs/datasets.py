"""A Parquet dataset on disk: its files, its units (worker.jobs.shards) from their footers, and their rows.

A dataset is a directory: every ``*.parquet`` file under it (any case), at any depth
(Hive-style ``date=2026-12-01/`` folders included), less those under a name
that starts with ``.`` or ``_`` (hidden files, ``_SUCCESS``, ``_metadata``,
``_temporary/``: what Spark and Arrow skip too). JSONL files are refused
rather than skipped: they would be requests left unscored. A single Parquet
file is a dataset of one file, whose units are its row groups.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from pathlib import Path

from worker.core.errors import ConfigError
from worker.core.messages import RawRecord
from worker.jobs.shards import Unit
from worker.jobs.tables import SUFFIXES, read_row_groups, row_group_rows

_SKIPPED_PREFIXES = (".", "_")


def dataset_files(root: Path) -> list[str]:
    """The Parquet files of the directory ``root``, as POSIX paths relative to it, sorted by code point.

    ConfigError when it holds none, or holds JSONL files (named, up to three); OSError when it cannot be
    listed. Reads no file.
    """
    found: list[str] = []
    jsonl: list[str] = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part.startswith(_SKIPPED_PREFIXES) for part in relative.parts) or not path.is_file():
            continue
        kind = SUFFIXES.get(path.suffix.lower())
        if kind == "parquet":
            found.append(relative.as_posix())
        elif kind == "jsonl":
            jsonl.append(relative.as_posix())
    if jsonl:
        named = ", ".join(sorted(jsonl)[:3]) + (", ..." if len(jsonl) > 3 else "")
        raise ConfigError(f"{root}: a dataset directory holds Parquet files only, and {len(jsonl)} JSONL file(s) "
                          f"are there ({named}): score each JSONL file on its own, or convert them to Parquet")
    if not found:
        raise ConfigError(f"{root}: no *.parquet file in this directory or under it (names starting with . or _ "
                          "are skipped): is the dataset mounted there?")
    return sorted(found)


def dataset_units(source: Path) -> list[Unit]:
    """The units of the dataset ``source`` (a directory, or one Parquet file), in order: each file's row groups.

    Reads every file's footer, not its rows. ConfigError for a file ``score-file`` would refuse (not
    Parquet, no string ``id`` column), naming it; OSError for one that cannot be read.
    """
    files = [source.name] if source.is_file() else dataset_files(source)
    units: list[Unit] = []
    for name in files:
        first_row = 0
        for row_group, rows in enumerate(row_group_rows(_base(source) / name)):
            units.append(Unit(name, row_group, first_row, rows))
            first_row += rows
    return units


def read_units(source: Path, units: Sequence[Unit], chunk_rows: int) -> Iterator[RawRecord]:
    """The records of ``units`` of the dataset ``source``, in that order, ``chunk_rows`` rows read at a time.

    Each is positioned at (its file relative to the dataset, 0, its row number in that file from 1): the
    rows of one file are numbered as a ``score-file`` of that file alone numbers them. Opens each file when
    its first unit comes, once for each run of consecutive row groups.
    """
    for _, run in groupby(enumerate(units), key=lambda pair: (pair[1].file, pair[1].row_group - pair[0])):
        consecutive = [unit for _, unit in run]
        first = consecutive[0]
        yield from read_row_groups(_base(source) / first.file, first.file, [unit.row_group for unit in consecutive],
                                   first.first_row, chunk_rows)


def _base(source: Path) -> Path:
    """What a unit's file is relative to: the dataset directory, or the single file's directory."""
    return source if source.is_dir() else source.parent
