"""When and how the stream commits: a policy per delivery mode, called once per loop step.

Both policies take the step's deliveries (what the broker acknowledged or
refused since the last step) and own the order that makes them safe:

- ``AtLeastOnce``: acknowledge the offsets of delivered dead letters and
  error replies at once, and of scored replies once their done marks are
  written; commit the contiguous watermark when the commit interval has
  passed, asynchronously (one commit out at a time: the loop goes on while
  the broker answers, and the answer marks the offsets committed). A failed
  delivery commits what is safe, synchronously, and raises DeliveryError (the
  worker restarts, and the records are consumed again); so does a commit the
  broker refused for good.
- ``Transactional``: commit the replies sent since the last commit with
  their offsets in one Kafka transaction when the commit interval has passed
  (0: every step), then write the done marks (never before: a done mark for
  an aborted reply would lose the request). Never while a revocation waits
  for its assignment (librdkafka's eager protocol revokes every partition
  in one poll and assigns in a later one): the group may have given the
  partitions to a member that read their committed offsets already, and a
  commit then publishes replies it sends again (seen once in chaos scenario
  f); the assignment says whether they stay (commit later) or leave (abort). Any failure aborts and raises
  TransactionAborted: the caller drops what it holds, and the source gives it
  again from the committed offsets. Partitions that leave while a
  transaction is open abort it (``partitions_left``): committed later, it
  would publish replies that the partitions' new owner sends again.

Time is passed in; nothing here sleeps. ``CommitTimer`` is the pure part.
"""

from __future__ import annotations

import structlog

from worker.core.errors import CommitDeferred, DeliveryError, TransactionAborted
from worker.core.messages import Position
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.ports import CommitPolicy, Completed, Delivery, SendTag, Source, Transactions
from worker.stream.dedup_gate import DedupGate

log = structlog.get_logger(__name__)

COMMIT_ANSWER_S = 30.0  # an asynchronous commit unanswered this long is taken as lost: another may go


class CommitTimer:
    """Commit at most once per ``interval_s``. Pure: the caller passes the time."""

    def __init__(self, interval_s: float, now: float) -> None:
        self._interval_s = interval_s
        self._last = now

    def should_commit(self, now: float) -> bool:
        return now - self._last >= self._interval_s

    def did_commit(self, now: float) -> None:
        self._last = now


class AtLeastOnce:
    def __init__(self, source: Source, offsets: OffsetTracker, gate: DedupGate, interval_s: float,
                 now: float) -> None:
        self._source = source
        self._offsets = offsets
        self._gate = gate
        self._timer = CommitTimer(interval_s, now)
        self._out_since: float | None = None  # when the asynchronous commit still unanswered was sent
        self._refused: Exception | None = None  # what the broker answered to one, when not "later"

    def settle(self, deliveries: list[Delivery[SendTag]], now: float, force: bool) -> None:
        if self._refused is not None:
            refused, self._refused = self._refused, None
            raise refused
        failures = [d for d in deliveries if d.error is not None]
        completed: list[tuple[Position, Completed]] = []
        for delivery in deliveries:
            position, done = delivery.tag.position, delivery.tag.done
            if delivery.error is not None:
                continue
            if done is None:
                self._offsets.ack((position.topic, position.partition), position.offset)
            else:
                completed.append((position, done))
        # A claimed request's offset counts as done only once its done mark is written.
        for position in self._gate.complete(completed, now):
            self._offsets.ack((position.topic, position.partition), position.offset)
        if force or failures:
            self._commit(now)
        elif self._timer.should_commit(now):
            self._commit_async(now)
        if failures:
            raise DeliveryError(f"{len(failures)} records were not delivered ({first_failure(failures)}); "
                                "exiting so that they are consumed again")

    def partitions_left(self, partitions: set[TP]) -> bool:
        return False  # what was acknowledged is done-marked already; the rest is the new owner's retry

    def _commit(self, now: float) -> None:
        offsets = self._offsets.committable()
        if offsets:
            try:
                self._source.commit(offsets)
            except CommitDeferred as exc:
                log.warning("commit_deferred", error=str(exc), partitions=len(offsets))
                return
            self._offsets.mark_committed(offsets)
        self._timer.did_commit(now)

    def _commit_async(self, now: float) -> None:
        if self._out_since is not None and now - self._out_since < COMMIT_ANSWER_S:
            return  # one at a time: the next one carries what this one could not
        offsets = self._offsets.committable()
        if offsets:
            self._out_since = now
            self._source.commit_async(offsets, lambda error: self._answered(offsets, error))
        self._timer.did_commit(now)

    def _answered(self, offsets: dict[TP, int], error: Exception | None) -> None:
        self._out_since = None
        if error is None:
            self._offsets.mark_committed(offsets)
        elif isinstance(error, CommitDeferred):
            log.warning("commit_deferred", error=str(error), partitions=len(offsets))
        else:
            self._refused = error  # raised by the next settle, like a refused synchronous commit


class Transactional:
    def __init__(self, transactions: Transactions, source: Source, offsets: OffsetTracker, gate: DedupGate,
                 interval_s: float, now: float) -> None:
        self._transactions = transactions
        self._source = source
        self._offsets = offsets
        self._gate = gate
        self._timer = CommitTimer(interval_s, now)
        self._delivered = False  # something was delivered since the last commit
        self._completed: list[tuple[Position, Completed]] = []  # their done marks, written after the commit

    def settle(self, deliveries: list[Delivery[SendTag]], now: float, force: bool) -> None:
        """Commits when the interval has passed and there is something to commit (interval 0: every step)."""
        # Done marks of committed transactions that the store failed to take are retried every step, whatever
        # else happens: while they wait the gate is blocked and the loop admits nothing new.
        self._gate.complete((), now)
        failures = [d for d in deliveries if d.error is not None]
        if failures:
            reason = f"{len(failures)} sends failed ({first_failure(failures)})"
            self._abort(reason)
            raise TransactionAborted(reason)
        for delivery in deliveries:
            position, done = delivery.tag.position, delivery.tag.done
            self._offsets.ack((position.topic, position.partition), position.offset)
            if done is not None:
                self._completed.append((position, done))
        self._delivered |= bool(deliveries)
        if not (force or self._timer.should_commit(now)) or self._source.rebalancing():
            return
        offsets = self._offsets.committable()
        if not self._delivered and not offsets:
            return
        try:
            self._transactions.commit(offsets)
        except TransactionAborted:
            self._forget()
            raise
        self._offsets.mark_committed(offsets)
        completed = self._completed
        self._forget()
        self._timer.did_commit(now)
        self._gate.complete(completed, now)

    def partitions_left(self, partitions: set[TP]) -> bool:
        if not (self._delivered or self._transactions.open):
            return False
        self._abort(f"{len(partitions)} partition(s) left while a transaction was open")
        return True

    def _abort(self, reason: str) -> None:
        self._transactions.abort(reason)
        self._forget()

    def _forget(self) -> None:
        self._delivered = False
        self._completed = []


def commit_policy(source: Source, transactions: Transactions | None, offsets: OffsetTracker, gate: DedupGate,
                  interval_s: float, now: float) -> CommitPolicy:
    """Exactly-once when given transactions (over the same sink and source), else at-least-once."""
    if transactions is not None:
        return Transactional(transactions, source, offsets, gate, interval_s, now)
    return AtLeastOnce(source, offsets, gate, interval_s, now)


def first_failure(failures: list[Delivery[SendTag]]) -> str:
    first = failures[0]
    return f"first: {first.tag.position.token()}: {first.error}"
