"""Building and sending replies: one builder for the stream, the backfill and the batch file job.

``reply_to_request`` and ``reply_to_invalid`` are pure and build the Reply
for a scored (or expired, or refused) request and for a record that could
not be read but named its id. ``Responder`` sends them, and dead letters for
records without an id, through the stream's sink, tagging each send with
what the dedup store must learn once the broker has it, and counting every
outcome in the stats. A send its topic refuses for good is replaced by the
next step of worker/core/refusals.py's ladder (``take_refused``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import cast

import structlog
from msgspec import structs

from worker.core.bounds import SETTLE_S
from worker.core.errors import DeliveryError, UnencodableReply
from worker.core.messages import Headers, InvalidRecord, Position, Reply, Request, Status, Timings
from worker.core.offsets import TopicPartition as TP
from worker.core.refusals import (
    CUT_DEAD_LETTER,
    CUT_DEAD_LETTER_BYTES,
    DEAD_LETTER,
    ERROR_REPLY,
    GIVE_UP,
    REPLY,
    TOO_LARGE,
    TOPIC_GONE,
    Lessons,
    Refusals,
    Refused,
    next_step,
    record_bytes,
    refusal,
)
from worker.core.routes import Route
from worker.core.stats import WorkerStats
from worker.core.wire import (
    ERR_DEADLINE_EXCEEDED,
    ERR_REPLY_REFUSED,
    ERR_REPLY_TOO_LARGE,
    ERR_REPLY_UNENCODABLE,
    ERR_TOO_MANY_TOKENS,
    H_BATCH_SIZE,
    H_BATCH_WAIT,
    H_COMPUTE,
    H_QUEUE_WAIT,
    H_SOURCE_OFFSET,
    H_SOURCE_PARTITION,
    H_SOURCE_TOPIC,
    H_TRACEPARENT,
    MAX_SEND_BYTES,
    encode_dead_letter,
    encode_reply,
    ok_reply_value,
    send_size,
    timing_text,
)
from worker.ports import (
    Answered,
    Completed,
    Delivery,
    Outcome,
    Record,
    ReplyEncode,
    Scored,
    SendTag,
    SentBatch,
    Sink,
    Tag,
    Tracer,
    failed_send,
)

log = structlog.get_logger(__name__)


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


def encode_sendable(reply: Reply, encode: ReplyEncode = encode_reply) -> tuple[Reply, tuple[bytes, bytes, Headers]]:
    """The reply and its record; a reply too large to send becomes the error reply reply_too_large, one whose
    outputs its reply schema cannot hold the error reply reply_unencodable."""
    try:
        key, value, headers = encoded = encode(reply)
    except UnencodableReply as exc:
        log.warning("reply_unencodable", request_id=reply.id, model=reply.model, error=str(exc))
        unencodable = replace(reply, status="error", outputs=None, error_code=ERR_REPLY_UNENCODABLE,
                              error_message=str(exc))
        return unencodable, encode(unencodable)
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
    return smaller, encode(smaller)


def refused_as_too_large(reply: Reply, why: str) -> Reply:
    """The error reply reply_too_large sent in place of ``reply``, which its topic refused as too large."""
    return replace(reply, status="error", outputs=None, error_code=ERR_REPLY_TOO_LARGE,
                   error_message=f"the reply was not delivered: {why} (larger than the topic's max.message.bytes)")


def stage_waits(batch: list[Request], scored: Scored, submitted_ms: int) -> tuple[list[float], list[float]]:
    """Each request's queue wait (produced to batched) and batch wait (polled to scored), in ms."""
    started = scored.started
    batch_waits = [(started - request.received_at) * 1000 for request in batch]
    queue_waits = [max(0.0, submitted_ms - waited - request.produced_ms)
                   for request, waited in zip(batch, batch_waits, strict=True)]
    return queue_waits, batch_waits


class Responder:
    """Sends every reply and dead letter of the stream. Not thread-safe."""

    def __init__(self, sink: Sink[Tag], reply_topic: str, dead_letter_topic: str, default: Callable[[], Route],
                 stats: WorkerStats, settle_s: float = SETTLE_S, tracer: Tracer | None = None,
                 encode: ReplyEncode | None = None, gone: Callable[[str], bool] | None = None,
                 compressed: bool = False) -> None:
        """``default()``: the model whose name and version a reply carries when its request has no route (it
        could not be read, or named no model), as served when the reply is made (a SIGHUP may switch it);
        ``settle_s``: the longest wait for a record sent alone (worker/core/refusals.py); ``tracer``: spans for
        batches, replies and dead letters (None: none, and no cost but a test per batch and per error);
        ``encode``: a reply's record (default: the wire contract's JSON); ``gone``: whether a topic is confirmed
        deleted (worker/stream/topics.py), asked of a ``reply_to`` topic a send to failed (None: never);
        ``compressed``: the sink compresses its batches, so a record's size does not tell whether it fits."""
        self._gone = gone
        self._sizes_tell = not compressed
        self._tracer = tracer
        self._encode = encode or encode_reply
        self._sink = sink
        self._reply_topic = reply_topic
        self._dead_letter_topic = dead_letter_topic
        self._default = default
        self._stats = stats
        self._refusals = Refusals()
        self._settle_s = settle_s
        self._held: list[Delivery[Tag]] = []  # deliveries of sends made alone, for the next take_refused

    def reject(self, record: InvalidRecord, claimed: bool = False) -> None:
        """An error reply when the record named its id, else a dead letter with its original bytes.
        ``claimed``: its id was claimed, and the reply releases the claim."""
        if record.request_id is None:
            self._stats.error_codes[record.code] += 1
            if self._tracer is not None:
                self._tracer.unscored("dead letter", None, record.traceparent, self._dead_letter_topic, record.code)
            refused = self._refusals.get(record.position) if self._refusals else None
            if refused is None:
                self._dead_letter(record, None, record, cut=False)
            else:  # consumed again after its refusal aborted a transaction
                self._dead_letter_at(refused, record)
            return
        route = record.route or self._default()
        reply = reply_to_invalid(record, route.model, route.version)
        if self._tracer is not None:
            reply.traceparent = self._tracer.unscored("error reply", reply.id, reply.traceparent,
                                                      reply.reply_to or self._reply_topic, record.code)
        self._send(reply, claimed=claimed)

    def answer(self, request: Request, status: Status, outcome: Outcome, timings: Timings = Timings(),
               batch_size: int = 0) -> None:
        """Reply to a claimed request (one not scored, when ``status`` is not ok: a span says why)."""
        reply = self._reply(request, status, outcome, timings, batch_size)
        if self._tracer is not None and status != "ok":
            reply.traceparent = self._tracer.unscored("error reply", reply.id, reply.traceparent,
                                                      reply.reply_to or self._reply_topic,
                                                      outcome.error_code or status)
        self._send(reply, claimed=True)

    def answer_scored(self, scored: Scored, submitted_ms: int, left: set[TP]) -> None:
        """Reply to a finished batch, except for the partitions that ``left`` while it ran (their new
        owner scores them again)."""
        batch, outcomes = scored.batch, scored.outcomes
        if left:
            kept = [i for i, r in enumerate(batch) if (r.position.topic, r.position.partition) not in left]
            batch, outcomes = [batch[i] for i in kept], [outcomes[i] for i in kept]
        size = len(batch)
        self._stats.handed_over += len(scored.batch) - size
        self._stats.record_batch(size, scored.compute_s, scored.entry)
        queue_waits, batch_waits = stage_waits(batch, scored, submitted_ms)
        compute_ms = scored.compute_s * 1000
        self._stats.record_stages(queue_waits, batch_waits, compute_ms)
        if self._tracer is None and self._encode is encode_reply:
            self._answer_in_one_pass(batch, outcomes, queue_waits, batch_waits, compute_ms)
            return
        timings = [Timings(queued, waited, compute_ms) for queued, waited in zip(queue_waits, batch_waits, strict=True)]
        traceparents: list[bytes | None] = []
        if self._tracer is not None and batch:
            answered = Scored(scored.entry, batch, outcomes, scored.started, scored.compute_s)
            traceparents = self._tracer.scored(answered, timings, submitted_ms)
        for i, request in enumerate(batch):
            outcome = outcomes[i]
            reply = self._reply(request, "ok" if outcome.ok else "error", outcome, timings[i], size)
            if traceparents:
                reply.traceparent = traceparents[i]
            self._send(reply, claimed=True)

    def _answer_in_one_pass(self, batch: list[Request], outcomes: list[Outcome], queue_waits: list[float],
                            batch_waits: list[float], compute_ms: float) -> None:
        """Send a batch's ok replies in the wire contract's JSON as one group of sends (``Sink.send_group``),
        tagged once (SentBatch) instead of a tag, a done mark and a delivery report each: the values first, one
        orjson call each, then the records, the headers the batch shares built once, a timing's text once for
        each distinct value (a poll's requests share their batch wait). What needs more (an error reply, a
        record refused before, a value near the size limit, outputs orjson cannot write) takes the per-request
        path, which gives the same records; so does a batch with an id twice (a group tells its sends apart by
        key)."""
        size, default, limit = len(batch), self._default(), MAX_SEND_BYTES - REPLY_HEADROOM_BYTES
        if not size:  # every request of it left with its partition
            return
        refused = self._refusals.get if self._refusals else None
        values: list[bytes | None] = []
        for request, outcome in zip(batch, outcomes, strict=True):
            value = None
            if outcome.error_code is None and (refused is None or refused(request.position) is None):
                route = request.route or default
                value = ok_reply_value(request.id, outcome.output, route.model, route.version)
            values.append(value if value is not None and len(value) <= limit else None)
        if None in values:
            kept = []
            for i, value in enumerate(values):
                if value is None:
                    outcome = outcomes[i]
                    self._send(self._reply(batch[i], "ok" if outcome.ok else "error", outcome,
                                           Timings(queue_waits[i], batch_waits[i], compute_ms), size), claimed=True)
                else:
                    kept.append(i)
            batch, outcomes = [batch[i] for i in kept], [outcomes[i] for i in kept]
            queue_waits, batch_waits = [queue_waits[i] for i in kept], [batch_waits[i] for i in kept]
            values = [values[i] for i in kept]
            if not batch:
                return
        sent = SentBatch(batch, [outcome.output for outcome in outcomes], cast(list[bytes], values), queue_waits,
                         batch_waits, compute_ms, size, default)
        records = self._records(sent)
        if len({record[1] for record in records}) == len(records):
            self._sink.send_group(records, sent, sent.member)
        else:
            for i, record in enumerate(records):
                self._sink.send(*record, sent.member(i))
        routes = {id(request.route): request.route or default for request in batch}
        if len(routes) == 1:
            route = next(iter(routes.values()))
            self._stats.record_reply(route.model, route.version, "ok", len(batch))
        else:
            for request in batch:
                route = request.route or default
                self._stats.record_reply(route.model, route.version, "ok")

    def _records(self, sent: SentBatch) -> list[Record]:
        """The records of a group of ok replies: each reply's value under its id, with its seven headers."""
        compute, batch_size = (H_COMPUTE, timing_text(sent.compute_ms)), (H_BATCH_SIZE, b"%d" % sent.batch_size)
        texts: dict[float, bytes] = {}
        topics: dict[str, tuple[str, bytes]] = {}
        records: list[Record] = []
        reply_topic = self._reply_topic
        for request, value, queued, waited in zip(sent.requests, sent.values, sent.queue_waits_ms,
                                                  sent.batch_waits_ms, strict=True):
            position = request.position
            source = topics.get(position.topic) or topics.setdefault(position.topic,
                                                                     (H_SOURCE_TOPIC, position.topic.encode()))
            headers: Headers = [(H_QUEUE_WAIT, texts.get(queued) or texts.setdefault(queued, timing_text(queued))),
                                (H_BATCH_WAIT, texts.get(waited) or texts.setdefault(waited, timing_text(waited))),
                                compute, batch_size, source, (H_SOURCE_PARTITION, b"%d" % position.partition),
                                (H_SOURCE_OFFSET, b"%d" % position.offset)]
            if request.traceparent is not None:
                headers.append((H_TRACEPARENT, request.traceparent))
            records.append((request.reply_to or reply_topic, request.id.encode(), value, headers))
        return records

    def _reply(self, request: Request, status: Status, outcome: Outcome, timings: Timings,
               batch_size: int) -> Reply:
        route = request.route or self._default()
        return reply_to_request(request, status, outcome, route.model, route.version, timings, batch_size)

    def take_refused(self, deliveries: list[Delivery[Tag]], resend: bool) -> list[Delivery[Tag]]:
        """The deliveries left for the commit policy, those of sends made alone meanwhile first. A send
        refused for good moves its record one step down the ladder (worker/core/refusals.py), or, refused
        together with others, marks it to be sent again alone. With ``resend`` (at-least-once) that send
        goes now and the refusal leaves the list; without (exactly-once, where the refusal aborts the
        transaction) the refusal stays, and the record is sent so when it is consumed again.

        Raises DeliveryError when the dead-letter topic refuses even a cut dead letter: it cannot take one.
        """
        if self._held:
            deliveries, self._held = self._held + deliveries, []
        if all(delivery.error is None for delivery in deliveries):
            return deliveries
        gone: dict[str, bool] = {}  # reply_to topic -> confirmed deleted, asked once a call
        reasons = [self._why_refused(d, gone) if d.error is not None else None for d in deliveries]
        together = sum(why is not None for why in reasons) > 1
        lessons, learned = Lessons(self._sizes_tell), 0
        left = []
        for delivery, why in zip(deliveries, reasons, strict=True):
            if why is None:
                left.append(delivery)
                continue
            tag = failed_send(delivery)
            position, done, sent = tag.position, tag.done, tag.sent
            if isinstance(sent, Answered):
                sent = sent.reply()
            step = self._step(position, sent)
            with_others, fits = together, False
            before = self._refusals.get(position)
            if together and not (before and before.alone):  # what the records sent alone so far taught may
                # spare this one its send alone (one sent alone learns from its own refusal)
                learned = self._learn(lessons, learned, gone)
                topic = self._topic_of(sent, step)
                size = self._sent_size(sent, position) if lessons.sizes_tell and why in TOO_LARGE else None
                fits = lessons.takes(topic, why, size)
                with_others = not (fits or lessons.refuses(topic, why, size))
            refused = self._refused(position, sent, why, with_others, fits)
            if not resend:
                left.append(delivery)
                continue
            self._uncount(sent, step)
            if isinstance(sent, Reply):
                self._send_at(refused, sent, done is not None)
            else:
                self._dead_letter_at(refused, sent)
        if self._held:  # what was sent alone just now: refused again, it is refused alone
            left += self.take_refused([], resend)
        return left

    def _learn(self, lessons: Lessons, learned: int, gone: dict[str, bool]) -> int:
        """Learn from what was sent alone since the first ``learned`` deliveries held (the deliveries settled
        before a send alone teach nothing); returns how many are held now."""
        for delivery in self._held[learned:]:
            tag = failed_send(delivery) if delivery.error is not None else delivery.tag
            if not isinstance(tag, SendTag):
                continue
            refused = self._refusals.get(tag.position)
            if refused is None or not refused.alone:
                continue
            sent = tag.sent.reply() if isinstance(tag.sent, Answered) else tag.sent
            topic = self._topic_of(sent, refused.step)
            why = self._why_refused(delivery, gone) if delivery.error is not None else None
            size = self._sent_size(sent, tag.position) if lessons.sizes_tell and why in (None, *TOO_LARGE) else None
            if delivery.error is None:
                lessons.taken(topic, size)
            elif why is not None:
                lessons.refused(topic, why, size)
        return len(self._held)

    def _sent_size(self, sent: Reply | InvalidRecord, position: Position) -> int | None:
        """The send size of what went for ``position`` at its step of the ladder when it went to the reply's
        topic (the reply, or the error reply reply_too_large in its place), else None."""
        if not isinstance(sent, Reply):
            return None
        before = self._refusals.get(position)
        if before is None or before.step == REPLY:
            return record_bytes(*encode_sendable(sent, self._encode)[1])
        if before.step == ERROR_REPLY:
            return record_bytes(*self._encode(refused_as_too_large(sent, before.why)))
        return None

    def _why_refused(self, delivery: Delivery[Tag], gone: dict[str, bool]) -> str | None:
        """The refusal for good of a failed send, if it is one: the broker's, or TOPIC_GONE when it went to a
        ``reply_to`` topic that a lookup now finds deleted."""
        assert delivery.error is not None
        why = refusal(delivery.error)
        if why is not None or self._gone is None:
            return why
        tag = failed_send(delivery)
        position, sent = tag.position, tag.sent
        if isinstance(sent, Answered):
            sent = sent.reply()
        topic = self._topic_of(sent, self._step(position, sent))
        if topic in (self._reply_topic, self._dead_letter_topic):
            return None
        if topic not in gone:
            gone[topic] = self._gone(topic)
        return TOPIC_GONE if gone[topic] else None

    def _refused(self, position: Position, sent: Reply | InvalidRecord, why: str, together: bool,
                 fits: bool = False) -> Refused:
        """Remember the refusal of what was sent for ``position``; returns where the record stands now.
        ``fits``: a record of its size to its topic was taken alone, so it goes again as it went."""
        before = self._refusals.get(position)
        step = self._step(position, sent)
        topic = self._topic_of(sent, step)
        first_why = before.why if before else f"{topic} refused it for good: {why}"
        headed_to = before.headed_to if before else topic
        if fits:
            refused = Refused(step, first_why, headed_to)
            log.info("send_refused_with_others", source=position.token(), topic=topic, error=why,
                     next_try="the same record, with others (a record as large went to the topic alone)")
        elif together and not (before and before.alone):
            refused = Refused(step, first_why, headed_to, alone=True)
            log.info("send_refused_with_others", source=position.token(), topic=topic, error=why,
                     next_try="the same record, sent alone")
        else:
            refused = Refused(next_step(step, why), first_why, headed_to)
            if refused.step == GIVE_UP:
                raise DeliveryError(
                    f"the dead-letter topic {self._dead_letter_topic!r} refused even a cut dead letter "
                    f"({CUT_DEAD_LETTER_BYTES} bytes, keyed) of {position.token()}: {why}. Check the topic of "
                    "--dead-letter-topic: the worker's write permission (ACL), its max.message.bytes, its "
                    "cleanup.policy; exiting so that the record is consumed again")
            # Counted as what goes instead: at ERROR_REPLY, the error reply reply_too_large counts itself when sent.
            if refused.step == DEAD_LETTER:  # a reply becomes the dead letter reply_refused
                self._stats.error_codes[ERR_REPLY_REFUSED] += 1
            elif refused.step > DEAD_LETTER:  # a dead letter goes again, cut
                self._stats.error_codes["dead_letter_refused"] += 1
            log.warning("send_refused", source=position.token(), topic=topic, error=why,
                        next_try=_STEPS[refused.step],
                        advice=_ADVICE.get(why, "check the topic's configuration and the worker's ACLs"))
        self._refusals.remember(position, refused)
        return refused

    def _step(self, position: Position, sent: Reply | InvalidRecord) -> int:
        """The step of the ladder the record's last send was at."""
        before = self._refusals.get(position)
        return before.step if before else (REPLY if isinstance(sent, Reply) else DEAD_LETTER)

    def _topic_of(self, sent: Reply | InvalidRecord, step: int) -> str:
        if isinstance(sent, Reply) and step <= ERROR_REPLY:
            return sent.reply_to or self._reply_topic
        return self._dead_letter_topic

    def _send(self, reply: Reply, claimed: bool) -> None:
        if self._refusals:
            refused = self._refusals.get(reply.position)
            # Consumed again after its refusal aborted a transaction, and headed where it was refused (a
            # reply_to topic deleted meanwhile is refused at admission now: its error reply goes elsewhere).
            if refused is not None and refused.headed_to == (reply.reply_to or self._reply_topic):
                self._send_at(refused, reply, claimed)
                return
        self._emit(reply, claimed, reply)

    def _send_at(self, refused: Refused, reply: Reply, claimed: bool) -> None:
        """Send what stands for ``reply`` at the record's step of the ladder (alone, if so marked)."""
        if refused.alone:
            self._sink_alone(lambda: self._send_at(replace(refused, alone=False), reply, claimed))
        elif refused.step == REPLY:
            self._emit(reply, claimed, reply)
        elif refused.step == ERROR_REPLY:
            self._emit(refused_as_too_large(reply, refused.why), claimed, reply)
        else:
            _, value, _ = self._encode(reply)  # it was encoded once already, before its topic refused it
            record = InvalidRecord(reply.position, ERR_REPLY_REFUSED, f"the reply was not delivered: {refused.why}",
                                   reply.id.encode(), value)
            self._dead_letter(record, Completed(reply.id, None) if claimed else None, reply,
                              cut=refused.step >= CUT_DEAD_LETTER)

    def _dead_letter_at(self, refused: Refused, record: InvalidRecord) -> None:
        if refused.alone:
            self._sink_alone(lambda: self._dead_letter_at(replace(refused, alone=False), record))
        else:
            self._dead_letter(record, None, record, cut=refused.step >= CUT_DEAD_LETTER)

    def _sink_alone(self, send: Callable[[], None]) -> None:
        """Make ``send``'s record a batch of its own: settle what is out before it, and it after. The
        deliveries are held for the next ``take_refused``."""
        if self._sink.pending:
            self._held += self._sink.settle(self._settle_s)
        send()
        self._held += self._sink.settle(self._settle_s)

    def _emit(self, reply: Reply, claimed: bool, sent: Reply) -> None:
        reply, (key, value, headers) = encode_sendable(reply, self._encode)
        self._count(reply)
        # Only a scored answer is remembered; an error or expiry releases the
        # claim so that a corrected retry with the same id is scored.
        done = Completed(reply.id, value if reply.status == "ok" else None) if claimed else None
        self._sink.send(reply.reply_to or self._reply_topic, key, value, headers,
                        SendTag(reply.position, done, sent))

    def _dead_letter(self, record: InvalidRecord, done: Completed | None, sent: Reply | InvalidRecord,
                     cut: bool) -> None:
        """``cut``: the dead-letter topic refused it before; send the smallest form, keyed."""
        self._stats.dead_lettered += 1
        if cut:
            keyed = record if record.key is not None else structs.replace(record, key=record.position.token().encode())
            key, value, headers = encode_dead_letter(keyed, CUT_DEAD_LETTER_BYTES)
        else:
            key, value, headers = encode_dead_letter(record)
        self._sink.send(self._dead_letter_topic, key, value, headers, SendTag(record.position, done, sent))

    def _count(self, reply: Reply, count: int = 1) -> None:
        """Count a reply sent, by status and, unless ok, by the error code it carries (``count`` -1: take back
        one its topic refused). Every reply is counted here, once, as it was sent."""
        self._stats.record_reply(reply.model, reply.model_version, reply.status, count)
        if reply.status != "ok":
            self._stats.error_codes[reply.error_code or reply.status] += count

    def _uncount(self, sent: Reply | InvalidRecord, step: int) -> None:
        """Take back what a refused send, made at ``step`` of the ladder, counted: its replacement counts
        itself. A dead letter's code stays counted (a refused one counts dead_letter_refused on top)."""
        if isinstance(sent, InvalidRecord) or step >= DEAD_LETTER:
            self._stats.dead_lettered -= 1
        elif step == ERROR_REPLY:
            self._count(refused_as_too_large(sent, ""), -1)
        else:
            self._count(encode_sendable(sent, self._encode)[0], -1)  # what _emit counted: it may have replaced it


_STEPS = {ERROR_REPLY: "error reply reply_too_large", DEAD_LETTER: "dead letter",
          CUT_DEAD_LETTER: "cut dead letter"}
_ADVICE = {
    "MESSAGE_TOO_LARGE": "raise the topic's max.message.bytes (the worker sends up to "
                         f"{MAX_SEND_BYTES} bytes), or lower the producer's batch size below it",
    "RECORD_LIST_TOO_LARGE": "raise the topic's max.message.bytes, or lower the producer's batch size",
    "TOPIC_AUTHORIZATION_FAILED": "grant the worker's principal WRITE on the topic",
    "INVALID_RECORD": "a compacted topic needs keyed records: check the topic's cleanup.policy",
    TOPIC_GONE: "the reply_to topic was deleted after the request was checked: create it again, or name another",
}
