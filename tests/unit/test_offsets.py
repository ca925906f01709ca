import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.offsets import OffsetTracker

TP = ("requests", 0)


def test_commits_only_the_contiguous_acknowledged_prefix():
    tracker = OffsetTracker()
    for offset in (10, 11, 12, 13):
        tracker.track(TP, offset)
    assert tracker.committable() == {}  # the group is at 10 already
    tracker.ack(TP, 11)
    tracker.ack(TP, 13)
    assert tracker.committable() == {}  # 10 is still out
    tracker.ack(TP, 10)
    assert tracker.committable() == {TP: 12}
    tracker.ack(TP, 12)
    assert tracker.committable() == {TP: 14}


def test_committed_offsets_are_not_reported_again():
    tracker = OffsetTracker()
    tracker.track(TP, 0)
    tracker.ack(TP, 0)
    tracker.mark_committed(tracker.committable())
    assert tracker.committable() == {}
    tracker.track(TP, 1)
    assert tracker.committable() == {}  # 1 is not acknowledged: nothing new to commit
    tracker.ack(TP, 1)
    assert tracker.committable() == {TP: 2}


def test_gaps_in_offsets_are_fine():  # compacted topics and transaction markers leave gaps
    tracker = OffsetTracker()
    tracker.track(TP, 5)
    tracker.track(TP, 9)
    tracker.ack(TP, 5)
    tracker.ack(TP, 9)
    assert tracker.committable() == {TP: 10}


def test_forget_drops_partition_and_ignores_late_acks():
    tracker = OffsetTracker()
    tracker.track(TP, 0)
    tracker.forget([TP])
    tracker.ack(TP, 0)
    assert tracker.committable() == {}
    assert tracker.partitions() == []


def test_offsets_must_increase():
    tracker = OffsetTracker()
    tracker.track(TP, 3)
    with pytest.raises(ValueError, match="tracked after"):
        tracker.track(TP, 3)


@given(st.lists(st.booleans(), min_size=1, max_size=80), st.randoms())
def test_watermark_never_decreases_and_never_passes_an_unacknowledged_offset(acked_flags, rnd):
    tracker = OffsetTracker()
    offsets = list(range(len(acked_flags)))
    for offset in offsets:
        tracker.track(TP, offset)
    to_ack = [o for o, flag in zip(offsets, acked_flags, strict=True) if flag]
    rnd.shuffle(to_ack)
    last = 0
    for offset in to_ack:
        tracker.ack(TP, offset)
        mark = tracker.committable().get(TP, last)
        assert mark >= last
        acked_so_far = set(to_ack[: to_ack.index(offset) + 1])
        assert all(o in acked_so_far for o in range(mark))
        last = mark
