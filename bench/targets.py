"""The targets of bench/targets.toml, checked on ratios of figures measured in the same run. Nothing here is
a measurement, and no target number is in this code: they are in that file.

Each check compares streamscore at the chosen configuration (``--batch-size``,
``--max-wait-ms``) with a figure from the same run; a figure that was not
measured gives ``met: None``, never a guess.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from bench.results import LatencyRun, Target, WorkloadResult

TARGETS_FILE = Path(__file__).with_name("targets.toml")
_TARGETS = tomllib.loads(TARGETS_FILE.read_text())

KAFKA_CEILING_SHARE = float(_TARGETS["kafka_ceiling"]["share"])
NAIVE_FACTOR = float(_TARGETS["naive"]["factor"])
MODEL_CEILING_SHARE = float(_TARGETS["model_ceiling"]["share"])
LATENCY_LOAD = float(_TARGETS["latency"]["load"])
LATENCY_SLACK_MS = float(_TARGETS["latency"]["slack_ms"])
CONFLUENT_CEILING_SHARE = float(_TARGETS["confluent"]["ceiling_share"])
CONFLUENT_FACTOR = float(_TARGETS["confluent"]["factor"])
EXACTLY_ONCE_SHARE = float(_TARGETS["exactly_once"]["share"])
EXACTLY_ONCE_INTERVAL_MS = int(_TARGETS["exactly_once"]["interval_ms"])


def evaluate(result: WorkloadResult, checks: tuple[str, ...], batch_size: int, wait_ms: int) -> list[Target]:
    point = result.point(batch_size, wait_ms)
    ours = point.throughput.per_s if point else None
    where = f"streamscore at batch {batch_size}, wait {wait_ms} ms"
    targets = []
    if "kafka_ceiling" in checks:
        theirs = result.kafka_ceiling.per_s if result.kafka_ceiling else None
        targets.append(_ratio("streamscore / Kafka ceiling", ours, theirs, KAFKA_CEILING_SHARE,
                              f"{where} vs the plain kafka-python loop, closed loop"))
        theirs_cpu = result.kafka_ceiling.cpu_us_per_request if result.kafka_ceiling else None
        ours_cpu = point.throughput.cpu_us_per_request if point else None
        targets.append(_ratio("streamscore / Kafka ceiling, by CPU time", theirs_cpu, ours_cpu, KAFKA_CEILING_SHARE,
                              "the same ratio from CPU microseconds per request (ceiling / streamscore): what the "
                              "throughput ratio would be with a core to each, less moved by other load; "
                              "for reference, not the target's measure"))
    if "naive" in checks:
        theirs = result.naive.per_s if result.naive else None
        targets.append(_ratio("streamscore / naive baseline", ours, theirs, NAIVE_FACTOR,
                              f"{where} vs one request at a time, closed loop"))
    if "model_ceiling" in checks:
        ceiling = point.model_ceiling if point else None
        targets.append(_ratio("streamscore / model ceiling", ours, ceiling.items_per_s if ceiling else None,
                              MODEL_CEILING_SHARE, f"{where} vs forward passes alone at batch {batch_size}, "
                              "measured just before that worker started"))
    if "latency" in checks:
        targets.append(_latency(point.latency if point else [], wait_ms,
                                point.throughput.compute_ms_p50 if point else None, where))
    if "fast_path" in checks:
        targets += _fast_path(result, ours, wait_ms, where)
    return targets


def _fast_path(result: WorkloadResult, kafka_python: float | None, wait_ms: int, where: str) -> list[Target]:
    """The second transport's targets: against its bare loop, against streamscore on kafka-python, its
    latency bound, and exactly-once against at-least-once on it."""
    on = result.confluent
    ours = on.throughput.per_s if on else None
    ceiling = result.confluent_ceiling.per_s if result.confluent_ceiling else None
    exactly_once = result.confluent_exactly_once.per_s if result.confluent_exactly_once else None
    spanning = result.confluent_exactly_once_interval
    confluent_where = where.replace("streamscore", "streamscore on confluent-kafka")
    latency = _latency(on.latency if on else [], wait_ms, on.throughput.compute_ms_p50 if on else None,
                       confluent_where)
    return [
        _ratio("confluent: streamscore / its Kafka ceiling", ours, ceiling, CONFLUENT_CEILING_SHARE,
               f"{confluent_where} vs the plain confluent-kafka loop, closed loop"),
        _ratio("confluent: streamscore on confluent / on kafka-python", ours, kafka_python, CONFLUENT_FACTOR,
               f"{confluent_where} vs {where} (kafka-python), closed loop"),
        Target("confluent: " + latency.name, latency.measured, latency.target, latency.comparison, latency.unit,
               latency.met, latency.detail),
        _ratio("confluent: exactly-once / at-least-once", exactly_once, ours, EXACTLY_ONCE_SHARE,
               f"{confluent_where}, --delivery exactly-once vs at-least-once, closed loop"),
        _ratio(f"confluent: exactly-once, {EXACTLY_ONCE_INTERVAL_MS} ms transactions / at-least-once",
               spanning.per_s if spanning else None, ours, EXACTLY_ONCE_SHARE,
               f"{confluent_where}, --delivery exactly-once --commit-interval-ms {EXACTLY_ONCE_INTERVAL_MS} "
               "(replies reach read_committed readers up to that much later) vs at-least-once, closed loop"),
    ]


def _ratio(name: str, numerator: float | None, denominator: float | None, required: float, detail: str) -> Target:
    value = numerator / denominator if numerator and denominator else None
    return Target(name, value, required, ">=", "x", None if value is None else value >= required, detail)


def _latency(runs: list[LatencyRun], wait_ms: int, compute_ms: float | None, where: str) -> Target:
    """p99 at LATENCY_LOAD of the maximum throughput <= max wait + 2 x batch compute time + LATENCY_SLACK_MS."""
    run = min(runs, key=lambda r: abs(r.load - LATENCY_LOAD), default=None)
    if run is None or compute_ms is None or run.p99_ms is None:
        return Target(f"p99 latency at {LATENCY_LOAD:.0%} load", None, None, "<=", "ms", None,
                      f"{where}: not measured (no open-loop run or no compute time)")
    bound = wait_ms + 2 * compute_ms + LATENCY_SLACK_MS
    return Target(f"p99 latency at {LATENCY_LOAD:.0%} load", run.p99_ms, bound, "<=", "ms", run.p99_ms <= bound,
                  f"{where}, {run.load:.0%} load ({run.achieved_per_s:,.0f} req/s sent): bound = max wait "
                  f"{wait_ms} + 2 x batch compute {compute_ms:.2f} (median compute-ms of full batches) + "
                  f"{LATENCY_SLACK_MS:.0f} ms")
