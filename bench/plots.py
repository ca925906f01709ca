"""PNG plots per workload: throughput against batch size (ceilings drawn in), latency against offered load."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

from bench.results import WorkloadResult  # noqa: E402
from bench.targets import LATENCY_SLACK_MS  # noqa: E402


def throughput_plot(result: WorkloadResult, path: Path) -> None:
    """req/s against max batch size, one line per wait limit; Kafka ceiling and naive as horizontal lines."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for wait in sorted({p.max_wait_ms for p in result.grid}):
        points = sorted((p.batch_size, p.throughput.per_s) for p in result.grid
                        if p.max_wait_ms == wait and p.throughput.per_s)
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", label=f"streamscore, wait {wait} ms")
    ceilings = sorted((c.batch_size, c.items_per_s) for c in result.model_ceiling)
    if ceilings:
        ax.plot(*zip(*ceilings, strict=True), linestyle="--", color="grey", marker=".",
                label="model ceiling (forward only)")
    for run, color, label in ((result.kafka_ceiling, "tab:red", "Kafka ceiling (kafka-python)"),
                              (result.confluent_ceiling, "tab:purple", "Kafka ceiling (confluent-kafka)"),
                              (result.naive, "tab:brown", "naive, one at a time")):
        if run is not None and run.per_s:
            ax.axhline(run.per_s, color=color, linestyle=":", label=f"{label} ({run.per_s:,.0f}/s)")
    on = result.confluent
    if on is not None and on.throughput.per_s:
        ax.scatter([on.batch_size], [on.throughput.per_s], marker="*", s=120, color="tab:purple", zorder=3,
                   label=f"streamscore on confluent-kafka, wait {on.max_wait_ms} ms ({on.throughput.per_s:,.0f}/s)")
    ax.set_xscale("log", base=2)
    sizes = sorted({p.batch_size for p in result.grid} | {c.batch_size for c in result.model_ceiling})
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("max batch size")
    ax.set_ylabel("requests / s (closed loop)")
    ax.set_title(f"{result.name}: throughput")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_plot(result: WorkloadResult, batch_size: int, wait_ms: int, path: Path) -> bool:
    """p50/p95/p99 against offered load at the chosen configuration, with the latency target; False if no data."""
    point = result.point(batch_size, wait_ms)
    runs = sorted((r for r in point.latency if r.p50_ms is not None), key=lambda r: r.offered_per_s) if point else []
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rates = [r.achieved_per_s for r in runs]
    for name, values in (("p50", [r.p50_ms for r in runs]), ("p95", [r.p95_ms for r in runs]),
                         ("p99", [r.p99_ms for r in runs])):
        ax.plot(rates, [v if v is not None else float("nan") for v in values], marker="o", label=name)
    theirs = sorted((r.offered_per_s, r.achieved_per_s, r.p99_ms)
                    for r in (result.confluent.latency if result.confluent else []) if r.p99_ms is not None)
    if theirs:
        ax.plot([achieved for _, achieved, _ in theirs], [p99 for _, _, p99 in theirs], marker="*",
                color="tab:purple", label="p99 on confluent-kafka")
    if point and point.throughput.compute_ms_p50 is not None:
        bound = wait_ms + 2 * point.throughput.compute_ms_p50 + LATENCY_SLACK_MS
        ax.axhline(bound, color="tab:red", linestyle=":", label=f"p99 target at 50% load ({bound:.0f} ms)")
    floor = result.kafka_ceiling_latency
    if floor is not None and floor.p50_ms is not None and floor.p99_ms is not None:
        ax.scatter([floor.achieved_per_s] * 2, [floor.p50_ms, floor.p99_ms], marker="x", color="black",
                   label="Kafka ceiling loop at the same rate (p50, p99)", zorder=3)
    for r in runs:
        ax.annotate(f"{r.load:.0%}", (r.achieved_per_s, r.p50_ms or 0), textcoords="offset points", xytext=(0, -12),
                    ha="center", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("requests / s sent (open loop; labels: share of the closed-loop maximum)")
    ax.set_ylabel("latency, request sent -> reply received (ms)")
    ax.set_title(f"{result.name}: latency under load (batch {batch_size}, wait {wait_ms} ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
