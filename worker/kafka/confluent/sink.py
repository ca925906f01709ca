"""Publishing replies and dead letters: a thin adapter over confluent-kafka's Producer, behind the Sink port.

As KafkaSink does: ``send`` never raises for a failed delivery; ``settle``
waits for the sends out and says which succeeded. Replies count as delivered
only once the broker acknowledged them (acks=all, idempotent producer). Each
send's outcome comes back through its delivery callback, which librdkafka runs
inside ``poll()`` and ``flush()`` on the caller's thread. Unlike kafka-python's
producer, this one never creates a topic by sending to it: a send to a missing
topic fails once topic.metadata.propagation.max.ms has passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

import structlog
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from worker.core.bounds import SEND_BLOCK_S
from worker.core.messages import Headers
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.confluent.connection import client_config
from worker.kafka.sends import SendLedger
from worker.ports import Delivery

log = structlog.get_logger(__name__)
T = TypeVar("T")
_Headers = list[tuple[str, str | bytes | None]]  # what produce() takes; ours are a narrower kind of it

MAX_BLOCK_S = SEND_BLOCK_S  # the producer's transport waits as long for room in a full queue
QUEUE_FULL_WAIT_S = 0.01  # serve delivery reports this long before trying a refused send again


class _Report:
    """One send's delivery report, once it comes: librdkafka calls ``delivered`` from poll() or flush()."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: Exception | None = None

    def delivered(self, error: KafkaError | None, _message: Message) -> None:
        self.done = True
        if error is not None:
            self.error = KafkaException(error)

    def outcome(self) -> tuple[bool, Exception | None]:
        return self.done, self.error


class ConfluentSink(Generic[T]):
    def __init__(self, bootstrap_servers: str, client_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 **producer_config: Any) -> None:
        """``producer_config``: more librdkafka properties, which win over these. ``max_block_s``: the longest
        a send waits for room in a full queue (kafka-python's max_block_ms)."""
        self._max_block_s = max_block_s
        self._config = {**client_config(bootstrap_servers, security), "client.id": client_id, "acks": "all",
                        "enable.idempotence": True, "linger.ms": linger_ms, "allow.auto.create.topics": False,
                        **producer_config}
        self._producer = Producer(self._config)
        self._pending: SendLedger[T, _Report] = SendLedger(_Report.outcome)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        """Queue a record for ``topic``; its outcome is reported by a later ``settle``.

        Blocks (serving delivery reports) while librdkafka's queue is full, up to ``max_block_s``.
        """
        report = _Report()
        try:
            produce(self._producer, topic, key, value, report.delivered, headers, self._max_block_s)
        except (BufferError, KafkaException, TypeError, ValueError) as exc:  # e.g. larger than message.max.bytes
            self._pending.failed(tag, exc)
            return
        self._pending.sent(tag, report)

    def settle(self, timeout_s: float = 30.0) -> list[Delivery[T]]:
        """Flush, then report every finished send in the order it was made. Blocks up to ``timeout_s``.

        Sends still unanswered then (the broker is away) stay queued for the next settle.
        """
        self._producer.flush(timeout_s)
        return self._pending.settle()

    def close(self, timeout_s: float = 10.0) -> None:
        """Close, waiting up to ``timeout_s`` for what is still out (its offsets were never committed)."""
        if self._producer.flush(timeout_s):
            log.warning("sink_closed_with_sends_out", timeout_s=timeout_s,
                        consequence="those records were not committed: they are consumed again")


def produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None,
            on_delivery: Callable[[KafkaError | None, Message], None], headers: Headers | None = None,
            max_block_s: float = MAX_BLOCK_S) -> None:
    """Queue one record; while librdkafka's queue is full, serve delivery reports (which frees room) and try
    again, for up to ``max_block_s``, then raise BufferError. Raises KafkaException, TypeError or ValueError
    for a record refused at once (larger than message.max.bytes, say)."""
    deadline: float | None = None
    while True:
        try:
            producer.produce(topic, value, key, on_delivery=on_delivery, headers=cast(_Headers, headers))
            return
        except BufferError:  # the queue is full: let acknowledgements free room
            deadline = deadline if deadline is not None else time.monotonic() + max_block_s
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            producer.poll(min(QUEUE_FULL_WAIT_S, left))
