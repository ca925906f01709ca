"""Carrying out the commit policies' decisions (stream/commit.py): the one place the stream commits.

Each step ``settle`` asks the policy which done marks to write first and
writes them through the dedup gate (which retries those still waiting), asks
the policy what to commit, given what was written and whether a revocation
waits for its assignment, carries that out against the source or the
transactions, and tells the policy what came of it:

- ``CommitOffsets``: commit and wait; deferred (a rebalance is under way), the
  offsets wait for a later commit; then DeliveryError if deliveries failed.
- ``CommitOffsetsAsync``: send, and go on; the broker's answer comes inside a
  later poll, and one refused for good is raised by the next settle.
- ``CommitTransaction``: commit the transaction with its offsets, then (never
  before) write its done marks. A failed commit has aborted: the policy
  forgets the transaction, and TransactionAborted propagates.
- ``AbortTransaction``: abort, then raise TransactionAborted (from ``settle``;
  ``partitions_left`` returns True instead).
- ``DeliveryFailed``: raise DeliveryError.

Blocks on the source's, the transactions' and the dedup store's calls; time is passed in. Not thread-safe.
"""

from __future__ import annotations

from typing import assert_never

import structlog

from worker.core.errors import CommitDeferred, DeliveryError, TransactionAborted, WorkerError
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.ports import Delivery, DoneMarks, Source, Tag, Transactions
from worker.stream.commit import (
    AbortTransaction,
    AtLeastOnce,
    CommitOffsets,
    CommitOffsetsAsync,
    CommitTransaction,
    Decision,
    DeliveryFailed,
    Nothing,
    Policy,
    Transactional,
)
from worker.stream.dedup_gate import DedupGate

log = structlog.get_logger(__name__)


class Committer:
    """The stream's CommitPolicy (worker/ports.py): ``policy``'s decisions carried out against ``source``,
    ``transactions`` (exactly-once only) and ``gate``."""

    def __init__(self, policy: Policy, source: Source, transactions: Transactions | None, gate: DedupGate) -> None:
        self._policy = policy
        self._source = source
        self._transactions = transactions
        self._gate = gate

    def settle(self, deliveries: list[Delivery[Tag]], now: float, force: bool) -> None:
        """Raises DeliveryError, TransactionAborted, or what the broker refused of the last asynchronous commit."""
        if self._transactions is not None:
            self._transactions.recover()
        written = self._gate.complete(self._policy.take(deliveries), now)
        self._carry_out(self._policy.decide(written, now, force, self._source.rebalancing()), now)

    def partitions_left(self, partitions: set[TP]) -> bool:
        transaction_open = self._transactions is not None and self._transactions.open
        decision = self._policy.partitions_left(partitions, transaction_open)
        if isinstance(decision, Nothing):
            return False
        self._abort(decision.reason)
        return True

    def _carry_out(self, decision: Decision, now: float) -> None:
        match decision:
            case CommitOffsets(offsets, failure):
                self._commit(offsets, now)
                if failure is not None:
                    raise DeliveryError(failure)
            case CommitOffsetsAsync(offsets):
                self._source.commit_async(offsets, lambda error: self._answered(offsets, error))
            case CommitTransaction(offsets, done):
                self._commit_transaction(offsets, done, now)
            case AbortTransaction(reason):
                self._abort(reason)
                raise TransactionAborted(reason)
            case DeliveryFailed(reason):
                raise DeliveryError(reason)
            case Nothing():
                pass
            case _:
                assert_never(decision)

    def _commit(self, offsets: dict[TP, int], now: float) -> None:
        try:
            self._source.commit(offsets)
        except CommitDeferred as exc:
            log.warning("commit_deferred", error=str(exc), partitions=len(offsets))
            return
        self._policy.committed(offsets, now)

    def _answered(self, offsets: dict[TP, int], error: Exception | None) -> None:
        if isinstance(error, CommitDeferred):
            log.warning("commit_deferred", error=str(error), partitions=len(offsets))
        self._policy.answered(offsets, error)

    def _commit_transaction(self, offsets: dict[TP, int], done: DoneMarks, now: float) -> None:
        try:
            self._transactional().commit(offsets)
        except TransactionAborted:
            self._policy.aborted()
            raise
        self._policy.committed(offsets, now)
        self._gate.complete(done, now)

    def _abort(self, reason: str) -> None:
        self._transactional().abort(reason)
        self._policy.aborted()

    def _transactional(self) -> Transactions:
        if self._transactions is None:
            raise WorkerError("a transaction was decided without transactions to carry it out: build the committer "
                              "with commit_policy, which gives Transactional its transactions")
        return self._transactions


def commit_policy(source: Source, transactions: Transactions | None, offsets: OffsetTracker, gate: DedupGate,
                  interval_s: float, now: float) -> Committer:
    """Exactly-once when given transactions (over the same sink and source), else at-least-once: the mode's
    policy over ``offsets``, committing at most once per ``interval_s`` from ``now``, carried out by a Committer."""
    policy: Policy = (Transactional(offsets, interval_s, now) if transactions is not None
                      else AtLeastOnce(offsets, interval_s, now))
    return Committer(policy, source, transactions, gate)
