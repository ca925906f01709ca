"""``python -m bench.latency_target``: fixed batch waits against ``--latency-target-ms``, at light, medium
and heavy load, beside the floor of the machine.

First, each configuration's throughput at saturation: one worker process
over a pre-filled topic (closed loop), once a repeat. Then, for each repeat and
configuration in turn (interleaved, so that the machine's drift spreads over
all of them), a fresh worker, idle, meets open-loop runs at 10 %, 50 % and
90 % of a common reference rate (the best fixed wait's median throughput, or
``--reference-per-s``). The sender runs in a process of its own
(bench/tail_sender.py) on a fixed schedule, and latency is reply read -
planned send (no coordinated omission); a request's queue wait, batch wait
and compute come from its reply's headers. The floor is the bare librdkafka
loop (bench/confluent_ceiling.py: consume, reply, commit; no model, no
Redis) at the same rates: what this machine's broker, sender and reader cost
a request. Figures are medians over the repeats. Writes results.json,
results.md and latency-target.png under ``--out``. Needs
KAFKA_BOOTSTRAP_SERVERS and REDIS_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

from bench import commands, machine  # noqa: E402
from bench.contender import ContenderProcess  # noqa: E402
from bench.openloop import latency_run  # noqa: E402
from bench.results import LatencyRun, ThroughputRun  # noqa: E402
from bench.runs import RunContext, closed_loop, say  # noqa: E402
from bench.tail_sender import send_and_read  # noqa: E402
from bench.topics import RunTopics  # noqa: E402
from bench.workloads import WORKLOADS, RequestPool, load_or_skip, reply_size  # noqa: E402

LOADS = (0.1, 0.5, 0.9)
FLOOR = "floor: bare librdkafka loop"


@dataclass
class Config:
    label: str
    wait_ms: int | None  # the worker's --max-wait-ms; None: the floor, no worker
    target_ms: int | None = None  # its --latency-target-ms
    saturation: list[ThroughputRun] = field(default_factory=list)  # one a repeat
    latency: list[LatencyRun] = field(default_factory=list)  # every repeat's open-loop runs, in order

    def median(self, load: float, figure: str) -> float | None:
        """The median over the repeats of one figure (p50_ms, p99_ms, mean_batch_size) at ``load``."""
        values = [getattr(x, figure) for x in self.latency if x.load == load and getattr(x, figure) is not None]
        return statistics.median(values) if values else None

    def saturation_per_s(self) -> float | None:
        values = [x.per_s for x in self.saturation if x.per_s]
        return statistics.median(values) if values else None


def configs(waits_ms: list[int], target_ms: int, floor: bool) -> list[Config]:
    fixed = [Config(f"fixed wait {w} ms", w) for w in waits_ms]
    # The worker batches by the target alone once one is set; the 10 ms wait beside it is what its runs had.
    return [*([Config(FLOOR, None)] if floor else []), *fixed, Config(f"target {target_ms} ms", 10, target_ms)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_target", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="churn", choices=sorted(WORKLOADS))
    parser.add_argument("--waits-ms", default="0,2,10,50", help="the fixed waits (default 0,2,10,50)")
    parser.add_argument("--target-ms", type=int, default=50, help="the latency target (default 50)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--requests", type=int, default=100_000, help="closed-loop run (default 100,000)")
    parser.add_argument("--open-loop-s", type=float, default=10.0, help="measured, after the warm-up (default 10)")
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3, help="open-loop runs of each configuration (default 3)")
    parser.add_argument("--no-floor", action="store_true", help="leave out the bare librdkafka loop")
    parser.add_argument("--kafka-client", default="confluent", help="the worker's and the load's")
    parser.add_argument("--reference-per-s", type=float, default=0.0,
                        help="the rate the loads are fractions of; default: the best fixed wait's closed-loop "
                             "throughput. On a machine that also runs the sender, the reader and the broker, the "
                             "open loop saturates far below that: give the open loop's own capacity here (the "
                             "highest rate bench.tail answers without a growing backlog)")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/latency-target"))
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make up`, then eval its output)",
              file=sys.stderr)
        return 2
    servable, note = load_or_skip(WORKLOADS[args.workload])
    if servable is None:
        print(f"error: {note}", file=sys.stderr)
        return 2
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    ctx = RunContext(bootstrap, 4, args.torch_threads, args.out / "logs", progress=False,
                     worker_args=("--kafka-client", args.kafka_client), load_client=args.kafka_client,
                     redis_url=redis_url)
    pool = RequestPool(WORKLOADS[args.workload], 2_000)
    model = WORKLOADS[args.workload].model
    runs = configs([int(w) for w in args.waits_ms.split(",")], args.target_ms, not args.no_floor)
    workers = [c for c in runs if c.wait_ms is not None]
    for repeat in range(args.repeats):
        for config in workers:
            config.saturation.append(closed_loop(ctx, f"{_label(config, 'sat')}-{repeat}", pool.take(args.requests),
                                                 partial(_command, ctx, redis_url, model, args.batch_size, config),
                                                 90.0, from_worker=True))
            say(f"{config.label}: {config.saturation[-1].per_s or 0:,.0f} req/s closed loop (repeat {repeat + 1})")
    reference = args.reference_per_s or max(c.saturation_per_s() or 0.0 for c in workers if c.target_ms is None)
    rates = [load * reference for load in LOADS]
    reply_bytes = reply_size(servable, pool.take(32))
    for repeat in range(args.repeats):
        for config in runs:
            def open_loops(topics: RunTopics, config: Config = config, repeat: int = repeat) -> None:
                for load, rate in zip(LOADS, rates, strict=True):
                    files = args.out / "logs" / f"{_label(config, 'lat')}-{repeat}-{load:.0%}"
                    sends, reader = send_and_read(bootstrap, topics.requests, topics.replies,
                                                  pool.take(round(rate * (args.warmup_s + args.open_loop_s))),
                                                  rate, files, args.kafka_client)
                    if config.wait_ms is None:  # the bare loop's headers only have the right size
                        reader.stages.clear()
                        reader.batch_sizes.clear()
                    x = latency_run(sends["sent_ms"], sends["planned_ms"], reader, rate, load, args.warmup_s)
                    config.latency.append(x)
                    say(f"{config.label} at {load:.0%} ({rate:,.0f}/s, repeat {repeat + 1}): p50 {x.p50_ms or 0:.0f} "
                        f"p99 {x.p99_ms or 0:.0f} ms, mean batch {x.mean_batch_size or 0:.1f}")
            if config.wait_ms is None:
                _floor(ctx, f"lt-floor-{repeat}", reply_bytes, open_loops)
            else:
                closed_loop(ctx, f"{_label(config, 'lat')}-{repeat}", pool.take(500),
                            partial(_command, ctx, redis_url, model, args.batch_size, config), 90.0,
                            from_worker=True, after_drain=partial(_without_run, open_loops))
    meta = {"command": shlex.join(["python", "-m", "bench.latency_target", *(argv or sys.argv[1:])]),
            "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine.describe(),
            "reference_per_s": reference, "reference_given": bool(args.reference_per_s),
            "batch_size": args.batch_size, "kafka_client": args.kafka_client, "repeats": args.repeats,
            "open_loop_s": args.open_loop_s}
    (args.out / "results.json").write_text(json.dumps({**meta, "configs": [asdict(c) for c in runs]}, indent=2))
    table = markdown(meta, runs)
    (args.out / "results.md").write_text(table)
    plot(runs, reference, args.out / "latency-target.png")
    print(table)
    return 0


def _without_run(open_loops: Callable[[RunTopics], None], topics: RunTopics, _run: ThroughputRun) -> None:
    open_loops(topics)


def _floor(ctx: RunContext, label: str, reply_bytes: int, open_loops: Callable[[RunTopics], None]) -> None:
    """The bare librdkafka loop on fresh topics, given its partitions, then the open loops."""
    topics = RunTopics.fresh(label)
    topics.create(ctx.bootstrap, ctx.partitions)
    process = ContenderProcess(label, commands.confluent_ceiling(ctx.bootstrap, topics, reply_bytes),
                               ctx.log_dir / f"{label}.log")
    try:
        if not process.wait_assigned(ctx.startup_timeout_s):
            say(f"{label}: never got its partitions (log: {process.log_path})")
            return
        open_loops(topics)
    finally:
        process.stop()
        topics.delete(ctx.bootstrap)


def _label(config: Config, phase: str) -> str:
    return f"lt-{phase}-" + "".join(c if c.isalnum() else "-" for c in config.label)


def _command(ctx: RunContext, redis_url: str, model: str, batch_size: int, config: Config,
             topics: RunTopics) -> list[str]:
    return commands.worker(ctx.bootstrap, redis_url, topics, model, batch_size, config.wait_ms or 0, ctx.torch_threads,
                           ctx.worker_args, latency_target_ms=config.target_ms or 0)


def markdown(meta: dict[str, object], runs: list[Config]) -> str:
    source = "given" if meta.get("reference_given") else "the best fixed wait's closed-loop throughput"
    lines = [f"Command: `{meta['command']}` ({meta['started_at']}); loads are fractions of "
             f"{meta['reference_per_s']:,.0f} req/s ({source}), on {meta['kafka_client']}, batch "
             f"{meta['batch_size']}; latency = reply read - planned send, {meta['open_loop_s']:g} s a run; each "
             f"cell is the median of {meta['repeats']} runs, each run's p99 (and req/s) in brackets.", "",
             "| configuration | req/s at saturation | " + " | ".join(
                 f"p50 / p99 ms at {load:.0%}" for load in LOADS) + " | mean batch at 10 / 50 / 90 % |",
             "|---|---:|" + "---:|" * len(LOADS) + "---:|"]
    for config in runs:
        cells = []
        for load in LOADS:
            each = ", ".join(f"{x.p99_ms or 0:.0f}" for x in config.latency if x.load == load)
            cells.append(f"{config.median(load, 'p50_ms') or 0:.1f} / {config.median(load, 'p99_ms') or 0:.0f} "
                         f"[{each}]")
        batches = " / ".join(f"{config.median(load, 'mean_batch_size') or 0:.1f}" for load in LOADS)
        per_s = config.saturation_per_s()
        each_per_s = ", ".join(f"{x.per_s or 0:,.0f}" for x in config.saturation)
        lines.append(f"| {config.label} | {'-' if per_s is None else f'{per_s:,.0f} [{each_per_s}]'} | "
                     + " | ".join(cells)
                     + f" | {batches if config.wait_ms is not None else '-'} |")
    return "\n".join(lines) + "\n"


def plot(runs: list[Config], reference: float, path: Path) -> None:
    fig, (p99, sat) = plt.subplots(1, 2, figsize=(11, 4.5))
    for config in runs:
        line = p99.plot(LOADS, [config.median(load, "p99_ms") for load in LOADS],
                        marker="*" if config.target_ms else "o", label=config.label,
                        **({"color": "black", "linestyle": "--"} if config.wait_ms is None else {}))
        p99.scatter([x.load for x in config.latency], [x.p99_ms for x in config.latency], s=8, alpha=0.4,
                    color=line[0].get_color())
        if config.target_ms:
            p99.axhline(config.target_ms, color="tab:red", linestyle=":", label=f"target {config.target_ms} ms")
    p99.set_xlabel(f"offered load (fraction of {reference:,.0f} req/s)")
    p99.set_ylabel("p99 latency, ms (reply read - planned send)")
    p99.set_title("median of the repeats (line), each run (dots)", fontsize=9)
    p99.set_yscale("log")
    p99.legend(fontsize=8)
    workers = [c for c in runs if c.wait_ms is not None]
    sat.bar([c.label for c in workers], [c.saturation_per_s() or 0 for c in workers],
            color=["tab:red" if c.target_ms else "tab:blue" for c in workers])
    sat.set_ylabel("req/s at saturation (closed loop)")
    sat.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
