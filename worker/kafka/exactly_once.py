"""Exactly-once delivery over either Kafka client: a transactional sink bound to the source whose offsets
it commits. Client-free: each client's transactions module provides the sink, each source the rest.

After an abort the source goes back to the offsets this worker committed last, which it knows without asking
the group coordinator: on the three-broker cluster that coordinator was the paused broker in every paused-leader
run, and a rewind that asked it consumed nothing until the broker came back
(docs/chaos/cluster-eos-failover-2026-12-05.md). The group coordinator is asked only for what this worker
cannot know: a partition it has not committed in this group generation (another member may have since), and
every partition after a commit whose outcome it cannot know (CommitUncertain).
"""

from __future__ import annotations

from worker.core.errors import CommitUncertain, TransactionAborted
from worker.core.offsets import TopicPartition as TP
from worker.ports import RewindableSource, TransactionalProducer


class ExactlyOnce:
    """The worker's Transactions: every send since the last commit, and the offsets, in one transaction."""

    def __init__(self, sink: TransactionalProducer, source: RewindableSource) -> None:
        self._sink = sink
        self._source = source
        self._committed: dict[TP, int] = {}  # what this worker committed in the generation below
        self._generation = -1

    @property
    def open(self) -> bool:
        return self._sink.open

    def commit(self, offsets: dict[TP, int]) -> None:
        generation = self._source.generation()
        try:
            self._sink.commit(offsets, self._source.group_metadata())
        except CommitUncertain:
            self._committed = {}
            self._source.rewind()
            raise
        except TransactionAborted:
            self._source.rewind(self._known())
            raise
        if generation != self._generation:
            self._committed, self._generation = {}, generation
        self._committed.update(offsets)

    def abort(self, reason: str) -> None:
        self._sink.abort(reason)
        self._source.rewind(self._known())

    def recover(self) -> None:
        self._sink.renew_if_due()

    def _known(self) -> dict[TP, int]:
        """The offsets committed here, while the group generation they were committed in lasts (a partition
        that left this member and came back was a new generation's)."""
        if self._generation < 0 or self._source.generation() != self._generation:
            return {}
        return dict(self._committed)
