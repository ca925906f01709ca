"""Publishing replies and dead letters: confluent-kafka's Producer under the shared sink (worker/kafka/sends.py).

Each send's outcome comes back through its delivery callback, which librdkafka
runs inside ``poll()`` and ``flush()`` on the caller's thread. Unlike kafka-python's
producer, this one never creates a topic by sending to it: a send to a missing
topic fails once topic.metadata.propagation.max.ms has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar, cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from worker.core.bounds import SEND_BLOCK_S
from worker.core.messages import Headers
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.confluent.connection import client_config
from worker.kafka.sends import DeliveryReport, LedgerSink, SendGroup, SendLedger, retry_while_full
from worker.ports import Record

T = TypeVar("T")
_Headers = list[tuple[str, str | bytes | None]]  # what produce() takes; ours are a narrower kind of it

MAX_BLOCK_S = SEND_BLOCK_S  # the producer's transport waits as long for room in a full queue


class ConfluentSink(LedgerSink[T, DeliveryReport]):
    SEND_ERRORS: ClassVar[tuple[type[Exception], ...]] = (BufferError, KafkaException, TypeError, ValueError)

    def __init__(self, bootstrap_servers: str, client_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 producer_class: type[Producer] = Producer, **producer_config: Any) -> None:
        """``producer_config``: more librdkafka properties, which win over these. ``max_block_s``: the longest
        a send waits for room in a full queue (kafka-python's max_block_ms); ``producer_class``: a Producer
        or a subclass (the transactional sink's)."""
        self._max_block_s = max_block_s
        self._config = {**client_config(bootstrap_servers, security), "client.id": client_id, "acks": "all",
                        "enable.idempotence": True, "linger.ms": linger_ms, "allow.auto.create.topics": False,
                        # A key's partition as the Java client and kafka-python pick it (librdkafka's own CRC32
                        # puts it elsewhere): a reply lands where a reader of its id's partition looks.
                        "partitioner": "murmur2_random", **producer_config}
        self._producer = producer_class(self._config)
        self._pending: SendLedger[T, DeliveryReport] = SendLedger(_outcome)

    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> DeliveryReport:
        """Serves delivery reports while librdkafka's queue is full, up to ``max_block_s``. The first try is
        the bare call: the retrying wrapper's layers cost a quarter of a reply's own send."""
        report = DeliveryReport()
        try:
            self._producer.produce(topic, value, key, on_delivery=report.delivered, headers=cast(_Headers, headers))
        except BufferError:
            produce(self._producer, topic, key, value, report.delivered, headers, self._max_block_s)
        return report

    def _queue_group(self, records: Sequence[Record]) -> SendGroup[DeliveryReport]:
        """One callback for the group's delivery reports, not one object a send."""
        reports = DeliveryReports([key for _, key, _, _ in records])
        producer, delivered = self._producer, reports.delivered
        for i, (topic, key, value, headers) in enumerate(records):
            try:
                try:
                    producer.produce(topic, value, key, on_delivery=delivered, headers=cast(_Headers, headers))
                except BufferError:
                    produce(producer, topic, key, value, delivered, headers, self._max_block_s)
            except self.SEND_ERRORS as exc:
                reports.failed(i, exc)
        return reports

    def _flush(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    def _close(self, timeout_s: float) -> bool:
        return not self._producer.flush(timeout_s)  # librdkafka's handle goes with its last reference


class DeliveryReports(SendGroup[DeliveryReport]):
    """A group's delivery reports, counted by one callback, which librdkafka calls for each send from poll()
    or flush(); a failed send is told by its key, distinct within a group."""

    __slots__ = ("_errors", "_keys", "_left")

    def __init__(self, keys: list[bytes | None]) -> None:
        super().__init__(len(keys))
        self._keys = keys
        self._left = len(keys)
        self._errors: dict[int, Exception] = {}

    def failed(self, index: int, error: Exception) -> None:
        super().failed(index, error)
        self._left -= 1

    def delivered(self, error: KafkaError | None, message: Message) -> None:
        self._left -= 1
        if error is not None:
            self._errors[self._keys.index(message.key())] = KafkaException(error)

    def outcome(self) -> tuple[bool, dict[int, Exception]]:
        return self._left == 0, {**self._refused, **self._errors}


def produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None,
            on_delivery: Callable[[KafkaError | None, Message], None], headers: Headers | None = None,
            max_block_s: float = MAX_BLOCK_S) -> None:
    """Queue one record; while librdkafka's queue is full, serve delivery reports (which frees room) and try
    again, for up to ``max_block_s``, then raise BufferError. Raises KafkaException, TypeError or ValueError
    for a record refused at once (larger than message.max.bytes, say)."""
    retry_while_full(lambda: producer.produce(topic, value, key, on_delivery=on_delivery,
                                              headers=cast(_Headers, headers)), producer.poll, max_block_s)


def _outcome(report: DeliveryReport) -> tuple[bool, Exception | None]:
    return report.done, None if report.error is None else KafkaException(report.error)
