"""Time as a dependency: the pure core never reads the clock itself."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""

    def wall_ms(self) -> int:
        """Unix time in milliseconds (comparable with Kafka timestamps)."""


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that moves only when told to; for tests."""

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
