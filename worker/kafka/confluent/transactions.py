"""Exactly-once delivery over confluent-kafka: replies and consumed offsets committed in one Kafka transaction.

The twin of worker/kafka/kafka_python/transactions.py. ``TransactionalSink`` is a
ConfluentSink whose sends join a transaction that ``commit`` closes together
with the consumer offsets they answer (``send_offsets_to_transaction`` with the
consumer's group metadata, so that the broker fences a worker the group has
dropped). Any failure aborts the whole transaction: ``commit`` raises
TransactionAborted after aborting, and the caller consumes again from the
committed offsets. librdkafka says what an error allows: ``txn_requires_abort()``
(abort, then go on with the same producer) or ``fatal()`` (fenced by a newer
instance with the same transactional id, or a broken producer: only a new
producer can go on, so it is closed and replaced).
"""

from __future__ import annotations

from typing import Any, TypeVar

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from worker.core.bounds import SEND_BLOCK_S, TRANSACTION_S
from worker.core.errors import TransactionAborted
from worker.core.messages import Headers
from worker.core.offsets import TopicPartition as TP
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.confluent.sink import ConfluentSink, _Send

log = structlog.get_logger(__name__)
T = TypeVar("T")



def _error_of(exc: KafkaException) -> KafkaError | None:
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


class TransactionalSink(ConfluentSink[T]):
    def __init__(self, bootstrap_servers: str, client_id: str, transactional_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 transaction_s: float = TRANSACTION_S) -> None:
        """``transaction_s``: the longest one transactional call (init, offsets, commit, abort) may block."""
        super().__init__(bootstrap_servers, client_id, linger_ms, security=security, max_block_s=max_block_s,
                         **{"transactional.id": transactional_id})
        self._transaction_s = transaction_s
        self._producer.init_transactions(transaction_s)  # aborts what a previous instance left open
        self._in_transaction = False

    @property
    def open(self) -> bool:
        """True between the first send (or commit) of a transaction and its commit or abort."""
        return self._in_transaction

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        if not self._in_transaction:
            try:
                self._producer.begin_transaction()
            except KafkaException as exc:  # the send fails, the step aborts: go on with a new producer
                self._replace_producer(exc)
                self._pending.append(_Send(tag, exc))
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
                    [TopicPartition(t, p, o) for (t, p), o in offsets.items()], group_metadata,
                    self._transaction_s)
            self._producer.commit_transaction(self._transaction_s)
            self._in_transaction = False
        except KafkaException as exc:
            error = _error_of(exc)
            if error is not None and error.fatal():
                self._pending = []
                self._replace_producer(exc)
            else:
                self.abort(f"commit failed: {exc}")
            raise TransactionAborted(str(exc)) from exc

    def abort(self, reason: str) -> None:
        """Abort the open transaction and forget its sends; replace the producer if it cannot abort."""
        log.warning("transaction_aborted", reason=reason, sends=len(self._pending))
        self._pending = []
        was_open, self._in_transaction = self._in_transaction, False
        if not was_open:
            return
        try:
            self._producer.abort_transaction(self._transaction_s)
        except KafkaException as exc:  # fenced or fatal: only a new producer can go on
            self._replace_producer(exc)

    def _replace_producer(self, error: KafkaException) -> None:
        log.warning("producer_replaced", error=str(error))
        self._in_transaction = False
        self._producer.flush(0)  # serve the reports of the purged sends; they are forgotten
        self._producer = Producer(self._config)
        self._producer.init_transactions(self._transaction_s)
