"""What flows through the worker: requests, replies, records that could not be read.

Every message carries the position of the Kafka record it came from, so that
batching, reordering and failures never lose track of what may be committed.

The three built for every record polled (Position, RawRecord, Request) are
msgspec Structs, built in C: as slotted dataclasses they took 245, 195 and 231
ns each to build, as Structs 73, 96 and 114 (an in-process timeit). A Reply,
built only for a reply that takes the per-request path, is a slotted, not
frozen, dataclass: a frozen dataclass sets each field through
object.__setattr__, which made building one about five times slower. An
InvalidRecord is a Struct too, so that a decoder's output copies alike: with
``msgspec.structs.replace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import msgspec

from worker.core.routes import Route

Headers = list[tuple[str, bytes]]  # a record's headers, as the worker sends them
RecordHeaders = list[tuple[str, bytes | None]]  # as a record consumed has them: Kafka allows a null value
Status = Literal["ok", "error", "expired"]


class Position(msgspec.Struct, frozen=True, order=True):
    """Where a record was consumed from. Hashed by value (a key of the offsets and refusals)."""

    topic: str
    partition: int
    offset: int

    def token(self) -> str:
        """A compact identity of the record, e.g. ``requests/3/1042``."""
        return f"{self.topic}/{self.partition}/{self.offset}"


class Request(msgspec.Struct):
    """A decoded, validated scoring request.

    ``item`` is what the model's ``prepare`` made of the JSON ``inputs``.
    ``produced_ms`` is the record's Kafka timestamp; ``received_at`` the
    worker's monotonic time when it was polled. ``route``: the model that
    answers it (worker/core/routes.py; None: the worker's default model).
    """

    id: str
    item: Any
    position: Position
    reply_to: str | None = None
    deadline_ms: int | None = None
    traceparent: bytes | None = None
    produced_ms: int = 0
    received_at: float = 0.0
    route: Route | None = None


@dataclass(frozen=True)
class Unprepared:
    """A request's JSON ``inputs`` as they came, while the model that answers it is not loaded: its ``prepare``
    runs once it is (worker/stream/residency.py). ``version``: the model_version the request named, if any,
    checked then."""

    inputs: Any
    version: str | None = None


class InvalidRecord(msgspec.Struct, frozen=True):
    """A record that cannot be scored.

    With a ``request_id`` it is answered with an error reply; without one it
    goes to the dead-letter topic with its original bytes. ``schema_id``: the
    registry schema id its frame named, for a registry-framed record (a dead
    letter's ``dlq-schema-id`` header). ``route``: the model it was routed to,
    when that model refused it (its error reply names that model and version).
    """

    position: Position
    code: str
    message: str
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders = msgspec.field(default_factory=list)
    request_id: str | None = None
    reply_to: str | None = None
    traceparent: bytes | None = None
    schema_id: int | str | None = None
    route: Route | None = None


class Refused(Request, kw_only=True):
    """A record that named its id but cannot be scored: claimed like a request, so that an id already
    answered gets no second reply, then answered with ``refusal``'s error."""

    refusal: InvalidRecord


class Timings(NamedTuple):
    """A scored request's stages, in ms. A tuple: built per reply, a frozen dataclass cost 3 times as much."""

    queue_wait_ms: float = 0.0
    batch_wait_ms: float = 0.0
    compute_ms: float = 0.0


@dataclass(slots=True)
class Reply:
    """The answer to one request, bound for ``reply_to`` keyed by ``id``."""

    id: str
    status: Status
    position: Position
    model: str
    model_version: str
    outputs: Any = None
    error_code: str | None = None
    error_message: str | None = None
    reply_to: str | None = None
    traceparent: bytes | None = None
    timings: Timings = Timings()
    batch_size: int = 0


class RawRecord(msgspec.Struct):
    """A consumed Kafka record, as the codec sees it."""

    position: Position
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders
    timestamp_ms: int
    received_at: float
