"""The batch file job over a Parquet dataset, in shards: ``score-file IN OUT --shard I/N`` on N machines.

IN is a dataset (worker.jobs.datasets: a directory of Parquet files, or one
Parquet file cut at its row groups); shard I of N scores the row groups the
rule of worker.jobs.shards gives it, reading every file's footer to know
them, and nothing else of the files outside its share. Its replies go to
``OUT/part-0000I-of-0000N.parquet`` (and its dead letters to that name plus
``.deadletter.jsonl``), in the dataset's order, published as ``score_file``
publishes (worker.jobs.file_outputs): a rerun of a shard replaces its part
whole, a run that stops early leaves the part as it was. A shard with no row
group writes an empty part, so that N parts always follow a complete job.
One run over a dataset without ``--shard`` is shard 0/1: OUT gets one part.

The shards' parts, in shard order, hold the replies one run over the whole
dataset would give, in its order; the dead letters name each row by its file
(relative to IN) and row number in it, whichever shard scored it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.core.clock import Clock
from worker.core.errors import ConfigError
from worker.core.sections import BatchingSettings
from worker.jobs.batch_file import FileSummary, score_records
from worker.jobs.datasets import dataset_units, read_units
from worker.jobs.shards import Shard, Unit, assign, fingerprint
from worker.jobs.tables import SUFFIXES, file_format
from worker.ports import ModelRunner

_PART = re.compile(r"part-\d{5}-of-(\d{5})\.parquet")


@dataclass(frozen=True)
class ShardPlan:
    """What shard ``shard`` of the dataset ``source`` scores (``units``, consecutive) and where it writes.

    ``rows_before``: the dataset's rows in the shards before this one; ``dataset_units`` and
    ``dataset_rows``: the whole dataset's; ``plan``: its fingerprint (worker.jobs.shards.fingerprint).
    """

    source: Path
    shard: Shard
    units: tuple[Unit, ...]
    rows_before: int
    dataset_units: int
    dataset_rows: int
    plan: str
    part: Path

    @property
    def rows(self) -> int:
        return sum(unit.rows for unit in self.units)


def plan_shard(source: Path, target: Path, shard: Shard, chunk_rows: int = 10_000) -> ShardPlan:
    """The plan of ``shard`` of ``source`` writing into the directory ``target``; writes nothing.

    ConfigError, before anything is written, for: a ``chunk_rows`` below 1; a ``source`` that is neither a
    directory nor a Parquet file; a ``target`` that is a file (or, not there yet, is named like one:
    ``.parquet``, ``.jsonl``), is inside ``source``, or whose parent directory does not exist; what
    worker.jobs.datasets refuses (no Parquet file, JSONL files, a file without a string ``id`` column).
    Reads every file's footer. OSError for a file that cannot be read.
    """
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be at least 1, got {chunk_rows}")
    if not source.exists():
        raise ConfigError(f"the input {source} does not exist")
    if source.is_file() and file_format(source) != "parquet":
        raise ConfigError(f"{source} is JSONL: --shard needs Parquet, whose row groups split the input "
                          "(score the file without --shard, or convert it to Parquet)")
    _check_output_directory(source, target)
    units = dataset_units(source)
    shards = assign(units, shard.count)
    mine = tuple(unit for unit, index in zip(units, shards, strict=True) if index == shard.index)
    before = sum(unit.rows for unit, index in zip(units, shards, strict=True) if index < shard.index)
    return ShardPlan(source, shard, mine, before, len(units), sum(unit.rows for unit in units), fingerprint(units),
                     target / shard.part_name)


def _check_output_directory(source: Path, target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ConfigError(f"the output {target} is a file: with a dataset or --shard, OUT is a directory that "
                          "receives one part-0000I-of-0000N.parquet per shard")
    if not target.exists() and target.suffix.lower() in SUFFIXES:
        raise ConfigError(f"the output {target} is named like a file: with a dataset or --shard, OUT is a directory "
                          "that receives one part-0000I-of-0000N.parquet per shard; name it without a suffix")
    if source.is_dir() and target.resolve().is_relative_to(source.resolve()):
        raise ConfigError(f"the output {target} is inside the input {source}: its parts would be read as "
                          "requests by the next run; write them to another directory")
    if not target.resolve().parent.is_dir():
        raise ConfigError(f"the output {target} cannot be created: no directory {target.parent}")


def score_shard(runner: ModelRunner, plan: ShardPlan, batching: BatchingSettings, progress: bool = True,
                chunk_rows: int = 10_000, *, stop: Callable[[], bool] = lambda: False,
                clock: Clock | None = None) -> FileSummary:
    """Score the rows of ``plan`` into ``plan.part``, creating its directory if need be (another shard may at
    the same moment). ``FileSummary.read`` and ``total`` count this shard's rows. Blocks, stops and raises
    as ``score_file``; the part and its dead-letter file are left as they were unless it returns."""
    plan.part.parent.mkdir(exist_ok=True)
    records = enumerate(read_units(plan.source, plan.units, chunk_rows), start=1)
    return score_records(runner, records, plan.part, batching, total=plan.rows, progress=progress,
                         chunk_rows=chunk_rows, stop=stop, clock=clock)


def other_shardings(plan: ShardPlan) -> list[str]:
    """The parts in ``plan``'s output directory that belong to another number of shards, sorted: an earlier
    job's, which a reader of the whole directory would count twice."""
    if not plan.part.parent.is_dir():
        return []
    return sorted(path.name for path in plan.part.parent.iterdir()
                  if (found := _PART.fullmatch(path.name)) and int(found[1]) != plan.shard.count)


def describe(plan: ShardPlan) -> str:
    """What the shard holds, for a person: its rows and row groups out of the dataset's, and the plan."""
    shard, whole = plan.shard, f"{plan.dataset_units} row groups, {plan.dataset_rows} rows"
    if not plan.units:
        return f"shard {shard} is empty (the dataset's {whole} went to the other shards; plan {plan.plan})"
    return (f"shard {shard}: rows {plan.rows_before + 1}-{plan.rows_before + plan.rows} in {len(plan.units)} of "
            f"the dataset's {whole} (plan {plan.plan})")


def log_fields(plan: ShardPlan) -> dict[str, Any]:
    """What the shard holds, as log fields."""
    return {"shard": plan.shard.index, "shards": plan.shard.count, "row_groups": len(plan.units),
            "rows_before": plan.rows_before, "dataset_row_groups": plan.dataset_units,
            "dataset_rows": plan.dataset_rows, "plan": plan.plan}
