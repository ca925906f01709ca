"""Micro-batching by size, waiting time and (optionally) cost. Pure: no I/O, no sleeping.

A batch is ready when the pending items fill it (by count or by cost), when
the oldest pending item has waited ``max_wait_s`` (or what its ``wait`` policy
allows: core/batch_wait.py), or at once while a backlog
waits behind them (the caller says so): the wait is for requests not sent
yet, pointless when more are already in line. Items leave in the order
they arrived; an item that would overflow the cost budget waits for the next
batch. The caller owns time: every method that needs "now" takes it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from worker.core.batch_wait import BatchWait, FixedWait, LatencyTarget
from worker.core.errors import ConfigError
from worker.core.messages import Request
from worker.core.sections import BatchingSettings

T = TypeVar("T")


class Batcher(Generic[T]):
    """Collects items into batches of at most ``max_batch_size`` items.

    ``cost`` and ``max_batch_cost`` (both or neither) bound the summed cost of
    a batch, e.g. tokens for a text model.
    Not thread-safe.
    """

    def __init__(
        self,
        max_batch_size: int,
        max_wait_s: float,
        *,
        cost: Callable[[T], int] | None = None,
        max_batch_cost: int | None = None,
        wait: BatchWait | None = None,
    ) -> None:
        """``wait``: how long the oldest item may wait (default: ``max_wait_s`` after it was added)."""
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        if (cost is None) != (max_batch_cost is None):
            raise ValueError("cost and max_batch_cost go together: give both or neither")
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.wait: BatchWait = wait or FixedWait(max_wait_s)
        self._cost = cost
        self._max_batch_cost = max_batch_cost
        self._items: deque[tuple[float, T]] = deque()

    @property
    def pending(self) -> int:
        return len(self._items)

    @property
    def max_batch_cost(self) -> int | None:
        return self._max_batch_cost

    def fits(self, item: T) -> bool:
        """Whether the item could ever be batched (its cost alone fits the budget)."""
        return self._cost is None or self._cost(item) <= self._budget()

    def add(self, item: T, now: float) -> None:
        """Queue an item that arrived at ``now``. Raises ValueError if it never fits."""
        if not self.fits(item):
            raise ValueError(f"item costs more than max_batch_cost={self._max_batch_cost} alone")
        self._items.append((now, item))

    def extend(self, items: Iterable[T], arrived: Callable[[T], float]) -> list[T]:
        """Queue items in order (a poll's at once), each at the time ``arrived`` gives it, which is asked only
        of an item that fits; returns those whose cost alone exceeds the budget, not queued."""
        if self._cost is None:
            self._items.extend([(arrived(item), item) for item in items])
            return []
        never = []
        for item in items:
            if self.fits(item):
                self._items.append((arrived(item), item))
            else:
                never.append(item)
        return never

    def deadline(self) -> float | None:
        """When the oldest pending item will have waited long enough; None if empty."""
        if not self._items:
            return None
        return self._items[0][0] + self.wait.wait_s(self._next_batch_len())

    def ready(self, now: float, backlog: bool = False) -> bool:
        """Whether a batch should be drained now; ``backlog``: more items are waiting to be added (or, with
        the model idle, none is arriving: send what there is)."""
        if not self._items:
            return False
        return backlog or self.full() or now >= self._items[0][0] + self.wait.wait_s(self._next_batch_len())

    def full(self) -> bool:
        """Whether the next batch is complete without waiting: it is at the size limit, or the item
        after it would not fit its cost budget."""
        return self._next_batch_len() < len(self._items) or self._next_batch_len() >= self.max_batch_size

    def drain(self) -> list[T]:
        """Remove and return the next batch (possibly empty), oldest first."""
        count = self._next_batch_len()
        return [self._items.popleft()[1] for _ in range(count)]

    def remove_if(self, predicate: Callable[[T], bool]) -> list[T]:
        """Remove and return every pending item matching ``predicate``, in order."""
        kept: deque[tuple[float, T]] = deque()
        removed: list[T] = []
        for arrived, item in self._items:
            if predicate(item):
                removed.append(item)
            else:
                kept.append((arrived, item))
        self._items = kept
        return removed

    def _budget(self) -> int:
        return self._max_batch_cost if self._max_batch_cost is not None else 0

    def _next_batch_len(self) -> int:
        """How many leading items form the next batch under both limits."""
        if self._cost is None:
            return min(len(self._items), self.max_batch_size)
        total = 0
        count = 0
        for _, item in self._items:
            item_cost = self._cost(item)
            if count == self.max_batch_size or total + item_cost > self._budget():
                break
            total += item_cost
            count += 1
        return count


def request_batcher(batching: BatchingSettings, cost: Callable[[Any], int] | None) -> Batcher[Request]:
    """Size and wait limits (or a latency target), plus a token budget when asked for (the model must say what
    an item costs)."""
    wait: BatchWait = (LatencyTarget(batching.latency_target_ms / 1000, fill=batching.wait_to_fill)
                       if batching.latency_target_ms
                       else FixedWait(batching.max_wait_ms / 1000))
    if not batching.max_batch_tokens:
        return Batcher(batching.max_batch_size, batching.max_wait_ms / 1000, wait=wait)
    if cost is None:
        raise ConfigError("max_batch_tokens is set, but the model has no cost function (only text models do); "
                          "unset STREAMSCORE_MAX_BATCH_TOKENS / --max-batch-tokens")
    item_cost = cost
    return Batcher(batching.max_batch_size, batching.max_wait_ms / 1000,
                   cost=lambda request: item_cost(request.item), max_batch_cost=batching.max_batch_tokens, wait=wait)
