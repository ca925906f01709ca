"""Offline scoring: the scheduled batch job, over a JSONL file, no Kafka or Redis.

Each input line is a request in the wire format; each output line is the
reply value the streaming worker would publish for it, in input order. Lines
without a readable request id go to ``<OUT>.deadletter.jsonl``. Requests are
batched by the stream's own Batcher, so the size limit and the token budget
(``max_batch_tokens``) hold here too; at most one batch of lines is held in
memory besides the line being read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson
from tqdm import tqdm

from worker.core.batcher import request_batcher
from worker.core.messages import InvalidRecord, Position, RawRecord, Reply, Request
from worker.core.settings import Settings
from worker.core.wire import decode_request, encode_reply
from worker.ports import ModelRunner, Outcome
from worker.stream.replies import reply_to_invalid, reply_to_request


@dataclass
class FileSummary:
    lines: int = 0
    ok: int = 0
    errors: int = 0
    dead_letters: int = 0


class _OrderedWriter:
    """Writes each line's answer in input order, as soon as every line before it is answered."""

    def __init__(self, out: IO[bytes], dead: IO[bytes], summary: FileSummary) -> None:
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
        self._out.write(encode_reply(reply)[1] + b"\n")

    def _write_dead_letter(self, entry: InvalidRecord) -> None:
        self._summary.lines += 1
        self._summary.dead_letters += 1
        raw = (entry.value or b"").decode("utf-8", "replace")
        self._dead.write(orjson.dumps({"line": entry.position.offset,
                                       "error": {"code": entry.code, "message": entry.message}, "raw": raw}) + b"\n")


def score_file(runner: ModelRunner, source: Path, target: Path, settings: Settings, progress: bool = True) -> FileSummary:
    """Score every line of ``source`` into ``target`` with the batch limits of ``settings``.

    Blocks; raises OSError for file problems, ConfigError for a token budget the model cannot cost.
    """
    summary = FileSummary()
    batcher = request_batcher(settings, getattr(runner, "cost", None))
    dead_path = target.with_name(target.name + ".deadletter.jsonl")
    total = sum(1 for _ in source.open("rb")) if progress else None
    with source.open("rb") as lines, target.open("wb") as out, dead_path.open("wb") as dead:
        writer = _OrderedWriter(out, dead, summary)
        bar = tqdm(total=total, unit="req", desc="scoring", disable=not progress)

        def score(batch: list[Request]) -> None:
            for request, outcome in zip(batch, runner.run([r.item for r in batch])):
                writer.answer(reply_to_request(request, "ok" if outcome.ok else "error", outcome, runner.name,
                                               runner.version, batch_size=len(batch)))
            writer.flush()
            bar.update(len(batch))

        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = RawRecord(Position(str(source), 0, number), None, line.rstrip(b"\r\n"), [], 0, 0.0)
            entry = decode_request(record, runner.prepare, settings.max_record_bytes)
            writer.expect(entry)
            if isinstance(entry, InvalidRecord):
                if entry.request_id is not None:
                    writer.answer(reply_to_invalid(entry, runner.name, runner.version))
                bar.update(1)
            elif not batcher.fits(entry):
                writer.answer(reply_to_request(entry, "error", Outcome(None, "too_many_tokens",
                              f"the input alone exceeds max_batch_tokens={settings.max_batch_tokens}"),
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
        bar.close()
    if summary.dead_letters == 0:
        dead_path.unlink()
    return summary
