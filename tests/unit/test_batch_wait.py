"""Batch waits: fixed, or from a latency target with a batch cost learned online."""

import pytest

from worker.core.batch_wait import ArrivalRate, BatchCost, FixedWait, LatencyTarget
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


def test_the_fixed_part_of_a_batch_cost_is_what_one_batch_fewer_saves_and_unknown_until_two_sizes():
    cost = BatchCost(decay=1.0)
    cost.observe(8, 0.004)
    assert cost.fixed_s() == 0.0  # one size seen: no line yet, so nothing says a batch has a fixed cost
    cost.observe(64, 0.0096)
    assert cost.fixed_s() == pytest.approx(0.0032)


def test_the_arrival_rate_follows_the_arrivals_and_starts_at_none():
    rate = ArrivalRate(horizon_s=0.5)
    assert rate.per_s() == 0.0
    for i in range(3_000):  # 1,000 a second for three seconds
        rate.arrived(i / 1_000)
    assert rate.per_s() == pytest.approx(1_000, rel=0.01)


def busy_target(target_s: float, fixed_s: float, per_item_s: float, per_s: float, fill: bool = False) -> LatencyTarget:
    """A target that has seen batches costing fixed_s + per_item_s a request, and arrivals at per_s."""
    target = LatencyTarget(target_s, margin=0.2, fill=fill)
    for n in (1, 64):
        target.observe(n, fixed_s + per_item_s * n)
    for i in range(round(3 * per_s)):  # for three seconds
        target.rate.arrived(i / per_s)
    return target


def test_a_latency_target_waits_while_the_next_request_costs_those_in_hand_less_than_a_batch_saves():
    target = busy_target(0.050, fixed_s=0.005, per_item_s=0.0002, per_s=1_000)  # a request every 1 ms
    assert target.wait_s(4) == pytest.approx(0.040 - 0.0058)  # 4 ms more waiting < 5 ms a batch fewer saves
    assert target.wait_s(5) == 0.0  # 5 ms: it no longer pays


def test_a_cheap_batch_or_a_slow_trickle_does_not_wait():
    assert busy_target(0.050, fixed_s=0.0002, per_item_s=0.0002, per_s=1_000).wait_s(1) == 0.0
    assert busy_target(0.050, fixed_s=0.005, per_item_s=0.0002, per_s=50).wait_s(1) == 0.0  # 20 ms apart
    assert LatencyTarget(0.050).wait_s(1) == 0.0  # nothing learned yet


def test_a_latency_target_never_waits_past_what_the_target_leaves_after_the_predicted_compute():
    target = busy_target(0.050, fixed_s=0.030, per_item_s=0.001, per_s=1_000)
    assert target.wait_s(10) == pytest.approx(0.040 - 0.040)  # 10 ms more pays, but the compute takes 40 ms
    target.observe(64, 1.0)  # batches of 64 now take longer than the target: no wait at all
    target.observe(1, 0.5)
    assert target.wait_s(64) == 0.0


def test_to_fill_a_latency_target_waits_all_it_allows_paying_or_not():
    assert busy_target(0.050, fixed_s=0.0, per_item_s=0.0002, per_s=50, fill=True).wait_s(1) == pytest.approx(
        0.040 - 0.0002)
    assert LatencyTarget(0.050, fill=True).wait_s(1) == pytest.approx(0.040)


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
    target = busy_target(0.100, fixed_s=0.050, per_item_s=0.010, per_s=1_000)
    batcher: Batcher[str] = Batcher(8, 1.0, wait=target)
    batcher.add("a", 10.0)
    batcher.add("b", 10.0)
    assert batcher.deadline() == pytest.approx(10.010)  # two items take 70 ms, with 20 ms kept back: start by 10 ms
    assert not batcher.ready(10.009) and batcher.ready(10.011)
