"""One pass of bounded records through a model, answered in input order: the core of the offline jobs.

``ScoringPass`` decodes each record as a Kafka record is decoded, batches
the requests with the stream's own Batcher (the size limit and the token
budget hold), scores each batch as the stream does (what expired while it
waited is answered ``expired``) and hands every record's answer, in input
order, to an ``Answers``: a reply, or a dead letter for a record without a
readable id. No waiting offline: a batch goes when it is full, the rest at
the end of the records. Synchronous; the only I/O is what the runner and the
``Answers`` do.

worker.jobs.batch_file answers into a reply file and a dead-letter file;
worker.jobs.ray_scoring into the reply rows of a Ray Data batch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from msgspec import structs

from worker.core.batcher import Batcher
from worker.core.clock import Clock
from worker.core.errors import WorkerError
from worker.core.messages import InvalidRecord, Position, RawRecord, Reply, Request
from worker.core.routes import Route, Routes
from worker.core.sections import BatchingSettings
from worker.core.wire import ERR_RECORD_TOO_LARGE, decode_request
from worker.ports import ModelRunner
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


class Answers(Protocol):
    """Where a pass's answers go, one call per record, in the records' order."""

    def reply(self, reply: Reply) -> None:
        """The reply to a record that named its request id (ok, error or expired)."""

    def dead_letter(self, entry: InvalidRecord) -> None:
        """A record without a readable request id: nobody to reply to (``entry.request_id`` is None)."""


class _InOrder:
    """Hands each record's answer to ``answers`` in input order, as soon as every one before it is answered.

    Answers are matched to records by position, which must be unique within a pass."""

    def __init__(self, answers: Answers, summary: FileSummary) -> None:
        self._answers, self.summary = answers, summary
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
                self.summary.dead_letters += 1
                self._answers.dead_letter(entry)
            elif entry.position in self._replies:
                reply = self._replies.pop(entry.position)
                self.summary.ok += reply.status == "ok"
                self.summary.errors += reply.status == "error"
                self.summary.expired += reply.status == "expired"
                self._answers.reply(reply)
            else:
                return
            self.summary.lines += 1
            self._lines.popleft()


class ScoringPass:
    """Scores records with ``runner`` under the limits of ``batching``, answering into ``answers`` in order.

    ``batcher`` must be empty and built for these limits (worker.core.batcher.request_batcher); ``summary``
    is counted into as answers go; ``answered(n)`` is told of every ``n`` records answered (a progress bar);
    ``stop()`` is asked before each record and each batch; ``clock`` decides what has expired. One thread.
    """

    def __init__(self, runner: ModelRunner, batching: BatchingSettings, batcher: Batcher[Request],
                 answers: Answers, summary: FileSummary, *, clock: Clock,
                 answered: Callable[[int], Any] = lambda _: None, stop: Callable[[], bool] = lambda: False) -> None:
        self._runner, self._batching, self._batcher = runner, batching, batcher
        self._routes = Routes.single(Route(runner.name, runner.name, runner.version, runner.prepare))
        self._in_order = _InOrder(answers, summary)
        self._answered, self._stop, self._clock = answered, stop, clock

    def run(self, records: Iterable[tuple[int, RawRecord]]) -> None:
        """Score every record (each with how many lines or rows were read up to it, ``FileSummary.read``) and
        answer it before returning. Raises ScoringStopped when ``stop()`` is true before a record or a batch;
        what the runner raises (ModelError) as it is."""
        for read, record in records:
            self._stop_if_asked()
            self._in_order.summary.read = read
            self._admit(decode_request(record, self._routes, self._batching.max_record_bytes))
            while self._batcher.full():
                self._score(self._batcher.drain())
            self._in_order.flush()
        while self._batcher.pending:
            self._score(self._batcher.drain())

    def _stop_if_asked(self) -> None:
        if self._stop():
            raise ScoringStopped(self._in_order.summary)

    def _admit(self, entry: Request | InvalidRecord) -> None:
        runner = self._runner
        if isinstance(entry, InvalidRecord):
            entry = with_id_if_too_large(entry)
        self._in_order.expect(entry)
        if isinstance(entry, InvalidRecord):
            if entry.request_id is not None:
                self._in_order.answer(reply_to_invalid(entry, runner.name, runner.version))
            self._answered(1)
        elif not self._batcher.fits(entry):
            self._in_order.answer(reply_to_request(entry, "error", too_many_tokens(self._batching.max_batch_tokens),
                                                   runner.name, runner.version))
            self._answered(1)
        else:
            self._batcher.add(entry, 0.0)

    def _score(self, batch: list[Request]) -> None:
        """Answer what expired while it waited, as the stream does when it submits a batch; run the rest."""
        self._stop_if_asked()
        runner, now_ms = self._runner, self._clock.wall_ms()
        live = [r for r in batch if r.deadline_ms is None or r.deadline_ms > now_ms]
        for request in batch:
            if request.deadline_ms is not None and request.deadline_ms <= now_ms:
                self._in_order.answer(reply_to_request(request, "expired", EXPIRED, runner.name, runner.version))
        if live:
            for request, outcome in zip(live, runner.run([r.item for r in live]), strict=True):
                self._in_order.answer(reply_to_request(request, "ok" if outcome.ok else "error", outcome,
                                                       runner.name, runner.version, batch_size=len(live)))
        self._in_order.flush()
        self._answered(len(batch))


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
    return entry if request_id is None else structs.replace(entry, request_id=request_id)


def _as_it_is(inputs: Any) -> Any:
    return inputs


_ANY_INPUTS = Routes.single(Route("", "", "", _as_it_is))  # to read a request's id, whatever its inputs
