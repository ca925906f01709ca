"""Batch waits: fixed, or from a latency target with a batch cost learned online."""

import pytest

from worker.core.batch_wait import BatchCost, FixedWait, LatencyTarget
from worker.core.batcher import Batcher
from worker.core.messages import Position, Request


def request(produced_ms: int, received_at: float) -> Request:
    return Request("r", None, Position("t", 0, 0), produced_ms=produced_ms, received_at=received_at)


def test_the_batch_cost_line_is_fitted_from_batches_of_several_sizes():
    cost = BatchCost(decay=1.0)
    for n in (1, 8, 32, 64, 16):
        cost.observe(n, 0.002 + 0.0001 * n)
    assert cost.predict(64) == pytest.approx(0.0084)
    assert cost.predict(1) == pytest.approx(0.0021)


def test_with_one_batch_size_seen_the_cost_scales_with_size_and_with_none_it_is_the_prior():
    assert BatchCost(per_item_s=0.001).predict(10) == pytest.approx(0.01)
    cost = BatchCost()
    cost.observe(10, 0.02)
    assert cost.predict(20) == pytest.approx(0.04)


def test_recent_batches_outweigh_old_ones():
    cost = BatchCost(decay=0.5)
    for _ in range(20):
        cost.observe(10, 0.010)
        cost.observe(20, 0.020)
    for _ in range(20):  # the machine got twice as slow
        cost.observe(10, 0.020)
        cost.observe(20, 0.040)
    assert cost.predict(20) == pytest.approx(0.040, rel=0.01)


def test_a_latency_target_waits_what_the_target_leaves_after_the_predicted_compute():
    target = LatencyTarget(0.050, margin=0.2)
    for n in (1, 64):
        target.observe(n, 0.001 + 0.0002 * n)
    assert target.wait_s(64) == pytest.approx(0.040 - 0.0138)
    target.observe(64, 1.0)  # batches of 64 now take longer than the target: no wait at all
    target.observe(1, 0.5)
    assert target.wait_s(64) == 0.0


def test_the_wait_counts_from_the_records_kafka_timestamp_clamped_to_the_target():
    target = LatencyTarget(0.050)
    polled = request(produced_ms=1_000_000 - 30, received_at=500.0)  # 30 ms in the topic before the poll
    assert target.arrival(polled, now=500.010, wall_ms=1_000_010) == pytest.approx(499.970)
    future = request(produced_ms=2_000_000, received_at=500.0)  # a producer clock ahead of ours
    assert target.arrival(future, now=500.0, wall_ms=1_000_000) == 500.0
    ancient = request(produced_ms=0, received_at=500.0)
    assert target.arrival(ancient, now=500.0, wall_ms=1_000_000) == pytest.approx(499.950)
    assert FixedWait(0.01).arrival(polled, now=500.010, wall_ms=1_000_010) == 500.0


def test_a_batcher_with_a_target_is_ready_once_waiting_longer_would_break_it():
    target = LatencyTarget(0.100, margin=0.0)
    target.observe(1, 0.010)
    target.observe(2, 0.020)
    batcher: Batcher[str] = Batcher(8, 1.0, wait=target)
    batcher.add("a", 10.0)
    batcher.add("b", 10.0)
    assert batcher.deadline() == pytest.approx(10.080)  # two items take 20 ms: start by 80 ms
    assert not batcher.ready(10.079) and batcher.ready(10.081)
