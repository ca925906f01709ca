"""Building and sending replies: one builder for the stream, the backfill and the batch file job.

``reply_to_request`` and ``reply_to_invalid`` are pure and build the Reply
for a scored (or expired, or refused) request and for a record that could
not be read but named its id. ``Responder`` sends them, and dead letters for
records without an id, through the stream's sink, tagging each send with
what the dedup store must learn once the broker has it, and counting every
outcome in the stats.
"""

from __future__ import annotations

from worker.core.messages import InvalidRecord, Reply, Request, Status, Timings
from worker.core.offsets import TopicPartition as TP
from worker.core.stats import WorkerStats
from worker.core.wire import (
    ERR_DEADLINE_EXCEEDED,
    ERR_REPLY_TOO_LARGE,
    ERR_TOO_MANY_TOKENS,
    MAX_SEND_BYTES,
    encode_dead_letter,
    encode_reply,
    send_size,
)
from worker.ports import Completed, Outcome, Scored, SendTag, Sink


def reply_to_request(request: Request, status: Status, outcome: Outcome, model: str, version: str,
                     timings: Timings = Timings(), batch_size: int = 0) -> Reply:
    return Reply(request.id, status, request.position, model, version, outputs=outcome.output,
                 error_code=outcome.error_code, error_message=outcome.error_message, reply_to=request.reply_to,
                 traceparent=request.traceparent, timings=timings, batch_size=batch_size)


def reply_to_invalid(record: InvalidRecord, model: str, version: str) -> Reply:
    """The error reply for a record that named its id; raises ValueError for one that did not."""
    if record.request_id is None:
        raise ValueError(f"{record.position.token()} has no request id: it is a dead letter, not a reply")
    return Reply(record.request_id, "error", record.position, model, version, error_code=record.code,
                 error_message=record.message, reply_to=record.reply_to, traceparent=record.traceparent)


def too_many_tokens(max_batch_tokens: int | None) -> Outcome:
    return Outcome(None, ERR_TOO_MANY_TOKENS, f"the input alone exceeds max_batch_tokens={max_batch_tokens}")


EXPIRED = Outcome(None, ERR_DEADLINE_EXCEEDED, "the deadline passed before scoring")


REPLY_HEADROOM_BYTES = 8192


def encode_sendable(reply: Reply) -> tuple[Reply, tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    """The reply and its record; a reply too large to send becomes the error reply reply_too_large."""
    key, value, headers = encoded = encode_reply(reply)
    # A reply's key (an id) and headers (timings, a capped traceparent) take far less than this: counted
    # only for a value near the limit, so that the common reply pays one comparison.
    if len(value) <= MAX_SEND_BYTES - REPLY_HEADROOM_BYTES:
        return reply, encoded
    size = send_size(key, value, headers)
    if size <= MAX_SEND_BYTES:
        return reply, encoded
    smaller = Reply(reply.id, "error", reply.position, reply.model, reply.model_version,
                    error_code=ERR_REPLY_TOO_LARGE,
                    error_message=f"the reply would be {size} bytes, more than the {MAX_SEND_BYTES} a record the "
                                  "worker sends may have",
                    reply_to=reply.reply_to, traceparent=reply.traceparent, timings=reply.timings,
                    batch_size=reply.batch_size)
    return smaller, encode_reply(smaller)


def stage_timings(request: Request, scored: Scored, submitted_ms: int) -> Timings:
    """Queue wait (produced to batched), batch wait (polled to scored) and compute, in ms."""
    batch_wait_ms = (scored.started - request.received_at) * 1000
    return Timings(queue_wait_ms=max(0.0, submitted_ms - batch_wait_ms - request.produced_ms),
                   batch_wait_ms=batch_wait_ms, compute_ms=scored.compute_s * 1000)


class Responder:
    """Sends every reply and dead letter of the stream. Not thread-safe."""

    def __init__(self, sink: Sink[SendTag], reply_topic: str, dead_letter_topic: str, model: str, version: str,
                 stats: WorkerStats) -> None:
        self._sink = sink
        self._reply_topic = reply_topic
        self._dead_letter_topic = dead_letter_topic
        self._model = model
        self._version = version
        self._stats = stats

    def reject(self, record: InvalidRecord, claimed: bool = False) -> None:
        """An error reply when the record named its id, else a dead letter with its original bytes.
        ``claimed``: its id was claimed, and the reply releases the claim."""
        self._stats.error_codes[record.code] += 1
        if record.request_id is None:
            self._stats.dead_lettered += 1
            key, value, headers = encode_dead_letter(record)
            self._sink.send(self._dead_letter_topic, key, value, headers, SendTag(record.position, None))
            return
        self._send(reply_to_invalid(record, self._model, self._version), claimed=claimed)

    def answer(self, request: Request, status: Status, outcome: Outcome, timings: Timings = Timings(),
               batch_size: int = 0) -> None:
        """Reply to a claimed request."""
        if status != "ok":
            self._stats.error_codes[outcome.error_code or status] += 1
        reply = reply_to_request(request, status, outcome, self._model, self._version, timings, batch_size)
        self._send(reply, claimed=True)

    def answer_scored(self, scored: Scored, submitted_ms: int, left: set[TP]) -> None:
        """Reply to a finished batch, except for the partitions that ``left`` while it ran (their new
        owner scores them again)."""
        pairs = [(r, o) for r, o in zip(scored.batch, scored.outcomes, strict=True)
                 if (r.position.topic, r.position.partition) not in left]
        self._stats.handed_over += len(scored.batch) - len(pairs)
        self._stats.record_batch(len(pairs), scored.compute_s)
        for request, outcome in pairs:
            timings = stage_timings(request, scored, submitted_ms)
            self._stats.record_stages(timings)
            self.answer(request, "ok" if outcome.ok else "error", outcome, timings, len(pairs))

    def _send(self, reply: Reply, claimed: bool) -> None:
        reply, (key, value, headers) = encode_sendable(reply)
        if reply.error_code == ERR_REPLY_TOO_LARGE:
            self._stats.error_codes[ERR_REPLY_TOO_LARGE] += 1
        if reply.status == "ok":
            self._stats.replied_ok += 1
        elif reply.status == "expired":
            self._stats.replied_expired += 1
        else:
            self._stats.replied_error += 1
        # Only a scored answer is remembered; an error or expiry releases the
        # claim so that a corrected retry with the same id is scored.
        done = Completed(reply.id, value if reply.status == "ok" else None) if claimed else None
        self._sink.send(reply.reply_to or self._reply_topic, key, value, headers, SendTag(reply.position, done))
