"""The DedupStore contract (worker/ports.py), run against InMemoryDedupStore and RedisDedupStore.

A claim names the record that made it (its position): the same record again
is a retry (FRESH), any other record with that id is BUSY (asked again later)
until the claim is released or its lease runs out; a done mark makes every
later claim a DUPLICATE.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.fakes import FakeClock
from tests.integration.kit import wait_until
from worker.core.messages import Position, Request
from worker.dedup.memory import InMemoryDedupStore
from worker.dedup.redis_store import RedisDedupStore
from worker.ports import BUSY, DUPLICATE, FRESH, DedupStore

TTL_S = 60
LONG_LEASE_MS = 60_000  # never runs out during a test
SHORT_LEASE_MS = 200  # runs out during the lease tests


def record(request_id: str, offset: int, partition: int = 0) -> Request:
    return Request(request_id, None, Position("requests", partition, offset))


class MemoryStores:
    """InMemoryDedupStore on a FakeClock: a lease runs out when the test moves the clock past it."""

    def __init__(self) -> None:
        self.clock = FakeClock()

    def store(self, lease_ms: int = LONG_LEASE_MS) -> DedupStore:
        return InMemoryDedupStore(self.clock, ttl_s=TTL_S, lease_ms=lease_ms)

    def once_lease_ran_out(self, lease_ms: int, condition: Callable[[], bool], what: str) -> None:
        self.clock.advance(lease_ms / 1000)
        assert condition(), what

    def close(self) -> None:
        pass


class RedisStores:
    """RedisDedupStore in a namespace of its own on the real server: a lease runs out in real time."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._namespace = f"contract-{uuid.uuid4().hex[:10]}"
        self._opened: list[RedisDedupStore] = []

    def store(self, lease_ms: int = LONG_LEASE_MS) -> DedupStore:
        store = RedisDedupStore(self._url, self._namespace, ttl_s=TTL_S, lease_ms=lease_ms)
        self._opened.append(store)
        return store

    def once_lease_ran_out(self, lease_ms: int, condition: Callable[[], bool], what: str) -> None:
        wait_until(condition, timeout_s=lease_ms / 1000 + 5, what=what, interval_s=0.05)

    def close(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def stores(request: pytest.FixtureRequest) -> Iterator[MemoryStores | RedisStores]:
    """Makes stores that share one keyspace (two workers' stores, for Redis), fresh for each test."""
    made = MemoryStores() if request.param == "memory" else RedisStores(request.getfixturevalue("redis_url"))
    yield made
    made.close()


def test_fresh_ids_are_claimed_and_an_empty_batch_claims_nothing(stores):
    store = stores.store()
    assert store.claim([record("a", 0), record("b", 1), record("c", 0, partition=1)]) == [FRESH, FRESH, FRESH]
    assert store.claim([]) == []


def test_the_same_record_claimed_again_is_a_retry(stores):
    store = stores.store()
    assert store.claim([record("a", 0)]) == [FRESH]
    assert store.claim([record("a", 0)]) == [FRESH]  # redelivered after a crash or a rebalance


def test_stores_on_one_keyspace_see_each_others_claims(stores, request):
    if isinstance(stores, MemoryStores):
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "InMemoryDedupStore keeps its claims in its own process's memory: two stores (two workers) share "
            "nothing, so it suits one local worker only")))
    first, second = stores.store(), stores.store()
    assert first.claim([record("a", 0)]) == [FRESH]
    assert second.claim([record("a", 1)]) == [BUSY]  # another record with the id, in flight on the first worker
    assert second.claim([record("a", 0)]) == [FRESH]  # the record itself, moved to another worker: a retry


def test_a_different_record_with_an_id_claimed_in_flight_is_busy(stores):
    store = stores.store()
    assert store.claim([record("a", 0)]) == [FRESH]
    assert store.claim([record("a", 1), record("a", 0, partition=1)]) == [BUSY, BUSY]


def test_the_same_id_twice_in_one_batch_claims_the_first_record_only(stores):
    store = stores.store()
    assert store.claim([record("a", 0), record("b", 1), record("a", 2)]) == [FRESH, FRESH, BUSY]


def test_a_completed_id_with_a_reply_is_a_duplicate_for_every_record_after(stores):
    store = stores.store()
    assert store.claim([record("a", 0), record("b", 1)]) == [FRESH, FRESH]
    store.complete(["a"], [b'{"id":"a"}'])
    assert store.claim([record("a", 0), record("a", 7), record("b", 1)]) == [DUPLICATE, DUPLICATE, FRESH]


def test_completing_without_a_reply_releases_the_claim_for_a_corrected_retry(stores):
    store = stores.store()
    assert store.claim([record("a", 0), record("a", 5)]) == [FRESH, BUSY]  # a retry in the same poll: held
    store.complete(["a"], [None])
    assert store.claim([record("a", 5)]) == [FRESH]  # asked again once the first try's error reply settled
    assert store.claim([record("a", 0)]) == [BUSY]  # and now it holds the claim


def test_completing_an_empty_list_or_an_unclaimed_id_is_harmless(stores):
    store = stores.store()
    store.complete([], [])
    store.complete(["never-claimed"], [None])
    assert store.claim([record("never-claimed", 0)]) == [FRESH]


def test_a_claim_whose_lease_ran_out_goes_to_the_next_record_with_the_id(stores):
    store = stores.store(lease_ms=SHORT_LEASE_MS)
    assert store.claim([record("a", 0)]) == [FRESH]
    stores.once_lease_ran_out(SHORT_LEASE_MS, lambda: store.claim([record("a", 1)]) == [FRESH],
                              "the record at offset 1 to claim id a once the lease ran out")
    assert store.claim([record("a", 0)]) == [BUSY]  # the first record's claim is gone to the second


def test_a_done_mark_outlives_the_lease(stores):
    store = stores.store(lease_ms=SHORT_LEASE_MS)
    assert store.claim([record("a", 0), record("probe", 0)]) == [FRESH, FRESH]
    store.complete(["a"], [b"{}"])
    stores.once_lease_ran_out(SHORT_LEASE_MS, lambda: store.claim([record("probe", 1)]) == [FRESH],
                              "the probe's lease, taken with a's claim, to run out")
    assert store.claim([record("a", 1)]) == [DUPLICATE]
