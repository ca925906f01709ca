"""Shadow scoring: how a candidate would have answered, without ever delaying a live reply.

A model entry may name a shadow candidate and a sample fraction. After a live
batch is answered, the loop offers its requests here (``offer``: never blocks):
a request its model's live version answered (not its canary) is sampled by a
hash of its id (the same id is always sampled, or
never), and waits in a bounded queue; when the queue is full the sample is
dropped and counted. A thread of its own scores the samples with the
candidate (a runner of its own: the loop's models are never shared with it),
in batches, and sends each pair to the shadow topic keyed by the request id:
``{"id", "model", "live": {...}, "candidate": {...}}``, each side with its
``version``, ``status``, ``outputs`` or ``error``, and ``compute_ms`` (its
batch's compute time, shared among its requests). ``python -m worker compare``
reads that topic.

What a shadow record promises: at most one per live scoring of a request,
best effort. It is sent by a plain producer outside the live delivery (and
outside exactly-once transactions): a sample still queued when the worker
stops or crashes is lost, and a request scored again after a crash may be
sampled again (compare keeps the first record of an id).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from worker.core.clock import Clock
from worker.core.messages import Request
from worker.core.routes import Route, arm_point
from worker.core.stats import WorkerStats
from worker.core.wire import encode_shadow
from worker.ports import ModelRunner, Outcome, Scored, Sink

log = structlog.get_logger(__name__)

GATHER_S = 0.01  # how long the thread waits for more samples to fill a batch
SETTLE_S = 1.0


@dataclass(frozen=True)
class Candidate:
    """The shadow of model ``model``: its runner, the version its records carry, the share of requests sampled."""

    runner: ModelRunner
    version: str
    fraction: float
    max_batch_size: int


@dataclass(frozen=True)
class _Sample:
    request: Request
    live: Outcome
    live_version: str
    live_compute_ms: float


class Shadow:
    def __init__(self, candidates: Mapping[str, Candidate], sink: Sink[str], topic: str, stats: WorkerStats,
                 clock: Clock, queue_size: int) -> None:
        """``candidates`` by the model name whose requests they shadow; ``sink``: a plain producer of their own,
        to ``topic``; ``queue_size``: how many samples may wait to be scored (more are dropped)."""
        self._candidates = dict(candidates)
        self._sink, self._topic, self._stats, self._clock = sink, topic, stats, clock
        self._queue: queue.Queue[_Sample | None] = queue.Queue(maxsize=queue_size)
        self._thread = threading.Thread(target=self._run, name="streamscore-shadow", daemon=True)
        stats.shadow_names(list(self._candidates))

    def start(self) -> None:
        self._thread.start()

    def offer(self, scored: Scored) -> None:
        """From the loop, after a live batch is answered: sample its requests. Never blocks."""
        compute_ms = scored.compute_s * 1000
        for request, outcome in zip(scored.batch, scored.outcomes, strict=True):
            route = request.route
            candidate = self._candidates.get(route.model) if route is not None else None
            if candidate is None or route is None or not _live_arm(route):
                continue
            if sampled_point(request.id) >= candidate.fraction:
                continue
            try:
                self._queue.put_nowait(_Sample(request, outcome, route.version, compute_ms))
            except queue.Full:
                self._stats.record_shadow(route.model, "dropped")
            else:
                self._stats.record_shadow(route.model, "sampled")

    def close(self, timeout_s: float = SETTLE_S) -> None:
        """Stop taking samples; those still queued are dropped (counted), the sends out settled."""
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            self._drop_queued()
            self._queue.put_nowait(None)
        self._thread.join(timeout_s)
        self._sink.close(timeout_s)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._drop_queued()
                return
            samples = [first]
            stopping = self._gather(samples)
            try:
                self._score(samples)
            except Exception:  # a bug here must not end shadow scoring for good, nor touch live traffic
                log.exception("shadow_batch_failed", samples=len(samples))
            self._settle(0.0)
            if stopping:
                self._drop_queued()
                self._settle(SETTLE_S)
                return

    def _gather(self, samples: list[_Sample]) -> bool:
        """Add what arrives within GATHER_S, up to a batch of the first sample's candidate; True at the stop."""
        model = samples[0].request.route.model if samples[0].request.route else ""
        limit = self._candidates[model].max_batch_size
        while len(samples) < limit:
            try:
                sample = self._queue.get(timeout=GATHER_S)
            except queue.Empty:
                return False
            if sample is None:
                return True
            samples.append(sample)
        return False

    def _score(self, samples: list[_Sample]) -> None:
        by_model: dict[str, list[_Sample]] = {}
        for sample in samples:
            by_model.setdefault(sample.request.route.model if sample.request.route else "", []).append(sample)
        for model, batch in by_model.items():
            candidate = self._candidates[model]
            started = self._clock.monotonic()
            outcomes = candidate.runner.run([sample.request.item for sample in batch])
            compute_ms = (self._clock.monotonic() - started) * 1000
            for sample, outcome in zip(batch, outcomes, strict=True):
                value = encode_shadow(sample.request.id, model,
                                      _side(sample.live_version, sample.live, sample.live_compute_ms),
                                      _side(candidate.version, outcome, compute_ms))
                self._sink.send(self._topic, sample.request.id.encode(), value, [], sample.request.id)
                self._stats.record_shadow_pair(model, sample.live, outcome, compute_ms - sample.live_compute_ms)

    def _settle(self, timeout_s: float) -> None:
        for delivery in self._sink.settle(timeout_s):
            if delivery.error is not None:
                log.warning("shadow_record_not_sent", topic=self._topic, error=str(delivery.error))

    def _drop_queued(self) -> None:
        while True:
            try:
                sample = self._queue.get_nowait()
            except queue.Empty:
                return
            if sample is not None and sample.request.route is not None:
                self._stats.record_shadow(sample.request.route.model, "dropped")


def _live_arm(route: Route) -> bool:
    """Whether the model's own entry answered (its key is its name, or ``name@N`` after a switch), not its canary:
    a shadow compares the candidate with the live version alone."""
    return route.entry.partition("@")[0] == route.model


def sampled_point(request_id: str) -> float:
    """Where a request id falls for shadow sampling: independent of its canary arm (another hash input)."""
    return arm_point("shadow:" + request_id)


def _side(version: str, outcome: Outcome, compute_ms: float) -> dict[str, Any]:
    side: dict[str, Any] = {"version": version, "status": "ok" if outcome.ok else "error"}
    if outcome.ok:
        side["outputs"] = outcome.output
    else:
        side["error"] = {"code": outcome.error_code, "message": outcome.error_message}
    side["compute_ms"] = round(compute_ms, 3)
    return side
