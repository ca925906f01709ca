"""The stop request and the one deadline of a shutdown; the count of what a stop leaves unfinished."""

import pytest

from tests.fakes import FakeClock
from worker.core.offsets import OffsetTracker
from worker.core.shutdown import Deadline, StopRequest


def test_a_stop_remembers_when_it_was_first_asked_for():
    clock = FakeClock()
    stop = StopRequest(clock)
    assert not stop.is_set() and stop.requested_at is None
    stop.set()
    asked_at = clock.monotonic()
    clock.advance(5)
    stop.set()  # a second SIGTERM does not move the deadline
    assert stop.is_set() and stop.requested_at == asked_at


@pytest.mark.parametrize("elapsed, left, passed, capped", [
    (0.0, 2.0, False, 1.0),
    (1.5, 0.5, False, 0.5),
    (2.0, 0.0, True, 0.0),
    (7.0, 0.0, True, 0.0),
])
def test_every_wait_gets_at_most_the_time_left(elapsed, left, passed, capped):
    clock = FakeClock()
    deadline = Deadline.after(clock, 2.0)
    clock.advance(elapsed)
    assert deadline.left() == pytest.approx(left)
    assert deadline.passed is passed
    assert deadline.cap(1.0) == pytest.approx(capped)


def test_a_deadline_counts_from_the_start_given():
    clock = FakeClock()
    asked_at = clock.monotonic()
    clock.advance(1.5)
    deadline = Deadline.after(clock, 2.0, start=asked_at)
    assert deadline.left() == pytest.approx(0.5)
    assert deadline.earlier(0.5).passed and deadline.earlier(0.25).left() == pytest.approx(0.25)


def test_unacknowledged_counts_what_a_stop_would_leave():
    offsets = OffsetTracker()
    for offset in range(5):
        offsets.track(("t", 0), offset)
    offsets.track(("t", 1), 7)
    assert offsets.unacknowledged() == 6
    for offset in (0, 1, 3):
        offsets.ack(("t", 0), offset)
    assert offsets.unacknowledged() == 3  # 2 and 4 of partition 0, and 7 of partition 1
    offsets.forget([("t", 1)])  # revoked: its new owner answers it
    assert offsets.unacknowledged() == 2
