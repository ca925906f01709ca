"""GroupLag (worker/kafka/group_lag.py): another group's lag summed over a stand-in PartitionReader."""

from __future__ import annotations

from structlog.testing import capture_logs

from worker.kafka.group_lag import GroupLag


class Refused(Exception):
    """What the stand-in client raises."""


class Reader:
    """The PartitionReader calls GroupLag makes, over fixed commits and ends."""

    def __init__(self, committed: dict[int, int], ends: dict[int, int], fail: bool = False) -> None:
        self._committed, self._ends, self.fail, self.closed = committed, ends, fail, False

    def partitions(self, wait_s: float) -> list[int]:
        return sorted(self._ends)

    def committed(self, partitions):
        if self.fail:
            raise Refused("coordinator away")
        return {tp: (self._committed[tp[1]], None) for tp in partitions if tp[1] in self._committed}

    def lookups(self, partitions, from_ms, until_ms):
        return {tp: (0, None, self._ends[tp[1]]) for tp in partitions}

    def close(self, timeout_s: float) -> None:
        self.closed = True


def lag_of(reader: Reader) -> GroupLag:
    return GroupLag(reader, "requests", "live", (Refused,))  # type: ignore[arg-type]


def test_the_lag_sums_the_committed_partitions_and_never_goes_below_zero():
    reader = Reader(committed={0: 10, 1: 50, 2: 7}, ends={0: 100, 1: 40, 2: 7, 3: 999})
    assert lag_of(reader)() == 90  # partition 3 never committed: left out; partition 1 past its end: 0
    lag = lag_of(reader)
    lag.close()
    assert reader.closed


def test_a_group_that_committed_nothing_has_no_lag_to_tell():
    assert lag_of(Reader(committed={}, ends={0: 100}))() is None


def test_a_refused_read_says_the_lag_is_unknown_and_logs_why():
    with capture_logs() as logs:
        assert lag_of(Reader(committed={0: 1}, ends={0: 100}, fail=True))() is None
    (warning,) = [e for e in logs if e["event"] == "live_lag_unknown"]
    assert warning["group"] == "live" and "coordinator away" in warning["error"]
