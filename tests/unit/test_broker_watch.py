"""The broker watch: when the brokers last answered, for readiness, and a silence said once, then its end."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.fakes import FakeClock
from worker.core.errors import ServiceUnavailable
from worker.core.stats import WorkerStats
from worker.kafka.broker_watch import BrokerWatch


class Unanswered(Exception):
    pass


class Admin:
    """An admin client (fence_watch.Brokers) whose request for the brokers is answered while ``up``."""

    ERRORS = (Unanswered,)

    def __init__(self) -> None:
        self.up = True
        self.asked = 0
        self.closed = False

    def brokers(self) -> dict[int, str]:
        self.asked += 1
        if not self.up:
            raise Unanswered("timed out")
        return {1: "127.0.0.1:9092"}

    def close(self) -> None:
        self.closed = True


def watch_of(admin: Admin, clock: FakeClock, stats: WorkerStats, unreachable_builds: int = 0) -> BrokerWatch:
    builds = iter([*[ServiceUnavailable("no broker answered")] * unreachable_builds, admin])

    def build() -> Admin:
        built = next(builds)
        if isinstance(built, Exception):
            raise built
        return built

    return BrokerWatch(build, stats, clock, away_after_s=60.0)


def test_each_answer_is_noted_and_a_silence_is_logged_once_past_the_timeout_then_its_end():
    admin, clock, stats = Admin(), FakeClock(), WorkerStats()
    watch = watch_of(admin, clock, stats)
    with capture_logs() as logs:
        assert watch.look() and stats.brokers_answered_at == 1000.0
        admin.up = False
        for _ in range(4):
            clock.advance(20.0)
            assert not watch.look()
        assert stats.brokers_answered_at == 1000.0
        admin.up = True
        clock.advance(5.0)
        assert watch.look() and stats.brokers_answered_at == 1085.0
    assert [(entry["event"], entry.get("silent_s")) for entry in logs] == [
        ("brokers_not_answering", 60.0), ("brokers_answering", None)]


def test_an_admin_that_cannot_be_built_yet_is_built_again_at_the_next_look():
    admin, clock, stats = Admin(), FakeClock(), WorkerStats()
    watch = watch_of(admin, clock, stats, unreachable_builds=2)
    assert not watch.look() and not watch.look()
    assert watch.look() and admin.asked == 1


def test_started_the_brokers_count_as_answered_now_and_closed_the_admin_is_let_go():
    admin, clock, stats = Admin(), FakeClock(start=50.0), WorkerStats()
    watch = BrokerWatch(lambda: admin, stats, clock, away_after_s=60.0, every_s=0.01)
    watch.start()
    assert stats.brokers_answered_at == 50.0
    watch.close()
    assert not watch._thread.is_alive() and admin.closed and admin.asked >= 1


@pytest.mark.parametrize("error", [ServiceUnavailable("away"), Unanswered("away")])
def test_a_look_that_gets_no_answer_changes_nothing(error):
    admin, clock, stats = Admin(), FakeClock(), WorkerStats()
    admin.up = not isinstance(error, Unanswered)
    watch = watch_of(admin, clock, stats, unreachable_builds=int(isinstance(error, ServiceUnavailable)))
    assert not watch.look() and stats.brokers_answered_at is None
