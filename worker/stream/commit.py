"""When the stream commits, and what: a pure policy per delivery mode, whose decisions stream/committer.py
carries out.

Each step a policy first takes the step's deliveries (what the broker
acknowledged or refused since the last step; ``take``) and names the done
marks to write before it decides; then, given the positions whose done marks
were written, the time and the facts it needs, it decides (``decide``):
commit these offsets synchronously (``CommitOffsets``) or asynchronously
(``CommitOffsetsAsync``), commit the transaction then write these done marks
(``CommitTransaction``), abort it (``AbortTransaction``), stop the worker
(``DeliveryFailed``), or nothing (``NOTHING``). The committer tells it what
came of the decision (``committed``, ``answered``, ``aborted``). The order
that makes each mode safe is decided here:

- ``AtLeastOnce``: acknowledge the offsets of delivered dead letters and
  error replies at once, and of scored replies once their done marks are
  written; commit the contiguous watermark when the commit interval has
  passed, asynchronously (one commit out at a time, or another once
  COMMIT_ANSWER_S passed unanswered: the loop goes on while the broker
  answers, and the answer marks the offsets committed). A failed delivery
  commits what is safe, synchronously, and raises DeliveryError (the worker
  restarts, and the records are consumed again); so does a commit the broker
  refused for good, raised by the next step's ``take``.
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

No I/O: time and facts are passed in, and nothing here sleeps. Not thread-safe (``answered`` runs inside a
poll, on the loop's thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from worker.core.errors import CommitDeferred
from worker.core.messages import Position
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.ports import Delivery, DoneMarks, SentBatch, Tag, failed_send

COMMIT_ANSWER_S = 30.0  # an asynchronous commit unanswered this long is taken as lost: another may go
_POSITION = attrgetter("position")

@dataclass(frozen=True)
class Nothing:
    """Commit nothing now."""


NOTHING = Nothing()


@dataclass(frozen=True)
class CommitOffsets:
    """Commit ``offsets`` and wait for the answer (deferred: they wait for a later commit); then, if ``failure``,
    raise DeliveryError(failure): what was safe is committed before the worker stops."""

    offsets: dict[TP, int]
    failure: str | None = None


@dataclass(frozen=True)
class CommitOffsetsAsync:
    """Start committing ``offsets`` and go on; the broker's answer goes to the policy's ``answered``."""

    offsets: dict[TP, int]


@dataclass(frozen=True)
class CommitTransaction:
    """Commit the transaction with ``offsets``, and only then write ``done``."""

    offsets: dict[TP, int]
    done: DoneMarks


@dataclass(frozen=True)
class AbortTransaction:
    """Abort the transaction for ``reason``; the source gives its records again from the committed offsets."""

    reason: str


@dataclass(frozen=True)
class DeliveryFailed:
    """Raise DeliveryError(reason): there was nothing safe left to commit first."""

    reason: str


Decision = Nothing | CommitOffsets | CommitOffsetsAsync | CommitTransaction | AbortTransaction | DeliveryFailed


class Policy(Protocol):
    """A delivery mode's commit decisions, pure; stream/committer.py carries them out and reports back."""

    def take(self, deliveries: list[Delivery[Tag]]) -> DoneMarks:
        """Account for the step's ``deliveries``; returns the done marks to write before ``decide``.

        Raises what the broker refused, for good, of the last asynchronous commit."""
    def decide(self, written: list[Position], now: float, force: bool, rebalancing: bool) -> Decision:
        """What to commit now. ``written``: the positions whose done marks were written since ``take``;
        ``force``: whatever the interval; ``rebalancing``: a revocation waits for its assignment."""
    def partitions_left(self, partitions: set[TP], transaction_open: bool) -> AbortTransaction | Nothing:
        """What the group taking ``partitions`` away means for the work in hand."""
    def committed(self, offsets: dict[TP, int], now: float) -> None:
        """A CommitOffsets or CommitTransaction decided before succeeded."""
    def answered(self, offsets: dict[TP, int], error: Exception | None) -> None:
        """The broker answered a CommitOffsetsAsync: None when committed, a CommitDeferred when not now."""
    def aborted(self) -> None:
        """The transaction was aborted: as decided, or by its failed commit."""


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
    """Commits the watermark of what is delivered and done-marked (see the module docstring)."""

    def __init__(self, offsets: OffsetTracker, interval_s: float, now: float) -> None:
        self._offsets = offsets
        self._timer = CommitTimer(interval_s, now)
        self._out_since: float | None = None  # when the asynchronous commit still unanswered was sent
        self._refused: Exception | None = None  # what the broker answered to one, when not "later"
        self._failure: str | None = None  # the step's failed deliveries, from take to decide

    def take(self, deliveries: list[Delivery[Tag]]) -> DoneMarks:
        """The done marks of the replies delivered (an error reply's only releases its claim)."""
        if self._refused is not None:
            refused, self._refused = self._refused, None
            raise refused
        failures = [d for d in deliveries if d.error is not None]
        self._failure = None if not failures else (
            f"{len(failures)} records were not delivered ({first_failure(failures)}); "
            "exiting so that they are consumed again")
        completed = DoneMarks()
        for delivery in deliveries:
            tag = delivery.tag
            if delivery.error is not None:
                continue
            if isinstance(tag, SentBatch):
                completed.add_batch(tag)
            elif tag.done is None:
                position = tag.position
                self._offsets.ack((position.topic, position.partition), position.offset)
            else:
                completed.add(tag.position, tag.done)
        return completed

    def decide(self, written: list[Position], now: float, force: bool, rebalancing: bool) -> Decision:
        """Synchronously when forced or a delivery failed, else asynchronously once the interval passed."""
        self._offsets.ack_all(written)  # a claimed request's offset counts as done only once its done mark is written
        failure, self._failure = self._failure, None
        if force or failure is not None:
            offsets = self._offsets.committable()
            if offsets:
                return CommitOffsets(offsets, failure)
            self._timer.did_commit(now)
            return NOTHING if failure is None else DeliveryFailed(failure)
        if not self._timer.should_commit(now):
            return NOTHING
        if self._out_since is not None and now - self._out_since < COMMIT_ANSWER_S:
            return NOTHING  # one at a time: the next one carries what this one could not
        offsets = self._offsets.committable()
        self._timer.did_commit(now)
        if not offsets:
            return NOTHING
        self._out_since = now  # before the committer sends it: the answer may come at once
        return CommitOffsetsAsync(offsets)

    def partitions_left(self, partitions: set[TP], transaction_open: bool) -> AbortTransaction | Nothing:
        return NOTHING  # what was acknowledged is done-marked already; the rest is the new owner's retry

    def committed(self, offsets: dict[TP, int], now: float) -> None:
        self._offsets.mark_committed(offsets)
        self._timer.did_commit(now)

    def answered(self, offsets: dict[TP, int], error: Exception | None) -> None:
        self._out_since = None
        if error is None:
            self._offsets.mark_committed(offsets)
        elif not isinstance(error, CommitDeferred):  # deferred: the next commit carries them
            self._refused = error  # raised by the next take, like a refused synchronous commit

    def aborted(self) -> None:
        """Never called: at-least-once decides no transaction."""


class Transactional:
    """Commits every send since the last commit in one transaction (see the module docstring)."""

    def __init__(self, offsets: OffsetTracker, interval_s: float, now: float) -> None:
        self._offsets = offsets
        self._timer = CommitTimer(interval_s, now)
        self._delivered = False  # something was delivered since the last commit
        self._completed = DoneMarks()  # their done marks, written after the commit
        self._failure: str | None = None  # the step's failed sends, from take to decide

    def take(self, deliveries: list[Delivery[Tag]]) -> DoneMarks:
        """None: done marks wait for the commit. Those of committed transactions that the store failed to take
        are retried every step, whatever else happens: while they wait the gate is blocked and the loop admits
        nothing new."""
        failures = [d for d in deliveries if d.error is not None]
        if failures:
            self._failure = f"{len(failures)} sends failed ({first_failure(failures)})"
            return DoneMarks()
        offsets = self._offsets
        for delivery in deliveries:
            tag = delivery.tag
            if isinstance(tag, SentBatch):
                offsets.ack_all(map(_POSITION, tag.requests))
                self._completed.add_batch(tag)
                continue
            position = tag.position
            offsets.ack((position.topic, position.partition), position.offset)
            if tag.done is not None:
                self._completed.add(position, tag.done)
        self._delivered |= bool(deliveries)
        return DoneMarks()

    def decide(self, written: list[Position], now: float, force: bool, rebalancing: bool) -> Decision:
        """Aborts on a failed send; commits when the interval has passed (0: every step) and there is something
        to commit, unless a revocation waits for its assignment."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            return AbortTransaction(failure)
        if not (force or self._timer.should_commit(now)) or rebalancing:
            return NOTHING
        offsets = self._offsets.committable()
        if not self._delivered and not offsets:
            return NOTHING
        return CommitTransaction(offsets, self._completed)

    def partitions_left(self, partitions: set[TP], transaction_open: bool) -> AbortTransaction | Nothing:
        if not (self._delivered or transaction_open):
            return NOTHING
        return AbortTransaction(f"{len(partitions)} partition(s) left while a transaction was open")

    def committed(self, offsets: dict[TP, int], now: float) -> None:
        self._offsets.mark_committed(offsets)
        self._forget()
        self._timer.did_commit(now)

    def answered(self, offsets: dict[TP, int], error: Exception | None) -> None:
        """Never called: a transaction commits its offsets itself."""

    def aborted(self) -> None:
        self._forget()

    def _forget(self) -> None:
        self._delivered = False
        self._completed = DoneMarks()


def first_failure(failures: list[Delivery[Tag]]) -> str:
    first = failures[0]
    return f"first: {failed_send(first).position.token()}: {first.error}"
