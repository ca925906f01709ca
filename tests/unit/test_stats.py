"""WorkerStats' additions for the metrics: fixed-bucket histograms, generations, pause reasons."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.stats import BATCH_SIZE_BUCKETS, STAGE_SECONDS_BUCKETS, Histogram, WorkerStats


@pytest.mark.parametrize("value, bucket", [
    (0.5, 0),  # below the first bound
    (1.0, 0),  # a bound is inclusive (Prometheus' le)
    (1.5, 1),
    (2.0, 1),
    (4.0, 2),
    (4.5, 3),  # above every bound: the +Inf bucket
])
def test_a_value_lands_in_the_first_bucket_whose_bound_is_not_below_it(value, bucket):
    histogram = Histogram((1.0, 2.0, 4.0))
    histogram.observe(value)
    assert histogram.counts == [1 if i == bucket else 0 for i in range(4)]
    assert histogram.sum == value


def test_cumulative_counts_end_with_the_total():
    histogram = Histogram((1.0, 2.0, 4.0))
    for value in (1, 1, 3, 9, 2):
        histogram.observe(value)
    assert histogram.cumulative() == ([2, 3, 4, 5], 16.0)


@given(st.lists(st.one_of(st.sampled_from([bound * 1000 for bound in STAGE_SECONDS_BUCKETS]),
                          st.floats(0, 1e6, allow_nan=False)), max_size=80),
       st.sampled_from([1.0, 1000.0]))
def test_a_batch_observed_at_once_counts_as_each_value_observed_alone(values, divisor):
    at_once, alone = Histogram(STAGE_SECONDS_BUCKETS), Histogram(STAGE_SECONDS_BUCKETS)
    at_once.observe_all(values, divisor)
    for value in values:
        alone.observe(value / divisor)
    assert at_once.counts == alone.counts  # bounds included: a value on a bound lands in its bucket either way
    assert at_once.sum == pytest.approx(alone.sum, rel=1e-9)


@pytest.mark.parametrize("bounds", [(2.0, 1.0), (1.0, 1.0)])
def test_bounds_must_increase(bounds):
    with pytest.raises(ValueError, match="strictly increasing"):
        Histogram(bounds)


def test_batch_size_buckets_are_powers_of_two_up_to_1024():
    assert BATCH_SIZE_BUCKETS == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def test_a_batch_is_observed_by_size_unless_nothing_of_it_was_answered():
    stats = WorkerStats()
    stats.record_batch(3, 0.01)
    stats.record_batch(64, 0.02)
    stats.record_batch(0, 0.01)  # every request left with its partition
    assert stats.batch_size.cumulative()[0][:7] == [0, 0, 1, 1, 1, 1, 2]
    assert stats.batch_size.sum == 67
    assert stats.batches == 3  # the old counters are unchanged


def test_stage_timings_are_recorded_in_seconds():
    stats = WorkerStats()
    stats.record_stages([2000.0], [4.0], 0.5)
    assert {stage: h.sum for stage, h in stats.stage_seconds.items()} == {
        "queue_wait": 2.0, "batch_wait": 0.004, "compute": 0.0005}
    assert stats.stage_seconds["compute"].counts[0] == 1  # 0.5 ms <= the 1 ms bucket


def test_each_new_generation_joined_is_a_rebalance_and_leaving_is_not():
    stats = WorkerStats()
    seen = []
    for generation in (-1, 1, 1, 2, -1, -1, 3, 3):
        stats.record_generation(generation)
        seen.append((stats.generation, stats.rebalances))
    assert seen == [(-1, 0), (1, 1), (1, 1), (2, 2), (-1, 2), (-1, 2), (3, 3), (3, 3)]


@pytest.mark.parametrize("dedup_outage, registry_outage, backlog, paused", [
    (False, False, False, False), (True, False, False, True), (False, True, False, True), (False, False, True, True),
    (True, True, True, True)])
def test_pause_reasons_are_kept_apart_and_any_one_pauses(dedup_outage, registry_outage, backlog, paused):
    stats = WorkerStats()
    assert stats.record_pause(dedup_outage=dedup_outage, registry_outage=registry_outage, backlog=backlog) is paused
    assert stats.paused == {"dedup_outage": dedup_outage, "registry_outage": registry_outage, "backlog": backlog}
