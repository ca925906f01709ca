"""Admission: from polled records to batched requests, refusals and counted duplicates.

Each record is tracked for its offset, decoded against the wire contract and
the model's ``prepare``, and its ``reply_to`` checked against the broker's
topics. A record that cannot be scored is refused at once (an error reply,
or a dead letter when it has no id). Records that name their id are claimed in the dedup
store through the gate, refused ones too: fresh requests join the batcher (or
are refused when they alone exceed the token budget; those of a model not
loaded yet wait for it: stream/residency.py), fresh refusals get
their error reply (which releases the claim, so a corrected retry is scored),
and duplicates are counted and acknowledged: an id already answered gets no
second reply, whatever is sent again under it. The decoder reads the wire
contract's JSON (stream/json_requests.py), or registry-framed requests
(--request-format avro, json-schema: stream/framed.py, which holds records
while the registry is away: ``blocked``), a poll at a time. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter

from msgspec import structs

from worker.core.clock import Clock
from worker.core.messages import InvalidRecord, RawRecord, Refused, Request, Unprepared
from worker.core.model_batchers import ModelBatchers
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.core.stats import WorkerStats
from worker.core.wire import ERR_INVALID_REPLY_TO, ERR_UNKNOWN_REPLY_TOPIC, KAFKA_INTERNAL_TOPICS
from worker.ports import RequestDecoder, Tracer
from worker.stream.dedup_gate import DedupGate
from worker.stream.replies import Responder, too_many_tokens
from worker.stream.topics import TopicDirectory

_POSITION = attrgetter("position")


def unfit_reply_topics(requests_topics: Iterable[str], dead_letter_topic: str) -> dict[str, str]:
    """The topics no request's ``reply_to`` may name, each with why."""
    unfit = dict.fromkeys(KAFKA_INTERNAL_TOPICS, "one of Kafka's internal topics: the broker takes no reply there")
    unfit[dead_letter_topic] = "this worker's dead-letter topic: a reply there would be read as a dead letter"
    unfit.update(dict.fromkeys(requests_topics, "a requests topic this worker reads: a reply there would be read "
                                                "as a request"))
    return unfit


class Admission:
    def __init__(self, decoder: RequestDecoder, topics: TopicDirectory, gate: DedupGate, batchers: ModelBatchers,
                 offsets: OffsetTracker, responder: Responder,
                 stats: WorkerStats, clock: Clock, refused_reply_topics: Mapping[str, str],
                 park: Callable[[Request], None] | None = None, tracer: Tracer | None = None) -> None:
        """``decoder``: from records to requests (the wire contract's JSON, or registry-framed);
        ``refused_reply_topics``: the topics no reply_to may name, each with why (``unfit_reply_topics``);
        ``park`` holds a fresh request whose model is not loaded yet (stream/residency.py); ``tracer`` gives a
        duplicate its span."""
        self._park = park
        self._tracer = tracer
        self._decoder = decoder
        self._refused_reply_topics = refused_reply_topics
        self._topics = topics
        self._gate = gate
        self._batchers = batchers
        self._offsets = offsets
        self._responder = responder
        self._stats = stats
        self._clock = clock

    def admit(self, records: Sequence[RawRecord], claim_now: bool = True) -> None:
        """Track, decode and check every record; refuse the bad ones, claim the rest. May block on the
        dedup store (never for long: the gate backs off while it is down), and on the schema registry (up to
        its timeout, once per schema id not cached). Without ``claim_now``, the claim is only started (sent, its
        answer read later: stream/dedup_gate.py) and ``take_claimed`` takes its answer."""
        valid: list[Request] = []
        self._offsets.track_all(map(_POSITION, records))
        for record, decoded in self._decoder.decode(records, self._clock.monotonic()):
            if type(decoded) is Request and not decoded.reply_to:
                valid.append(decoded)  # the common request: nothing to check, nothing to refuse
            else:
                self._sort(self._checked(record, decoded), valid)
        self._stats.consumed += len(records)
        if claim_now:
            self.take_claimed(valid)
        else:
            self._gate.start_claim(valid, self._clock.monotonic())

    @property
    def held(self) -> bool:
        """Requests wait for another record of their id, in flight, to be answered or released (BUSY)."""
        return self._gate.holding

    @property
    def blocked(self) -> bool:
        """Records wait for a schema registry that did not answer: stop fetching more."""
        return self._decoder.blocked

    def drop(self, partitions: set[TP]) -> int:
        """Forget records held for their schema, of partitions we no longer own; returns how many."""
        return self._decoder.drop(partitions)

    def _sort(self, decoded: Request | InvalidRecord, valid: list[Request]) -> None:
        if isinstance(decoded, Request):
            valid.append(decoded)
        elif decoded.request_id is None:
            self._responder.reject(decoded)  # a dead letter: no id to claim
        else:
            valid.append(Refused(decoded.request_id, None, decoded.position, refusal=decoded))

    def take_claimed(self, new: Sequence[Request] = ()) -> None:
        """Claim ids (new ones and any still waiting); batch what is fresh, count duplicates."""
        now, wall_ms = self._clock.monotonic(), self._clock.wall_ms()
        run: list[Request] = []  # fresh requests to batch, placed together before anything else claimed
        for request, fresh in self._gate.claim(new, now):
            parked = self._park is not None and isinstance(request.item, Unprepared)
            if fresh and not parked and type(request) is not Refused:  # isinstance of a Struct class: 2x slower
                run.append(request)
                continue
            if run:  # what was claimed before goes first, its refusals' replies included
                self.place(run, now, wall_ms)
                run = []
            if not fresh:
                self._stats.duplicates += 1
                if self._tracer is not None:
                    self._tracer.unscored("duplicate", request.id, request.traceparent, "", None)
                self._offsets.ack((request.position.topic, request.position.partition), request.position.offset)
            elif isinstance(request, Refused):
                self._responder.reject(request.refusal, claimed=True)
            elif self._park is not None:  # parked
                self._park(request)
        if run:
            self.place(run, now, wall_ms)

    def place(self, requests: Sequence[Request], now: float, wall_ms: int) -> None:
        """Batch fresh, claimed, prepared requests, in order, refusing any that alone exceeds its token budget."""
        for request in self._batchers.add_all(requests, now, wall_ms):
            self._responder.answer(request, "error", too_many_tokens(self._batchers.cost_budget(request)))

    def _checked(self, record: RawRecord, decoded: Request | InvalidRecord) -> Request | InvalidRecord:
        """``decoded``, or its refusal when its ``reply_to`` cannot be used; a record refused already keeps its
        own error, sent to the default reply topic instead (its error reply could not be delivered, or would be
        read as a request, and retrying it would stop the partition)."""
        if isinstance(decoded, InvalidRecord):
            if decoded.reply_to and (decoded.reply_to in self._refused_reply_topics
                                     or not self._topics.exists(decoded.reply_to)):
                return structs.replace(decoded, reply_to=None)
            return decoded
        if not decoded.reply_to:
            return decoded
        unfit = self._refused_reply_topics.get(decoded.reply_to)
        if unfit is not None:
            return InvalidRecord(record.position, ERR_INVALID_REPLY_TO,
                                 f"reply_to {decoded.reply_to!r} is {unfit}; the reply comes here",
                                 record.key, record.value, record.headers, decoded.id, None, decoded.traceparent)
        if not self._topics.exists(decoded.reply_to):
            return InvalidRecord(record.position, ERR_UNKNOWN_REPLY_TOPIC,
                                 f"reply_to topic {decoded.reply_to!r} does not exist; the reply comes here",
                                 record.key, record.value, record.headers, decoded.id, None, decoded.traceparent)
        return decoded
