"""What one run of ``bench.two_models`` measured, and the report of them all: the medians, the verdict,
results.md's tables and two-models.png."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

LIGHT, HEAVY = "light", "heavy"  # the entries' names, what each request's model field says
LIGHT_MODEL, HEAVY_MODEL = "churn", "bench.heavy_model:heavy"
HEAVY_EVERY = 10  # in the mixed run, every tenth request is for the heavy model: 9 light to 1 heavy
SHAPES = ("alone", "mixed")


@dataclass
class Row:
    shape: str  # "alone": the light model only; "mixed": light and heavy, 9 to 1
    repeat: int
    rate: float
    sent: dict[str, int] = field(default_factory=dict)  # by entry
    answered: dict[str, int] = field(default_factory=dict)
    not_ok: int = 0  # replies that were not ok, or came from another entry than the request named
    max_behind_ms: float = 0.0  # how far the sender fell behind its schedule
    latency_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)  # entry: p50, p99, max
    compute_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)  # entry: p50, p99, max
    # queue wait + batch wait + compute from the replies' headers: the request's record produced -> its batch
    # scored, what the worker did without the reply's way back to the reader
    scored_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)  # entry: p50, p99, max
    batch_size: dict[str, dict[str, float | None]] = field(default_factory=dict)  # entry: p50, mean, max
    machine_busy: float | None = None  # share of the machine's CPU busy during the run, every process
    # CPU during the run, in cores: the worker's, and the harness's (this reader and the sender's process)
    worker_cores: float | None = None
    harness_cores: float | None = None
    light_stages_p99_ms: dict[str, float | None] = field(default_factory=dict)  # from the headers, and to the reader
    # polled -> its batch scored (batch-wait-ms): the wait the round robin decides, behind at most one heavy batch
    light_batch_wait_ms: dict[str, float | None] = field(default_factory=dict)  # p50, p99, max
    load_1min: float | None = None  # at the run's end
    exit_code: int | None = None
    log: str = ""
    timeline: str = ""  # every answered request's planned send, latency, stages and model (tail.write_timeline)


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summary(rows: list[Row]) -> dict[str, Any]:
    """The medians over the repeats, and the verdict: the light p99's increase from alone to mixed against
    the heavy replies' p99 compute time (None where a figure is missing)."""
    def of(shape: str, entry: str, table: str, stat: str) -> float | None:
        return _median([getattr(r, table).get(entry, {}).get(stat) for r in rows if r.shape == shape])

    out: dict[str, Any] = {f"light_{stat}_{shape}_ms": of(shape, LIGHT, "latency_ms", stat)
                           for shape in SHAPES for stat in ("p50", "p99")}
    out |= {f"light_scored_{stat}_{shape}_ms": of(shape, LIGHT, "scored_ms", stat)
            for shape in SHAPES for stat in ("p50", "p99")}
    out |= {f"heavy_{stat}_ms": of("mixed", HEAVY, "latency_ms", stat) for stat in ("p50", "p99")}
    out |= {f"heavy_compute_{stat}_ms": of("mixed", HEAVY, "compute_ms", stat) for stat in ("p50", "p99", "max")}
    out["heavy_batch_mean"] = of("mixed", HEAVY, "batch_size", "mean")
    # The round robin's own part, per mixed run: the longest a polled light request waited for its batch, less
    # the longest heavy batch; the worst run's (about the light batches' compute when one heavy batch is the most)
    excess = [waited - longest for r in rows if r.shape == "mixed"
              if (waited := r.light_batch_wait_ms.get("max")) is not None
              and (longest := r.compute_ms.get(HEAVY, {}).get("max")) is not None]
    out["light_batch_wait_max_over_heavy_compute_max_ms"] = max(excess, default=None)
    bound = out["heavy_compute_p99_ms"]
    for prefix in ("light", "light_scored"):  # read here; and from the headers, without the way back
        alone, mixed = out[f"{prefix}_p99_alone_ms"], out[f"{prefix}_p99_mixed_ms"]
        increase = None if alone is None or mixed is None else mixed - alone
        margin = None if increase is None or bound is None else bound - increase
        out[f"{prefix}_p99_increase_ms"], out[f"{prefix}_margin_ms"] = increase, margin
        out[f"{prefix}_holds"] = None if margin is None else margin >= 0
    return out


def _verdict(margin: float | None) -> str:
    if margin is None:
        return "not measured"
    return f"holds, {margin:.1f} ms to spare" if margin >= 0 else f"fails, {-margin:.1f} ms over"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def trio(figures: dict[str, float | None], keys: tuple[str, ...] = ("p50", "p99", "max")) -> str:
    return " / ".join(_ms(figures.get(k)) for k in keys) if figures else "-"


def markdown(meta: dict[str, Any], summ: dict[str, Any], rows: list[Row]) -> str:
    return "\n".join([*_setup(meta, rows), "", *_verdict_table(meta, summ), "", *_run_table(meta, rows)]) + "\n"


def _setup(meta: dict[str, Any], rows: list[Row]) -> list[str]:
    busy = [r.machine_busy for r in rows if r.machine_busy is not None]
    return [
        "# Two models in one worker: the light model's p99 alone and beside a heavy one", "",
        f"Command: `{meta['command']}` ({meta['started_at']}). {meta['rate']:,.0f} requests/s in all, "
        f"{meta['seconds']:g} s measured after {meta['warmup_s']:g} s of warm-up, {meta['repeats']} repeats of each "
        f"run, interleaved; Kafka client {meta['kafka_client']}; one torch thread, inline scoring. Light: "
        f"`{LIGHT_MODEL}`, batch {meta['light_batch_size']}, wait {meta['light_wait_ms']} ms. Heavy: "
        f"`{HEAVY_MODEL}`, batch {meta['heavy_batch_size']}, wait {meta['heavy_wait_ms']} ms. Mixed: "
        f"{HEAVY_EVERY - 1} light requests to 1 heavy (so the light model gets {HEAVY_EVERY - 1}/{HEAVY_EVERY} of "
        "the rate it gets alone). Latency = reply read - planned send.", "",
        f"Machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores, shared with other work; load "
        f"average {meta['machine']['load_average_at_start']} at the start, {meta['load_average_at_end']} at the "
        f"end. The whole machine was {min(busy, default=0):.0%}-{max(busy, default=0):.0%} busy during the runs "
        "(every process: the worker, this harness, the broker, anything else; the last column splits it). "
        "Figures this noisy are indications, not constants.",
    ]


def _verdict_table(meta: dict[str, Any], summ: dict[str, Any]) -> list[str]:
    return [
        f"| median of {meta['repeats']} repeats | ms |", "|---|---:|",
        f"| light p50, alone / mixed | {_ms(summ['light_p50_alone_ms'])} / {_ms(summ['light_p50_mixed_ms'])} |",
        f"| light p99, alone / mixed | {_ms(summ['light_p99_alone_ms'])} / {_ms(summ['light_p99_mixed_ms'])} |",
        f"| light p99 increase | {_ms(summ['light_p99_increase_ms'])} |",
        f"| light produced -> scored (headers) p99, alone / mixed | {_ms(summ['light_scored_p99_alone_ms'])} / "
        f"{_ms(summ['light_scored_p99_mixed_ms'])} |",
        f"| light produced -> scored p99 increase | {_ms(summ['light_scored_p99_increase_ms'])} |",
        f"| heavy batch compute, p50 / p99 / max (replies' compute-ms) | {_ms(summ['heavy_compute_p50_ms'])} / "
        f"{_ms(summ['heavy_compute_p99_ms'])} / {_ms(summ['heavy_compute_max_ms'])} |",
        f"| heavy batch size, mean | {_ms(summ['heavy_batch_mean'])} |",
        f"| heavy p50 / p99 | {_ms(summ['heavy_p50_ms'])} / {_ms(summ['heavy_p99_ms'])} |", "",
        "Claim: the light model's p99 grows by no more than one heavy batch's compute time (the heavy replies' "
        f"p99 compute-ms): **{_verdict(summ['light_margin_ms'])}** (latency read here); "
        f"{_verdict(summ['light_scored_margin_ms'])} from the replies' headers (record produced -> batch scored, "
        "which leaves out the reply's way to the reader and the reader's own stalls).", "",
        "The round robin's own part, which the machine's noise touches least: a polled light request waited for "
        "its batch (batch-wait-ms) at most "
        f"{_ms(summ['light_batch_wait_max_over_heavy_compute_max_ms'])} ms longer than the longest heavy batch "
        "of its run (the worst mixed run; the light batches' own compute and the loop's steps make up the rest).",
    ]


def _run_table(meta: dict[str, Any], rows: list[Row]) -> list[str]:
    lines = [
        "| run | repeat | light p50 / p99 / max ms | light p99 by stage: queue wait / batch wait / compute / reply to "
        "reader ms | light batch wait p99 / max ms | light produced -> scored p50 / p99 ms | light batch mean "
        "| heavy p50 / p99 / max ms | heavy compute p50 / p99 / max ms | heavy batch p50 / mean / max | answered "
        "| not ok | sender behind ms | CPU, cores: worker / harness / rest (broker, others) of "
        f"{meta['machine']['cores']} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        heavy = HEAVY in r.sent
        answered = ", ".join(f"{e} {r.answered.get(e, 0)}/{n}" for e, n in r.sent.items()) or "-"
        lines.append(
            f"| {r.shape} | {r.repeat + 1} | {trio(r.latency_ms.get(LIGHT, {}))} | "
            f"{trio(r.light_stages_p99_ms, tuple(r.light_stages_p99_ms))} | "
            f"{trio(r.light_batch_wait_ms, ('p99', 'max'))} | "
            f"{trio(r.scored_ms.get(LIGHT, {}), ('p50', 'p99'))} | {_ms(r.batch_size.get(LIGHT, {}).get('mean'))} | "
            f"{trio(r.latency_ms[HEAVY]) if heavy else '-'} | {trio(r.compute_ms[HEAVY]) if heavy else '-'} | "
            f"{trio(r.batch_size[HEAVY], ('p50', 'mean', 'max')) if heavy else '-'} | "
            f"{answered} | {r.not_ok} | {_ms(r.max_behind_ms)} | {_cores(r, meta['machine']['cores'])} |")
    return lines


def _cores(row: Row, cores: int) -> str:
    if row.worker_cores is None or row.harness_cores is None or row.machine_busy is None:
        return "-"
    rest = row.machine_busy * cores - row.worker_cores - row.harness_cores
    return f"{row.worker_cores:.2f} / {row.harness_cores:.2f} / {rest:.2f}"


def plot(rows: list[Row], light: dict[str, list[float]], summ: dict[str, Any], path: Path) -> None:
    """Left: the share of light requests slower than x, alone and mixed, every repeat pooled. Right: each
    run's light p99, and the bound (the alone median plus the heavy batches' p99 compute)."""
    fig, (tail_ax, runs_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for shape, color in zip(SHAPES, ("tab:blue", "tab:orange"), strict=True):
        pooled = sorted(light[shape])
        if pooled:
            n = len(pooled)
            tail_ax.plot(pooled, [1 - i / n for i in range(n)], color=color, label=f"light, {shape} ({n:,})")
    if summ["light_p99_alone_ms"] is not None and summ["heavy_compute_p99_ms"] is not None:
        bound = summ["light_p99_alone_ms"] + summ["heavy_compute_p99_ms"]
        tail_ax.axvline(bound, color="tab:red", linestyle="--", label="alone p99 + heavy compute p99 (medians)")
        runs_ax.axhline(bound, color="tab:red", linestyle="--", label="alone p99 + heavy compute p99 (medians)")
    tail_ax.axhline(0.01, color="grey", linewidth=0.6)
    tail_ax.set_yscale("log")
    tail_ax.set_ylim(1e-4, 1.05)
    tail_ax.set_xlabel("ms, reply read - planned send")
    tail_ax.set_ylabel("share of light requests slower")
    tail_ax.set_title("the light latency's tail, every repeat pooled (grey: p99)", fontsize=9)
    tail_ax.legend(fontsize=8)
    for i, (shape, color) in enumerate(zip(SHAPES, ("tab:blue", "tab:orange"), strict=True)):
        p99s = [r.latency_ms.get(LIGHT, {}).get("p99") for r in rows if r.shape == shape]
        runs_ax.scatter([i] * len(p99s), [p or 0 for p in p99s], color=color, label=f"light p99, {shape}")
    computes = [r.compute_ms.get(HEAVY, {}).get("p99") for r in rows if r.shape == "mixed"]
    runs_ax.scatter([2] * len(computes), [c or 0 for c in computes], color="tab:red", marker="x",
                    label="heavy batch compute p99")
    runs_ax.set_xticks(range(3), ["light alone", "light mixed", "heavy compute"])
    runs_ax.set_xlim(-0.5, 2.5)
    runs_ax.set_ylim(bottom=0)
    runs_ax.set_ylabel("ms")
    runs_ax.set_title("each repeat a point", fontsize=9)
    runs_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


