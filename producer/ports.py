"""The producer side's ports: the Publisher and the ReplyReader, and the values that cross them.

ScoringClient, bulk sends (producer/send.py) and the bench's load generator
talk to these two protocols only; each transport (producer/transport_kafka_python.py,
producer/transport_confluent.py) implements them, and producer/transport.py
chooses one. They live apart from the chooser so that a transport imports
this module, never the chooser that imports the transport.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

Headers = Sequence[tuple[str, bytes]]  # a record's headers, as sent

# What a publish comes to: (partition, None) once the broker took the record, (None, error) if it was lost.
OnDone = Callable[[int | None, BaseException | None], None]

CLOSE_TIMEOUT_S = 1.0  # how long close() waits for the broker to take what was published


class PublishTimeout(TimeoutError):
    """A record could not be queued in the time given: no metadata for its topic (kafka-python, when no
    broker answers), or no room in the send buffer (librdkafka). Nothing was sent."""


class Record(NamedTuple):
    """A record as read: its key and value, headers, and timestamp (ms; the producer's CreateTime)."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


class Publisher(Protocol):
    """An idempotent producer (acks=all) that never creates a topic by sending to it. Thread-safe.

    Records with the same key go to the same partition on both libraries (the
    Java client's murmur2 partitioner), so switching clients keeps per-key order.
    """

    def prepare(self, topic: str, timeout_s: float) -> None:
        """Get what publishing to ``topic`` needs before the first record, so that ``publish`` does not wait
        for it later (kafka-python: the topic's metadata; librdkafka needs nothing). Raises PublishTimeout
        after ``timeout_s``."""
        ...

    def publish(self, topic: str, key: bytes | None, value: bytes, on_done: OnDone,
                timeout_s: float | None = None, headers: Headers = ()) -> None:
        """Queue one record, with ``headers``; ``on_done`` runs exactly once with its partition or the error
        that lost it.

        Blocks while kafka-python has no metadata for the topic (see ``prepare``)
        or librdkafka's send buffer is full, at most ``timeout_s`` (None: the
        library's own limit, 60 s on kafka-python, 15 s on librdkafka; 0: one
        try), then raises PublishTimeout and ``on_done`` never runs. It runs
        on kafka-python's IO thread, or, on confluent-kafka, inside a later
        ``publish``, ``serve``, ``flush`` or ``close`` on the thread that
        called it: keep it short and do not publish from it. A record refused
        at once (larger than the broker takes, say) raises here instead.
        """
        ...

    def serve(self) -> None:
        """Run the ``on_done`` callbacks that are due, without blocking (librdkafka runs them only inside a
        call; kafka-python has its own thread)."""
        ...

    def flush(self, timeout_s: float | None = None) -> int:
        """Block until the broker answered every record published so far, or ``timeout_s`` passed (None: no
        limit but the records' own delivery timeout). Returns how many are still unanswered."""
        ...

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Flush for up to ``timeout_s``, drop what the broker has not taken by then (their ``on_done`` may
        run with an error, or never), and let go of the connections. Returns how many records were dropped.
        Returns within about ``timeout_s`` even when no broker answers."""
        ...


class ReplyReader(Protocol):
    """A consumer outside any group that reads whole topics from a given point. One thread only."""

    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions, from the brokers' metadata; empty when the topic does not exist."""
        ...

    def follow_from_end(self, topic: str, partitions: list[int]) -> None:
        """Read these partitions from their current end on; returns once the end is resolved to offsets, so a
        reply written after this returns is read."""
        ...

    def poll(self, timeout_s: float) -> list[Record]:
        """Blocks up to ``timeout_s`` for the first record, then returns what is fetched already (up to 5,000)."""
        ...

    def close(self) -> None: ...
