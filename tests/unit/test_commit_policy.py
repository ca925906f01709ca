"""The commit policies: what each delivery mode commits, when, and in which order."""

from __future__ import annotations

import pytest

from worker.core.errors import CommitDeferred, DeliveryError, TransactionAborted
from worker.core.messages import InvalidRecord, Position
from worker.core.offsets import OffsetTracker
from worker.ports import Completed, Delivery, SendTag
from worker.stream.commit import COMMIT_ANSWER_S, AtLeastOnce, CommitTimer, Transactional
from worker.stream.dedup_gate import DedupGate

TP = ("requests", 0)


class RecordingStore:
    """A dedup store that records done marks, and can be down."""

    def __init__(self) -> None:
        self.completed: list[Completed] = []
        self.down = False

    def claim(self, requests):
        return [True for _ in requests]

    def complete(self, done):
        if self.down:
            raise ConnectionError("store down")
        self.completed.extend(done)

    def close(self):
        pass


class RecordingSource:
    """Records commits; an asynchronous one is answered when the test says so (``answer``)."""

    def __init__(self) -> None:
        self.commits: list[dict] = []
        self.deferring = False
        self.unanswered: list = []
        self.revocation_pending = False

    def rebalancing(self) -> bool:
        return self.revocation_pending

    def commit(self, offsets):
        if self.deferring:
            raise CommitDeferred("rebalance in progress")
        self.commits.append(dict(offsets))

    def commit_async(self, offsets, on_done):
        self.commits.append(dict(offsets))
        self.unanswered.append(on_done)

    def answer(self, error: Exception | None = None) -> None:
        answers, self.unanswered = self.unanswered, []
        for on_done in answers:
            on_done(error)


class RecordingTransactions:
    def __init__(self, log: list[str], fail: bool = False) -> None:
        self.log = log
        self.fail = fail
        self.committed: list[dict] = []
        self.open = False  # the real ones open at the first send; these tests open none without a delivery

    def commit(self, offsets):
        if self.fail:
            self.log.append("abort")
            raise TransactionAborted("coordinator away")
        self.log.append("commit")
        self.committed.append(dict(offsets))

    def abort(self, reason):
        self.log.append("abort")


def transactional(transactions: RecordingTransactions, offsets: OffsetTracker, gate: DedupGate, interval_s: float,
                  now: float) -> Transactional:
    """Over a source with no rebalance under way."""
    return Transactional(transactions, RecordingSource(), offsets, gate, interval_s, now)


def tracked(*offsets: int) -> OffsetTracker:
    tracker = OffsetTracker()
    for offset in offsets:
        tracker.track(TP, offset)
    return tracker


def reply(offset: int, error: Exception | None = None, done: bool = True) -> Delivery[SendTag]:
    position = Position(*TP, offset)
    record = InvalidRecord(position, "code", "message", None, b"")
    return Delivery(SendTag(position, Completed(f"id-{offset}", b"{}") if done else None, record), error)


def test_commit_timer_is_due_once_per_interval():
    timer = CommitTimer(interval_s=1.0, now=10.0)
    assert not timer.should_commit(10.5)
    assert timer.should_commit(11.0)
    timer.did_commit(11.0)
    assert not timer.should_commit(11.9)


def test_at_least_once_commits_a_reply_only_after_its_done_mark_and_on_the_interval():
    source, store = RecordingSource(), RecordingStore()
    offsets = tracked(0, 1, 2)
    policy = AtLeastOnce(source, offsets, DedupGate(store), interval_s=1.0, now=0.0)
    store.down = True
    policy.settle([reply(0), reply(1, done=False)], now=2.0, force=False)
    assert source.commits == []  # offset 0 waits for its done mark
    store.down = False
    policy.settle([], now=2.05, force=False)  # the gate is backing off: not retried yet
    policy.settle([reply(2)], now=3.0, force=False)
    assert store.completed == [Completed("id-0", b"{}"), Completed("id-2", b"{}")]
    assert source.commits == [{TP: 3}]
    offsets.track(TP, 3)
    policy.settle([reply(3, done=False)], now=3.5, force=False)
    assert source.commits == [{TP: 3}]  # not due yet
    policy.settle([], now=3.5, force=True)
    assert source.commits == [{TP: 3}, {TP: 4}]


def test_at_least_once_keeps_deferred_offsets_and_commits_them_later():
    source = RecordingSource()
    policy = AtLeastOnce(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    policy.settle([reply(0)], now=1.0, force=False)
    source.answer(CommitDeferred("rebalance in progress"))
    policy.settle([], now=2.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 1}]  # sent again
    source.answer()
    policy.settle([], now=3.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 1}]  # committed: nothing new to send


def test_at_least_once_keeps_deferred_offsets_of_a_synchronous_commit():
    source = RecordingSource()
    policy = AtLeastOnce(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    source.deferring = True
    policy.settle([reply(0)], now=1.0, force=True)
    source.deferring = False
    policy.settle([], now=2.0, force=True)
    assert source.commits == [{TP: 1}]


def test_at_least_once_sends_one_asynchronous_commit_at_a_time():
    source = RecordingSource()
    offsets = tracked(0, 1)
    policy = AtLeastOnce(source, offsets, DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    policy.settle([reply(0)], now=1.0, force=False)
    policy.settle([reply(1)], now=2.0, force=False)
    assert source.commits == [{TP: 1}]  # the first is unanswered
    source.answer()
    policy.settle([], now=3.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 2}]  # the next carries what the first could not


def test_at_least_once_sends_another_commit_when_one_was_never_answered():
    source = RecordingSource()
    policy = AtLeastOnce(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    policy.settle([reply(0)], now=1.0, force=False)
    policy.settle([], now=1.0 + COMMIT_ANSWER_S - 1, force=False)
    assert len(source.commits) == 1
    policy.settle([], now=1.0 + COMMIT_ANSWER_S, force=False)
    assert source.commits == [{TP: 1}, {TP: 1}]


def test_at_least_once_raises_what_the_broker_refused_for_good_at_the_next_step():
    source = RecordingSource()
    policy = AtLeastOnce(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    policy.settle([reply(0)], now=1.0, force=False)
    source.answer(PermissionError("GROUP_AUTHORIZATION_FAILED"))
    with pytest.raises(PermissionError, match="GROUP_AUTHORIZATION_FAILED"):
        policy.settle([], now=2.0, force=False)



def test_at_least_once_commits_what_is_safe_then_raises_on_a_failed_delivery():
    source = RecordingSource()
    policy = AtLeastOnce(source, tracked(0, 1), DedupGate(RecordingStore()), interval_s=60.0, now=0.0)
    with pytest.raises(DeliveryError, match="1 records were not delivered"):
        policy.settle([reply(0), reply(1, error=TimeoutError("no ack"))], now=1.0, force=False)
    assert source.commits == [{TP: 1}]  # offset 1 is consumed again after the restart


def test_transactional_writes_done_marks_only_after_the_commit():
    log: list[str] = []
    store = RecordingStore()
    store.complete = lambda done: log.append(f"done {len(done)}")  # type: ignore[method-assign]
    transactions = RecordingTransactions(log)
    policy = transactional(transactions, tracked(0, 1), DedupGate(store), 0.0, 0.0)
    policy.settle([reply(0), reply(1, done=False)], now=0.0, force=False)
    assert log == ["commit", "done 1"]
    assert transactions.committed == [{TP: 2}]


def test_transactional_aborts_on_a_failed_send_and_marks_nothing_done():
    log: list[str] = []
    store = RecordingStore()
    policy = transactional(RecordingTransactions(log), tracked(0, 1), DedupGate(store), 0.0, 0.0)
    with pytest.raises(TransactionAborted):
        policy.settle([reply(0), reply(1, error=TimeoutError("no ack"))], now=0.0, force=False)
    assert log == ["abort"] and store.completed == []


def test_transactional_failed_commit_marks_nothing_done():
    store = RecordingStore()
    policy = transactional(RecordingTransactions([], fail=True), tracked(0), DedupGate(store), 0.0, 0.0)
    with pytest.raises(TransactionAborted):
        policy.settle([reply(0)], now=0.0, force=False)
    assert store.completed == []


def test_transactional_with_nothing_to_commit_opens_no_transaction():
    log: list[str] = []
    transactional(RecordingTransactions(log), OffsetTracker(), DedupGate(RecordingStore()), 0.0, 0.0).settle(
        [], 0.0, True)
    assert log == []


def test_transactional_with_an_interval_commits_the_steps_between_in_one_transaction():
    log: list[str] = []
    store = RecordingStore()
    store.complete = lambda done: log.append(f"done {len(done)}")  # type: ignore[method-assign]
    transactions = RecordingTransactions(log)
    policy = transactional(transactions, tracked(0, 1, 2), DedupGate(store), interval_s=1.0, now=0.0)
    policy.settle([reply(0)], now=0.4, force=False)
    policy.settle([reply(1)], now=0.8, force=False)
    assert log == []  # nothing committed, nothing marked done yet
    policy.settle([reply(2)], now=1.0, force=False)
    assert log == ["commit", "done 3"] and transactions.committed == [{TP: 3}]
    policy.settle([], now=2.5, force=False)
    assert log == ["commit", "done 3"]  # nothing new: no empty transaction


def test_transactional_force_commits_before_the_interval():
    log: list[str] = []
    transactions = RecordingTransactions(log)
    policy = transactional(transactions, tracked(0), DedupGate(RecordingStore()), interval_s=10.0, now=0.0)
    policy.settle([reply(0)], now=0.1, force=True)
    assert log == ["commit"] and transactions.committed == [{TP: 1}]


def test_partitions_leaving_an_open_transaction_abort_it_and_its_done_marks_are_never_written():
    log: list[str] = []
    store = RecordingStore()
    policy = transactional(RecordingTransactions(log), tracked(0, 1), DedupGate(store), interval_s=1.0, now=0.0)
    policy.settle([reply(0)], now=0.1, force=False)
    assert policy.partitions_left({TP}) is True
    assert log == ["abort"]
    policy.settle([reply(1)], now=1.5, force=False)
    assert store.completed == [Completed("id-1", b"{}")]  # the aborted reply's done mark is gone with it


def test_partitions_leaving_between_transactions_abort_nothing():
    log: list[str] = []
    policy = transactional(RecordingTransactions(log), tracked(0), DedupGate(RecordingStore()), 0.0, 0.0)
    policy.settle([reply(0)], now=0.1, force=False)
    assert policy.partitions_left({TP}) is False and log == ["commit"]


def test_at_least_once_keeps_its_work_when_partitions_leave():
    policy = AtLeastOnce(RecordingSource(), tracked(0), DedupGate(RecordingStore()), 0.0, 0.0)
    assert policy.partitions_left({TP}) is False


def test_transactional_commits_nothing_while_a_revocation_waits_for_its_assignment():
    log: list[str] = []
    source = RecordingSource()
    policy = Transactional(RecordingTransactions(log), source, tracked(0), DedupGate(RecordingStore()), 0.0, 0.0)
    source.revocation_pending = True  # librdkafka's eager protocol: every partition revoked, none assigned yet
    policy.settle([reply(0)], now=1.0, force=True)
    assert log == []
    assert policy.partitions_left({TP}) and log == ["abort"]  # the assignment: the partition left
