"""Counters of what the worker did with every record it consumed, and where its loop stands.

Written by the loop's thread only (stream/replies.py, admission.py,
membership.py, loop.py). The HTTP surface (worker/surface/) reads it from
another thread at scrape time, without a lock: every field it reads is an
int, a float, a list of fixed length, a dict with fixed keys, or a value
replaced whole (``lag``, ``model``), so a read sees a consistent value of each
field, if not of all fields at the same instant.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from worker.core.agreement import agreement
from worker.core.offsets import TopicPartition as TP

BATCH_SIZE_BUCKETS = tuple(2.0 ** i for i in range(11))  # 1, 2, 4, ..., 1024
STAGE_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
STAGES = ("queue_wait", "batch_wait", "compute")
PAUSE_REASONS = ("dedup_outage", "registry_outage", "backlog")
STATUSES = ("ok", "error", "expired")
SHADOW_OUTCOMES = ("agree", "disagree", "error")
DIFFERENCE_BUCKETS = (1e-6, 1e-4, 1e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 10.0)
DELTA_SECONDS_BUCKETS = (-0.1, -0.01, -0.001, 0.0, 0.001, 0.01, 0.1, 1.0)


@dataclass(frozen=True)
class ServedModel:
    """A model entry once loaded and warmed up: the name and version its replies carry, its device, how long
    loading and warming it took, and the bytes its parameters and buffers take on its device."""

    entry: str
    model: str
    version: str
    device: str
    load_s: float
    memory_bytes: int = 0


class Histogram:
    """Observations counted in fixed buckets (upper bounds, inclusive), plus their sum.

    ``counts[i]`` counts values in (bounds[i-1], bounds[i]]; the last entry,
    one past the bounds, counts what is above them all. Not thread-safe for
    writers; a reader from another thread gets a copy with ``cumulative``.
    """

    def __init__(self, bounds: tuple[float, ...]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"bucket bounds must be strictly increasing, got {bounds}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def observe_all(self, values: Iterable[float], divisor: float = 1.0) -> None:
        """``observe(value / divisor)`` of each value: a batch's at once (ms to seconds: ``divisor`` 1000). The
        values are sorted once and each bound looked up in them, a bisection a bound rather than one a value:
        0.05 µs a value of a batch of 64, against 0.12 (in-process timeit)."""
        ordered = sorted(values)
        counts, below = self.counts, 0
        scaled = None if divisor == 1.0 else (lambda value: value / divisor)
        for i, bound in enumerate(self.bounds):
            at_most = bisect.bisect_right(ordered, bound, lo=below, key=scaled)
            counts[i] += at_most - below
            below = at_most
        counts[-1] += len(ordered) - below
        self.sum += sum(ordered) / divisor

    def observe_times(self, value: float, times: int) -> None:
        """``observe(value)``, ``times`` times over (a batch's compute, the same for each of its requests)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.sum += value * times

    def cumulative(self) -> tuple[list[int], float]:
        """Counts of values <= each bound, then of all values (Prometheus ``le`` buckets), and the sum."""
        running, total = [], 0
        for count in list(self.counts):  # one copy: the writer may go on meanwhile
            total += count
            running.append(total)
        return running, self.sum


@dataclass
class WorkerStats:
    """Every consumed record ends as exactly one of: reply (ok, error, expired),
    dead letter, duplicate, or handed over (its partition went to another
    worker, which answers it). Written by one thread; see the module's note on readers."""

    consumed: int = 0
    replied_ok: int = 0
    replied_error: int = 0
    replied_expired: int = 0
    dead_lettered: int = 0
    duplicates: int = 0
    handed_over: int = 0
    requests_skipped: int = 0  # never consumed: deleted before the source came to them (refreshed with the lag)
    aborted_transactions: int = 0  # exactly-once: each one's replies were discarded and their records consumed again
    batches: int = 0
    scored: int = 0
    compute_s: float = 0.0
    batch_sizes: Counter[int] = field(default_factory=Counter)
    error_codes: Counter[str] = field(default_factory=Counter)
    batch_size: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    stage_seconds: dict[str, Histogram] = field(
        default_factory=lambda: {stage: Histogram(STAGE_SECONDS_BUCKETS) for stage in STAGES})
    generation: int = -1  # the group generation last seen; negative while not a member
    rebalances: int = 0  # group generations joined, the first one included
    paused: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(PAUSE_REASONS, False))
    lag: dict[TP, int] = field(default_factory=dict)  # records behind each partition's end; replaced whole
    undecodable: dict[TP, str] = field(default_factory=dict)  # partitions stopped at a batch's codec; replaced whole
    last_iteration: float | None = None  # monotonic time of the loop's last poll; None before the first
    # monotonic time the Kafka brokers last answered the broker watch (worker/kafka/broker_watch.py, its thread
    # the only writer), or it began; None: not watched (no HTTP surface)
    brokers_answered_at: float | None = None
    rebalancing_since: float | None = None  # monotonic time a still unfinished rebalance began; None when none
    models: tuple[ServedModel, ...] = ()  # once all are loaded and warmed; replaced whole
    # Per model entry (keys fixed by ``serve``): batches, requests scored, compute seconds.
    entry_batches: dict[str, int] = field(default_factory=dict)
    entry_scored: dict[str, int] = field(default_factory=dict)
    entry_compute_s: dict[str, float] = field(default_factory=dict)
    # Replies by (model, version, status) as they carry them (keys fixed by ``serve``; a reply to a request that
    # named no served model carries the default model's).
    model_replies: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # New versions loaded without a restart, by model: switched in (written by the loop's thread), or refused, the
    # old one serving on (written by the reloads thread: one writer per dict, so that no count is lost).
    switched_versions: dict[str, int] = field(default_factory=dict)
    refused_versions: dict[str, int] = field(default_factory=dict)
    # Under a memory budget (worker/stream/residency.py): loads on first use and models let go, by (model, result:
    # loaded, failed, let_go); and the requests waiting for each model's load. Both replaced whole.
    model_loads: dict[tuple[str, str], int] = field(default_factory=dict)
    waiting_for_model: dict[str, int] = field(default_factory=dict)
    # Shadow scoring (worker/stream/shadow.py), keys fixed by ``shadow_names``. Samples by (model, sampled|dropped),
    # written by the loop's thread; pairs scored by (model, agree|disagree|error), and per model the largest
    # |difference| of a pair's numeric outputs and candidate minus live compute time, written by the shadow thread.
    shadow_samples: dict[tuple[str, str], int] = field(default_factory=dict)
    shadow_pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    shadow_difference: dict[str, Histogram] = field(default_factory=dict)
    shadow_compute_delta_s: dict[str, Histogram] = field(default_factory=dict)
    step_seconds: Histogram = field(default_factory=lambda: Histogram(STAGE_SECONDS_BUCKETS))  # loop steps
    holding: int = 0  # records in hand at the last step: batched, claiming, scoring, sent and unacknowledged
    progress_at: float | None = None  # monotonic time the loop last finished a record, retried the store, or held none
    _progress_seen: tuple[int, int] = (0, 0)  # (records finished, store retries) at progress_at

    def serve(self, models: tuple[ServedModel, ...], reply_names: list[tuple[str, str]]) -> None:
        """Note the models served, once loaded and warm (again after a version switch), and every (model, version) a
        reply may carry. Each dict is replaced whole, never grown, so that a reader on another thread iterates a
        dict of fixed keys."""
        entries = [served.entry for served in models]
        self.entry_batches = {**dict.fromkeys(entries, 0), **self.entry_batches}
        self.entry_scored = {**dict.fromkeys(entries, 0), **self.entry_scored}
        self.entry_compute_s = {**dict.fromkeys(entries, 0.0), **self.entry_compute_s}
        keys = [(model, version, status) for model, version in reply_names for status in STATUSES]
        self.model_replies = {**dict.fromkeys(keys, 0), **self.model_replies}
        self.models = models

    def record_model_load(self, model: str, result: str) -> None:
        """Count a load on first use of ``model`` (loaded, failed) or its letting go (let_go); replaced whole."""
        self.model_loads = {**self.model_loads, (model, result): self.model_loads.get((model, result), 0) + 1}

    def record_switch(self, model: str) -> None:
        """Count a new version of ``model`` switched in (the loop's thread); replaced whole (see ``serve``)."""
        self.switched_versions = {**self.switched_versions, model: self.switched_versions.get(model, 0) + 1}

    def record_refusal(self, model: str) -> None:
        """Count a new version of ``model`` refused (the reloads thread); replaced whole (see ``serve``)."""
        self.refused_versions = {**self.refused_versions, model: self.refused_versions.get(model, 0) + 1}

    @property
    def reloads(self) -> dict[tuple[str, str], int]:
        """New versions by (model, result: switched, refused)."""
        return {**{(m, "switched"): n for m, n in self.switched_versions.items()},
                **{(m, "refused"): n for m, n in self.refused_versions.items()}}

    def shadow_names(self, models: list[str]) -> None:
        """Note the models with a shadow candidate, before the first sample."""
        self.shadow_samples = {(m, what): 0 for m in models for what in ("sampled", "dropped")}
        self.shadow_pairs = {(m, what): 0 for m in models for what in SHADOW_OUTCOMES}
        self.shadow_difference = {m: Histogram(DIFFERENCE_BUCKETS) for m in models}
        self.shadow_compute_delta_s = {m: Histogram(DELTA_SECONDS_BUCKETS) for m in models}

    def record_shadow(self, model: str, what: str) -> None:
        """A live request of ``model`` sampled for its shadow, or dropped (the shadow queue was full)."""
        self.shadow_samples[(model, what)] = self.shadow_samples.get((model, what), 0) + 1

    def record_shadow_pair(self, model: str, live: Any, candidate: Any, compute_delta_ms: float) -> None:
        """A sample scored by the candidate: whether it agrees with the live answer (worker/core/agreement.py), by
        how much its numbers differ, and how much longer the candidate's batch took than the live one's."""
        outcome, difference = agreement(live, candidate)
        self.shadow_pairs[(model, outcome)] = self.shadow_pairs.get((model, outcome), 0) + 1
        if difference is not None and model in self.shadow_difference:
            self.shadow_difference[model].observe(difference)
        if model in self.shadow_compute_delta_s:
            self.shadow_compute_delta_s[model].observe(compute_delta_ms / 1000)

    def record_reply(self, model: str, version: str, status: str, count: int = 1) -> None:
        """Count a reply sent (``count`` -1: take back one whose send was refused)."""
        if status == "ok":
            self.replied_ok += count
        elif status == "expired":
            self.replied_expired += count
        else:
            self.replied_error += count
        key = (model, version, status)
        self.model_replies[key] = self.model_replies.get(key, 0) + count

    def record_batch(self, size: int, compute_s: float, entry: str | None = None) -> None:
        if entry is not None:
            self.entry_batches[entry] = self.entry_batches.get(entry, 0) + 1
            self.entry_scored[entry] = self.entry_scored.get(entry, 0) + size
            self.entry_compute_s[entry] = self.entry_compute_s.get(entry, 0.0) + compute_s
        self.batches += 1
        self.scored += size
        self.compute_s += compute_s
        self.batch_sizes[size] += 1
        if size:  # every request of a batch can have left with its partition: no batch was answered then
            self.batch_size.observe(size)

    def record_stages(self, queue_waits_ms: Sequence[float], batch_waits_ms: Sequence[float],
                      compute_ms: float) -> None:
        """A batch's scored requests: each one's time queued in the topic and waiting for the batch, and the
        batch's compute (each request's too), in ms."""
        stages = self.stage_seconds
        stages["queue_wait"].observe_all(queue_waits_ms, 1000)
        stages["batch_wait"].observe_all(batch_waits_ms, 1000)
        stages["compute"].observe_times(compute_ms / 1000, len(queue_waits_ms))

    def record_generation(self, generation: int) -> None:
        """Note the group generation; a new non-negative one is a completed join (a rebalance)."""
        if generation >= 0 and generation != self.generation:
            self.rebalances += 1
        self.generation = generation

    def record_rebalancing(self, rebalancing: bool, now: float) -> None:
        """Note whether a rebalance is under way, keeping when the current one began."""
        if not rebalancing:
            self.rebalancing_since = None
        elif self.rebalancing_since is None:
            self.rebalancing_since = now

    def record_progress(self, holding: int, store_failures: int, now: float) -> None:
        """Note the work in hand after a step. It moves on while records get finished (answered, dead-lettered,
        counted as duplicates, handed over) or the dedup store is being retried; holding none is no stall."""
        seen = (self.finished(), store_failures)
        self.holding = holding
        if not holding or seen != self._progress_seen or self.progress_at is None:
            self.progress_at = now
            self._progress_seen = seen

    def finished(self) -> int:
        """Consumed records that ended: answered, dead-lettered, duplicates, handed over."""
        return (self.replied_ok + self.replied_error + self.replied_expired + self.dead_lettered + self.duplicates
                + self.handed_over)

    def record_pause(self, *, dedup_outage: bool, backlog: bool, registry_outage: bool = False) -> bool:
        """Note why consumption is paused now; True when it is, for any reason."""
        self.paused["dedup_outage"] = dedup_outage
        self.paused["registry_outage"] = registry_outage
        self.paused["backlog"] = backlog
        return dedup_outage or registry_outage or backlog

    def snapshot(self) -> dict[str, Any]:
        return {
            "consumed": self.consumed,
            "replied_ok": self.replied_ok,
            "replied_error": self.replied_error,
            "replied_expired": self.replied_expired,
            "dead_lettered": self.dead_lettered,
            "duplicates": self.duplicates,
            "handed_over": self.handed_over,
            "requests_skipped": self.requests_skipped,
            "aborted_transactions": self.aborted_transactions,
            "rebalances": self.rebalances,
            "batches": self.batches,
            "mean_batch_size": round(self.scored / self.batches, 2) if self.batches else 0.0,
            "compute_s": round(self.compute_s, 3),
            "error_codes": dict(self.error_codes),
        }
