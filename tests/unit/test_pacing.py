"""A backfill's pacing: the rate limit, and yielding to live traffic (fake clock, fake source)."""

import pytest

from tests.component.fakes import FakeSource
from tests.fakes import FakeClock
from worker.core.pacing import LiveFirst, RatePacer
from worker.jobs.paced_source import PacedSource


def test_the_pacer_allows_a_second_worth_then_the_rate():
    clock = FakeClock()
    pacer = RatePacer(100, clock)
    assert pacer.allowance() == 100
    pacer.took(100)
    assert pacer.allowance() == 0 and pacer.wait_s() == pytest.approx(0.01)
    clock.advance(0.25)
    assert pacer.allowance() == 25
    clock.advance(10)
    assert pacer.allowance() == 100  # never more than a second's worth at once


def test_an_overdrawn_pacer_waits_until_it_is_paid_back():
    clock = FakeClock()
    pacer = RatePacer(10, clock)
    pacer.took(30)  # a poll returned more than allowed
    assert pacer.allowance() == 0 and pacer.wait_s() == pytest.approx(2.1)
    clock.advance(2.1)
    assert pacer.allowance() == 1


def test_no_rate_means_no_limit():
    pacer = RatePacer(0, FakeClock())
    pacer.took(10**9)
    assert pacer.allowance() is None and pacer.wait_s() == 0


def test_live_first_holds_above_the_threshold_and_goes_on_at_half_of_it():
    clock = FakeClock()
    live = LiveFirst(1000, 5, clock)
    assert live.due()
    assert not live.observe(900) and not live.holding
    assert not live.due()
    clock.advance(5)
    assert live.observe(1500) and live.holding
    assert not live.observe(700) and live.holding  # still above half: no flapping
    assert live.observe(500) and not live.holding
    assert live.observe(2000) and live.holding
    assert live.observe(None) and not live.holding  # no live commits to read: never hold for nothing


class Lag:
    def __init__(self, value):
        self.value, self.closed = value, False

    def __call__(self):
        return self.value

    def close(self):
        self.closed = True


def paced(rate=0, max_lag=0, lag=None):
    clock = FakeClock()
    inner = FakeSource(clock)
    for n in range(1000):
        inner.produce({"id": f"r{n}", "inputs": [0.0]}, partition=0)
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock.advance(seconds)

    live = LiveFirst(max_lag, 1, clock) if max_lag else None
    source = PacedSource(inner, RatePacer(rate, clock), live, lag if max_lag else None, sleep=sleep)
    return source, inner, clock, slept


def test_a_paced_source_gives_no_more_than_the_rate():
    source, _, clock, slept = paced(rate=50)
    got = []
    for _ in range(20):
        got += source.poll(0.5, 500)
        clock.advance(0.1)
    # 2.0 s of polling plus what was slept: a second's burst, then 50 a second
    assert len(got) <= 50 + 50 * (2.0 + sum(slept)) + 1
    assert len(got) >= 50 * (2.0 + sum(slept)) - 1
    assert [r.position.offset for r in got] == list(range(len(got)))  # in order, nothing skipped


def test_a_paced_source_holds_while_live_lags_and_keeps_the_loops_own_pause():
    lag = Lag(5000)
    source, inner, clock, _ = paced(max_lag=1000, lag=lag)
    assert source.poll(0.1, 100) == [] and inner.paused
    source.pause(False)  # the loop's own resume does not end the hold
    assert inner.paused
    lag.value = 400
    clock.advance(1)
    assert len(source.poll(0.1, 100)) == 100 and not inner.paused
    source.pause(True)  # the loop's own pause still pauses
    assert inner.paused
    source.close()
    assert lag.closed and inner.closed
