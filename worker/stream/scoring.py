"""Where a batch is scored: inline in the loop, or on a thread of its own while the loop goes on.

The loop hands batches to a Scorer and takes the finished ones back, in order.
``InlineScorer`` scores in ``submit`` (the loop waits for the model), and takes
more batches before the finished ones are answered while they and one more
like the last fit RUN_S: batches ready together are scored back to back, then
answered.
``InlineThenThreadScorer`` (the default on CPU) scores inline until a batch
outlives the group's poll interval, then on a thread.
``ThreadScorer`` scores on one background thread, so the loop keeps polling,
decoding, claiming, sending and committing while the model runs: torch
releases the GIL inside its kernels, so a heavy model's compute overlaps the
Kafka and Redis work of the batches around it. One batch at a time either
way, whichever of the served models (``runners``, by entry) it is for: a
model is not thread-safe, and a device runs one batch at a time.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from worker.core.clock import Clock
from worker.core.messages import Request
from worker.ports import ModelRunner, Outcome, Scored

RUN_S = 0.002  # the compute a run of batches scored back to back is kept under, as predicted


class InlineScorer:
    """Scores in ``submit``: nothing runs between the loop's steps. It takes batches ready together one after the
    other while those it finished and one more like the last would take under RUN_S, and the loop answers them
    after (so the first batch's replies wait for the run: under RUN_S, as predicted). Between two small forward
    passes, the replies' sends and the Kafka client's work push the model's code out of the CPU's caches
    (churn's pass cost 3.5 µs an item cold against 1.2 warm; docs/benchmarks.md, "Batches back to back"). A
    model whose batch takes RUN_S / 2 or more is answered a batch at a time, as before."""

    inline = True

    def __init__(self, runners: Mapping[str, ModelRunner], clock: Clock) -> None:
        self._runners = runners
        self._clock = clock
        self._done: deque[Scored] = deque()

    def move_to_thread(self) -> bool:
        return False  # --model-thread off: inline it stays

    @property
    def busy(self) -> bool:
        return bool(self._done)

    @property
    def takes_more(self) -> bool:
        return not self._done or sum(done.compute_s for done in self._done) + self._done[-1].compute_s < RUN_S

    def submit(self, entry: str, batch: list[Request]) -> None:
        started = self._clock.monotonic()
        outcomes = self._runners[entry].run([r.item for r in batch])
        self._done.append(Scored(entry, batch, outcomes, started, self._clock.monotonic() - started))

    def wait(self, timeout_s: float) -> None:
        pass

    def take(self) -> Scored | None:
        return self._done.popleft() if self._done else None

    def close(self, timeout_s: float = 0.0) -> None:
        pass


class ThreadScorer:
    """Scores on one background thread. Its methods are for the loop's thread only."""

    def __init__(self, runners: Mapping[str, ModelRunner], clock: Clock) -> None:
        self._runners = runners
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamscore-model")
        self._running: tuple[str, list[Request], Future[tuple[list[Outcome], float, float]]] | None = None

    @property
    def busy(self) -> bool:
        return self._running is not None

    takes_more = False  # one batch at a time: the next goes once the last was taken back
    inline = False

    def move_to_thread(self) -> bool:
        return False  # there already

    def submit(self, entry: str, batch: list[Request]) -> None:
        assert self._running is None, "one batch at a time"
        self._running = (entry, batch, self._executor.submit(self._run, self._runners[entry], [r.item for r in batch]))

    def _run(self, runner: ModelRunner, items: Sequence[Any]) -> tuple[list[Outcome], float, float]:
        started = self._clock.monotonic()
        outcomes = runner.run(items)
        return outcomes, started, self._clock.monotonic() - started

    def wait(self, timeout_s: float) -> None:
        if self._running is not None:
            with contextlib.suppress(FutureTimeout):
                self._running[2].result(timeout=timeout_s)

    def take(self) -> Scored | None:
        """Raises what the model raised (the runner turns model errors into outcomes; this is a bug)."""
        if self._running is None or not self._running[2].done():
            return None
        entry, batch, future = self._running
        self._running = None
        outcomes, started, compute_s = future.result()
        return Scored(entry, batch, outcomes, started, compute_s)

    def close(self, timeout_s: float = 60.0) -> None:
        """Wait up to ``timeout_s`` for a batch still running. A model call cannot be interrupted: past
        the timeout its thread is left running, and its batch unanswered (it is consumed again)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._running is not None:
            with contextlib.suppress(FutureTimeout, CancelledError):
                self._running[2].exception(timeout=timeout_s)


class InlineThenThreadScorer:
    """Inline until a batch outlives the group's poll interval, then on a thread of its own for good: where
    batches run on CPU by default (``--model-thread auto``). Inline (measured faster on shared CPU cores), a
    batch holds the loop, which cannot poll while it runs: one longer than max.poll.interval.ms costs the worker
    its membership and the batch's replies, and the same records come back to be scored as slowly again, for
    ever. On a thread the loop polls on, and the group keeps the member while a slow batch runs. The loop calls
    ``move_to_thread`` when a batch that lost the membership took that long."""

    def __init__(self, runners: Mapping[str, ModelRunner], clock: Clock) -> None:
        self._runners, self._clock = runners, clock
        self._current: InlineScorer | ThreadScorer = InlineScorer(runners, clock)

    @property
    def inline(self) -> bool:
        return self._current.inline

    def move_to_thread(self) -> bool:
        """From the next batch on, score on a thread (only with nothing in hand); True when it moved now."""
        if not self._current.inline or self._current.busy:
            return False
        self._current = ThreadScorer(self._runners, self._clock)
        return True

    @property
    def busy(self) -> bool:
        return self._current.busy

    @property
    def takes_more(self) -> bool:
        return self._current.takes_more

    def submit(self, entry: str, batch: list[Request]) -> None:
        self._current.submit(entry, batch)

    def wait(self, timeout_s: float) -> None:
        self._current.wait(timeout_s)

    def take(self) -> Scored | None:
        return self._current.take()

    def close(self, timeout_s: float = 60.0) -> None:
        self._current.close(timeout_s)
