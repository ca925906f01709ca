"""Time as a dependency: the pure core never reads the clock itself (tests use tests/fakes.py's FakeClock)."""

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

