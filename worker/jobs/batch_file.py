"""Offline scoring: the scheduled batch job, over a JSONL or Parquet file, no Kafka or Redis.

Each input line or row is a request (worker.jobs.tables says how a row
becomes one); each output line or row is the reply the streaming worker
would publish for it, in input order. Requests without a readable id go to
``<OUT>.deadletter.jsonl``, whatever the formats. Requests are batched by the
stream's own Batcher, so the size limit and the token budget
(``max_batch_tokens``) hold here too; memory holds one batch of requests and
one chunk of rows (``chunk_rows``) each way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson
from tqdm import tqdm

from worker.core.batcher import Batcher, request_batcher
from worker.core.errors import ConfigError
from worker.core.messages import InvalidRecord, RawRecord, Reply, Request
from worker.core.settings import Settings
from worker.core.wire import decode_request
from worker.jobs.file_outputs import refuse_the_input_as_output
from worker.jobs.tables import ReplyWriter, count_requests, file_format, open_replies, read_requests
from worker.ports import ModelRunner
from worker.stream.replies import reply_to_invalid, reply_to_request, too_many_tokens


@dataclass
class FileSummary:
    lines: int = 0
    ok: int = 0
    errors: int = 0
    dead_letters: int = 0


class _OrderedWriter:
    """Writes each request's answer in input order, as soon as every one before it is answered."""

    def __init__(self, out: ReplyWriter, dead: IO[bytes], summary: FileSummary) -> None:
        self._out, self._dead, self._summary = out, dead, summary
        self._lines: deque[Request | InvalidRecord] = deque()
        self._replies: dict[int, Reply] = {}

    def expect(self, entry: Request | InvalidRecord) -> None:
        self._lines.append(entry)

    def answer(self, reply: Reply) -> None:
        self._replies[reply.position.offset] = reply

    def flush(self) -> None:
        while self._lines:
            entry = self._lines[0]
            if isinstance(entry, InvalidRecord) and entry.request_id is None:
                self._write_dead_letter(entry)
            elif entry.position.offset in self._replies:
                self._write(self._replies.pop(entry.position.offset))
            else:
                return
            self._lines.popleft()

    def _write(self, reply: Reply) -> None:
        self._summary.lines += 1
        self._summary.ok += reply.status == "ok"
        self._summary.errors += reply.status != "ok"
        self._out.write(reply)

    def _write_dead_letter(self, entry: InvalidRecord) -> None:
        self._summary.lines += 1
        self._summary.dead_letters += 1
        raw = (entry.value or b"").decode("utf-8", "replace")
        self._dead.write(orjson.dumps({"line": entry.position.offset,
                                       "error": {"code": entry.code, "message": entry.message}, "raw": raw}) + b"\n")


def score_file(runner: ModelRunner, source: Path, target: Path, settings: Settings, progress: bool = True,
               chunk_rows: int = 10_000) -> FileSummary:
    """Score every request of ``source`` into ``target`` with the batch limits of ``settings``.

    Formats follow the suffixes (worker.jobs.tables); ``chunk_rows`` Parquet
    rows are read, and written as one row group, at a time. Blocks; raises
    ConfigError for what ``check_files`` refuses or a token budget the model
    cannot cost, OSError for file problems.
    """
    check_files(source, target, chunk_rows)
    dead_path = dead_letter_path(target)
    summary = FileSummary()
    batcher = request_batcher(settings, getattr(runner, "cost", None))
    total = count_requests(source) if progress else None
    records = read_requests(source, chunk_rows)
    out = open_replies(target, chunk_rows)
    try:
        with dead_path.open("wb") as dead:
            writer = _OrderedWriter(out, dead, summary)
            with tqdm(total=total, unit="req", desc="scoring", disable=not progress) as bar:
                _score_records(runner, records, writer, bar, settings, batcher)
    finally:
        out.close()
    if summary.dead_letters == 0:
        dead_path.unlink()
    return summary


def check_files(source: Path, target: Path, chunk_rows: int = 10_000) -> None:
    """ConfigError for files ``score_file`` would refuse, before either is touched: an unknown suffix, a
    ``chunk_rows`` below 1, an output (or its dead-letter file) that is the input. Cheap: reads no request."""
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be at least 1, got {chunk_rows}")
    for path in (source, target):
        file_format(path)
    dead_path = dead_letter_path(target)
    refuse_the_input_as_output(source, {f"the output {target}": target,
                                        f"the dead-letter file {dead_path} of output {target}": dead_path})


def dead_letter_path(target: Path) -> Path:
    """Where the requests without a readable id go: ``<OUT>.deadletter.jsonl``, whatever OUT's format."""
    return target.with_name(target.name + ".deadletter.jsonl")


def _score_records(runner: ModelRunner, records: Iterable[RawRecord], writer: _OrderedWriter, bar: tqdm,
                   settings: Settings, batcher: Batcher[Request]) -> None:
    def score(batch: list[Request]) -> None:
        for request, outcome in zip(batch, runner.run([r.item for r in batch]), strict=True):
            writer.answer(reply_to_request(request, "ok" if outcome.ok else "error", outcome, runner.name,
                                           runner.version, batch_size=len(batch)))
        writer.flush()
        bar.update(len(batch))

    for record in records:
        entry = decode_request(record, runner.prepare, settings.max_record_bytes)
        writer.expect(entry)
        if isinstance(entry, InvalidRecord):
            if entry.request_id is not None:
                writer.answer(reply_to_invalid(entry, runner.name, runner.version))
            bar.update(1)
        elif not batcher.fits(entry):
            writer.answer(reply_to_request(entry, "error", too_many_tokens(settings.max_batch_tokens),
                                           runner.name, runner.version))
            bar.update(1)
        else:
            batcher.add(entry, 0.0)
        # No clock offline: a batch goes when it is full (by count or by tokens), the rest at the end.
        while batcher.full():
            score(batcher.drain())
        writer.flush()
    while batcher.pending:
        score(batcher.drain())
