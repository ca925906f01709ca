"""Exactly-once delivery: replies and consumed offsets committed in one Kafka transaction.

``TransactionalSink`` is a KafkaSink whose sends join a transaction that
``commit`` closes together with the consumer offsets they answer
(``send_offsets_to_transaction`` with the consumer's group metadata, so that
the broker fences a worker the group has dropped). A reader with
``isolation_level="read_committed"`` sees a reply only once its offsets are
committed, and never the replies of an aborted transaction.

Any failure aborts the whole transaction: ``commit`` raises TransactionAborted
after aborting, and the caller consumes again from the committed offsets. A
producer that cannot abort (fenced by a newer instance with the same
transactional id, or in a fatal state) is closed and replaced.
"""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

import structlog
from kafka import KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from worker.core.errors import TransactionAborted
from worker.core.messages import Headers
from worker.core.offsets import TopicPartition as TP
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.sink import KafkaSink

log = structlog.get_logger(__name__)
T = TypeVar("T")


class TransactionalSink(KafkaSink[T]):
    def __init__(self, bootstrap_servers: str, client_id: str, transactional_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, **producer_config: Any) -> None:
        super().__init__(bootstrap_servers, client_id, linger_ms, security=security, transactional_id=transactional_id,
                         **producer_config)
        self._producer.init_transactions()  # aborts what a previous instance with this id left open
        self._in_transaction = False

    @property
    def open(self) -> bool:
        """True between the first send (or commit) of a transaction and its commit or abort."""
        return self._in_transaction

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        if not self._in_transaction:
            try:
                self._producer.begin_transaction()
            except KafkaError as exc:  # the send fails, the step aborts: go on with a new producer
                self._replace_producer(exc)
                self._pending.append((tag, None, exc))
                return
            self._in_transaction = True
        super().send(topic, key, value, headers, tag)

    def commit(self, offsets: dict[TP, int], group_metadata: Any) -> None:
        """Commit every send since the last commit together with ``offsets`` (next offsets to read).

        Call after ``settle`` reported every send delivered. Raises TransactionAborted.
        """
        try:
            if not self._in_transaction:
                self._producer.begin_transaction()
                self._in_transaction = True
            if offsets:
                self._producer.send_offsets_to_transaction(
                    {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
                    group_metadata)
            self._producer.commit_transaction()
            self._in_transaction = False
        except KafkaError as exc:
            self.abort(f"commit failed: {type(exc).__name__}: {exc}")
            raise TransactionAborted(str(exc)) from exc

    def abort(self, reason: str) -> None:
        """Abort the open transaction and forget its sends; replace the producer if it cannot abort."""
        log.warning("transaction_aborted", reason=reason, sends=len(self._pending))
        self._pending = []
        was_open, self._in_transaction = self._in_transaction, False
        if not was_open:
            return
        try:
            self._producer.abort_transaction()
        except KafkaError as exc:  # fenced or fatal: only a new producer can go on
            self._replace_producer(exc)

    def _replace_producer(self, error: KafkaError) -> None:
        log.warning("producer_replaced", error=f"{type(error).__name__}: {error}")
        self._in_transaction = False
        # A fenced producer's batches never finish: kafka-python's close raises when its flush times out.
        with contextlib.suppress(KafkaTimeoutError):
            self._producer.close(timeout=5)
        self._producer = KafkaProducer(**self._config)
        self._producer.init_transactions()
