"""Test doubles shared by every test suite; the component suite's fakes of the ports are in tests/component/fakes.py."""

from __future__ import annotations


class FakeClock:
    """A Clock (worker/core/clock.py) that moves only when told to."""

    def __init__(self, start: float = 1000.0, wall_ms: int = 1_700_000_000_000) -> None:
        self._now = start
        self._wall_offset_ms = wall_ms - int(start * 1000)

    def monotonic(self) -> float:
        return self._now

    def wall_ms(self) -> int:
        return int(self._now * 1000) + self._wall_offset_ms

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        self._now += seconds


def routes_of(prepare, model: str = "churn", version: str = "test"):
    """Routes (worker/core/routes.py) that send every request to one model preparing its inputs with ``prepare``."""
    from worker.core.routes import Route, Routes

    return Routes.single(Route(model, model, version, prepare))
