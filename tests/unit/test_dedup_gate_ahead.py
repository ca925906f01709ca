"""A claim started ahead (DedupGate.start_claim) and taken later: its answers, a store that fails meanwhile, and
partitions dropped while it is out."""

import threading

from tests.fakes import FakeClock
from worker.core.errors import StoreUnavailable
from worker.core.messages import Position, Request
from worker.dedup.memory import InMemoryDedupStore
from worker.stream.dedup_gate import DedupGate


def requests(*ids, partition=0):
    return [Request(i, None, Position("t", partition, n)) for n, i in enumerate(ids)]


class GatedStore(InMemoryDedupStore):
    """Answers a claim only once the test lets it (``go``), failing it once when told to."""

    def __init__(self, clock):
        super().__init__(clock)
        self.go = threading.Event()
        self.fail_next = False

    def claim(self, batch):
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
    assert [(r.id, fresh) for r, fresh in claimed] == [("a", True), ("b", True), ("a", False), ("c", True)]
    assert gate.claiming == 0


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
