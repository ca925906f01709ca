"""The loop's upkeep says why no partitions come while the worker waits to join its group, or owns none."""

from structlog.testing import capture_logs

from tests.fakes import FakeClock
from worker.core.sections import KafkaSettings, OperationsSettings
from worker.core.stats import WorkerStats
from worker.stream.upkeep import JOIN_REMINDER_S, JOIN_WARNING_S, Upkeep


class NoLag:
    def __init__(self) -> None:
        self.owned: set[tuple[str, int]] = set()

    def lag(self) -> dict:
        return {}

    def undecodable(self) -> dict:
        return {}

    def skipped(self) -> int:
        return 0

    def assigned(self) -> set[tuple[str, int]]:
        return self.owned


def upkeep_of(stats: WorkerStats, clock: FakeClock, source: NoLag | None = None) -> Upkeep:
    return Upkeep(source or NoLag(), stats, clock, KafkaSettings(session_timeout_ms=45_000),  # type: ignore[arg-type]
                  OperationsSettings())


def warnings_over(upkeep: Upkeep, clock: FakeClock, seconds: float, step_s: float = 0.5,
                  event: str = "still_joining_group") -> list[dict]:
    with capture_logs() as logs:
        for _ in range(int(seconds / step_s)):
            clock.advance(step_s)
            upkeep.after_step()
    return [entry for entry in logs if entry["event"] == event]


def test_a_long_join_is_said_once_then_reminded_and_names_the_session_timeout():
    clock, stats = FakeClock(), WorkerStats()
    upkeep = upkeep_of(stats, clock)
    assert warnings_over(upkeep, clock, JOIN_WARNING_S - 1) == []
    said = warnings_over(upkeep, clock, 2)
    assert len(said) == 1 and said[0]["session_timeout_ms"] == 45_000 and said[0]["waited_s"] >= JOIN_WARNING_S
    assert "kill -9" in said[0]["advice"]
    assert len(warnings_over(upkeep, clock, JOIN_REMINDER_S)) == 1


def test_a_member_is_not_warned_and_a_member_dropped_later_is_counted_from_then():
    clock, stats = FakeClock(), WorkerStats()
    source = NoLag()
    source.owned = {("requests", 0)}
    upkeep = upkeep_of(stats, clock, source)
    stats.record_generation(3)
    assert warnings_over(upkeep, clock, 60) == []
    stats.record_generation(-1)  # the group dropped it
    assert warnings_over(upkeep, clock, JOIN_WARNING_S - 1) == []
    assert len(warnings_over(upkeep, clock, 2)) == 1


def test_a_member_owning_no_partition_is_said_once_then_reminded_and_not_once_it_owns_one():
    """More members than partitions, or under KIP-848 a member gone without leaving: a member, consuming nothing."""
    clock, stats, source = FakeClock(), WorkerStats(), NoLag()
    upkeep = upkeep_of(stats, clock, source)
    stats.record_generation(2)
    assert warnings_over(upkeep, clock, JOIN_WARNING_S - 1, event="owning_no_partitions") == []
    said = warnings_over(upkeep, clock, 3, event="owning_no_partitions")
    assert len(said) == 1 and said[0]["waited_s"] >= JOIN_WARNING_S and "session times out" in said[0]["advice"]
    assert len(warnings_over(upkeep, clock, JOIN_REMINDER_S, event="owning_no_partitions")) == 1
    source.owned = {("requests", 3)}
    assert warnings_over(upkeep, clock, 60, event="owning_no_partitions") == []
    assert warnings_over(upkeep, clock, 60) == []  # a member: not joining either
