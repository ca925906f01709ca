"""Exactly-once delivery over confluent-kafka: a ConfluentSink whose sends join transactions, by the policy of
worker/kafka/transactional.py.

librdkafka says what an error allows: ``txn_requires_abort()`` (abort, then go
on with the same producer) or ``fatal()`` (fenced by a newer instance with the
same transactional id, or a broken producer: only a new producer can go on, so
it is closed and replaced without aborting).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from worker.core.bounds import SEND_BLOCK_S, TRANSACTION_S
from worker.core.offsets import TopicPartition as TP
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.confluent.sink import ConfluentSink
from worker.kafka.transactional import TransactionalSends

T = TypeVar("T")


class TransactionalSink(TransactionalSends[T], ConfluentSink[T]):
    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaException,)

    def __init__(self, bootstrap_servers: str, client_id: str, transactional_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 transaction_s: float = TRANSACTION_S) -> None:
        """``transaction_s``: the longest one transactional call (init, offsets, commit, abort) may block."""
        super().__init__(bootstrap_servers, client_id, linger_ms, security=security, max_block_s=max_block_s,
                         **{"transactional.id": transactional_id})
        self._timeout = (transaction_s,)
        self._producer.init_transactions(transaction_s)  # aborts what a previous instance left open

    def _offsets(self, offsets: dict[TP, int]) -> Any:
        return [TopicPartition(t, p, o) for (t, p), o in offsets.items()]

    def _fatal(self, error: Exception) -> bool:
        code = error.args[0] if error.args else None
        return isinstance(code, KafkaError) and code.fatal()

    def _renew_producer(self) -> None:
        self._producer.flush(0)  # serve the reports of the purged sends; they are forgotten
        self._producer = Producer(self._config)
        self._producer.init_transactions(*self._timeout)

    def _describe(self, error: Exception) -> str:
        return str(error)
