"""Offline scoring: the scheduled batch job, over a JSONL file, no Kafka or Redis.

Each input line is a request in the wire format; each output line is the
reply value the streaming worker would publish for it, in input order. Lines
without a readable request id go to ``<OUT>.deadletter.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson
from tqdm import tqdm

from worker.core.wire import decode_request, encode_reply
from worker.core.messages import InvalidRecord, Position, RawRecord, Reply, Request, Timings
from worker.ports import ModelRunner


@dataclass
class FileSummary:
    lines: int = 0
    ok: int = 0
    errors: int = 0
    dead_letters: int = 0


def score_file(runner: ModelRunner, source: Path, target: Path, batch_size: int,
               max_record_bytes: int, progress: bool = True) -> FileSummary:
    """Score every line of ``source`` into ``target``. Blocks; raises OSError for file problems."""
    summary = FileSummary()
    dead_path = target.with_name(target.name + ".deadletter.jsonl")
    total = sum(1 for _ in source.open("rb")) if progress else None
    with source.open("rb") as lines, target.open("wb") as out, dead_path.open("wb") as dead:
        bar = tqdm(total=total, unit="req", desc="scoring", disable=not progress)
        for batch in _batches(lines, str(source), batch_size, max_record_bytes, runner):
            _write_batch(runner, batch, out, dead, summary)
            bar.update(len(batch))
        bar.close()
    if summary.dead_letters == 0:
        dead_path.unlink()
    return summary


def _batches(lines: IO[bytes], name: str, size: int, max_bytes: int,
             runner: ModelRunner) -> Iterator[list[Request | InvalidRecord]]:
    batch: list[Request | InvalidRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = RawRecord(Position(name, 0, number), None, line.rstrip(b"\r\n"), [], 0, 0.0)
        batch.append(decode_request(record, runner.prepare, max_bytes))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_batch(runner: ModelRunner, batch: list[Request | InvalidRecord], out: IO[bytes], dead: IO[bytes],
                 summary: FileSummary) -> None:
    requests = [r for r in batch if isinstance(r, Request)]
    outcomes = iter(runner.run([r.item for r in requests]))
    for entry in batch:
        summary.lines += 1
        if isinstance(entry, Request):
            outcome = next(outcomes)
            reply = Reply(entry.id, "ok" if outcome.ok else "error", entry.position, runner.name, runner.version,
                          outputs=outcome.output, error_code=outcome.error_code,
                          error_message=outcome.error_message, timings=Timings(), batch_size=len(requests))
        elif entry.request_id is not None:
            reply = Reply(entry.request_id, "error", entry.position, runner.name, runner.version,
                          error_code=entry.code, error_message=entry.message)
        else:
            summary.dead_letters += 1
            dead.write(orjson.dumps({"line": entry.position.offset, "error": {"code": entry.code,
                                     "message": entry.message}, "raw": (entry.value or b"").decode("utf-8", "replace")})
                       + b"\n")
            continue
        summary.ok += reply.status == "ok"
        summary.errors += reply.status != "ok"
        out.write(encode_reply(reply)[1] + b"\n")
