"""The worker's Prometheus metrics: a custom collector that reads WorkerStats at scrape time.

Nothing is counted twice: the loop counts in its pure WorkerStats as it
always did, and each scrape turns the current values into metric families.
``collect`` runs on the HTTP server's thread and only reads (see the note in
worker/core/stats.py on what such a read sees).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from worker.core.stats import PAUSE_REASONS, Histogram, WorkerStats

LabelValues = TypeVar("LabelValues", bound=tuple[str, ...])


class StatsCollector(Collector):
    """Exposes one WorkerStats as the ``streamscore_*`` metrics (names and labels are a public interface:
    dashboards and alerts use them)."""

    def __init__(self, stats: WorkerStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self._stats
        yield _counter("streamscore_requests", "Records consumed from the requests topic; each ends as a reply, a "
                       "dead letter, a duplicate or handed over.", s.consumed)
        replies = CounterMetricFamily("streamscore_replies", "Replies sent, by status: ok (scored), error (an error "
                                      "reply; streamscore_errors_total counts its code) or expired (its deadline "
                                      "passed before it was scored).", labels=["status"])
        for status, count in (("ok", s.replied_ok), ("error", s.replied_error), ("expired", s.replied_expired)):
            replies.add_metric([status], count)
        yield replies
        yield _counter("streamscore_dead_letters", "Records without a readable request id, sent to the "
                       "dead-letter topic.", s.dead_lettered)
        yield _counter("streamscore_duplicates", "Records whose request id was answered already, or by a "
                       "record read before them (not scored again).", s.duplicates)
        yield _counter("streamscore_handed_over", "Records left unanswered because their partition went to "
                       "another worker (which answers them).", s.handed_over)
        yield _counter("streamscore_requests_skipped", "Requests never consumed: the partition's log no longer "
                       "held them (retention, a delete-records request) when the consumer came to them, and it went "
                       "on past them (auto_offset_reset); requests_skipped says each time.", s.requests_skipped)
        yield _counter("streamscore_rebalances", "Consumer group generations joined, the first one included.",
                       s.rebalances)
        batch_size = HistogramMetricFamily("streamscore_batch_size", "Requests per scored batch.")
        batch_size.add_metric([], *_buckets(s.batch_size))
        yield batch_size
        stages = HistogramMetricFamily(
            "streamscore_stage_seconds", "Per scored request: queue_wait (in the topic, produced to polled), "
            "batch_wait (polled to scored) and compute (its batch's model time).", labels=["stage"])
        for stage, histogram in s.stage_seconds.items():
            stages.add_metric([stage], *_buckets(histogram))
        yield stages
        errors = CounterMetricFamily("streamscore_errors", "Error replies and dead letters, by code: the wire "
                                     "contract's error codes (docs/wire-contract.md; an expired reply's is "
                                     "deadline_exceeded). A reply its topic refused for good counts as what was sent "
                                     "instead: reply_too_large (refused as too large) or reply_refused (the dead "
                                     "letter); a dead letter refused counts once more, as dead_letter_refused (sent "
                                     "again cut).", labels=["code"])
        for code, count in sorted(s.error_codes.items()):
            errors.add_metric([code], count)
        yield errors
        steps = HistogramMetricFamily("streamscore_step_seconds", "Seconds each step of the consumer loop took, "
                                      "poll to settle, the time it blocks included (a slow broker, Redis or model "
                                      "shows here first).")
        steps.add_metric([], *_buckets(s.step_seconds))
        yield steps
        yield GaugeMetricFamily("streamscore_records_in_hand", "Records held at the last step: batched, waiting "
                                "on the dedup store, being scored, sent and unacknowledged.", value=s.holding)
        lag = GaugeMetricFamily("streamscore_consumer_lag", "Records behind the end of each assigned partition, "
                                "as of the last fetch (refreshed at most once a second).",
                                labels=["topic", "partition"])
        for (topic, partition), behind in sorted(s.lag.items()):
            lag.add_metric([topic, str(partition)], behind)
        yield lag
        stopped = GaugeMetricFamily("streamscore_undecodable_partitions", "1 for each assigned partition stopped at "
                                    "a record batch whose codec this client cannot decode (the log line "
                                    "partition_undecodable says what to install).",
                                    labels=["topic", "partition", "codec"])
        for (topic, partition), codec in sorted(s.undecodable.items()):
            stopped.add_metric([topic, str(partition), codec], 1)
        yield stopped
        paused = GaugeMetricFamily("streamscore_paused", "1 while consumption is paused for this reason: "
                                   "dedup_outage (the dedup store, Redis, does not answer), registry_outage (the "
                                   "schema registry does not answer), backlog (the requests waiting to be scored, "
                                   "besides a poll whose ids are being claimed ahead, reach --max-poll-records); "
                                   "else 0.", labels=["reason"])
        for reason in PAUSE_REASONS:
            paused.add_metric([reason], 1 if s.paused[reason] else 0)
        yield paused
        info = GaugeMetricFamily("streamscore_model_info", "1 for each model entry served (a version: churn, then "
                                 "churn@1 after a switch), once loaded and warmed up: the model name and version its "
                                 "replies carry, and its device.",
                                 labels=["entry", "model", "version", "device"])
        load = GaugeMetricFamily("streamscore_model_load_seconds", "Seconds loading and warming up each model "
                                 "entry took.", labels=["entry"])
        memory = GaugeMetricFamily("streamscore_model_memory_bytes", "The bytes each loaded model entry's "
                                   "parameters and buffers take on its device.", labels=["entry"])
        for served in s.models:
            info.add_metric([served.entry, served.model, served.version, served.device], 1)
            load.add_metric([served.entry], served.load_s)
            memory.add_metric([served.entry], served.memory_bytes)
        yield info
        yield load
        yield memory
        yield _labelled_counter("streamscore_model_loads", "Under a memory budget: models loaded on first use "
                                "(loaded, failed: the log says why) and let go to make room (let_go), by model.",
                                ["model", "result"], s.model_loads)
        waiting = GaugeMetricFamily("streamscore_requests_waiting_for_model", "Requests waiting for their model's "
                                    "load on first use.", labels=["model"])
        for name, count in sorted(s.waiting_for_model.items()):
            waiting.add_metric([name], count)
        yield waiting
        yield _labelled_counter("streamscore_model_replies", "Replies sent, by the model name and version they carry "
                                "(the default model's when the request named none served) and status.",
                                ["model", "version", "status"], s.model_replies)
        yield _labelled_counter("streamscore_model_batches", "Batches scored, by model entry (see "
                                "streamscore_model_info).", ["entry"], _by_one(s.entry_batches))
        yield _labelled_counter("streamscore_model_scored", "Requests scored, by model entry (see "
                                "streamscore_model_info).", ["entry"], _by_one(s.entry_scored))
        yield _labelled_counter("streamscore_model_compute_seconds", "Seconds the model spent scoring batches, by "
                                "model entry (see streamscore_model_info).", ["entry"], _by_one(s.entry_compute_s))
        yield _labelled_counter("streamscore_model_reloads", "New versions loaded without a restart, by model and "
                                "result: switched, or refused (the old version serves on; the log says why).",
                                ["model", "result"], s.reloads)
        yield _labelled_counter("streamscore_shadow_samples", "Live requests sampled for their model's shadow "
                                "candidate (sampled), or dropped because the shadow queue was full (dropped).",
                                ["model", "what"], s.shadow_samples)
        yield _labelled_counter("streamscore_shadow_pairs", "Samples scored by the candidate: agree (same labels, "
                                "probabilities on the same side of 0.5), disagree, or error (one side failed).",
                                ["model", "outcome"], s.shadow_pairs)
        yield _by_model("streamscore_shadow_difference", "Per pair, the largest |candidate - live| of the numeric "
                        "outputs.", s.shadow_difference)
        yield _by_model("streamscore_shadow_compute_delta_seconds", "Per pair, the candidate's batch compute time "
                        "minus the live one's.", s.shadow_compute_delta_s)


def metrics_registry(stats: WorkerStats) -> CollectorRegistry:
    """A registry of the worker's metrics and the usual process ones (memory, CPU, file descriptors, GC)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(StatsCollector(stats))
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    return registry


def _counter(name: str, documentation: str, value: int) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def _labelled_counter(name: str, documentation: str, labels: list[str],
                      values: Mapping[LabelValues, float]) -> CounterMetricFamily:
    """A counter with one sample per key of ``values`` (a tuple of label values), in key order."""
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def _by_one(values: Mapping[str, float]) -> dict[tuple[str, ...], float]:
    return {(key,): value for key, value in values.items()}


def _by_model(name: str, documentation: str, histograms: Mapping[str, Histogram]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=["model"])
    for model, histogram in sorted(histograms.items()):
        family.add_metric([model], *_buckets(histogram))
    return family


def _buckets(histogram: Histogram) -> tuple[list[tuple[str, float]], float]:
    cumulative, total = histogram.cumulative()
    bounds = [str(float(bound)) for bound in histogram.bounds] + ["+Inf"]  # "1.0", "0.005": as Go writes them
    return list(zip(bounds, cumulative, strict=True)), total
