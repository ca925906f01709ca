"""``python -m bench.model_budget``: what a memory budget saves, and what loading on first use costs a request.

One worker serves ``--models`` copies of a heavy model (``bench.heavy_model:heavy``,
a 2048 x 8 MLP: 134 MB of float32 weights each; entries ``m1``, ``m2`` ...),
under two configurations (a ``--config`` TOML file each):

- ``all``: no budget, every model loaded at start;
- ``budget``: ``max_loaded_models = --budget`` (default: half the models),
  so the models load on first use and the least recently used idle one
  is let go (worker/stream/residency.py).

The traffic moves between the models: ``--phases`` phases of ``--phase-s``
seconds, each sending every request to the next model in turn (m1, m2, m3, m1
...), open loop at ``--rate`` (bench/tail_sender.py: latency counts from each
request's planned send, no coordinated omission). Under the budget, a phase
whose model was let go starts with a load: its first requests wait for it.

Per run: latency p50/p99/max over all requests, and p99 over each phase's first
second against the rest; how many loads on first use and models let go (from the
worker's log) and the load seconds; the worker's resident memory at the end of
the traffic (VmRSS) and its peak (VmHWM: a load's transient counts there);
replies not ``ok`` or from another model. Writes, under ``--out`` (default
bench/results/model-budget/<time>/): results.json, results.md, and
model-budget.png (each request's latency over the run's time, both
configurations, the phase boundaries marked). Needs KAFKA_BOOTSTRAP_SERVERS and
REDIS_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import orjson

from bench import commands, machine
from bench.contender import ContenderProcess
from bench.results import percentile
from bench.runs import say
from bench.tail_sender import send_and_read
from bench.topics import RunTopics, default_load_client
from bench.workloads import WORKLOADS, RequestPool

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

MODEL = "bench.heavy_model:heavy"
SHAPES = ("all", "budget")
PARTITIONS = 4
PHASE_START_S = 1.0  # a phase's first second: where a load on first use shows


@dataclass
class Row:
    shape: str
    repeat: int
    sent: int = 0
    answered: int = 0
    not_ok: int = 0
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    phase_start_p99_ms: float | None = None
    phase_rest_p99_ms: float | None = None
    loads: int = 0
    let_go: int = 0
    load_s: list[float] = field(default_factory=list)
    peak_memory_mib: float | None = None
    end_memory_mib: float | None = None
    machine_busy: float | None = None
    exit_code: int | None = None
    log: str = ""
    points: list[tuple[float, float]] = field(default_factory=list)  # (seconds into the run, latency ms)


def config_toml(shape: str, args: argparse.Namespace) -> str:
    lines = [f"max_batch_size = {args.batch_size}", f"max_wait_ms = {args.wait_ms}"]
    if shape == "budget":
        lines.append(f"max_loaded_models = {args.budget}")
    for i in range(1, args.models + 1):
        lines += ["", f"[models.m{i}]", f'model = "{MODEL}"', f'version = "m{i}"']
    return "\n".join(lines) + "\n"


def bodies(args: argparse.Namespace, pool: RequestPool) -> list[dict[str, Any]]:
    """Every request of the run, in send order, each naming the model of its phase."""
    per_phase = round(args.rate * args.phase_s)
    return [{**body, "model": f"m{(i // per_phase) % args.models + 1}"}
            for i, body in enumerate(pool.take(per_phase * args.phases))]


def run_one(shape: str, repeat: int, args: argparse.Namespace, pool: RequestPool) -> Row:
    """One run. Always stops the worker and deletes the topics."""
    row = Row(shape, repeat)
    label = f"model-budget-{shape}-{repeat}"
    logs = args.out / "logs"
    config = logs / f"{label}.toml"
    config.write_text(config_toml(shape, args))
    topics = RunTopics.fresh(label)
    topics.create(args.bootstrap, PARTITIONS)
    command = commands.worker(args.bootstrap, args.redis_url, topics, MODEL, args.batch_size, args.wait_ms, 1,
                              ("--kafka-client", args.kafka_client, "--config", str(config)))
    process = ContenderProcess(label, command, logs / f"{label}.log")
    row.log = str(process.log_path)
    sent = bodies(args, pool)
    try:
        if not process.wait_assigned(300.0):
            say(f"{label}: never got its partitions (log: {process.log_path})")
            return row
        ticks = machine.cpu_ticks()
        sends, reader = send_and_read(args.bootstrap, topics.requests, topics.replies, sent, args.rate,
                                      logs / label, args.kafka_client, answers=True)
        row.machine_busy = machine.busy_share(ticks, machine.cpu_ticks())
        row.peak_memory_mib, row.end_memory_mib = process.memory_mib("VmHWM"), process.memory_mib("VmRSS")
    finally:
        row.exit_code = process.stop()
        topics.delete(args.bootstrap, args.redis_url)
    _figures(row, sent, sends, reader, args)
    _loads(row, process.log_path)
    return row


def _figures(row: Row, sent: list[dict[str, Any]], sends: dict[str, Any], reader: Any,
             args: argparse.Namespace) -> None:
    planned: dict[str, float] = sends["planned_ms"]
    model_of = {str(b["id"]): str(b["model"]) for b in sent}
    row.sent, row.answered = len(sent), sum(1 for b in sent if str(b["id"]) in reader.received_ms)
    row.not_ok = sum(1 for i, (status, model) in reader.answers.items() if status != "ok" or model != model_of.get(i))
    start = min(planned.values())
    latencies: list[float] = []
    at_start: list[float] = []
    rest: list[float] = []
    for request_id, planned_ms in planned.items():
        received = reader.received_ms.get(request_id)
        if received is None:
            continue
        latency, into_run_s = received - planned_ms, (planned_ms - start) / 1000
        latencies.append(latency)
        row.points.append((round(into_run_s, 3), round(latency, 2)))
        (at_start if into_run_s % args.phase_s < PHASE_START_S else rest).append(latency)
    latencies.sort()
    row.latency_ms = {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
                      "max": latencies[-1] if latencies else None}
    row.phase_start_p99_ms = percentile(sorted(at_start), 99)
    row.phase_rest_p99_ms = percentile(sorted(rest), 99)


def _loads(row: Row, log_path: Path) -> None:
    for line in log_path.read_bytes().splitlines():
        if not line.startswith(b"{"):
            continue
        event = orjson.loads(line)
        if event.get("event") == "model_loaded_on_first_use":
            row.loads += 1
            row.load_s.append(float(event.get("load_s", 0.0)))
        elif event.get("event") == "model_let_go":
            row.let_go += 1


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def markdown(meta: dict[str, Any], rows: list[Row]) -> str:
    lines = [f"# Memory budget: {meta['models']} models, room for {meta['budget']}", "",
             f"`{meta['command']}`, {meta['started_at']}; {meta['phases']} phases of {meta['phase_s']} s at "
             f"{meta['rate']:g} req/s, each phase's requests all for the next model in turn.", "",
             "| run | memory at the end (MiB) | peak memory (MiB) | p50 ms | p99 ms | max ms "
             "| p99 first 1 s of a phase | p99 rest | loads | let go | load s (median) | answered | not ok "
             "| machine busy |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        loads = sorted(row.load_s)
        median = loads[len(loads) // 2] if loads else None
        lines.append(f"| {row.shape} #{row.repeat + 1} | {_ms(row.end_memory_mib)} | {_ms(row.peak_memory_mib)} "
                     f"| {_ms(row.latency_ms.get('p50'))} "
                     f"| {_ms(row.latency_ms.get('p99'))} | {_ms(row.latency_ms.get('max'))} "
                     f"| {_ms(row.phase_start_p99_ms)} | {_ms(row.phase_rest_p99_ms)} | {row.loads} | {row.let_go} "
                     f"| {'-' if median is None else f'{median:.2f}'} | {row.answered}/{row.sent} | {row.not_ok} "
                     f"| {'-' if row.machine_busy is None else f'{row.machine_busy:.0%}'} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], args: argparse.Namespace, path: Path) -> None:
    figure, axes = plt.subplots(len(SHAPES), 1, figsize=(10, 6), sharex=True)
    for axis, shape in zip(axes, SHAPES, strict=True):
        for row in (r for r in rows if r.shape == shape):
            if row.points:
                xs, ys = zip(*row.points, strict=True)
                axis.scatter(xs, ys, s=2, label=f"run {row.repeat + 1}: {row.loads} loads, "
                                                f"{_ms(row.end_memory_mib)} MiB at the end")
        for phase in range(1, args.phases):
            axis.axvline(phase * args.phase_s, color="grey", linewidth=0.5)
        axis.set_yscale("log")
        axis.set_ylabel("latency (ms)")
        axis.set_title("every model loaded" if shape == "all" else f"max_loaded_models = {args.budget}")
        axis.legend(loc="upper right", fontsize="small")
    axes[-1].set_xlabel("seconds into the run (grey: the traffic moves to the next model)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.model_budget", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=4, help="copies of the heavy model served (default 4)")
    parser.add_argument("--budget", type=int, help="max_loaded_models of the budget run (default: half --models)")
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second (default 100)")
    parser.add_argument("--phases", type=int, default=6, help="phases of the traffic (default 6)")
    parser.add_argument("--phase-s", type=float, default=4.0, help="seconds each (default 4)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration, interleaved (default 1)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--wait-ms", type=int, default=0)
    parser.add_argument("--kafka-client", default=default_load_client(),
                        help="the worker's, the sender's and the reader's (default: confluent when installed)")
    parser.add_argument("--out", type=Path, help="default bench/results/model-budget/<date-time>/")
    args = parser.parse_args(argv)
    args.budget = args.budget if args.budget is not None else max(1, args.models // 2)
    if args.models < 2 or not 1 <= args.budget < args.models:
        parser.error("--models must be at least 2, and --budget between 1 and --models - 1")
    if args.rate <= 0 or args.phases < 2 or args.phase_s <= PHASE_START_S or args.repeats < 1:
        parser.error(f"--rate must be above 0, --phases at least 2, --phase-s above {PHASE_START_S:g}, "
                     "--repeats at least 1")
    args.out = args.out or Path("bench/results/model-budget") / time.strftime("%Y-%m-%d-%H%M%S")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.bootstrap, args.redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not args.bootstrap or not args.redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make up`, then eval its output)",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the finally clauses stop the worker
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "bench.model_budget", *(argv if argv is not None else sys.argv[1:])]),
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine.describe(),
        **{k: getattr(args, k) for k in ("models", "budget", "rate", "phases", "phase_s", "repeats", "batch_size",
                                         "wait_ms", "kafka_client")}}
    pool = RequestPool(WORKLOADS["churn"], 5_000)  # the heavy model takes churn's 16 numbers
    rows: list[Row] = []
    for repeat in range(args.repeats):
        for shape in SHAPES if repeat % 2 == 0 else SHAPES[::-1]:  # alternate, so that drift spreads
            row = run_one(shape, repeat, args, pool)
            rows.append(row)
            say(f"{shape} (repeat {repeat + 1}): p50/p99 {_ms(row.latency_ms.get('p50'))}/"
                f"{_ms(row.latency_ms.get('p99'))} ms, {row.loads} loads, {_ms(row.end_memory_mib)} MiB at the end")
    (args.out / "results.json").write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2))
    table = markdown(meta, rows)
    (args.out / "results.md").write_text(table)
    plot(rows, args, args.out / "model-budget.png")
    print(table)
    say(f"wrote {args.out}")
    return 0 if all(row.answered == row.sent and not row.not_ok and row.exit_code == 0 for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
