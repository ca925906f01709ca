"""The commit policies: what each delivery mode decides to commit, when, and in which order (the pure policies of
worker/stream/commit.py); and the Committer carrying their decisions out (worker/stream/committer.py)."""

from __future__ import annotations

import pytest

from worker.core.errors import CommitDeferred, DeliveryError, TransactionAborted, WorkerError
from worker.core.messages import InvalidRecord, Position, Request
from worker.core.offsets import OffsetTracker
from worker.core.routes import Route
from worker.ports import FRESH, Completed, Delivery, DoneMarks, SendTag, SentBatch, Tag
from worker.stream.commit import (
    COMMIT_ANSWER_S,
    NOTHING,
    AbortTransaction,
    AtLeastOnce,
    CommitOffsets,
    CommitOffsetsAsync,
    CommitTimer,
    CommitTransaction,
    DeliveryFailed,
    Transactional,
)
from worker.stream.committer import Committer, commit_policy
from worker.stream.dedup_gate import DedupGate

TP = ("requests", 0)
UNDELIVERED = "1 records were not delivered (first: requests/0/1: no ack); exiting so that they are consumed again"


class RecordingStore:
    """A dedup store that records done marks, and can be down."""

    def __init__(self) -> None:
        self.completed: list[Completed] = []  # in the order written
        self.down = False

    def claim(self, requests):
        return [FRESH for _ in requests]

    def complete(self, ids, replies):
        if self.down:
            raise ConnectionError("store down")
        self.completed += [Completed(request_id, reply) for request_id, reply in zip(ids, replies, strict=True)]

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
        self.recoveries = 0

    def commit(self, offsets):
        if self.fail:
            self.log.append("abort")
            raise TransactionAborted("coordinator away")
        self.log.append("commit")
        self.committed.append(dict(offsets))

    def abort(self, reason):
        self.log.append("abort")

    def recover(self):
        self.recoveries += 1


def at_least_once(source: RecordingSource, offsets: OffsetTracker, gate: DedupGate, interval_s: float,
                  now: float) -> Committer:
    return commit_policy(source, None, offsets, gate, interval_s, now)


def transactional(transactions: RecordingTransactions, offsets: OffsetTracker, gate: DedupGate, interval_s: float,
                  now: float, source: RecordingSource | None = None) -> Committer:
    """Over a source with no rebalance under way, unless given one."""
    return commit_policy(source or RecordingSource(), transactions, offsets, gate, interval_s, now)


ROUTE = Route("churn", "churn", "v1", lambda inputs: inputs)


def tracked(*offsets: int) -> OffsetTracker:
    tracker = OffsetTracker()
    for offset in offsets:
        tracker.track(TP, offset)
    return tracker


def position(offset: int) -> Position:
    return Position(*TP, offset)


def done_marks(*offsets: int) -> DoneMarks:
    return DoneMarks([f"id-{offset}" for offset in offsets], [b"{}"] * len(offsets), [position(o) for o in offsets])


def reply(offset: int, error: Exception | None = None, done: bool = True) -> Delivery[SendTag]:
    record = InvalidRecord(position(offset), "code", "message", None, b"")
    return Delivery(SendTag(position(offset), Completed(f"id-{offset}", b"{}") if done else None, record), error)


def group(*offsets: int) -> Delivery[Tag]:
    """The delivery of a batch's ok replies sent as one group, every one delivered."""
    requests = [Request(f"id-{offset}", None, position(offset)) for offset in offsets]
    n = len(offsets)
    return Delivery(SentBatch(requests, [0.5] * n, [b"{}"] * n, [0.0] * n, [0.0] * n, 1.0, n, ROUTE), None)


def test_at_least_once_takes_a_delivered_groups_done_marks_and_acknowledges_its_offsets_once_written():
    offsets = tracked(0, 1, 2, 3)
    policy = AtLeastOnce(offsets, interval_s=0.0, now=0.0)
    marks = policy.take([group(0, 1), reply(2, done=False), group(3)])
    assert marks == done_marks(0, 1, 3)
    assert offsets.committable() == {}  # offset 2 is acknowledged, 0 waits for its done mark
    assert policy.decide(marks.positions, 1.0, True, False) == CommitOffsets({TP: 4})


def test_transactional_acknowledges_a_delivered_group_and_decides_its_done_marks_with_the_commit():
    policy = Transactional(tracked(0, 1, 2), interval_s=0.0, now=0.0)
    assert policy.take([group(0, 1), reply(2, done=False)]) == done_marks()
    assert policy.decide([], 0.0, False, False) == CommitTransaction({TP: 3}, done_marks(0, 1))


def test_commit_timer_is_due_once_per_interval():
    timer = CommitTimer(interval_s=1.0, now=10.0)
    assert not timer.should_commit(10.5)
    assert timer.should_commit(11.0)
    timer.did_commit(11.0)
    assert not timer.should_commit(11.9)


# The pure decisions: what each policy decides for what input.

def test_at_least_once_takes_the_done_marks_of_delivered_replies_and_acknowledges_the_rest_at_once():
    offsets = tracked(0, 1, 2)
    policy = AtLeastOnce(offsets, interval_s=0.0, now=0.0)
    assert policy.take([reply(0), reply(1, done=False), reply(2, error=TimeoutError("no ack"))]) == done_marks(0)
    assert offsets.committable() == {}  # offset 1 waits behind offset 0, which waits for its done mark


@pytest.mark.parametrize(("written", "now", "force", "rebalancing", "decision"), [
    ([], 2.0, False, False, NOTHING),  # the done mark is not written: nothing is safe to commit
    ([position(0)], 0.5, False, False, NOTHING),  # not due yet
    ([position(0)], 1.0, False, False, CommitOffsetsAsync({TP: 1})),  # due: asynchronously
    ([position(0)], 0.5, True, False, CommitOffsets({TP: 1})),  # forced: synchronously, whatever the interval
    ([position(0)], 0.5, True, True, CommitOffsets({TP: 1})),  # a rebalance does not hold it back
    ([position(0)], 1.0, False, True, CommitOffsetsAsync({TP: 1})),
])
def test_at_least_once_decides_on_what_is_done_marked_and_the_interval(written, now, force, rebalancing, decision):
    policy = AtLeastOnce(tracked(0), interval_s=1.0, now=0.0)
    assert policy.take([reply(0)]) == done_marks(0)
    assert policy.decide(written, now, force, rebalancing) == decision


def test_at_least_once_decides_a_synchronous_commit_of_what_is_safe_and_then_a_delivery_failure():
    policy = AtLeastOnce(tracked(0, 1), interval_s=60.0, now=0.0)
    assert policy.take([reply(0, done=False), reply(1, error=TimeoutError("no ack"))]) == done_marks()
    assert policy.decide([], 1.0, False, False) == CommitOffsets({TP: 1}, UNDELIVERED)


def test_at_least_once_decides_a_delivery_failure_alone_when_nothing_is_safe_to_commit():
    policy = AtLeastOnce(tracked(0, 1), interval_s=60.0, now=0.0)
    policy.take([reply(1, error=TimeoutError("no ack"))])
    assert policy.decide([], 1.0, False, False) == DeliveryFailed(UNDELIVERED)
    policy.take([])
    assert policy.decide([], 2.0, False, False) == NOTHING  # decided once


def test_at_least_once_decides_one_asynchronous_commit_at_a_time():
    offsets = tracked(0, 1)
    policy = AtLeastOnce(offsets, interval_s=0.0, now=0.0)
    policy.take([reply(0, done=False)])
    assert policy.decide([], 1.0, False, False) == CommitOffsetsAsync({TP: 1})
    policy.take([reply(1, done=False)])
    assert policy.decide([], 2.0, False, False) == NOTHING  # the first is unanswered
    assert policy.decide([], 1.0 + COMMIT_ANSWER_S, False, False) == CommitOffsetsAsync({TP: 2})  # taken as lost
    policy.answered({TP: 2}, None)
    assert offsets.committable() == {}


def test_at_least_once_decides_again_what_the_broker_deferred_and_raises_what_it_refused_at_the_next_take():
    policy = AtLeastOnce(tracked(0), interval_s=0.0, now=0.0)
    policy.take([reply(0, done=False)])
    assert policy.decide([], 1.0, False, False) == CommitOffsetsAsync({TP: 1})
    policy.answered({TP: 1}, CommitDeferred("rebalance in progress"))
    assert policy.take([]) == done_marks()
    assert policy.decide([], 2.0, False, False) == CommitOffsetsAsync({TP: 1})
    policy.answered({TP: 1}, PermissionError("GROUP_AUTHORIZATION_FAILED"))
    with pytest.raises(PermissionError, match="GROUP_AUTHORIZATION_FAILED"):
        policy.take([])


def test_at_least_once_decides_nothing_when_partitions_leave():
    policy = AtLeastOnce(tracked(0), 0.0, 0.0)
    policy.take([reply(0)])
    assert policy.partitions_left({TP}, transaction_open=True) == NOTHING


def test_transactional_takes_no_done_mark_before_the_commit_and_decides_them_with_it():
    policy = Transactional(tracked(0, 1), interval_s=0.0, now=0.0)
    assert policy.take([reply(0), reply(1, done=False)]) == done_marks()
    assert policy.decide([], 0.0, False, False) == CommitTransaction({TP: 2}, done_marks(0))
    policy.committed({TP: 2}, 0.0)
    policy.take([])
    assert policy.decide([], 1.0, True, False) == NOTHING  # committed and forgotten: no empty transaction


@pytest.mark.parametrize(("now", "force", "rebalancing", "decision"), [
    (0.5, False, False, NOTHING),  # not due
    (1.0, False, False, CommitTransaction({TP: 1}, done_marks(0))),
    (0.5, True, False, CommitTransaction({TP: 1}, done_marks(0))),  # forced
    (1.0, True, True, NOTHING),  # a revocation waits for its assignment: never commit then
])
def test_transactional_decides_on_the_interval_and_never_while_a_revocation_waits(now, force, rebalancing,
                                                                                    decision):
    policy = Transactional(tracked(0), interval_s=1.0, now=0.0)
    policy.take([reply(0)])
    assert policy.decide([], now, force, rebalancing) == decision


def test_transactional_decides_an_abort_on_a_failed_send():
    policy = Transactional(tracked(0, 1), interval_s=0.0, now=0.0)
    assert policy.take([reply(0), reply(1, error=TimeoutError("no ack"))]) == done_marks()
    assert policy.decide([], 0.0, True, False) == AbortTransaction("1 sends failed (first: requests/0/1: no ack)")


@pytest.mark.parametrize(("delivered", "transaction_open", "decision"), [
    (False, False, NOTHING),  # between transactions
    (False, True, AbortTransaction("1 partition(s) left while a transaction was open")),  # a send is out
    (True, False, AbortTransaction("1 partition(s) left while a transaction was open")),  # delivered, uncommitted
])
def test_transactional_decides_to_abort_when_partitions_leave_an_open_transaction(delivered, transaction_open,
                                                                                  decision):
    policy = Transactional(tracked(0), interval_s=1.0, now=0.0)
    policy.take([reply(0)] if delivered else [])
    assert policy.partitions_left({TP}, transaction_open) == decision


def test_transactional_forgets_an_aborted_transaction():
    policy = Transactional(tracked(0), interval_s=0.0, now=0.0)
    policy.take([reply(0)])
    policy.aborted()
    assert policy.partitions_left({TP}, transaction_open=False) == NOTHING


# The Committer: each decision carried out, in order, against the source, the transactions and the dedup gate.

def test_at_least_once_commits_a_reply_only_after_its_done_mark_and_on_the_interval():
    source, store = RecordingSource(), RecordingStore()
    offsets = tracked(0, 1, 2)
    committer = at_least_once(source, offsets, DedupGate(store), interval_s=1.0, now=0.0)
    store.down = True
    committer.settle([reply(0), reply(1, done=False)], now=2.0, force=False)
    assert source.commits == []  # offset 0 waits for its done mark
    store.down = False
    committer.settle([], now=2.05, force=False)  # the gate is backing off: not retried yet
    committer.settle([reply(2)], now=3.0, force=False)
    assert store.completed == [Completed("id-0", b"{}"), Completed("id-2", b"{}")]
    assert source.commits == [{TP: 3}]
    offsets.track(TP, 3)
    committer.settle([reply(3, done=False)], now=3.5, force=False)
    assert source.commits == [{TP: 3}]  # not due yet
    committer.settle([], now=3.5, force=True)
    assert source.commits == [{TP: 3}, {TP: 4}]


def test_at_least_once_keeps_deferred_offsets_and_commits_them_later():
    source = RecordingSource()
    committer = at_least_once(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    committer.settle([reply(0)], now=1.0, force=False)
    source.answer(CommitDeferred("rebalance in progress"))
    committer.settle([], now=2.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 1}]  # sent again
    source.answer()
    committer.settle([], now=3.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 1}]  # committed: nothing new to send


def test_at_least_once_keeps_deferred_offsets_of_a_synchronous_commit():
    source = RecordingSource()
    committer = at_least_once(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    source.deferring = True
    committer.settle([reply(0)], now=1.0, force=True)
    source.deferring = False
    committer.settle([], now=2.0, force=True)
    assert source.commits == [{TP: 1}]


def test_at_least_once_sends_one_asynchronous_commit_at_a_time():
    source = RecordingSource()
    offsets = tracked(0, 1)
    committer = at_least_once(source, offsets, DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    committer.settle([reply(0)], now=1.0, force=False)
    committer.settle([reply(1)], now=2.0, force=False)
    assert source.commits == [{TP: 1}]  # the first is unanswered
    source.answer()
    committer.settle([], now=3.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 2}]  # the next carries what the first could not


def test_at_least_once_takes_an_answer_that_comes_at_once():
    source = RecordingSource()
    source.commit_async = lambda offsets, on_done: (source.commits.append(dict(offsets)), on_done(None))
    committer = at_least_once(source, tracked(0, 1), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    committer.settle([reply(0)], now=1.0, force=False)
    committer.settle([reply(1)], now=2.0, force=False)
    assert source.commits == [{TP: 1}, {TP: 2}]  # the first was answered: the next did not wait


def test_at_least_once_sends_another_commit_when_one_was_never_answered():
    source = RecordingSource()
    committer = at_least_once(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    committer.settle([reply(0)], now=1.0, force=False)
    committer.settle([], now=1.0 + COMMIT_ANSWER_S - 1, force=False)
    assert len(source.commits) == 1
    committer.settle([], now=1.0 + COMMIT_ANSWER_S, force=False)
    assert source.commits == [{TP: 1}, {TP: 1}]


def test_at_least_once_raises_what_the_broker_refused_for_good_at_the_next_step():
    source = RecordingSource()
    committer = at_least_once(source, tracked(0), DedupGate(RecordingStore()), interval_s=0.0, now=0.0)
    committer.settle([reply(0)], now=1.0, force=False)
    source.answer(PermissionError("GROUP_AUTHORIZATION_FAILED"))
    with pytest.raises(PermissionError, match="GROUP_AUTHORIZATION_FAILED"):
        committer.settle([], now=2.0, force=False)


def test_at_least_once_commits_what_is_safe_then_raises_on_a_failed_delivery():
    source = RecordingSource()
    committer = at_least_once(source, tracked(0, 1), DedupGate(RecordingStore()), interval_s=60.0, now=0.0)
    with pytest.raises(DeliveryError, match="1 records were not delivered"):
        committer.settle([reply(0), reply(1, error=TimeoutError("no ack"))], now=1.0, force=False)
    assert source.commits == [{TP: 1}]  # offset 1 is consumed again after the restart


def test_at_least_once_raises_on_a_failed_delivery_with_nothing_safe_to_commit():
    source = RecordingSource()
    committer = at_least_once(source, tracked(0), DedupGate(RecordingStore()), interval_s=60.0, now=0.0)
    with pytest.raises(DeliveryError, match="1 records were not delivered"):
        committer.settle([reply(0, error=TimeoutError("no ack"))], now=1.0, force=False)
    assert source.commits == []


def test_transactional_writes_done_marks_only_after_the_commit():
    log: list[str] = []
    store = RecordingStore()
    store.complete = lambda ids, replies: log.append(f"done {len(ids)}")  # type: ignore[method-assign]
    transactions = RecordingTransactions(log)
    committer = transactional(transactions, tracked(0, 1), DedupGate(store), 0.0, 0.0)
    committer.settle([reply(0), reply(1, done=False)], now=0.0, force=False)
    assert log == ["commit", "done 1"]
    assert transactions.committed == [{TP: 2}]


def test_transactional_aborts_on_a_failed_send_and_marks_nothing_done():
    log: list[str] = []
    store = RecordingStore()
    committer = transactional(RecordingTransactions(log), tracked(0, 1), DedupGate(store), 0.0, 0.0)
    with pytest.raises(TransactionAborted):
        committer.settle([reply(0), reply(1, error=TimeoutError("no ack"))], now=0.0, force=False)
    assert log == ["abort"] and store.completed == []


def test_transactional_failed_commit_marks_nothing_done():
    store = RecordingStore()
    committer = transactional(RecordingTransactions([], fail=True), tracked(0), DedupGate(store), 0.0, 0.0)
    with pytest.raises(TransactionAborted):
        committer.settle([reply(0)], now=0.0, force=False)
    assert store.completed == []
    assert committer.partitions_left({TP}) is False  # the failed commit aborted it: nothing left to abort


def test_transactional_with_nothing_to_commit_opens_no_transaction():
    log: list[str] = []
    transactional(RecordingTransactions(log), OffsetTracker(), DedupGate(RecordingStore()), 0.0, 0.0).settle(
        [], 0.0, True)
    assert log == []


def test_transactional_with_an_interval_commits_the_steps_between_in_one_transaction():
    log: list[str] = []
    store = RecordingStore()
    store.complete = lambda ids, replies: log.append(f"done {len(ids)}")  # type: ignore[method-assign]
    transactions = RecordingTransactions(log)
    committer = transactional(transactions, tracked(0, 1, 2), DedupGate(store), interval_s=1.0, now=0.0)
    committer.settle([reply(0)], now=0.4, force=False)
    committer.settle([reply(1)], now=0.8, force=False)
    assert log == []  # nothing committed, nothing marked done yet
    committer.settle([reply(2)], now=1.0, force=False)
    assert log == ["commit", "done 3"] and transactions.committed == [{TP: 3}]
    committer.settle([], now=2.5, force=False)
    assert log == ["commit", "done 3"]  # nothing new: no empty transaction


def test_transactional_force_commits_before_the_interval():
    log: list[str] = []
    transactions = RecordingTransactions(log)
    committer = transactional(transactions, tracked(0), DedupGate(RecordingStore()), interval_s=10.0, now=0.0)
    committer.settle([reply(0)], now=0.1, force=True)
    assert log == ["commit"] and transactions.committed == [{TP: 1}]


def test_transactional_retries_the_done_marks_of_a_committed_transaction_every_step():
    store = RecordingStore()
    committer = transactional(RecordingTransactions([]), tracked(0, 1), DedupGate(store), interval_s=10.0, now=0.0)
    store.down = True
    committer.settle([reply(0)], now=0.0, force=True)
    store.down = False
    committer.settle([reply(1)], now=1.0, force=False)  # not due: only the waiting done mark is written
    assert store.completed == [Completed("id-0", b"{}")]


def test_partitions_leaving_an_open_transaction_abort_it_and_its_done_marks_are_never_written():
    log: list[str] = []
    store = RecordingStore()
    committer = transactional(RecordingTransactions(log), tracked(0, 1), DedupGate(store), interval_s=1.0, now=0.0)
    committer.settle([reply(0)], now=0.1, force=False)
    assert committer.partitions_left({TP}) is True
    assert log == ["abort"]
    committer.settle([reply(1)], now=1.5, force=False)
    assert store.completed == [Completed("id-1", b"{}")]  # the aborted reply's done mark is gone with it


def test_partitions_leaving_a_transaction_with_a_send_out_abort_it():
    log: list[str] = []
    transactions = RecordingTransactions(log)
    committer = transactional(transactions, tracked(0), DedupGate(RecordingStore()), interval_s=1.0, now=0.0)
    transactions.open = True  # sent, not yet acknowledged
    assert committer.partitions_left({TP}) is True and log == ["abort"]


def test_partitions_leaving_between_transactions_abort_nothing():
    log: list[str] = []
    committer = transactional(RecordingTransactions(log), tracked(0), DedupGate(RecordingStore()), 0.0, 0.0)
    committer.settle([reply(0)], now=0.1, force=False)
    assert committer.partitions_left({TP}) is False and log == ["commit"]


def test_at_least_once_keeps_its_work_when_partitions_leave():
    committer = at_least_once(RecordingSource(), tracked(0), DedupGate(RecordingStore()), 0.0, 0.0)
    assert committer.partitions_left({TP}) is False


def test_transactional_commits_nothing_while_a_revocation_waits_for_its_assignment():
    log: list[str] = []
    source = RecordingSource()
    committer = transactional(RecordingTransactions(log), tracked(0), DedupGate(RecordingStore()), 0.0, 0.0, source)
    source.revocation_pending = True  # librdkafka's eager protocol: every partition revoked, none assigned yet
    committer.settle([reply(0)], now=1.0, force=True)
    assert log == []
    assert committer.partitions_left({TP}) and log == ["abort"]  # the assignment: the partition left


def test_a_committer_without_transactions_refuses_a_transaction_decided():
    class DecidesATransaction(AtLeastOnce):
        def decide(self, written, now, force, rebalancing):
            return CommitTransaction({TP: 1}, done_marks())

    committer = Committer(DecidesATransaction(tracked(0), 0.0, 0.0), RecordingSource(), None,
                          DedupGate(RecordingStore()))
    with pytest.raises(WorkerError, match="without transactions"):
        committer.settle([], now=1.0, force=True)


def test_every_settle_lets_the_transactions_recover_a_producer_even_with_nothing_to_commit():
    """A failed replacement producer leaves its predecessor's transaction open, and the rewind consumes nothing
    until it is settled: only a step that asks again gets the worker out (ExactlyOnce.recover)."""
    transactions = RecordingTransactions([])
    committer = transactional(transactions, OffsetTracker(), DedupGate(RecordingStore()), 0.0, 0.0)
    committer.settle([], now=0.0, force=False)
    committer.settle([], now=1.0, force=True)
    assert transactions.recoveries == 2 and transactions.committed == []
