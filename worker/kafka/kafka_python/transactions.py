"""Exactly-once delivery over kafka-python: a KafkaSink whose sends join transactions, by the policy of
worker/kafka/transactional.py."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, TypeVar

from kafka import KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from worker.core.messages import Headers
from worker.core.offsets import TopicPartition as TP
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.sink import KafkaSink
from worker.kafka.transactional import TransactionalSends

T = TypeVar("T")


class TransactionalSink(TransactionalSends[T], KafkaSink[T]):
    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaError,)

    def __init__(self, bootstrap_servers: str, client_id: str, transactional_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, **producer_config: Any) -> None:
        super().__init__(bootstrap_servers, client_id, linger_ms, security=security, transactional_id=transactional_id,
                         **producer_config)
        self._producer.init_transactions()  # aborts what a previous instance with this id left open

    def _send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        KafkaSink.send(self, topic, key, value, headers, tag)

    def _offsets(self, offsets: dict[TP, int]) -> Any:
        return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}

    def _renew_producer(self) -> None:
        # A fenced producer's batches never finish: kafka-python's close raises when its flush times out.
        with contextlib.suppress(KafkaTimeoutError):
            self._producer.close(timeout=5)
        self._producer = KafkaProducer(**self._config)
        self._producer.init_transactions()

    def _describe(self, error: Exception) -> str:
        return f"{type(error).__name__}: {error}"
