"""Publishing replies and dead letters: kafka-python's KafkaProducer under the shared sink (worker/kafka/sends.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

import structlog
from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import FutureRecordMetadata

from worker.core.bounds import SEND_BLOCK_S
from worker.core.messages import Headers
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config, creating_no_topics
from worker.kafka.sends import LedgerSink, SendGroup, SendLedger
from worker.ports import Record

log = structlog.get_logger(__name__)
T = TypeVar("T")


class KafkaSink(LedgerSink[T, FutureRecordMetadata]):
    SEND_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaError,)  # e.g. no metadata within max_block_ms
    PRODUCER: type[KafkaProducer] = KafkaProducer  # what the sink builds (a subclass may bound more calls)

    def __init__(self, bootstrap_servers: str, client_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 **producer_config: Any) -> None:
        """``producer_config``: more kafka-python options, which win over these (max_block_ms over
        ``max_block_s``)."""
        self._config = {**client_config(bootstrap_servers, security), "client_id": client_id, "acks": "all",
                        "enable_idempotence": True, "linger_ms": linger_ms, "max_block_ms": int(max_block_s * 1000),
                        "allow_auto_create_topics": False, **producer_config}
        self._producer = self._new_producer()
        self._pending: SendLedger[T, FutureRecordMetadata] = SendLedger(_outcome)

    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> FutureRecordMetadata:
        return self._producer.send(topic, key=key, value=value, headers=headers)

    def _queue_group(self, records: Sequence[Record]) -> SendGroup[FutureRecordMetadata]:
        futures = Futures(len(records))
        send = self._producer.send
        for i, (topic, key, value, headers) in enumerate(records):
            try:
                futures.handles_by_index.append((i, send(topic, key=key, value=value, headers=headers)))
            except self.SEND_ERRORS as exc:
                futures.failed(i, exc)
        return futures

    def _flush(self, timeout_s: float) -> None:
        # A timeout leaves some sends out: the settle reports the finished ones and keeps the rest. A producer
        # that turned fatal (a record its topic refused for good) aborts its batches, and its flush may raise
        # UnknownError("Future not done") for one caught aborting: the futures hold each send's outcome, the
        # settle reports them, and _settled replaces the producer.
        try:
            self._producer.flush(timeout=timeout_s)
        except KafkaTimeoutError:
            pass
        except KafkaError as exc:
            log.warning("flush_failed", error=f"{type(exc).__name__}: {exc}",
                        detail="each send's outcome is read from its own future")

    def _settled(self) -> None:
        """Replace the producer when it would fail or hold every send after this one:

        - kafka-python's idempotent (not transactional) producer turns fatal on any send the broker
          refuses for good (a record too large for its topic, a topic it may not write to) and fails every
          send after it with that refusal: a new one lets the sends the Responder makes again, each alone,
          find which record was refused (worker/core/refusals.py);
        - a send to a topic deleted after it was queued is retried until the topic is back, whatever
          delivery_timeout_ms says, and every flush waits for it (``_stuck_on_gone_topics``).
        """
        manager = self._producer._transaction_manager  # kafka-python 3.x has no public accessor for it
        if manager is not None and manager.has_fatal_error():
            self._start_over(f"{type(manager.last_error).__name__}: {manager.last_error}")
        elif self._stuck_on_gone_topics():
            self._start_over("every send still out goes to a topic no longer in the metadata")

    def _stuck_on_gone_topics(self, every: bool = True) -> bool:
        """Whether every send still out (``every``; else any) goes to a topic the producer's metadata no longer
        has (deleted since). Closing the producer then fails them (IllegalStateError), and the Responder asks
        whether their topic is gone (worker/stream/topics.py) and sends what stands for them elsewhere."""
        topics = {handle._produce_future.topic_partition.topic for handle in self._pending.handles_out()}
        gone = [self._producer._metadata.partitions_for_topic(topic) is None for topic in topics]
        return bool(gone) and (all(gone) if every else any(gone))

    def _start_over(self, why: str) -> None:
        log.warning("producer_replaced", error=why)
        close_for_good(self._producer, timeout_s=1)
        self._producer = self._new_producer()

    def _new_producer(self, bootstrap_servers: list[str] | None = None) -> KafkaProducer:
        """A producer whose sends never create their topic, even where the broker would, bootstrapped from
        ``bootstrap_servers`` when given. A replacement takes the broker version its predecessor learned:
        kafka-python otherwise asks the first bootstrap server for it before the constructor returns, and a
        paused broker there held a replacement 10 s on the three-broker cluster."""
        producer = self.PRODUCER(**{**self._config, **({"bootstrap_servers": bootstrap_servers}
                                                          if bootstrap_servers else {})})
        creating_no_topics(producer._metadata)
        self._config.setdefault("api_version", producer.config["api_version"])
        return producer

    def _close(self, timeout_s: float) -> bool:
        try:
            self._producer.close(timeout=timeout_s)
        except KafkaTimeoutError:  # kafka-python raises when the flush inside close times out
            return False
        return True


def close_for_good(producer: KafkaProducer, timeout_s: float) -> None:
    """Close ``producer``, failing what it has not sent within ``timeout_s``. kafka-python's ``close`` flushes
    first and raises when the flush times out, before it would force the close: its I/O thread would go on
    sending, for ever when a batch's topic was deleted."""
    try:
        producer.close(timeout=timeout_s)
    except KafkaTimeoutError:
        producer._sender.force_close()  # fails every batch not answered: the flush in close then returns
        producer._sender.join(timeout_s)
        with contextlib.suppress(KafkaTimeoutError):
            producer.close(timeout=0)


class Futures(SendGroup[FutureRecordMetadata]):
    """A group's sends as kafka-python's futures, one a send queued."""

    __slots__ = ("handles_by_index",)

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.handles_by_index: list[tuple[int, FutureRecordMetadata]] = []

    def outcome(self) -> tuple[bool, dict[int, Exception]]:
        if not all(future.is_done for _, future in self.handles_by_index):
            return False, {}
        lost = {i: future.exception for i, future in self.handles_by_index if future.failed()}
        return True, {**self._refused, **lost} if lost else self._refused

    def handles(self) -> list[FutureRecordMetadata]:
        """Those of its sends still out: a group is reported only once its last send is finished."""
        return [future for _, future in self.handles_by_index if not future.is_done]


def _outcome(future: FutureRecordMetadata) -> tuple[bool, Exception | None]:
    return future.is_done, future.exception if future.failed() else None
