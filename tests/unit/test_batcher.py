import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.batcher import Batcher


def test_not_ready_until_size_or_wait():
    batcher: Batcher[int] = Batcher(max_batch_size=3, max_wait_s=0.010)
    batcher.add(1, now=0.0)
    batcher.add(2, now=0.001)
    assert not batcher.ready(now=0.005)
    assert batcher.deadline() == pytest.approx(0.010)
    assert batcher.ready(now=0.010)


def test_ready_when_full_even_before_wait():
    batcher: Batcher[int] = Batcher(max_batch_size=2, max_wait_s=10)
    batcher.add(1, 0.0)
    batcher.add(2, 0.0)
    assert batcher.ready(0.0)
    assert batcher.drain() == [1, 2]
    assert not batcher.ready(100.0)
    assert batcher.deadline() is None


def test_a_backlog_makes_a_partial_batch_ready_at_once():
    b: Batcher[int] = Batcher(max_batch_size=4, max_wait_s=1.0)
    assert not b.ready(0.0, backlog=True)  # nothing to send
    b.add(1, now=0.0)
    assert not b.ready(0.0) and b.ready(0.0, backlog=True)


def test_drain_takes_at_most_max_batch_size_in_order():
    batcher: Batcher[int] = Batcher(max_batch_size=4, max_wait_s=0)
    for i in range(10):
        batcher.add(i, 0.0)
    assert [batcher.drain() for _ in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_deadline_follows_the_oldest_remaining_item():
    batcher: Batcher[int] = Batcher(max_batch_size=1, max_wait_s=1.0)
    batcher.add(1, 0.0)
    batcher.add(2, 5.0)
    batcher.drain()
    assert batcher.deadline() == 6.0


def test_cost_budget_defers_overflowing_item_to_next_batch():
    batcher: Batcher[int] = Batcher(max_batch_size=10, max_wait_s=1.0, cost=lambda n: n, max_batch_cost=10)
    for item in (4, 4, 5, 1):
        batcher.add(item, 0.0)
    assert batcher.ready(0.0)  # the 5 does not fit after 4+4: the first batch is full by cost
    assert batcher.drain() == [4, 4]
    assert batcher.drain() == [5, 1]


def test_item_too_costly_alone_is_refused():
    batcher: Batcher[int] = Batcher(max_batch_size=10, max_wait_s=1.0, cost=lambda n: n, max_batch_cost=10)
    assert not batcher.fits(11)
    with pytest.raises(ValueError, match="max_batch_cost"):
        batcher.add(11, 0.0)


def test_extend_queues_in_order_and_returns_what_never_fits_asking_the_arrival_of_what_fits_only():
    batcher: Batcher[int] = Batcher(max_batch_size=10, max_wait_s=1.0, cost=lambda n: n, max_batch_cost=10)
    asked: list[int] = []

    def arrived(item: int) -> float:
        asked.append(item)
        return item / 10

    assert batcher.extend([4, 11, 5, 12], arrived) == [11, 12]
    assert asked == [4, 5]
    assert batcher.pending == 2 and batcher.deadline() == 1.4  # the oldest queued arrived at 0.4
    assert batcher.drain() == [4, 5]


def test_extend_without_a_cost_queues_everything():
    batcher: Batcher[int] = Batcher(max_batch_size=2, max_wait_s=1.0)
    assert batcher.extend(iter([5, 6, 7]), lambda item: item / 10) == []
    assert batcher.deadline() == 1.5 and batcher.drain() == [5, 6] and batcher.drain() == [7]


def test_remove_if_keeps_the_rest_in_order():
    batcher: Batcher[int] = Batcher(max_batch_size=2, max_wait_s=1.0)
    for i in range(3):
        batcher.add(i, float(i))
    assert batcher.remove_if(lambda n: n % 2 == 0) == [0, 2]
    assert batcher.pending == 1
    assert batcher.deadline() == 2.0


def test_full_without_waiting_by_count_or_by_cost():
    by_count: Batcher[int] = Batcher(max_batch_size=2, max_wait_s=1.0)
    by_count.add(1, 0.0)
    assert not by_count.full() and not by_count.ready(0.5)
    by_count.add(1, 0.0)
    assert by_count.full() and by_count.ready(0.0)
    by_cost: Batcher[int] = Batcher(max_batch_size=10, max_wait_s=1.0, cost=lambda n: n, max_batch_cost=10)
    by_cost.add(6, 0.0)
    assert not by_cost.full()
    by_cost.add(5, 0.0)  # 6 + 5 overflows: the first batch is complete with the 6 alone
    assert by_cost.full() and by_cost.drain() == [6]


@pytest.mark.parametrize("kwargs", [
    {"max_batch_size": 0, "max_wait_s": 1},
    {"max_batch_size": 1, "max_wait_s": -1},
    {"max_batch_size": 1, "max_wait_s": 1, "cost": len},
])
def test_bad_limits_are_refused(kwargs):
    with pytest.raises(ValueError):
        Batcher(**kwargs)


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=9), max_size=60),
    max_batch_size=st.integers(min_value=1, max_value=8),
    budget=st.integers(min_value=9, max_value=30),
)
def test_batches_respect_limits_keep_order_and_lose_nothing(sizes, max_batch_size, budget):
    batcher: Batcher[tuple[int, int]] = Batcher(max_batch_size, 0.5, cost=lambda item: item[1],
                                                max_batch_cost=budget)
    items = list(enumerate(sizes))
    out = []
    for index, item in enumerate(items):
        batcher.add(item, now=index * 0.1)
        while batcher.ready(now=index * 0.1):
            batch = batcher.drain()
            assert 1 <= len(batch) <= max_batch_size
            assert sum(cost for _, cost in batch) <= budget
            out.extend(batch)
    while batcher.pending:
        out.extend(batcher.drain())
    assert out == items
