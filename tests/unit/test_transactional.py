"""The transactional send/commit policy both clients' TransactionalSink share, over a stand-in producer."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs

from worker.core.errors import CommitUncertain, TransactionAborted
from worker.kafka.sends import SendGroup, SendLedger
from worker.kafka.transactional import TransactionalSends


class Refused(Exception):
    """What the stand-in client raises."""


class Producer:
    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*_args: Any) -> None:
            self.calls.append(name)
            if name == self.fail:
                raise Refused(name)
        return call


class Answered(SendGroup[object]):
    """A group answered as the ledger's single sends are."""

    def __init__(self, size: int, ledger: SendLedger[str, object]) -> None:
        super().__init__(size)
        self._ledger = ledger

    def outcome(self) -> tuple[bool, dict[int, Exception]]:
        return self._ledger._outcome(object())[0], {}


class Sink(TransactionalSends[str]):
    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]] = (Refused,)

    def __init__(self, producer: Producer, fatal: bool = False, answered: bool = True) -> None:
        self._producer = producer
        self._pending = SendLedger(lambda handle: (answered, None))
        self.fatal = fatal
        self.renewed = 0
        self.flush_raises: BaseException | None = None
        self.flushed_s: list[float] = []

    SEND_ERRORS: ClassVar[tuple[type[Exception], ...]] = ()

    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Any) -> object:
        return object()

    def _queue_group(self, records: Any) -> SendGroup[object]:
        return Answered(len(records), self._pending)

    def _flush(self, timeout_s: float) -> None:
        self.flushed_s.append(timeout_s)
        if self.flush_raises is not None:
            raise self.flush_raises

    def _close(self, timeout_s: float) -> bool:
        return True

    def _offsets(self, offsets: Any) -> Any:
        return offsets

    def _fatal(self, error: Exception) -> bool:
        return self.fatal

    def _renew_producer(self) -> None:
        self.renewed += 1
        self._producer = Producer()

    def _unanswered_for(self, waited_s: float | None) -> Exception:
        return Refused(f"unanswered after {waited_s} s")

    def _describe(self, error: Exception) -> str:
        return f"Refused: {error}"


def test_the_first_send_begins_the_transaction_and_commit_closes_it_with_the_offsets():
    producer = Producer()
    sink = Sink(producer)
    sink.send("replies", None, b"a", [], "a")
    sink.send("replies", None, b"b", [], "b")
    assert sink.open
    sink.commit({("requests", 0): 10}, "group")
    assert producer.calls == ["begin_transaction", "send_offsets_to_transaction", "commit_transaction"]
    assert not sink.open


def test_a_failed_commit_aborts_forgets_the_sends_and_raises():
    producer = Producer(fail="commit_transaction")
    sink = Sink(producer)
    sink.send("replies", None, b"a", [], "a")
    with capture_logs() as logs, pytest.raises(TransactionAborted):
        sink.commit({("requests", 0): 10}, "group")
    assert producer.calls[-1] == "abort_transaction" and len(sink._pending) == 0 and not sink.open
    assert [log["event"] for log in logs] == ["transaction_aborted"]
    assert logs[0]["reason"] == "commit failed: Refused: commit_transaction"


def test_a_fatal_commit_error_replaces_the_producer_without_aborting():
    producer = Producer(fail="commit_transaction")
    sink = Sink(producer, fatal=True)
    sink.send("replies", None, b"a", [], "a")
    with capture_logs() as logs, pytest.raises(TransactionAborted):
        sink.commit({}, "group")
    assert "abort_transaction" not in producer.calls and sink.renewed == 1 and len(sink._pending) == 0
    assert [log["event"] for log in logs] == ["producer_replaced"]


@pytest.mark.parametrize(("failing", "fatal", "uncertain"), [
    ("commit_transaction", True, True),  # unanswered, the producer replaced: the coordinator may complete it
    ("commit_transaction", False, True),  # refused, then aborted: told apart from a half-done commit by no one
    ("send_offsets_to_transaction", True, False),  # the commit was never asked for: aborted
])
def test_only_a_failed_commit_call_is_uncertain(failing, fatal, uncertain):
    sink = Sink(Producer(fail=failing), fatal=fatal)
    sink.send("replies", None, b"a", [], "a")
    with pytest.raises(TransactionAborted) as raised:
        sink.commit({("requests", 0): 10}, "group")
    assert isinstance(raised.value, CommitUncertain) is uncertain


def test_a_send_that_cannot_begin_a_transaction_is_reported_failed_and_the_producer_replaced():
    sink = Sink(Producer(fail="begin_transaction"))
    sink.send("replies", None, b"a", [], "a")
    assert sink.renewed == 1 and not sink.open
    (failed,) = sink._pending.settle()
    assert failed.tag == "a" and isinstance(failed.error, Refused)


def test_a_group_that_cannot_begin_a_transaction_is_reported_failed_send_by_send():
    sink = Sink(Producer(fail="begin_transaction"))
    sink.send_group([("replies", b"k0", b"a", []), ("replies", b"k1", b"b", [])], "group", lambda i: f"member {i}")
    assert sink.renewed == 1 and not sink.open and sink.pending == 2
    deliveries = sink._pending.settle()
    assert [d.tag for d in deliveries] == ["member 0", "member 1"]
    assert all(isinstance(d.error, Refused) for d in deliveries) and sink.pending == 0


def test_a_group_sent_in_a_transaction_is_reported_whole_and_forgotten_by_an_abort():
    sink = Sink(Producer())
    sink.send_group([("replies", b"k0", b"a", []), ("replies", b"k1", b"b", [])], "group", lambda i: f"member {i}")
    assert sink.open and sink.pending == 2
    assert [(d.tag, d.error) for d in sink._pending.settle()] == [("group", None)]
    sink.send_group([("replies", b"k2", b"c", [])], "next", lambda i: f"next {i}")
    sink.abort("step failed")
    assert sink.pending == 0 and sink._pending.settle() == []


def test_an_abort_the_producer_refuses_replaces_it():
    sink = Sink(Producer(fail="abort_transaction"))
    sink.send("replies", None, b"a", [], "a")
    sink.abort("step failed")
    assert sink.renewed == 1 and not sink.open and len(sink._pending) == 0


def test_a_replacement_that_cannot_initialise_fails_the_steps_until_one_can_and_never_raises_otherwise():
    """The transaction coordinator's broker is down: init_transactions gets no answer. The worker goes on: the
    step's sends fail, its commit raises TransactionAborted, and a later step gets a producer."""
    sink = Sink(Producer(fail="abort_transaction"))
    attempts = []

    def renew() -> None:
        attempts.append(1)
        if len(attempts) <= 2:
            raise Refused("init_transactions")
        sink._producer = Producer()

    sink._renew_producer = renew  # type: ignore[method-assign]
    sink.send("replies", None, b"a", [], "a")
    with capture_logs() as logs:
        sink.abort("step failed")  # the abort is refused, and so is the first replacement
    assert [log["event"] for log in logs] == ["transaction_aborted", "producer_replaced", "producer_not_renewed"]
    sink.send("replies", None, b"b", [], "b")  # the second try fails too: the send is reported failed
    (failed,) = sink._pending.settle()
    assert failed.tag == "b" and isinstance(failed.error, Refused) and not sink.open
    sink.commit({("requests", 0): 3}, "group")  # the third gets a producer: committed as usual
    assert len(attempts) == 3 and sink._producer.calls == ["begin_transaction", "send_offsets_to_transaction",
                                                           "commit_transaction"]


def test_between_transactions_a_failed_replacement_is_tried_again_without_a_send():
    """A rewind after the failed commit consumes nothing while the old transaction's offsets are unstable, so no
    send comes to try again: ``renew_if_due`` does, each step. It does nothing while a transaction is open, or
    when no replacement is due."""
    sink = Sink(Producer(fail="commit_transaction"), fatal=True)
    attempts = []

    def renew() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise Refused("init_transactions")
        sink._producer = Producer()

    sink._renew_producer = renew  # type: ignore[method-assign]
    sink.send("replies", None, b"a", [], "a")
    with pytest.raises(TransactionAborted):
        sink.commit({("requests", 0): 3}, "group")  # fatal: replaced, and the replacement fails
    assert len(attempts) == 1
    sink.renew_if_due()
    assert len(attempts) == 2
    sink.renew_if_due()  # none due now
    sink.send("replies", None, b"b", [], "b")
    sink._renewal_failure = Refused("as if a replacement had failed meanwhile")
    sink.renew_if_due()  # a transaction is open: its producer is not closed under it
    assert len(attempts) == 2 and sink.open


@pytest.mark.parametrize("timed_out", [True, False])
def test_a_replacement_whose_init_ran_out_of_time_is_asked_again_rather_than_replaced(timed_out):
    """A second producer would race the first's init_transactions, still going, for the producer epoch, and be
    fenced when it completes: the client resumes the first instead. Any other failure gets a new producer."""
    sink = Sink(Producer(fail="abort_transaction"))
    resumed: list[bool] = []

    def renew() -> None:
        resumed.append(sink._resume_init)
        if len(resumed) <= 2:
            raise Refused("init_transactions")
        sink._producer = Producer()

    sink._renew_producer = renew  # type: ignore[method-assign]
    sink._init_timed_out = lambda error: timed_out  # type: ignore[method-assign]
    sink.send("replies", None, b"a", [], "a")
    sink.abort("step failed")  # the abort is refused, the replacement's init runs out of time
    sink.send("replies", None, b"b", [], "b")  # asked again: out of time again
    sink.commit({("requests", 0): 3}, "group")  # and again: initialised
    assert resumed == [False, timed_out, timed_out] and not sink._resume_init


def test_a_commit_without_a_producer_aborts():
    sink = Sink(Producer(fail="begin_transaction"))

    def renew() -> None:
        raise Refused("init_transactions")

    sink._renew_producer = renew  # type: ignore[method-assign]
    sink.send("replies", None, b"a", [], "a")  # begin refused, replacement refused
    with pytest.raises(TransactionAborted, match="no transactional producer"):
        sink.commit({("requests", 0): 3}, "group")


class Expired(Exception):
    """A send the stand-in client gave up on unanswered."""


class ExpiringSink(Sink):
    """Its sends expire (reported failed with Expired), as kafka-python's do past delivery_timeout_ms."""

    def __init__(self, producer: Producer) -> None:
        super().__init__(producer)
        self._pending = SendLedger(lambda handle: (True, Expired("expired unanswered")))

    def _unanswered(self, error: Exception) -> bool:
        return isinstance(error, Expired)


def test_a_transaction_whose_sends_expired_unanswered_is_settled_by_a_new_producer_not_aborted():
    """A producer whose sends expire has a stale view of the cluster (a dead leader or coordinator): aborting
    with it would wait on the same coordinator, and its next transaction would expire the same way."""
    producer = Producer()
    sink = ExpiringSink(producer)
    sink.send("replies", None, b"a", [], "a")
    (delivery,) = sink.settle()
    assert isinstance(delivery.error, Expired)
    with capture_logs() as logs:
        sink.abort("1 sends failed")
    assert sink.renewed == 1 and "abort_transaction" not in producer.calls and not sink.open
    assert [entry["event"] for entry in logs] == ["transaction_aborted", "producer_replaced"]
    fresh = sink._producer
    sink.send("replies", None, b"b", [], "b")
    sink.settle()
    sink.abort("again")  # the next one expired too: replaced again, never aborted
    assert sink.renewed == 2 and "abort_transaction" not in fresh.calls


def test_a_failed_send_that_did_not_expire_is_aborted_as_before():
    producer = Producer()
    sink = Sink(producer)
    sink._pending = SendLedger(lambda handle: (True, Refused("too large")))
    sink.send("replies", None, b"a", [], "a")
    sink.settle()
    sink.abort("1 sends failed")
    assert sink.renewed == 0 and producer.calls == ["begin_transaction", "abort_transaction"]


@pytest.mark.parametrize("raised", [Refused("fenced"), "wrapped"])
def test_a_producer_that_raises_in_its_flush_fails_the_sends_out_and_the_abort_replaces_it(raised):
    """librdkafka's flush raises a fatal error (fenced: an abandoned producer's init_transactions completed
    after its successor's), wrapped in a SystemError when it comes out of a delivery callback."""
    if raised == "wrapped":
        raised = SystemError("delivered returned a result with an exception set")
        raised.__cause__ = Refused("fenced")
    producer = Producer()
    sink = Sink(producer, answered=False)
    sink.flush_raises = raised
    sink.send("replies", None, b"a", [], "a")
    sink.send("replies", None, b"b", [], "b")
    failed = sink.settle(5.0)
    assert [d.tag for d in failed] == ["a", "b"] and all(isinstance(d.error, Refused) for d in failed)
    assert len(sink._pending) == 0
    with capture_logs() as logs:
        sink.abort("2 sends failed")  # what the commit policy decides on a failed send
    assert producer.calls == ["begin_transaction"] and sink.renewed == 1 and not sink.open  # no abort call
    assert [log["event"] for log in logs] == ["transaction_aborted", "producer_replaced"]


def test_a_system_error_not_caused_by_the_client_is_raised():
    sink = Sink(Producer())
    sink.flush_raises = SystemError("ours")
    sink.send("replies", None, b"a", [], "a")
    with pytest.raises(SystemError, match="ours"):
        sink.settle(5.0)


def test_a_settle_waits_no_longer_than_transaction_s_and_then_fails_what_is_still_out_for_a_new_producer():
    """Neither client expires a transaction's sends by itself everywhere (kafka-python not while a transactional
    request is pending, librdkafka only at the transaction timeout): a paused coordinator held a step's sends
    through a 20 s pause. After a whole transaction_s they fail, and the abort replaces the producer."""
    producer = Producer()
    sink = Sink(producer, answered=False)
    sink._transaction_s = 10.0
    sink.send("replies", None, b"a", [], "a")
    failed = sink.settle(15.0)
    assert sink.flushed_s == [10.0]
    assert [d.tag for d in failed] == ["a"] and str(failed[0].error) == "unanswered after 10.0 s"
    assert len(sink._pending) == 0
    with capture_logs() as logs:
        sink.abort("1 sends failed")
    assert producer.calls == ["begin_transaction"] and sink.renewed == 1  # replaced, not aborted with it
    assert [log["event"] for log in logs] == ["transaction_aborted", "producer_replaced"]


def test_a_shorter_settle_leaves_what_is_still_out_for_the_next():
    """A settle given less than transaction_s (a drain's last seconds) has not waited the bound out."""
    sink = Sink(Producer(), answered=False)
    sink._transaction_s = 10.0
    sink.send("replies", None, b"a", [], "a")
    assert sink.settle(2.0) == [] and len(sink._pending) == 1 and sink.flushed_s == [2.0]


class Fencing:
    """A FenceWatch whose wait ends at a fence, the sends still out."""

    def wait(self, done, timeout_s: float):
        return None if not done(0.5) else True


def test_a_settle_ends_at_a_fence_and_the_abort_replaces_the_producer():
    """The leaders the sends wait on have moved: a new producer finds them (a paused leader held a step's sends
    through the whole pause)."""
    producer = Producer()
    sink = Sink(producer, answered=False)
    sink._fences = Fencing()
    sink.send("replies", None, b"a", [], "a")
    (failed,) = sink.settle(15.0)
    assert str(failed.error) == "unanswered after None s" and sink.flushed_s == [0.5]
    sink.abort("1 sends failed")
    assert producer.calls == ["begin_transaction"] and sink.renewed == 1
