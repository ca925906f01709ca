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

Both outputs are written beside their paths and renamed onto them once every
request is answered (worker.jobs.file_outputs): a run that stops early, asked
to or by an error, leaves no output and what was there before as it was.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import orjson
from tqdm import tqdm

from worker.core.batcher import Batcher, request_batcher
from worker.core.clock import Clock, SystemClock
from worker.core.errors import ConfigError, WorkerError
from worker.core.messages import InvalidRecord, Position, RawRecord, Reply, Request
from worker.core.routes import Route, Routes
from worker.core.sections import BatchingSettings
from worker.core.wire import ERR_RECORD_TOO_LARGE, decode_request
from worker.jobs.file_outputs import StagedFile, refuse_the_input_as_output
from worker.jobs.tables import (
    check_requests,
    count_requests,
    file_format,
    open_replies,
    read_requests,
)
from worker.ports import ModelRunner, ReplyWriter
from worker.stream.replies import EXPIRED, reply_to_invalid, reply_to_request, too_many_tokens


@dataclass
class FileSummary:
    """How far a run got. ``read``: the last line or row read (blank lines count, as in ``total``; for a
    dataset's shard, its rows read so far); ``lines``: the requests answered or dead-lettered, in order;
    ``total``: the input's lines or rows, when known (always for Parquet, whose footer says; for JSONL only
    with the progress bar, a pass of its own)."""

    read: int = 0
    lines: int = 0
    ok: int = 0
    errors: int = 0
    expired: int = 0
    dead_letters: int = 0
    total: int | None = None


class ScoringStopped(WorkerError):
    """``score_file`` stopped when asked to, before its outputs were published: none was written."""

    def __init__(self, summary: FileSummary) -> None:
        of = f" of {summary.total}" if summary.total is not None else ""
        super().__init__(f"stopped after reading {summary.read}{of} requests ({summary.lines} answered): "
                         "no output written")
        self.summary = summary


class _OrderedWriter:
    """Writes each request's answer in input order, as soon as every one before it is answered.

    Answers are matched to requests by position, which is unique within a run (a file's line or row, or a
    dataset file's row)."""

    def __init__(self, out: ReplyWriter, dead: IO[bytes], summary: FileSummary) -> None:
        self._out, self._dead, self.summary = out, dead, summary
        self._lines: deque[Request | InvalidRecord] = deque()
        self._replies: dict[Position, Reply] = {}

    def expect(self, entry: Request | InvalidRecord) -> None:
        self._lines.append(entry)

    def answer(self, reply: Reply) -> None:
        self._replies[reply.position] = reply

    def flush(self) -> None:
        while self._lines:
            entry = self._lines[0]
            if isinstance(entry, InvalidRecord) and entry.request_id is None:
                self._write_dead_letter(entry)
            elif entry.position in self._replies:
                self._write(self._replies.pop(entry.position))
            else:
                return
            self._lines.popleft()

    def _write(self, reply: Reply) -> None:
        self.summary.lines += 1
        self.summary.ok += reply.status == "ok"
        self.summary.errors += reply.status == "error"
        self.summary.expired += reply.status == "expired"
        self._out.write(reply)

    def _write_dead_letter(self, entry: InvalidRecord) -> None:
        self.summary.lines += 1
        self.summary.dead_letters += 1
        raw = (entry.value or b"").decode("utf-8", "replace")
        self._dead.write(orjson.dumps({"line": entry.position.offset, "file": entry.position.topic,
                                       "error": {"code": entry.code, "message": entry.message}, "raw": raw}) + b"\n")


def score_file(runner: ModelRunner, source: Path, target: Path, batching: BatchingSettings, progress: bool = True,
               chunk_rows: int = 10_000, *, stop: Callable[[], bool] = lambda: False,
               clock: Clock | None = None) -> FileSummary:
    """Score every request of ``source`` into ``target`` with the limits of ``batching``.

    Formats follow the suffixes (worker.jobs.tables); ``chunk_rows`` Parquet
    rows are read, and written as one row group, at a time. A request whose
    ``deadline_ms`` has passed on ``clock`` (the system's by default) when
    its batch is scored is answered ``expired``, as the stream does. Blocks until
    done, or until ``stop()`` is true: it is asked before each request and
    each batch, and once more before the outputs are published. Raises
    ScoringStopped then; ConfigError for what ``check_files`` refuses or a
    token budget the model cannot cost; OSError for file problems. Whatever
    it raises, the outputs are left as they were.
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
                writer = _OrderedWriter(out, dead, summary)
                _FileScoring(runner, batching, batcher, writer, bar, stop, clock or SystemClock()).run(records)
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
    """ConfigError for files ``score_file`` would refuse, before either is touched: an unknown suffix, a
    ``chunk_rows`` below 1, an output (or its dead-letter file) that is the input, an output directory that
    does not exist, a Parquet input that is not Parquet or has no string ``id`` column. Cheap: reads no
    request (a Parquet footer only)."""
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


def with_id_if_too_large(entry: InvalidRecord) -> InvalidRecord:
    """A record refused for its size, with the id its value names when the value is JSON that names one.

    The stream refuses to parse a value over ``max_record_bytes``; a file's
    line is in memory already, so it is parsed anyway and the request is
    answered ``record_too_large`` rather than dead-lettered. Any other record
    is returned as it is. Pure.
    """
    if entry.code != ERR_RECORD_TOO_LARGE or entry.request_id is not None or entry.value is None:
        return entry
    record = RawRecord(entry.position, entry.key, entry.value, entry.headers, 0, 0.0)
    named = decode_request(record, _ANY_INPUTS, len(entry.value))
    request_id = named.id if isinstance(named, Request) else named.request_id
    return entry if request_id is None else replace(entry, request_id=request_id)


def _as_it_is(inputs: Any) -> Any:
    return inputs


_ANY_INPUTS = Routes.single(Route("", "", "", _as_it_is))  # to read a request's id, whatever its inputs


class _FileScoring:
    """One pass over the records: each decoded, batched, scored and answered through the ordered writer."""

    def __init__(self, runner: ModelRunner, batching: BatchingSettings, batcher: Batcher[Request],
                 writer: _OrderedWriter, bar: tqdm, stop: Callable[[], bool], clock: Clock) -> None:
        self._runner, self._batching, self._batcher = runner, batching, batcher
        self._routes = Routes.single(Route(runner.name, runner.name, runner.version, runner.prepare))
        self._writer, self._bar, self._stop, self._clock = writer, bar, stop, clock

    def run(self, records: Iterable[tuple[int, RawRecord]]) -> None:
        """Raises ScoringStopped when ``stop()`` is true before a record or a batch."""
        for read, record in records:
            self._stop_if_asked()
            self._writer.summary.read = read
            self._admit(decode_request(record, self._routes, self._batching.max_record_bytes))
            # No waiting offline: a batch goes when it is full (by count or by tokens), the rest at the end.
            while self._batcher.full():
                self._score(self._batcher.drain())
            self._writer.flush()
        while self._batcher.pending:
            self._score(self._batcher.drain())

    def _stop_if_asked(self) -> None:
        if self._stop():
            raise ScoringStopped(self._writer.summary)

    def _admit(self, entry: Request | InvalidRecord) -> None:
        runner = self._runner
        if isinstance(entry, InvalidRecord):
            entry = with_id_if_too_large(entry)
        self._writer.expect(entry)
        if isinstance(entry, InvalidRecord):
            if entry.request_id is not None:
                self._writer.answer(reply_to_invalid(entry, runner.name, runner.version))
            self._bar.update(1)
        elif not self._batcher.fits(entry):
            self._writer.answer(reply_to_request(entry, "error", too_many_tokens(self._batching.max_batch_tokens),
                                                 runner.name, runner.version))
            self._bar.update(1)
        else:
            self._batcher.add(entry, 0.0)

    def _score(self, batch: list[Request]) -> None:
        """Answer what expired while it waited, as the stream does when it submits a batch; run the rest."""
        self._stop_if_asked()
        runner, now_ms = self._runner, self._clock.wall_ms()
        live = [r for r in batch if r.deadline_ms is None or r.deadline_ms > now_ms]
        for request in batch:
            if request.deadline_ms is not None and request.deadline_ms <= now_ms:
                self._writer.answer(reply_to_request(request, "expired", EXPIRED, runner.name, runner.version))
        if live:
            for request, outcome in zip(live, runner.run([r.item for r in live]), strict=True):
                self._writer.answer(reply_to_request(request, "ok" if outcome.ok else "error", outcome, runner.name,
                                                     runner.version, batch_size=len(live)))
        self._writer.flush()
        self._bar.update(len(batch))
