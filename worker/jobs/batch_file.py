"""Offline scoring: the scheduled batch job, over a JSONL or Parquet file, no Kafka or Redis.

Each input line or row is a request (worker.jobs.tables says how a row
becomes one); each output line or row is the reply the streaming worker
would publish for it, in input order. Requests without a readable id go to
``<OUT>.deadletter.jsonl``, whatever the formats, each as a line naming its
input file and line or row number. Requests are batched by the stream's own
Batcher, so the size limit and the token budget (``max_batch_tokens``) hold
here too; memory holds one batch of requests and one chunk of rows
(``chunk_rows``) each way. ``score_records`` is the job over any records:
``score_file`` gives it one file's, worker.jobs.batch_shards a dataset
shard's.

The pass itself (decode, batch, score, answer in order) is
worker.jobs.scoring_pass's, which the Ray Data path shares.

Both outputs are written beside their paths and renamed onto them once every
request is answered (worker.jobs.file_outputs): a run that stops early, asked
to or by an error, leaves no output and what was there before as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import orjson
from tqdm import tqdm

from worker.core.batcher import request_batcher
from worker.core.clock import Clock, SystemClock
from worker.core.errors import ConfigError
from worker.core.messages import InvalidRecord, RawRecord, Reply
from worker.core.sections import BatchingSettings
from worker.jobs.file_outputs import StagedFile, refuse_the_input_as_output
from worker.jobs.scoring_pass import FileSummary, ScoringPass, ScoringStopped
from worker.jobs.tables import (
    check_requests,
    count_requests,
    file_format,
    open_replies,
    read_requests,
)
from worker.ports import ModelRunner, ReplyWriter

__all__ = ["FileSummary", "ScoringStopped", "check_files", "dead_letter_path", "score_file", "score_records"]


class _FileAnswers:
    """Each reply written by ``out``; each dead letter a JSON line of ``dead`` naming its file and line or row."""

    def __init__(self, out: ReplyWriter, dead: IO[bytes]) -> None:
        self._out, self._dead = out, dead

    def reply(self, reply: Reply) -> None:
        self._out.write(reply)

    def dead_letter(self, entry: InvalidRecord) -> None:
        raw = (entry.value or b"").decode("utf-8", "replace")
        self._dead.write(orjson.dumps({"line": entry.position.offset, "file": entry.position.topic,
                                       "error": {"code": entry.code, "message": entry.message}, "raw": raw}) + b"\n")


def score_file(runner: ModelRunner, source: Path, target: Path, batching: BatchingSettings, progress: bool = True,
               chunk_rows: int = 10_000, *, stop: Callable[[], bool] = lambda: False,
               clock: Clock | None = None) -> FileSummary:
    """Score every request of ``source`` into ``target``: ``python -m worker score-file``'s job.

    Each output line or row is the reply the streaming worker would publish
    for the request in the same place, in input order. Requests without a
    readable id go to ``<target>.deadletter.jsonl`` (``dead_letter_path``);
    with none, an earlier run's dead-letter file there is removed. Both
    outputs are written beside their paths and renamed onto them once every
    request is answered: whatever this raises, the outputs are left as they
    were. Blocks until done, or until ``stop()`` is true.

    Args:
        runner: The loaded model: ``build_one_model(settings)`` builds the one score-file would.
        source: The requests: a ``.jsonl`` (or ``.ndjson``) or ``.parquet`` file, by its suffix.
        target: Where the replies go: a ``.jsonl`` (or ``.ndjson``) or ``.parquet`` file, by its suffix.
        batching: The batching settings (``settings.batching``): the stream's batch size and token limits
            hold here too.
        progress: Show a progress bar on stderr (for JSONL, this costs a pass over the file to count it).
        chunk_rows: Parquet rows read, and written as one row group, at a time.
        stop: Asked before each request and each batch, and once more before the outputs are published: when
            it returns True, the run stops.
        clock: The clock a request's ``deadline_ms`` is compared with when its batch is scored (None: the
            system's); a passed deadline is answered ``expired``, as the stream does.

    Returns:
        How many requests were read and answered, by status.

    Raises:
        ScoringStopped: ``stop()`` returned True; no output was written.
        ConfigError: What ``check_files`` refuses, or a token budget the model cannot cost.
        ModelError: What the runner raises, as it is.
        OSError: A file cannot be read or written.
    """
    check_files(source, target, chunk_rows)
    known = progress or file_format(source) == "parquet"  # a JSONL total costs a pass over the file
    total = count_requests(source) if known else None
    records = ((record.position.offset, record) for record in read_requests(source, chunk_rows))
    return score_records(runner, records, target, batching, total=total, progress=progress, chunk_rows=chunk_rows,
                         stop=stop, clock=clock)


def score_records(runner: ModelRunner, records: Iterable[tuple[int, RawRecord]], target: Path,
                  batching: BatchingSettings, *, total: int | None, progress: bool = True, chunk_rows: int = 10_000,
                  stop: Callable[[], bool] = lambda: False, clock: Clock | None = None) -> FileSummary:
    """Score ``records`` into ``target`` (its format by its suffix) and its dead-letter file, as ``score_file``.

    Each record comes with how many lines or rows of the input were read up to it (``FileSummary.read``);
    ``total`` is the input's, when known. Positions must be unique among ``records``. Publishes both outputs
    only once every record is answered, an empty ``target`` when there is none. Checks no path: the caller
    has. Raises as ``score_file``.
    """
    batcher = request_batcher(batching, getattr(runner, "cost", None))
    summary = FileSummary(total=total)
    replies, dead_letters = StagedFile(target), StagedFile(dead_letter_path(target))
    try:
        out = open_replies(replies.partial, chunk_rows, file_format(target))
        try:
            with dead_letters.partial.open("wb") as dead, \
                    tqdm(total=summary.total, unit="req", desc="scoring", disable=not progress) as bar:
                ScoringPass(runner, batching, batcher, _FileAnswers(out, dead), summary, clock=clock or SystemClock(),
                            answered=bar.update, stop=stop).run(records)
        finally:
            out.close()
        if stop():
            raise ScoringStopped(summary)
    except BaseException:  # KeyboardInterrupt too: never leave a partial file behind
        replies.discard()
        dead_letters.discard()
        raise
    if summary.dead_letters:
        dead_letters.publish()
    else:
        dead_letters.withdraw()
    replies.publish()  # last: a replies file newer than the run's start means the run completed
    return summary


def check_files(source: Path, target: Path, chunk_rows: int = 10_000) -> None:
    """Refuse the files ``score_file`` would refuse, before either is touched (and before a model loads).

    Cheap: reads no request (of a Parquet input, its footer only).

    Args:
        source: The requests file, as ``score_file`` takes it.
        target: The replies file, as ``score_file`` takes it.
        chunk_rows: As ``score_file`` takes it.

    Raises:
        ConfigError: An unknown suffix, a ``chunk_rows`` below 1, an output (or its dead-letter file) that is
            the input, an output directory that does not exist, or a Parquet input that is not Parquet or has
            no string ``id`` column.
    """
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be at least 1, got {chunk_rows}")
    for path in (source, target):
        file_format(path)
    dead_path = dead_letter_path(target)
    refuse_the_input_as_output(source, {f"the output {target}": target,
                                        f"the dead-letter file {dead_path} of output {target}": dead_path})
    if not target.resolve().parent.is_dir():  # else the error would name the partial file, after the model loads
        raise ConfigError(f"the output {target} cannot be written: no directory {target.parent}")
    check_requests(source)


def dead_letter_path(target: Path) -> Path:
    """Where the requests without a readable id go: ``<OUT>.deadletter.jsonl``, whatever OUT's format."""
    return target.with_name(target.name + ".deadletter.jsonl")
