"""``python -m bench.latency_target``: fixed batch waits against ``--latency-target-ms``, at light, medium
and heavy load.

Each configuration is one worker process per phase, on fresh topics. First a
closed-loop run over a pre-filled topic gives its throughput at saturation.
Then, with the worker idle, open-loop runs send at 10 %, 50 % and 90 % of a
common reference rate (the best throughput among the fixed waits, or
``--reference-per-s``), so that every configuration meets the same offered loads; latency is request sent ->
reply read, and a request's queue wait, batch wait and compute come from its
reply's headers. Writes results.json, results.md and latency-target.png
under ``--out``. Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

from bench import commands, machine  # noqa: E402
from bench.openloop import open_loop  # noqa: E402
from bench.results import LatencyRun, ThroughputRun  # noqa: E402
from bench.runs import RunContext, closed_loop, say  # noqa: E402
from bench.topics import RunTopics  # noqa: E402
from bench.workloads import WORKLOADS, RequestPool  # noqa: E402

LOADS = (0.1, 0.5, 0.9)


@dataclass
class Config:
    label: str
    wait_ms: int  # the worker's --max-wait-ms
    target_ms: int | None = None  # its --latency-target-ms
    saturation: ThroughputRun | None = None
    latency: list[LatencyRun] = field(default_factory=list)


def configs(waits_ms: list[int], target_ms: int) -> list[Config]:
    fixed = [Config(f"fixed wait {w} ms", w) for w in waits_ms]
    # The worker batches by the target alone once one is set; the 10 ms wait beside it is what its runs had.
    return [*fixed, Config(f"target {target_ms} ms", 10, target_ms)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_target", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="churn", choices=sorted(WORKLOADS))
    parser.add_argument("--waits-ms", default="0,2,10,50", help="the fixed waits (default 0,2,10,50)")
    parser.add_argument("--target-ms", type=int, default=50, help="the latency target (default 50)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--requests", type=int, default=40_000, help="closed-loop run (default 40,000)")
    parser.add_argument("--open-loop-s", type=float, default=10.0)
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
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(bootstrap, 4, args.torch_threads, args.out / "logs", progress=False,
                     worker_args=("--kafka-client", args.kafka_client), load_client=args.kafka_client)
    pool = RequestPool(WORKLOADS[args.workload], 2_000)
    model = WORKLOADS[args.workload].model
    runs = configs([int(w) for w in args.waits_ms.split(",")], args.target_ms)
    for config in runs:
        config.saturation = closed_loop(ctx, _label(config, "sat"), pool.take(args.requests),
                                        partial(_command, ctx, redis_url, model, args.batch_size, config),
                                        90.0, from_worker=True)
        say(f"{config.label}: {config.saturation.per_s or 0:,.0f} req/s closed loop")
    best_closed = max((c.saturation.per_s or 0.0) for c in runs if c.target_ms is None and c.saturation)
    reference = args.reference_per_s or best_closed
    for config in runs:
        def open_loops(topics: RunTopics, _run: ThroughputRun, config: Config = config) -> None:
            for load in LOADS:
                rate = load * reference
                config.latency.append(open_loop(bootstrap, topics.requests, topics.replies,
                                                pool.take(max(10, round(rate * args.open_loop_s))), rate, load, 1.0,
                                                False, kafka_client=args.kafka_client))
                x = config.latency[-1]
                say(f"{config.label} at {load:.0%} ({rate:,.0f}/s): p50 {x.p50_ms or 0:.0f} "
                    f"p99 {x.p99_ms or 0:.0f} ms, mean batch {x.mean_batch_size or 0:.1f}")
        closed_loop(ctx, _label(config, "lat"), pool.take(500),
                    partial(_command, ctx, redis_url, model, args.batch_size, config), 90.0, from_worker=True,
                    after_drain=open_loops)
    meta = {"command": shlex.join(["python", "-m", "bench.latency_target", *(argv or sys.argv[1:])]),
            "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine.describe(),
            "reference_per_s": reference, "reference_given": bool(args.reference_per_s),
            "batch_size": args.batch_size, "kafka_client": args.kafka_client}
    (args.out / "results.json").write_text(json.dumps({**meta, "configs": [asdict(c) for c in runs]}, indent=2))
    table = markdown(meta, runs)
    (args.out / "results.md").write_text(table)
    plot(runs, reference, args.out / "latency-target.png")
    print(table)
    return 0


def _label(config: Config, phase: str) -> str:
    return f"lt-{phase}-" + config.label.replace(" ", "-")


def _command(ctx: RunContext, redis_url: str, model: str, batch_size: int, config: Config,
             topics: RunTopics) -> list[str]:
    return commands.worker(ctx.bootstrap, redis_url, topics, model, batch_size, config.wait_ms, ctx.torch_threads,
                           ctx.worker_args, latency_target_ms=config.target_ms or 0)


def markdown(meta: dict[str, object], runs: list[Config]) -> str:
    source = "given" if meta.get("reference_given") else "the best fixed wait's closed-loop throughput"
    lines = [f"Command: `{meta['command']}` ({meta['started_at']}); loads are fractions of "
             f"{meta['reference_per_s']:,.0f} req/s ({source}), on "
             f"{meta['kafka_client']}, batch {meta['batch_size']}.", "",
             "| configuration | req/s at saturation | " + " | ".join(
                 f"p50 / p99 ms at {load:.0%}" for load in LOADS) + " | mean batch at 10 / 50 / 90 % |",
             "|---|---:|" + "---:|" * len(LOADS) + "---:|"]
    for config in runs:
        cells = [f"{x.p50_ms or 0:.0f} / {x.p99_ms or 0:.0f}" for x in config.latency]
        batches = " / ".join(f"{x.mean_batch_size or 0:.1f}" for x in config.latency)
        per_s = config.saturation.per_s if config.saturation else None
        lines.append(f"| {config.label} | {per_s or 0:,.0f} | " + " | ".join(cells) + f" | {batches} |")
    return "\n".join(lines) + "\n"


def plot(runs: list[Config], reference: float, path: Path) -> None:
    fig, (p99, sat) = plt.subplots(1, 2, figsize=(11, 4.5))
    for config in runs:
        points = [(x.load, x.p99_ms) for x in config.latency if x.p99_ms is not None]
        if points:
            p99.plot(*zip(*points, strict=True), marker="*" if config.target_ms else "o", label=config.label)
        if config.target_ms:
            p99.axhline(config.target_ms, color="tab:red", linestyle=":", label=f"target {config.target_ms} ms")
    p99.set_xlabel(f"offered load (fraction of {reference:,.0f} req/s)")
    p99.set_ylabel("p99 latency, ms (request sent -> reply read)")
    p99.set_yscale("log")
    p99.legend(fontsize=8)
    labels = [c.label for c in runs]
    sat.bar(labels, [(c.saturation.per_s or 0) if c.saturation else 0 for c in runs],
            color=["tab:red" if c.target_ms else "tab:blue" for c in runs])
    sat.set_ylabel("req/s at saturation (closed loop)")
    sat.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
