"""Exactly-once delivery: replies and consumed offsets committed in one Kafka transaction, whichever client.

The first send of a transaction begins it; ``commit`` closes it together with
the offsets the sends answer and the consumer's group metadata (so that the
broker fences a member the group dropped). A read_committed reader sees a reply
only once its offsets are committed, never an aborted transaction's. Any
failure aborts the whole transaction, and the caller consumes again from the
committed offsets. A producer that cannot abort (fenced, or fatal) is replaced;
a replacement whose transactions cannot be initialised yet (its coordinator is
away) does not stop the worker: that step's sends fail and the next step tries
again.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import structlog

from worker.core.bounds import TRANSACTION_S
from worker.core.errors import CommitUncertain, TransactionAborted
from worker.core.messages import Headers
from worker.core.offsets import TopicPartition as TP
from worker.kafka.fence_watch import FenceWatch
from worker.kafka.sends import FailedGroup, LedgerSink
from worker.ports import Delivery, Record

log = structlog.get_logger(__name__)
T = TypeVar("T")


def unanswered(waited_s: float | None) -> str:
    """Why sends still out failed: ``waited_s`` unanswered, or None: a broker was fenced meanwhile."""
    if waited_s is None:
        return "sends unanswered: a broker was fenced"
    return f"sends unanswered after {waited_s:.1f} s"


class TransactionalSends(LedgerSink[T, Any]):
    """A sink's sends in transactions. Not thread-safe. Mixed into a client's sink, before it."""

    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]]  # what the client's transactional calls raise
    _producer: Any
    _in_transaction = False
    _timeout: tuple[float, ...] = ()  # the last argument of the calls that take one (commit, abort, offsets)
    _renewal_failure: Exception | None = None  # why the last replacement producer could not be initialised
    _resume_init = False  # its init_transactions ran out of time still going: ask it again, make no other producer
    _expired: Exception | None = None  # a send that expired unanswered: the producer's view of the cluster is stale
    _transaction_s: float = TRANSACTION_S  # the longest a send waits for its answer
    _fences: FenceWatch | None = None  # ends a settle at a broker's fence

    @property
    def open(self) -> bool:
        """True between the first send (or commit) of a transaction and its commit or abort."""
        return self._in_transaction

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        failure = self._begun()
        if failure is not None:
            self._pending.failed(tag, failure)
            return
        super().send(topic, key, value, headers, tag)

    def send_group(self, records: Sequence[Record], tag: T, member: Callable[[int], T]) -> None:
        failure = self._begun()
        if failure is not None:
            self._pending.sent_group(tag, member, FailedGroup(len(records), failure))
            return
        super().send_group(records, tag, member)

    def _begun(self) -> Exception | None:
        """Begin a transaction unless one is open; the error that fails a send when none could begin: no
        producer to send with, or one whose begin failed (the step aborts and is retried with a new one)."""
        if self._in_transaction:
            return None
        failure = self._renewed_if_needed()
        if failure is not None:
            return failure
        try:
            self._producer.begin_transaction()
        except self.CLIENT_ERRORS as exc:
            self._replace_producer(exc)
            return exc
        self._in_transaction = True
        return None

    def settle(self, timeout_s: float = 30.0) -> list[Delivery[T]]:
        """Waits at most ``transaction_s``; a send still unanswered after all of it fails, and the abort that
        follows replaces the producer. Neither client keeps that bound by itself everywhere: kafka-python expires
        a send at its delivery timeout only while no transactional request is pending (one retried at a paused
        coordinator held its sends 20 s, the whole pause, on the three-broker cluster), and librdkafka's message
        timeout is the transaction's, 60 s. With a FenceWatch (worker/kafka/fence_watch.py) they fail as soon as
        the cluster fences a broker meanwhile: the leaders they wait on have moved. A producer fenced or broken
        while it flushes (librdkafka's ``flush`` raises then, seen when an abandoned producer's
        ``init_transactions`` completed after its successor's) fails every send still out too."""
        waited_s = min(timeout_s, self._transaction_s)
        deliveries: list[Delivery[T]] = []
        settle = super().settle

        def answered(wait_s: float) -> bool:
            deliveries.extend(settle(wait_s))
            return not self._pending

        try:
            outcome = self._fences.wait(answered, waited_s) if self._fences is not None else answered(waited_s)
        except Exception as exc:
            failure = exc.__cause__ if isinstance(exc, SystemError) else exc
            if not isinstance(failure, self.CLIENT_ERRORS):  # not the client's, alone or wrapped
                raise
            self._expired = failure
            return deliveries + self._pending.give_up(failure)
        self._expired = next((d.error for d in deliveries if d.error is not None and self._unanswered(d.error)),
                             self._expired)
        if outcome is None or (self._pending and waited_s >= self._transaction_s):  # fenced, or waited it all
            self._expired = self._unanswered_for(None if outcome is None else waited_s)
            deliveries += self._pending.give_up(self._expired)
        return deliveries

    def commit(self, offsets: dict[TP, int], group_metadata: Any) -> None:
        """Commit every send since the last commit together with ``offsets`` (next offsets to read).

        Call after ``settle`` reported every send delivered. Raises TransactionAborted, or CommitUncertain when
        ``commit_transaction`` itself failed.
        """
        failure = self._renewed_if_needed()
        if failure is not None:
            raise TransactionAborted(f"no transactional producer: {self._describe(failure)}") from failure
        committing = False
        try:
            if not self._in_transaction:
                self._producer.begin_transaction()
                self._in_transaction = True
            if offsets:
                self._producer.send_offsets_to_transaction(self._offsets(offsets), group_metadata, *self._timeout)
            committing = True
            self._producer.commit_transaction(*self._timeout)
            self._in_transaction = False
        except self.CLIENT_ERRORS as exc:
            if self._fatal(exc):  # aborting would fail too: only a new producer can go on
                self._pending.clear()
                self._replace_producer(exc)
            else:
                self.abort(f"commit failed: {self._describe(exc)}")
            if committing:  # the coordinator may have begun the commit before the failure: it then completes it
                raise CommitUncertain(str(exc)) from exc
            raise TransactionAborted(str(exc)) from exc

    def abort(self, reason: str) -> None:
        """Abort the open transaction and forget its sends; replace the producer if it cannot abort."""
        log.warning("transaction_aborted", reason=reason, sends=len(self._pending))
        self._pending.clear()
        was_open, self._in_transaction = self._in_transaction, False
        expired, self._expired = self._expired, None
        if not was_open:
            return
        if expired is not None:  # a new producer finds the partitions' leaders and the coordinator anew
            self._replace_producer(expired)
            return
        try:
            self._producer.abort_transaction(*self._timeout)
        except self.CLIENT_ERRORS as exc:  # fenced or fatal: only a new producer can go on
            self._replace_producer(exc)

    def renew_if_due(self) -> None:
        """Between transactions, try again to put a new producer in place if the last try failed. Its
        predecessor's transaction, offsets included, stays open until a new producer of the same id is
        initialised: a rewind reads those offsets as unstable and consumes nothing, so no send would try again
        (on the three-broker cluster the worker waited out the 60 s transaction timeout)."""
        if not self._in_transaction:
            self._renewed_if_needed()

    def _replace_producer(self, error: Exception) -> None:
        log.warning("producer_replaced", error=self._describe(error))
        self._in_transaction = False
        self._renewal_failure = error
        self._renewed_if_needed()

    def _renewed_if_needed(self) -> Exception | None:
        """Replace the producer if the last replacement failed (or is due); None once one is initialised, else
        why it could not be (the caller's step fails, and the next one tries again)."""
        if self._renewal_failure is None:
            return None
        try:
            self._renew_producer()
        except self.CLIENT_ERRORS as exc:  # init_transactions got no answer: its coordinator is away
            self._resume_init = self._init_timed_out(exc)
            log.warning("producer_not_renewed", error=self._describe(exc), resumed_next=self._resume_init)
            self._renewal_failure = exc
            return exc
        self._renewal_failure = None
        self._resume_init = False
        return None

    def _fatal(self, error: Exception) -> bool:
        """Whether a failed commit left the producer unable even to abort (default: try to abort)."""
        return False

    def _unanswered(self, error: Exception) -> bool:
        """Whether a failed send expired unanswered, so that the transaction is settled by a new producer rather
        than aborted by this one (default: abort)."""
        return False

    def _init_timed_out(self, error: Exception) -> bool:
        """Whether a replacement's ``init_transactions`` ran out of time with the call still going (its
        coordinator is moving). The next try then asks the same producer again, which the client resumes: a
        new producer would race the first for the producer epoch, and be fenced when the first completes
        (seen on the three-broker cluster, on librdkafka). Default: never."""
        return False

    @abstractmethod
    def _offsets(self, offsets: dict[TP, int]) -> Any:
        """Next offsets to read, as the client's ``send_offsets_to_transaction`` takes them."""

    @abstractmethod
    def _renew_producer(self) -> None:
        """Close the producer, whatever its state, and put a new one with transactions initialised in its place;
        with ``_resume_init``, initialise the one in place again instead."""

    @abstractmethod
    def _unanswered_for(self, waited_s: float | None) -> Exception:
        """The client's timeout error for sends still unanswered after ``waited_s`` (None: when a broker was
        fenced)."""

    @abstractmethod
    def _describe(self, error: Exception) -> str:
        """``error`` as the log lines and abort reasons show it."""
