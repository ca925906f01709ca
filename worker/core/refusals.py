"""Sends a topic refuses for good, and what the worker sends in their place.

A send can fail for a while (the broker away, a leader moving: the worker
retries by consuming the record again) or for good, whatever the retry: a
record larger than the topic's ``max.message.bytes``, a topic the worker may
not write to or no record may go to, a compacted topic given a key-less record. Retrying those would
stop the partition for good, so each refused send is replaced by a smaller,
plainer one, one step down a ladder:

- a reply refused as too large becomes the error reply ``reply_too_large``
  (a few hundred bytes) on the same topic;
- any other refused reply (a ``reply_to`` topic deleted since the request
  was checked among them: TOPIC_GONE), or that error reply refused too,
  becomes a dead letter that carries the reply (cut to fit) and says which topic refused it
  (``reply_refused``);
- a dead letter refused becomes a cut one, of at most CUT_DEAD_LETTER_BYTES:
  a key (the source position, when it had none: a compacted topic needs one),
  the worker's headers and what room is left of the value;
- a cut dead letter refused means the dead-letter topic cannot take anything:
  the worker stops, naming the topic and what to change.

A refusal tells which record only when it came alone: a broker refuses a
whole batch for one record in it, and kafka-python's idempotent producer
fails every send after one refusal with that same error. So records refused
together are first sent again each on its own, at the same step; only a
refusal of a record sent alone moves it down the ladder. What a refusal of a
record alone teaches (``Lessons``) holds for the rest of the refusals of its
batch: a topic that refuses any record (no right to write, no such topic) or
a record of a size is not tried record by record again, so a topic that
refuses everything costs a batch a few sends alone, not one a record.

``refusal`` reads both Kafka clients' errors without importing either: a
kafka-python error carries the protocol's error code as ``errno``, a
confluent-kafka one as its KafkaError's ``code()``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from worker.core.messages import Headers, Position

# Kafka protocol error codes that mean "this record, never": retrying the same bytes gets the same answer.
REFUSED_FOR_GOOD = {
    10: "MESSAGE_TOO_LARGE",
    17: "INVALID_TOPIC_EXCEPTION",  # a topic no record may go to: one of the broker's own
    18: "RECORD_LIST_TOO_LARGE",
    29: "TOPIC_AUTHORIZATION_FAILED",
    44: "POLICY_VIOLATION",
    87: "INVALID_RECORD",
}
TOO_LARGE = frozenset({"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"})
# A send to a reply_to topic that failed, whatever the error, when a lookup made then finds no such topic (it was
# deleted after the request's reply_to was checked): sent again, it would fail again until the topic is back.
TOPIC_GONE = "UNKNOWN_TOPIC_OR_PARTITION"
# Refusals that say a topic takes no record at all: one record refused alone so says it for any other.
TOPIC_REFUSES_ALL = frozenset({"INVALID_TOPIC_EXCEPTION", "TOPIC_AUTHORIZATION_FAILED", TOPIC_GONE})
CUT_DEAD_LETTER_BYTES = 4096  # a refused dead letter's second try, all in
REMEMBERED = 10_000  # refused records remembered (across aborted transactions), oldest forgotten first

# The ladder's steps, from what was sent first to giving up.
REPLY, ERROR_REPLY, DEAD_LETTER, CUT_DEAD_LETTER, GIVE_UP = range(5)


def refusal(error: BaseException) -> str | None:
    """The broker's name for a refusal for good (REFUSED_FOR_GOOD), or None for any other failure."""
    code = getattr(type(error), "errno", None)  # kafka-python: the error class carries the protocol code
    if not isinstance(code, int) and error.args:
        kafka_error = error.args[0]  # confluent-kafka: KafkaException(KafkaError)
        code = kafka_error.code() if callable(getattr(kafka_error, "code", None)) else None
    return REFUSED_FOR_GOOD.get(code) if isinstance(code, int) else None


def record_bytes(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """The bytes of a record as Kafka's record format v2 writes it in a batch of its own, without the batch's
    header (the same for every batch of one record): what the broker holds against ``max.message.bytes``, when
    the batch is not compressed. Exact, where wire.send_size over-counts each header, so that sizes compare."""
    headers_bytes = sum(_varint_bytes(len(name.encode())) + len(name.encode()) + _length_bytes(text)
                        for name, text in headers)
    body = (3 + _length_bytes(key) + _length_bytes(value)  # attributes, timestamp delta 0 and offset delta 0
            + _varint_bytes(len(headers)) + headers_bytes)
    return _varint_bytes(body) + body


def _length_bytes(data: bytes | None) -> int:
    """A length-prefixed field: its zigzag varint length (-1 for null), then its bytes."""
    return _varint_bytes(-1) if data is None else _varint_bytes(len(data)) + len(data)


def _varint_bytes(number: int) -> int:
    zigzag = (number << 1) ^ (number >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7)


def next_step(step: int, reason: str) -> int:
    """Where a record sent at ``step`` goes when refused for ``reason``: a reply refused as too large
    gets a small error reply first; everything else goes one step further, at least to a dead letter."""
    if step == REPLY and reason in TOO_LARGE:
        return ERROR_REPLY
    return max(step + 1, DEAD_LETTER)


class Refusals:
    """What is known of each refused record: the step it is at, why it was refused first, and whether it
    is to be sent alone. Bounded: past ``remembered`` records, the oldest start from the top again
    (costing one more refusal each)."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._remembered = remembered
        self._known: OrderedDict[tuple[str, int, int], Refused] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._known)

    def get(self, position: Position) -> Refused | None:
        return self._known.get((position.topic, position.partition, position.offset))

    def remember(self, position: Position, refused: Refused) -> None:
        key = (position.topic, position.partition, position.offset)
        self._known.pop(key, None)
        self._known[key] = refused
        while len(self._known) > self._remembered:
            self._known.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Refused:
    """A refused record: the ladder's ``step`` to send it at, ``why`` it was refused first, ``headed_to``: the
    topic of that first refused send, and ``alone``: its refusal came with others, so it is sent again on its
    own (a broker refuses a whole batch for one record in it, and kafka-python's idempotent producer fails
    every send after a refusal)."""

    step: int
    why: str
    headed_to: str
    alone: bool = False


class Lessons:
    """What records sent alone taught about their topics, for the refusals that came with theirs: a topic that
    refuses every record, the smallest record a topic refused as too large, and the largest it took. Sizes
    teach only when batches go uncompressed (``sizes_tell``): compressed, a larger record may take fewer
    bytes."""

    def __init__(self, sizes_tell: bool) -> None:
        self.sizes_tell = sizes_tell
        self._refuses_all: dict[str, str] = {}  # topic -> why
        self._too_large_from: dict[str, int] = {}  # topic -> the smallest send size refused alone as too large
        self._fits_up_to: dict[str, int] = {}  # topic -> the largest send size taken alone

    def refused(self, topic: str, why: str, size: int | None) -> None:
        """A record sent alone was refused; ``size``: its bytes (record_bytes), None where not known."""
        if why in TOPIC_REFUSES_ALL:
            self._refuses_all[topic] = why
        elif why in TOO_LARGE and size is not None and self.sizes_tell:
            self._too_large_from[topic] = min(size, self._too_large_from.get(topic, size))

    def taken(self, topic: str, size: int | None) -> None:
        """A record sent alone was taken."""
        if size is not None and self.sizes_tell:
            self._fits_up_to[topic] = max(size, self._fits_up_to.get(topic, size))

    def refuses(self, topic: str, why: str, size: int | None) -> bool:
        """Whether a record refused with others would be refused alone too: no need to try it alone."""
        if self._refuses_all.get(topic) == why:
            return True
        smallest = self._too_large_from.get(topic)
        return why in TOO_LARGE and size is not None and smallest is not None and size >= smallest

    def takes(self, topic: str, why: str, size: int | None) -> bool:
        """Whether a record refused as too large with others fits its topic: it goes again, with others."""
        largest = self._fits_up_to.get(topic)
        return why in TOO_LARGE and size is not None and largest is not None and size <= largest
