"""The stop and its one deadline: when a stop was asked for, and how long every wait after it may take.

Kubernetes kills a pod ``terminationGracePeriodSeconds`` after SIGTERM, however
far its drain got. So the drain has one budget, fixed once when the stop is
asked for and shared by every wait that follows (the batch in hand, the
broker's acknowledgements, the commit, the close): each wait takes at most
the time left, never a fixed timeout of its own. Time comes from the injected
clock only.
"""

from __future__ import annotations

from worker.core.clock import Clock


class StopRequest:
    """A stop asked for once, and the monotonic time of the first ask.

    ``set`` is safe from a signal handler and from any thread: it stores a
    float and a flag, takes no lock and never blocks.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.requested_at: float | None = None
        self.signal: str | None = None  # the name of the signal that asked, if one did

    def set(self, signal: str | None = None) -> None:
        if self.requested_at is None:
            self.requested_at = self._clock.monotonic()
            self.signal = signal

    def is_set(self) -> bool:
        return self.requested_at is not None


class Deadline:
    """A point on the monotonic clock; every wait of one shutdown asks it how long it may take."""

    def __init__(self, clock: Clock, at: float) -> None:
        self._clock = clock
        self.at = at

    @classmethod
    def after(cls, clock: Clock, seconds: float, start: float | None = None) -> Deadline:
        """``seconds`` after ``start`` (default: now)."""
        return cls(clock, (clock.monotonic() if start is None else start) + seconds)

    def left(self) -> float:
        """Seconds until the deadline; 0.0 once it has passed."""
        return max(0.0, self.at - self._clock.monotonic())

    @property
    def passed(self) -> bool:
        return self._clock.monotonic() >= self.at

    def cap(self, seconds: float) -> float:
        """``seconds``, or the time left if that is less."""
        return min(seconds, self.left())

    def earlier(self, seconds: float) -> Deadline:
        """The same deadline, ``seconds`` sooner (to keep a share of the budget for what comes last)."""
        return Deadline(self._clock, self.at - seconds)
