"""Exactly-once delivery over either Kafka client: a transactional sink bound to the source whose offsets
it commits. Client-free: each client's transactions module provides the sink, each source the rest."""

from __future__ import annotations

from worker.core.errors import TransactionAborted
from worker.core.offsets import TopicPartition as TP
from worker.ports import RewindableSource, TransactionalProducer


class ExactlyOnce:
    """The worker's Transactions: every send since the last commit, and the offsets, in one transaction."""

    def __init__(self, sink: TransactionalProducer, source: RewindableSource) -> None:
        self._sink = sink
        self._source = source

    @property
    def open(self) -> bool:
        return self._sink.open

    def commit(self, offsets: dict[TP, int]) -> None:
        try:
            self._sink.commit(offsets, self._source.group_metadata())
        except TransactionAborted:
            self._source.rewind()
            raise

    def abort(self, reason: str) -> None:
        self._sink.abort(reason)
        self._source.rewind()

    def recover(self) -> None:
        self._sink.renew_if_due()
