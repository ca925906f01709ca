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
from typing import Any, Generic, TypeVar, cast

import structlog
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from worker.core.bounds import SEND_BLOCK_S
from worker.core.messages import Headers
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.confluent.connection import client_config
from worker.ports import Delivery

log = structlog.get_logger(__name__)
T = TypeVar("T")
_Headers = list[tuple[str, str | bytes | None]]  # what produce() takes; ours are a narrower kind of it

MAX_BLOCK_S = SEND_BLOCK_S  # the producer's transport waits as long for room in a full queue
QUEUE_FULL_WAIT_S = 0.01  # serve delivery reports this long before trying a refused send again


class _Send(Generic[T]):
    """One send, until its delivery report comes: librdkafka calls ``delivered`` from poll() or flush()."""

    __slots__ = ("tag", "done", "error")

    def __init__(self, tag: T, error: Exception | None = None) -> None:
        self.tag = tag
        self.done = error is not None
        self.error = error

    def delivered(self, error: KafkaError | None, _message: Message) -> None:
        self.done = True
        if error is not None:
            self.error = KafkaException(error)


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
        self._pending: list[_Send[T]] = []

    @property
    def pending(self) -> int:
        return len(self._pending)

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        """Queue a record for ``topic``; its outcome is reported by a later ``settle``.

        Blocks (serving delivery reports) while librdkafka's queue is full, up to ``max_block_s``.
        """
        record = _Send(tag)
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(topic, value, key, on_delivery=record.delivered, headers=cast(_Headers, headers))
                break
            except BufferError as exc:  # the queue is full: let acknowledgements free room
                deadline = deadline if deadline is not None else time.monotonic() + self._max_block_s
                if time.monotonic() >= deadline:
                    record = _Send(tag, exc)
                    break
                self._producer.poll(QUEUE_FULL_WAIT_S)
            except (KafkaException, TypeError, ValueError) as exc:  # e.g. larger than message.max.bytes
                record = _Send(tag, exc)
                break
        self._pending.append(record)

    def settle(self, timeout_s: float = 30.0) -> list[Delivery[T]]:
        """Flush, then report every finished send in the order it was made. Blocks up to ``timeout_s``.

        Sends still unanswered then (the broker is away) stay queued for the next settle.
        """
        self._producer.flush(timeout_s)
        deliveries = []
        still_out = []
        for record in self._pending:
            if record.done:
                deliveries.append(Delivery(record.tag, record.error))
            else:
                still_out.append(record)
        self._pending = still_out
        return deliveries

    def close(self, timeout_s: float = 10.0) -> None:
        """Close, waiting up to ``timeout_s`` for what is still out (its offsets were never committed)."""
        if self._producer.flush(timeout_s):
            log.warning("sink_closed_with_sends_out", timeout_s=timeout_s,
                        consequence="those records were not committed: they are consumed again")
