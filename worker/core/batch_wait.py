"""How long a batch waits for more requests: a fixed wait, or as long as a latency target allows. Pure.

``FixedWait`` is ``--max-wait-ms``: the oldest pending request waits at most
that long after it was polled. ``LatencyTarget`` is ``--latency-target-ms``, a
target for a request's queue wait + batch wait + compute, measured from its
record's Kafka timestamp. It learns what a batch of n requests costs
(``BatchCost``, a line a + b·n fitted online to the batches scored) and lets
the oldest request wait only while its target still holds with the next
batch's predicted compute after it. Both are upper bounds: the loop adds the
opportunistic half, a batch goes as soon as the model is idle and a poll finds
nothing more arriving (stream/loop.py; ``wait_to_fill`` turns that off).
Neither ever drops a request: only a request's own ``deadline_ms`` makes it
expired.
"""

from __future__ import annotations

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
        spread = self._w * self._nn - self._n * self._n
        if spread <= 1e-9 * max(1.0, self._w * self._nn):  # one batch size so far: scale its mean
            mean_n = self._n / self._w
            return (self._y / self._w) * batch_len / max(mean_n, 1.0)
        slope = (self._w * self._ny - self._n * self._y) / spread
        intercept = (self._y - slope * self._n) / self._w
        return max(0.0, intercept + max(0.0, slope) * batch_len)


class LatencyTarget:
    """Waits while the oldest request's target still holds after the next batch's predicted compute.

    ``margin`` of the target is kept back for what the prediction misses (the reply's send, the
    machine's noise).
    """

    def __init__(self, target_s: float, margin: float = 0.2, cost: BatchCost | None = None) -> None:
        self.target_s = target_s
        self._margin = margin
        self.cost = cost or BatchCost()

    def arrival(self, request: Request, now: float, wall_ms: int) -> float:
        """When the request was produced, in the monotonic clock: polled at ``received_at``, after waiting
        in the topic since its Kafka timestamp (clamped: producers' clocks are not ours)."""
        in_topic_s = (wall_ms - request.produced_ms) / 1000 - (now - request.received_at)
        return request.received_at - min(max(in_topic_s, 0.0), self.target_s)

    def wait_s(self, batch_len: int) -> float:
        return max(0.0, self.target_s * (1 - self._margin) - self.cost.predict(batch_len))

    def observe(self, batch_len: int, compute_s: float) -> None:
        self.cost.observe(batch_len, compute_s)
