"""The results as a markdown table: what ran, on what machine, the figures and the targets."""

from __future__ import annotations

from typing import Any

from bench.results import GridPoint, Target, ThroughputRun, WorkloadResult
from bench.targets import EXACTLY_ONCE_INTERVAL_MS, LATENCY_LOAD


def markdown(meta: dict[str, Any], workloads: list[WorkloadResult]) -> str:
    m = meta["machine"]
    lines = [
        "# streamscore benchmark",
        "",
        f"- command: `{meta['command']}` ({meta['size']} size, {meta['duration_s']:.0f} s, started "
        f"{meta['started_at']})",
        f"- machine: {m['cpu']}, {m['cores_usable']} usable cores of {m['cores']}, {m['memory_gib']} GiB; "
        f"Python {m['python']}, torch {m['torch']}, kafka-python {m['kafka_python']}, "
        f"confluent-kafka {m.get('confluent_kafka', 'n/a')}",
        f"- load average (1/5/15 min) at start {_load(m['load_average_at_start'])}, at end "
        f"{_load(m.get('load_average_at_end', []))}: everything (broker, Redis, contenders, this harness) "
        "shares these cores, so compare figures within this run, not across runs",
        f"- worker settings: --torch-threads {meta['torch_threads']} {meta.get('worker_args', '')}".rstrip()
        + f", {meta['partitions']} partitions per topic; "
        f"chosen configuration: batch {meta['batch_size']}, wait {meta['max_wait_ms']} ms; "
        f"load sent with {meta.get('load_client', 'kafka-python')}",
    ]
    for result in workloads:
        lines += ["", f"## {result.name}: {result.about}", ""]
        if result.status != "ran":
            lines.append(f"{result.note}")
            continue
        lines += _workload(result, meta["batch_size"], meta["max_wait_ms"])
    return "\n".join(lines) + "\n"


def _workload(r: WorkloadResult, batch: int, wait: int) -> list[str]:
    point = r.point(batch, wait)
    ceiling = (point.model_ceiling if point else None) or r.ceiling_at(batch)
    lines = [f"model `{r.model}` {r.model_version}, reply value about {r.reply_bytes} bytes; "
             f"{r.seconds:.0f} s for this workload", "",
             "| contender | requests | req/s | CPU us a request | note |", "|---|---:|---:|---:|---|",
             f"| model ceiling, forward only, batch {batch} | | {_num(ceiling.items_per_s if ceiling else None)} "
             f"| | {ceiling.batch_ms_p50 if ceiling else 0:.2f} ms a batch |"]
    runs = [("Kafka ceiling (plain kafka-python loop)", r.kafka_ceiling),
            ("naive (one request at a time)", r.naive),
            (f"streamscore, batch {batch}, wait {wait} ms", point.throughput if point else None)]
    if r.confluent_ceiling is not None:
        runs += [("Kafka ceiling on confluent-kafka (plain librdkafka loop)", r.confluent_ceiling),
                 (f"streamscore on confluent-kafka, batch {batch}, wait {wait} ms",
                  r.confluent.throughput if r.confluent else None),
                 ("... the same, --delivery exactly-once", r.confluent_exactly_once),
                 ("... the same, --delivery exactly-once --commit-interval-ms "
                  f"{EXACTLY_ONCE_INTERVAL_MS}", r.confluent_exactly_once_interval)]
    lines += [_run_row(label, run) for label, run in runs]
    lines += ["", "### Grid (closed-loop throughput; latency in an open loop at the given share of it)", "",
              "| batch | wait ms | req/s | / Kafka ceiling | / model ceiling (just before) | CPU us a request "
              "| mean batch | compute ms | load | p50 ms | p95 ms | p99 ms |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [_grid_row(r, p) for p in r.grid]
    notes = [f"- batch {p.batch_size}, wait {p.max_wait_ms} ms: {note}" for p in r.grid for note in _notes(p)]
    if notes:
        lines += ["", "Notes:", *notes]
    if point and point.latency:
        lines += ["", f"### Latency under load (batch {batch}, wait {wait} ms)", "",
                  "| load | offered req/s | sent req/s | p50 ms | p95 ms | p99 ms | max ms | mean batch | missing |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        rows = [(f"{x.load:.0%}", x) for x in point.latency]
        rows += [(f"{x.load:.0%}, on confluent-kafka", x) for x in (r.confluent.latency if r.confluent else [])]
        if r.kafka_ceiling_latency is not None:
            rows.append((f"Kafka ceiling loop at the {r.kafka_ceiling_latency.load:.0%} rate", r.kafka_ceiling_latency))
        lines += [f"| {label} | {_num(x.offered_per_s)} | {_num(x.achieved_per_s)} | {_num(x.p50_ms)} "
                  f"| {_num(x.p95_ms)} | {_num(x.p99_ms)} | {_num(x.max_ms)} | {_num(x.mean_batch_size, 1)} "
                  f"| {x.missing} |" for label, x in rows]
        lines += ["", "Where the time went (p50 / p99 ms, from the worker's reply headers): "
                  + "; ".join(f"{x.load:.0%} load: " + ", ".join(
                      f"{k} {_num(v)} / {_num(x.stages_p99_ms.get(k))}" for k, v in x.stages_p50_ms.items())
                      for x in point.latency)]
    lines += ["", "### Targets", "", "| target | measured | required | met | how |", "|---|---:|---:|---|---|"]
    lines += [_target_row(t) for t in r.targets]
    return lines


def _run_row(label: str, run: ThroughputRun | None) -> str:
    if run is None:
        return f"| {label} | | n/a | | not run |"
    return f"| {label} | {run.replies:,} | {_num(run.per_s)} | {_num(run.cpu_us_per_request)} | {run.note} |"


def _grid_row(r: WorkloadResult, p: GridPoint) -> str:
    t = p.throughput
    kafka = r.kafka_ceiling.per_s if r.kafka_ceiling else None
    ceiling = p.model_ceiling
    cells = [str(p.batch_size), str(p.max_wait_ms), _num(t.per_s), _share(t.per_s, kafka),
             _share(t.per_s, ceiling.items_per_s if ceiling else None), _num(t.cpu_us_per_request),
             _num(t.mean_batch_size, 1),
             _num(t.compute_ms_p50, 2)]
    lat = min(p.latency, key=lambda x: abs(x.load - LATENCY_LOAD), default=None)
    cells += ([f"{lat.load:.0%}", _num(lat.p50_ms), _num(lat.p95_ms), _num(lat.p99_ms)] if lat
              else ["", "", "", ""])
    return "| " + " | ".join(cells) + " |"


def _notes(p: GridPoint) -> list[str]:
    notes = [f"failed try: {n}" for n in p.failed_attempts]
    notes += [p.throughput.note] if p.throughput.note else []
    notes += [f"open loop at {x.load:.0%}: {x.missing:,} of {x.sent:,} requests got no reply" for x in p.latency
              if x.missing]
    return notes


def _target_row(t: Target) -> str:
    decimals, unit = (2, "") if t.unit == "x" else (1, " ms")
    measured = "n/a" if t.measured is None else _num(t.measured, decimals) + unit
    required = "n/a" if t.target is None else f"{t.comparison} {_num(t.target, decimals)}{unit}"
    met = {True: "yes", False: "no", None: "not measured"}[t.met]
    return f"| {t.name} | {measured} | {required} | {met} | {t.detail} |"


def _num(value: float | None, decimals: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{decimals}f}"


def _share(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.0%}" if ours and theirs else "n/a"


def _load(values: list[float]) -> str:
    return "/".join(f"{v:.1f}" for v in values) or "n/a"
