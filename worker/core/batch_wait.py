"""How long a batch waits for more requests: a fixed wait, or while waiting pays, within a latency target. Pure.

``FixedWait`` is ``--max-wait-ms``: the oldest pending request waits at most
that long after it was polled. ``LatencyTarget`` is ``--latency-target-ms``, a
target for a request's queue wait + batch wait + compute, measured from its
record's Kafka timestamp. It learns what a batch of n requests costs
(``BatchCost``, a line a + b·n fitted online to the batches scored) and how
fast requests arrive (``ArrivalRate``), and waits for the next request only
while that pays: while the wait it adds to the n requests in hand, n times
the expected gap to the next arrival, is less than a, what one batch fewer
saves; never past the point where the oldest request's target would no
longer hold with the next batch's predicted compute after it. Both are upper
bounds: the loop adds the opportunistic half, a batch goes as soon as the
model is idle and a poll finds nothing more arriving (stream/loop.py).
``wait_to_fill`` turns off both early sends: a batch then waits all the wait
allows. Neither ever drops a request: only a request's own ``deadline_ms``
makes it expired.
"""

from __future__ import annotations

import math
from typing import Protocol

from worker.core.messages import Request


class BatchWait(Protocol):
    def arrival(self, request: Request, now: float, wall_ms: int) -> float:
        """The monotonic time the request's wait counts from, given the time ``now`` and the wall clock."""
    def wait_s(self, batch_len: int) -> float:
        """How long after its arrival the oldest pending request may wait, the next batch being this long."""
    def observe(self, batch_len: int, compute_s: float) -> None:
        """A batch of ``batch_len`` requests took ``compute_s`` to score."""


class FixedWait:
    def __init__(self, max_wait_s: float) -> None:
        self.max_wait_s = max_wait_s

    def arrival(self, request: Request, now: float, wall_ms: int) -> float:
        return request.received_at

    def wait_s(self, batch_len: int) -> float:
        return self.max_wait_s

    def observe(self, batch_len: int, compute_s: float) -> None:
        pass


class BatchCost:
    """Compute seconds of a batch as a + b·n, fitted by least squares over recent batches, each weighted
    ``decay`` times the one after it (so the fit follows a model that warms up or a machine that gets busy).
    Until two batch sizes have been seen, the cost is ``per_item_s`` an item."""

    def __init__(self, decay: float = 0.97, per_item_s: float = 0.0) -> None:
        self._decay = decay
        self._per_item_s = per_item_s
        self._w = self._n = self._y = self._nn = self._ny = 0.0

    def observe(self, batch_len: int, compute_s: float) -> None:
        d = self._decay
        n = float(batch_len)
        self._w = d * self._w + 1
        self._n = d * self._n + n
        self._y = d * self._y + compute_s
        self._nn = d * self._nn + n * n
        self._ny = d * self._ny + n * compute_s

    def predict(self, batch_len: int) -> float:
        if self._w == 0:
            return self._per_item_s * batch_len
        fit = self._fit()
        if fit is None:  # one batch size so far: scale its mean
            return (self._y / self._w) * batch_len / max(self._n / self._w, 1.0)
        intercept, slope = fit
        return max(0.0, intercept + max(0.0, slope) * batch_len)

    def fixed_s(self) -> float:
        """What a batch costs whatever its size (the line's a): what scoring requests in one batch rather than
        two saves. 0 until two batch sizes have been seen."""
        fit = self._fit()
        return 0.0 if fit is None else max(0.0, fit[0])

    def _fit(self) -> tuple[float, float] | None:
        """The line's (a, b) by weighted least squares; None until two batch sizes have been seen."""
        spread = self._w * self._nn - self._n * self._n
        if self._w == 0 or spread <= 1e-9 * max(1.0, self._w * self._nn):
            return None
        slope = (self._w * self._ny - self._n * self._y) / spread
        return (self._y - slope * self._n) / self._w, slope


class ArrivalRate:
    """Requests a second, as of the last arrival: arrivals counted with exponential decay over ``horizon_s``
    (0 before the first)."""

    def __init__(self, horizon_s: float = 0.5) -> None:
        self._horizon_s = horizon_s
        self._count = 0.0
        self._at = 0.0

    def arrived(self, now: float) -> None:
        self._count = self._count * math.exp(-max(0.0, now - self._at) / self._horizon_s) + 1
        self._at = now

    def per_s(self) -> float:
        return self._count / self._horizon_s


class LatencyTarget:
    """Waits for the next request while that pays, and while the oldest request's target still holds after the
    next batch's predicted compute.

    ``margin`` of the target is kept back for what the prediction misses (the reply's send, the
    machine's noise). ``fill``: wait as long as the target allows, paying or not (``--wait-to-fill``).
    """

    def __init__(self, target_s: float, margin: float = 0.2, cost: BatchCost | None = None,
                 rate: ArrivalRate | None = None, fill: bool = False) -> None:
        self.target_s = target_s
        self._margin = margin
        self._fill = fill
        self.cost = cost or BatchCost()
        self.rate = rate or ArrivalRate()

    def arrival(self, request: Request, now: float, wall_ms: int) -> float:
        """When the request was produced, in the monotonic clock: polled at ``received_at``, after waiting
        in the topic since its Kafka timestamp (clamped: producers' clocks are not ours)."""
        self.rate.arrived(now)
        in_topic_s = (wall_ms - request.produced_ms) / 1000 - (now - request.received_at)
        return request.received_at - min(max(in_topic_s, 0.0), self.target_s)

    def wait_s(self, batch_len: int) -> float:
        per_s = self.rate.per_s()
        if not self._fill and (per_s <= 0 or batch_len / per_s >= self.cost.fixed_s()):
            return 0.0  # the next request would cost those in hand more waiting than its own batch would cost
        return max(0.0, self.target_s * (1 - self._margin) - self.cost.predict(batch_len))

    def observe(self, batch_len: int, compute_s: float) -> None:
        self.cost.observe(batch_len, compute_s)
