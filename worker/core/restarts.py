"""When the supervisor restarts a child that died, and when it gives up. Pure: times are passed in.

A child that exits on its own is started again after a backoff that doubles
with each exit (1 s, 2 s, 4 s ... at most 30 s) and starts over once a child
has run for 60 s (it was healthy; this is a new incident). A failure within
10 s of its start is a fast failure: 5 in a row mean the child cannot start
(a bad setting, a broken model, a service that is not coming back), and
restarting it for ever would only hide that, so the supervisor gives up.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartLimits:
    first_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    healthy_after_s: float = 60.0  # a child that ran this long starts its backoff over
    fast_failure_s: float = 10.0  # an exit this soon after the start is a fast failure
    max_fast_failures: int = 5  # this many fast failures in a row: give up


DEFAULT_LIMITS = RestartLimits()


@dataclass(frozen=True)
class Restart:
    at: float  # when to start the child again (same clock as the times passed in)
    delay_s: float


@dataclass(frozen=True)
class GiveUp:
    fast_failures: int


class RestartPolicy:
    """The decisions for one child slot, one exit at a time. Not thread-safe."""

    def __init__(self, limits: RestartLimits = DEFAULT_LIMITS) -> None:
        self._limits = limits
        self._backoff_s = limits.first_backoff_s
        self._fast_failures = 0

    def on_exit(self, started_at: float, exited_at: float) -> Restart | GiveUp:
        """The child started at ``started_at`` exited at ``exited_at``: restart it when, or give up."""
        limits = self._limits
        ran_s = exited_at - started_at
        if ran_s >= limits.healthy_after_s:
            self._backoff_s = limits.first_backoff_s
        self._fast_failures = self._fast_failures + 1 if ran_s < limits.fast_failure_s else 0
        if self._fast_failures >= limits.max_fast_failures:
            return GiveUp(self._fast_failures)
        delay_s = self._backoff_s
        self._backoff_s = min(self._backoff_s * 2, limits.max_backoff_s)
        return Restart(exited_at + delay_s, delay_s)
