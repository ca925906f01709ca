import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.messages import Position
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


def test_offsets_of_a_run_must_increase_too():
    tracker = OffsetTracker()
    tracker.track_all([Position("requests", 0, 3)])
    for run in ([Position("requests", 0, 3)], [Position("requests", 0, 5), Position("requests", 0, 4)]):
        with pytest.raises(ValueError, match="must increase"):
            tracker.track_all(run)
    with pytest.raises(ValueError, match="must increase"):  # another partition's run is refused with it
        tracker.track_all([Position("requests", 1, 0), Position("requests", 0, 4), Position("requests", 0, 4)])
    assert tracker.committable() == {} and tracker.partitions() == [TP]  # refused runs track nothing: 3 is out
    tracker.ack(TP, 3)
    assert tracker.committable() == {TP: 4}


class ByRecord:
    """The tracker's contract, a record at a time: what the runs must keep."""

    def __init__(self) -> None:
        self.tracked: dict[tuple[str, int], list[int]] = {}
        self.acked: dict[tuple[str, int], set[int]] = {}
        self.committed: dict[tuple[str, int], int] = {}

    def track(self, tp, offset):
        self.committed.setdefault(tp, offset)
        self.tracked.setdefault(tp, []).append(offset)
        self.acked.setdefault(tp, set())

    def ack(self, tp, offset):
        if tp in self.tracked:
            self.acked[tp].add(offset)

    def committable(self):
        result = {}
        for tp, offsets in self.tracked.items():
            mark = next((o for o in offsets if o not in self.acked[tp]), offsets[-1] + 1)
            if mark > self.committed[tp]:
                result[tp] = mark
        return result

    def mark_committed(self, offsets):
        for tp, offset in offsets.items():
            if tp in self.committed:
                self.committed[tp] = max(self.committed[tp], offset)

    def forget(self, tp):
        for table in (self.tracked, self.acked, self.committed):
            table.pop(tp, None)

    def unacknowledged(self):
        return sum(1 for tp, offsets in self.tracked.items() for o in offsets if o not in self.acked[tp])


PARTITIONS = [("requests", 0), ("requests", 1), ("other", 0)]


@st.composite
def steps(draw):
    """Polls of records in runs of a partition (offsets increasing, with gaps), acks of any tracked in any order
    and groups (a duplicate acked twice, an offset never tracked), commits, and a partition lost."""
    next_offset = {tp: draw(st.integers(0, 5)) for tp in PARTITIONS}
    tracked: list[Position] = []
    plan = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["poll", "ack", "ack", "commit", "forget"]))
        if kind == "poll":
            poll = []
            for _ in range(draw(st.integers(1, 4))):
                tp = draw(st.sampled_from(PARTITIONS))
                for _ in range(draw(st.integers(1, 6))):
                    next_offset[tp] += draw(st.sampled_from([1, 1, 1, 2, 5]))
                    poll.append(Position(tp[0], tp[1], next_offset[tp] - 1))
            tracked += poll
            plan.append(("poll", poll))
        elif kind == "ack" and tracked:
            acks = draw(st.lists(st.sampled_from(tracked), max_size=10))
            if draw(st.booleans()):
                acks.append(Position("requests", 0, 10_000))  # never tracked
            plan.append(("ack", sorted(acks) if draw(st.booleans()) else acks))
        elif kind == "forget":
            tp = draw(st.sampled_from(PARTITIONS))
            plan.append(("forget", tp))
            tracked = [p for p in tracked if (p.topic, p.partition) != tp]
        else:
            plan.append(("commit", draw(st.booleans())))
    return plan


@given(steps())
def test_runs_keep_the_contract_of_a_record_at_a_time(plan):
    tracker, reference = OffsetTracker(), ByRecord()
    for kind, arg in plan:
        if kind == "poll":
            tracker.track_all(iter(arg))
            for p in arg:
                reference.track((p.topic, p.partition), p.offset)
        elif kind == "ack":
            tracker.ack_all(arg)
            for p in arg:
                reference.ack((p.topic, p.partition), p.offset)
        elif kind == "forget":
            tracker.forget([arg])
            reference.forget(arg)
        else:
            offsets = tracker.committable()
            assert offsets == reference.committable()
            if arg:
                tracker.mark_committed(offsets)
                reference.mark_committed(offsets)
        assert sorted(tracker.partitions()) == sorted(reference.tracked)
    assert tracker.committable() == reference.committable()
    assert tracker.unacknowledged() == reference.unacknowledged()
