"""The restart policy of --processes: capped exponential backoff, and giving up after repeated fast failures."""

import signal

import pytest

from worker.core.restarts import DEFAULT_LIMITS, GiveUp, Restart, RestartLimits, RestartPolicy
from worker.supervisor import EXIT_GAVE_UP, Supervisor


def decisions(runs: list[tuple[float, float]], limits: RestartLimits = DEFAULT_LIMITS) -> list[Restart | GiveUp]:
    """Feed (started_at, exited_at) pairs to one policy."""
    policy = RestartPolicy(limits)
    return [policy.on_exit(started, exited) for started, exited in runs]


def delays(runs: list[tuple[float, float]]) -> list[float | str]:
    return [d.delay_s if isinstance(d, Restart) else "give up" for d in decisions(runs)]


@pytest.mark.parametrize("runs, expected", [
    # each ran 20 s (not a fast failure): 1 s doubling, capped at 30 s
    ([(0, 20)] * 7, [1, 2, 4, 8, 16, 30, 30]),
    # four fast failures in a row: restarted; the fifth: give up
    ([(0, 1)] * 5, [1, 2, 4, 8, "give up"]),
    # a slow failure in between resets the count of fast ones, not the backoff
    ([(0, 1)] * 4 + [(0, 20)] + [(0, 1)] * 4, [1, 2, 4, 8, 16, 30, 30, 30, 30]),
    # a child that ran for 60 s was healthy: its backoff starts over
    ([(0, 20)] * 4 + [(0, 60), (0, 20)], [1, 2, 4, 8, 1, 2]),
    # exactly 10 s is not fast
    ([(0, 10)] * 6, [1, 2, 4, 8, 16, 30]),
])
def test_restart_delays(runs, expected):
    assert delays(runs) == expected


def test_a_restart_is_due_its_delay_after_the_exit():
    (decision,) = decisions([(100.0, 150.0)])
    assert decision == Restart(at=151.0, delay_s=1.0)


def test_the_limits_are_settings_of_the_policy():
    limits = RestartLimits(first_backoff_s=0.1, max_backoff_s=0.3, fast_failure_s=2, max_fast_failures=3)
    assert [d.delay_s if isinstance(d, Restart) else "give up"
            for d in decisions([(0, 1)] * 3, limits)] == [0.1, 0.2, "give up"]


class FakeProcess:
    """Exits with ``code`` once the fake clock reaches ``exit_at`` (never when None), or when signalled."""

    def __init__(self, clock: "FakeTime", pid: int, code: int, exit_at: float | None) -> None:
        self.clock, self.pid, self.code, self.exit_at = clock, pid, code, exit_at
        self.signals: list[int] = []

    def poll(self) -> int | None:
        if self.signals:
            return 0
        return self.code if self.exit_at is not None and self.clock.now >= self.exit_at else None

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def supervisor_with(lifetimes: dict[str, list[float | None]], limits: RestartLimits = DEFAULT_LIMITS):
    """Children named by their command; each start takes the next lifetime of its list (None: runs until
    signalled). Returns the supervisor, its time and every process started, in order."""
    time = FakeTime()
    started: list[tuple[str, float, FakeProcess]] = []

    def spawn(command: list[str]) -> FakeProcess:
        name = command[0]
        lifetime = lifetimes[name].pop(0) if len(lifetimes[name]) > 1 else lifetimes[name][0]
        process = FakeProcess(time, len(started) + 1, 1, None if lifetime is None else time.now + lifetime)
        started.append((name, time.now, process))
        return process

    supervisor = Supervisor([["a"], ["b"]], limits, spawn=spawn, clock=lambda: time.now, sleep=time.sleep,
                            poll_s=0.25)  # exact in binary: the times below add up exactly
    return supervisor, time, started


def test_a_child_that_dies_is_restarted_after_its_backoff_and_the_others_keep_running():
    supervisor, time, started = supervisor_with({"a": [3.0, None], "b": [None]})
    original_sleep = time.sleep

    def sleep(seconds: float) -> None:
        original_sleep(seconds)
        if time.now >= 20:
            supervisor.stop(signal.SIGTERM)

    supervisor._sleep = sleep
    assert supervisor.run() == 0
    assert [(name, round(at, 1)) for name, at, _ in started] == [("a", 0.0), ("b", 0.0), ("a", 4.0)]
    assert started[0][2].signals == []  # it died on its own
    assert started[1][2].signals == [signal.SIGTERM] and started[2][2].signals == [signal.SIGTERM]


def test_repeated_fast_failures_make_the_supervisor_give_up_and_stop_the_others():
    supervisor, time, started = supervisor_with({"a": [0.5], "b": [None]})
    assert supervisor.run() == EXIT_GAVE_UP
    a_starts = [round(at, 1) for name, at, _ in started if name == "a"]
    assert a_starts == [0.0, 1.5, 4.0, 8.5, 17.0]  # backoffs of 1, 2, 4, 8 s after each 0.5 s life
    assert supervisor.gave_up
    (b,) = [process for name, _, process in started if name == "b"]
    assert b.signals == [signal.SIGTERM]
    assert time.now < 20


def test_a_stop_during_a_backoff_starts_nothing_more():
    supervisor, time, started = supervisor_with({"a": [1.0], "b": [None]})
    original_sleep = time.sleep

    def sleep(seconds: float) -> None:
        original_sleep(seconds)
        if time.now >= 1.5:  # a died at 1.0, is due again at 2.0
            supervisor.stop(signal.SIGINT)

    supervisor._sleep = sleep
    assert supervisor.run() == 1  # a's last exit code
    assert [name for name, _, _ in started] == ["a", "b"]
    assert started[1][2].signals == [signal.SIGINT]
