"""One batcher per served model entry, and whose batch goes next. Pure: no I/O; the caller owns time.

A batch never mixes models: each request joins its own entry's batcher
(worker/core/routes.py says which), with that entry's size, wait and token
limits. The next batch is chosen round robin among the entries whose batch is
ready, starting after the entry that was served last: a model with a ready
batch waits for at most one batch of each other model, however deep another
model's backlog is. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import groupby

from worker.core.batcher import Batcher
from worker.core.messages import Request


class ModelBatchers:
    def __init__(self, batchers: Mapping[str, Batcher[Request]], default: str | None) -> None:
        """``batchers``: each entry's; ``default``: the entry of a request that has no route (None: every request
        has one, the default model being loaded on first use)."""
        if default is not None and default not in batchers:
            raise ValueError(f"default entry {default!r} has no batcher")  # "default": of requests without a route
        self._batchers = dict(batchers)
        self._order = list(self._batchers)
        self.default = default
        self._next = 0  # where the round robin looks first

    @property
    def pending(self) -> int:
        return sum(batcher.pending for batcher in self._batchers.values())

    def pending_by_entry(self) -> dict[str, int]:
        return {entry: batcher.pending for entry, batcher in self._batchers.items()}

    def pending_of(self, entry: str) -> int:
        return self._batchers[entry].pending

    def add_entry(self, entry: str, batcher: Batcher[Request]) -> None:
        """Serve one more entry (a new version switched in); it takes its turn after the others."""
        self._batchers[entry] = batcher
        self._order.append(entry)

    def remove_entry(self, entry: str) -> None:
        """Stop serving ``entry`` (a version let go); raises ValueError while it holds requests."""
        if self._batchers[entry].pending:
            raise ValueError(f"entry {entry!r} still holds {self._batchers[entry].pending} requests")
        index = self._order.index(entry)
        del self._batchers[entry]
        self._order.pop(index)
        if self._next > index:
            self._next -= 1
        self._next %= max(1, len(self._order))

    def entry_of(self, request: Request) -> str:
        entry = request.route.entry if request.route is not None else self.default
        if entry is None:
            raise ValueError(f"request {request.id!r} has no route, and no model is the default")
        return entry

    def cost_budget(self, request: Request) -> int | None:
        """The token budget of the request's entry (None: its batches have none)."""
        return self._batchers[self.entry_of(request)].max_batch_cost

    def add_all(self, requests: Sequence[Request], now: float, wall_ms: int) -> list[Request]:
        """Queue requests polled at ``now``, in order, each in its entry's batcher (whose wait policy says when it
        arrived), a run of one entry at once; returns those whose cost alone exceeds their entry's budget, not
        queued."""
        never: list[Request] = []
        for entry, run in groupby(requests, self.entry_of):
            batcher = self._batchers[entry]
            # A latency target counts arrivals: asked of the requests queued only.
            never += batcher.extend(run, partial(batcher.wait.arrival, now=now, wall_ms=wall_ms))
        return never

    def observe(self, entry: str, batch_size: int, compute_s: float) -> None:
        """A batch of ``entry`` was scored: what its wait policy learns from."""
        self._batchers[entry].wait.observe(batch_size, compute_s)

    def deadline(self) -> float | None:
        """The earliest moment a batch will be ready by waiting; None when nothing is pending."""
        deadlines = [d for d in (b.deadline() for b in self._batchers.values()) if d is not None]
        return min(deadlines, default=None)

    def ready(self, now: float, backlog: bool = False) -> bool:
        """Whether some entry's batch should go now (``backlog``: as Batcher.ready says)."""
        return any(batcher.ready(now, backlog) for batcher in self._batchers.values())

    def next_batch(self, now: float, backlog: bool = False) -> tuple[str, list[Request]] | None:
        """The next ready entry's batch, round robin; None when no batch is ready."""
        return self._take(lambda batcher: batcher.ready(now, backlog))

    def flush(self) -> tuple[str, list[Request]] | None:
        """The next entry's batch, ready or not (a drain at shutdown); None when nothing is pending."""
        return self._take(lambda batcher: batcher.pending > 0)

    def remove_if(self, predicate: Callable[[Request], bool]) -> list[Request]:
        """Remove and return every pending request matching ``predicate``."""
        return [request for batcher in self._batchers.values() for request in batcher.remove_if(predicate)]

    def _take(self, eligible: Callable[[Batcher[Request]], bool]) -> tuple[str, list[Request]] | None:
        count = len(self._order)
        for step in range(count):
            index = (self._next + step) % count
            entry = self._order[index]
            batcher = self._batchers[entry]
            if eligible(batcher):
                self._next = (index + 1) % count
                return entry, batcher.drain()
        return None
