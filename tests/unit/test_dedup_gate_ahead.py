"""A claim started ahead (DedupGate.start_claim) and taken later: its answers, a store that fails meanwhile, and
partitions dropped while it is out."""

import threading

from tests.fakes import FakeClock
from worker.core.errors import StoreUnavailable
from worker.core.messages import Position, Request
from worker.dedup.memory import InMemoryDedupStore
from worker.ports import DoneMarks
from worker.stream.dedup_gate import DedupGate


def requests(*ids, partition=0):
    return [Request(i, None, Position("t", partition, n)) for n, i in enumerate(ids)]


class GatedStore(InMemoryDedupStore):
    """Answers a claim only once the test lets it (``go``), failing it once when told to."""

    def __init__(self, clock):
        super().__init__(clock)
        self.go = threading.Event()
        self.fail_next = False
        self.calls = 0

    def claim(self, batch):
        self.calls += 1
        self.go.wait(5)
        if self.fail_next:
            self.fail_next = False
            raise StoreUnavailable("redis went away")
        return super().claim(batch)


def test_a_claim_started_ahead_is_answered_when_taken_with_the_ones_queued_since():
    clock = FakeClock()
    store = GatedStore(clock)
    gate = DedupGate(store)
    gate.start_claim(requests("a", "b"), clock.monotonic())
    assert gate.claiming == 2  # out, not answered: the models they name must stay
    store.go.set()
    claimed = gate.claim(requests("a", "c", partition=1), clock.monotonic())
    assert [(r.id, fresh) for r, fresh in claimed] == [("a", True), ("b", True), ("c", True)]
    assert gate.claiming == 0 and gate.holding  # the second "a" is held while the first holds its id (BUSY)


def test_a_request_held_by_a_claim_started_ahead_goes_with_the_next_claim_not_a_call_more_at_once():
    clock = FakeClock()
    store = GatedStore(clock)
    store.go.set()
    gate = DedupGate(store)
    gate.start_claim([Request("a", None, Position("t", 0, 0)), Request("a", None, Position("t", 0, 1))],
                     clock.monotonic())
    assert [(r.position.offset, fresh) for r, fresh in gate.claim([], clock.monotonic())] == [(0, True)]
    assert store.calls == 1 and gate.holding
    gate.start_claim([], clock.monotonic())  # the next step's claim asks for it
    assert gate.claim([], clock.monotonic()) == [] and store.calls == 2 and gate.holding


def test_a_request_whose_id_another_holds_waits_for_that_one_to_be_answered_or_released():
    """A corrected retry behind its refused first try is scored once the error reply released the id; a second
    copy behind an answered first one is a duplicate. Counted a duplicate at once, the retry was lost."""
    clock = FakeClock()
    store = InMemoryDedupStore(clock)
    gate = DedupGate(store)
    first_try, retry = Request("x", None, Position("t", 0, 0)), Request("x", None, Position("t", 0, 1))
    copy_of_answered = Request("y", None, Position("t", 0, 3))
    claimed = gate.claim([first_try, retry, Request("y", None, Position("t", 0, 2)), copy_of_answered],
                         clock.monotonic())
    assert [(r.position.offset, fresh) for r, fresh in claimed] == [(0, True), (2, True)]
    assert gate.claiming == 0 and gate.waiting == 0  # held: waiting on another record, not stalled
    assert gate.held_routes() == set()  # these name no route: no model or version is kept for them
    assert gate.claim([], clock.monotonic()) == [] and gate.holding  # asked again: still in flight
    store.complete(["x", "y"], [None, b"ok reply"])  # x refused (its claim released), y answered
    assert [(r.position.offset, fresh) for r, fresh in gate.claim([], clock.monotonic())] == [(1, True), (3, False)]
    assert gate.claiming == 0


def test_held_requests_of_a_partition_dropped_are_forgotten():
    clock = FakeClock()
    gate = DedupGate(InMemoryDedupStore(clock))
    gate.claim([Request("x", None, Position("t", 0, 0)), Request("x", None, Position("t", 1, 0))], clock.monotonic())
    assert gate.drop({("t", 1)}) == 1 and gate.claiming == 0


def test_a_failed_claim_puts_its_requests_back_first_and_backs_off():
    clock = FakeClock()
    store = GatedStore(clock)
    store.fail_next = True
    gate = DedupGate(store)
    gate.start_claim(requests("a", "b"), clock.monotonic())
    store.go.set()
    assert gate.claim(requests("c", partition=1), clock.monotonic()) == []
    assert gate.blocked and gate.claiming == 3
    clock.advance(1)  # past the backoff
    assert [r.id for r, fresh in gate.claim([], clock.monotonic()) if fresh] == ["a", "b", "c"]


def test_partitions_dropped_while_a_claim_is_out_lose_its_answers():
    clock = FakeClock()
    store = GatedStore(clock)
    gate = DedupGate(store)
    gate.start_claim(requests("a", "b") + requests("c", partition=1), clock.monotonic())
    assert gate.drop({("t", 0)}) == 2
    store.go.set()
    assert [r.id for r, _ in gate.claim([], clock.monotonic())] == ["c"]


class SentAheadStore(InMemoryDedupStore):
    """A store that claims ahead itself (ClaimsAhead): the claim is made when its answer is read."""

    def __init__(self, clock):
        super().__init__(clock)
        self.started: list[list[str]] = []

        self.complete_fails = False
        self.answers_taken = 0

    def claim_ahead(self, batch):
        self.started.append([r.id for r in batch])

        def answer():
            self.answers_taken += 1
            return self.claim(batch)
        return answer

    def complete(self, ids, replies):
        if self.complete_fails:
            raise StoreUnavailable("redis went away")
        super().complete(ids, replies)


def test_a_store_that_claims_ahead_itself_is_asked_to_on_the_loops_thread_and_no_helper_waits():
    clock = FakeClock()
    store = SentAheadStore(clock)
    gate = DedupGate(store)
    threads_before = threading.active_count()
    gate.start_claim(requests("a", "b"), clock.monotonic())
    assert store.started == [["a", "b"]] and gate.claiming == 2
    claimed = gate.claim(requests("c", partition=1), clock.monotonic())
    assert [(r.id, fresh) for r, fresh in claimed] == [("a", True), ("b", True), ("c", True)]
    assert threading.active_count() == threads_before


def test_the_answer_of_a_claim_sent_ahead_is_taken_even_while_the_store_is_backed_off():
    # A done mark failing meanwhile backs the gate off; the claim's answer waits on a connection: it is read.
    clock = FakeClock()
    store = SentAheadStore(clock)
    gate = DedupGate(store)
    gate.start_claim(requests("a"), clock.monotonic())
    store.complete_fails = True
    assert gate.complete(DoneMarks(["z"], [b"{}"], [Position("t", 0, 9)]), clock.monotonic()) == []
    assert gate.blocked  # backed off: no new call before its retry time
    claimed = gate.claim([], clock.monotonic())
    assert [(r.id, fresh) for r, fresh in claimed] == [("a", True)] and store.answers_taken == 1
