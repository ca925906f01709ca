"""How fast a backfill may read, and when it steps aside for live traffic. Pure: the clock is passed in.

``RatePacer`` is a token bucket (``--max-rate`` records per second, bursts
up to one second's worth). ``LiveFirst`` decides, from the live group's lag
read every ``check_interval_s``, whether the backfill holds: it starts
holding once the lag is above the threshold and goes on only once the lag
fell to half of it, so that it does not flap around the threshold.
"""

from __future__ import annotations

from worker.core.clock import Clock


class RatePacer:
    """At most ``rate`` records per second on average; ``rate`` 0 means no limit."""

    def __init__(self, rate: float, clock: Clock) -> None:
        if rate < 0:
            raise ValueError(f"rate must be >= 0, got {rate}")
        self._rate = rate
        self._clock = clock
        self._capacity = max(rate, 1.0)
        self._tokens = self._capacity
        self._at = clock.monotonic()

    def allowance(self) -> int | None:
        """How many records may be read now; None when unlimited."""
        if not self._rate:
            return None
        now = self._clock.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._rate)
        self._at = now
        return max(0, int(self._tokens))

    def took(self, records: int) -> None:
        """``records`` were read (they may overdraw the bucket: the next reads wait for it to refill)."""
        if self._rate:
            self._tokens -= records

    def wait_s(self) -> float:
        """Seconds until one more record may be read (0 when one may now)."""
        if not self._rate:
            return 0.0
        allowed = self.allowance()
        return 0.0 if allowed else (1 - self._tokens) / self._rate


class LiveFirst:
    """Hold a backfill while the live group lags by more than ``max_lag`` records."""

    def __init__(self, max_lag: int, check_interval_s: float, clock: Clock) -> None:
        if max_lag < 1 or check_interval_s <= 0:
            raise ValueError(f"need max_lag >= 1 and check_interval_s > 0, got {max_lag} and {check_interval_s}")
        self._max_lag = max_lag
        self._interval_s = check_interval_s
        self._clock = clock
        self._next_check = clock.monotonic()
        self.holding = False
        self.last_lag: int | None = None

    def due(self) -> bool:
        """Time to read the live group's lag again."""
        return self._clock.monotonic() >= self._next_check

    def observe(self, lag: int | None) -> bool:
        """Take a reading (None: the live group has no commits to read); returns whether ``holding`` changed."""
        self._next_check = self._clock.monotonic() + self._interval_s
        self.last_lag = lag
        before = self.holding
        if lag is None:
            self.holding = False
        elif self.holding:
            self.holding = lag > self._max_lag // 2
        else:
            self.holding = lag > self._max_lag
        return self.holding != before
