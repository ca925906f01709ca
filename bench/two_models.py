"""``python -m bench.two_models``: does a heavy model in the same worker hold up a light one by more than one batch?

One worker serves several models and picks the next batch round robin among
the models whose batch is ready (worker/core/model_batchers.py), so a light
model's ready batch should wait for at most one batch of the heavy model: its
p99 should grow by no more than one heavy batch's compute time. This measures
that, open loop, with two worker configurations (a ``--config`` TOML file each):

- ``alone``: the light model only (``churn``, entry ``light``), every request
  for it, at ``--rate`` requests per second;
- ``mixed``: the same light entry and a heavy one (``bench.heavy_model:heavy``,
  a deep MLP of about 30 ms a batch of 32 on one thread, entry ``heavy``),
  nine light requests to one heavy, at the same total rate.

Each run (``--repeats`` of each, interleaved, alternating which goes first):
fresh topics and dedup namespace, the worker started (one torch thread, inline
scoring) and given its partitions, then bench/tail_sender.py sends each
request (its ``model`` field naming the entry) on a fixed schedule for
``--warmup-s`` + ``--seconds``, and this process reads the replies. Latency =
reply read here - the request's planned send (no coordinated omission), for the
requests planned after the warm-up. The heavy batches' compute time and size
come from the heavy replies' ``compute-ms`` and ``batch-size`` headers (each
reply counts once, so a batch of 20 weighs 20 times).

Prints and writes, under ``--out`` (default bench/results/two-models/<time>/):
results.json (every run, the summary, the machine), results.md (the verdict:
the medians over the repeats of the light p50 and p99 alone and mixed, the
p99's increase against the heavy batches' p99 compute time, and whether it is
within it, with the margin; the same from the replies' headers; the round
robin's own part, how much longer than the longest heavy batch a polled light
request waited for its batch; then one row per run) and two-models.png (the
light latency's tail alone and mixed, pooled over the repeats, and each run's
p99 against the bound). Also how busy the whole machine was during each run:
on a shared machine other work shows up as latency. The logs folder keeps,
per run, the worker's configuration file and log, and every request's
latency, stages and model (``*.timeline.json``). bench/two_models_report.py
writes the report. Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import commands, machine
from bench.contender import ContenderProcess
from bench.openloop import STAGE_HEADERS, LatencyReader
from bench.results import percentile
from bench.runs import say
from bench.tail import STAGES, write_timeline
from bench.tail_sender import send_and_read
from bench.topics import RunTopics, default_load_client
from bench.two_models_report import (
    HEAVY,
    HEAVY_EVERY,
    HEAVY_MODEL,
    LIGHT,
    LIGHT_MODEL,
    SHAPES,
    Row,
    markdown,
    plot,
    summary,
    trio,
)
from bench.workloads import WORKLOADS, RequestPool

PARTITIONS = 4


def config_toml(shape: str, args: argparse.Namespace) -> str:
    """The worker's configuration file for ``shape``: the light entry, and in ``mixed`` the heavy one."""
    entries = [(LIGHT, LIGHT_MODEL, args.light_batch_size, args.light_wait_ms)]
    if shape == "mixed":
        entries.append((HEAVY, HEAVY_MODEL, args.heavy_batch_size, args.heavy_wait_ms))
    lines = [f'default_model = "{LIGHT}"']
    for name, model, size, wait in entries:
        lines += ["", f"[models.{name}]", f'model = "{model}"', f"max_batch_size = {size}", f"max_wait_ms = {wait}"]
    return "\n".join(lines) + "\n"


def bodies_for(shape: str, pool: RequestPool, count: int) -> list[dict[str, Any]]:
    """``count`` request bodies, each naming its entry: all light alone, every HEAVY_EVERY-th heavy mixed."""
    return [{**body, "model": HEAVY if shape == "mixed" and i % HEAVY_EVERY == HEAVY_EVERY - 1 else LIGHT}
            for i, body in enumerate(pool.take(count))]


def run_one(shape: str, repeat: int, args: argparse.Namespace, pool: RequestPool) -> tuple[Row, list[float]]:
    """One run; the row and the light requests' measured latencies (ms, ascending). Always stops the worker
    and deletes the topics."""
    row = Row(shape, repeat, args.rate)
    label = f"two-models-{shape}-{repeat}"
    logs = args.out / "logs"
    config = logs / f"{label}.toml"
    config.write_text(config_toml(shape, args))
    topics = RunTopics.fresh(label)
    topics.create(args.bootstrap, PARTITIONS)
    worker = commands.worker(args.bootstrap, args.redis_url, topics, LIGHT_MODEL, args.light_batch_size,
                             args.light_wait_ms, 1, ("--kafka-client", args.kafka_client, "--config", str(config)))
    process = ContenderProcess(label, worker, logs / f"{label}.log")
    row.log = str(process.log_path)
    try:
        if not process.wait_assigned(180.0):
            say(f"{label}: never got its partitions (log: {process.log_path})")
            return row, []
        bodies = bodies_for(shape, pool, round(args.rate * (args.warmup_s + args.seconds)))
        ticks, began, worker_s, harness_s = machine.cpu_ticks(), time.monotonic(), process.cpu_s(), machine.own_cpu_s()
        sends, reader = send_and_read(args.bootstrap, topics.requests, topics.replies, bodies, args.rate,
                                      logs / label, args.kafka_client, answers=True)
        row.machine_busy = machine.busy_share(ticks, machine.cpu_ticks())
        wall_s, worker_after = time.monotonic() - began, process.cpu_s()
        row.harness_cores = round((machine.own_cpu_s() - harness_s) / wall_s, 3)
        if worker_s is not None and worker_after is not None:
            row.worker_cores = round((worker_after - worker_s) / wall_s, 3)
    finally:
        row.exit_code = process.stop()
        topics.delete(args.bootstrap, args.redis_url)
    row.load_1min = next(iter(machine.load_average()), None)
    row.timeline = str(logs / f"{label}.timeline.json")
    write_timeline(Path(row.timeline), sends, reader)
    entries = {str(b["id"]): str(b["model"]) for b in bodies}
    return row, _figures(row, sends, reader, entries, args.warmup_s)


def _figures(row: Row, sends: dict[str, Any], reader: LatencyReader, entries: dict[str, str],
             warmup_s: float) -> list[float]:
    planned: dict[str, float] = sends["planned_ms"]
    row.max_behind_ms = float(sends["max_behind_ms"])
    row.not_ok = sum(1 for i, (status, model) in reader.answers.items()
                     if status != "ok" or model != entries.get(i))
    start = min(planned.values()) + warmup_s * 1000
    light: list[float] = []
    for entry in sorted(set(entries.values())):
        ids = [i for i in planned if entries[i] == entry]
        row.sent[entry] = len(ids)
        row.answered[entry] = sum(1 for i in ids if i in reader.received_ms)
        measured = [i for i in ids if planned[i] >= start and i in reader.received_ms]
        latencies = sorted(reader.received_ms[i] - planned[i] for i in measured)
        computes = sorted(reader.stages[i]["compute"] for i in measured if "compute" in reader.stages[i])
        scored = sorted(sum(reader.stages[i][s] for s in STAGE_HEADERS) for i in measured
                        if all(s in reader.stages[i] for s in STAGE_HEADERS))
        sizes = sorted(float(reader.batch_sizes[i]) for i in measured if reader.batch_sizes.get(i))
        row.latency_ms[entry] = _spread(latencies)
        row.compute_ms[entry] = _spread(computes)
        row.scored_ms[entry] = _spread(scored)
        row.batch_size[entry] = {"p50": percentile(sizes, 50), "mean": statistics.fmean(sizes) if sizes else None,
                                 "max": sizes[-1] if sizes else None}
        if entry == LIGHT:
            light = latencies
            row.light_stages_p99_ms = {stage: percentile(sorted(reader.stages[i][stage] for i in measured
                                                                if stage in reader.stages[i]), 99)
                                       for stage in STAGES}
            row.light_batch_wait_ms = _spread(sorted(reader.stages[i]["batch_wait"] for i in measured
                                                     if "batch_wait" in reader.stages[i]))
    return light


def _spread(ascending: list[float]) -> dict[str, float | None]:
    return {"p50": percentile(ascending, 50), "p99": percentile(ascending, 99),
            "max": ascending[-1] if ascending else None}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.two_models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second in all (default 1000)")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured, after the warm-up (default 15)")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="sent first and not counted (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each shape, interleaved (default 3)")
    parser.add_argument("--kafka-client", default=default_load_client(),
                        help="the worker's, the sender's and the reader's (default: confluent when installed)")
    parser.add_argument("--light-batch-size", type=int, default=64)
    parser.add_argument("--light-wait-ms", type=int, default=0)
    parser.add_argument("--heavy-batch-size", type=int, default=32)
    parser.add_argument("--heavy-wait-ms", type=int, default=100,
                        help="lets heavy batches gather (10-15 requests at 100 heavy a second; default 100)")
    parser.add_argument("--out", type=Path, help="default bench/results/two-models/<date-time>/")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.rate <= 0 or args.seconds <= 0 or args.warmup_s < 0:
        parser.error("--repeats and --rate and --seconds must be above 0, --warmup-s at least 0")
    args.out = args.out or Path("bench/results/two-models") / time.strftime("%Y-%m-%d-%H%M%S")
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
        "command": shlex.join(["python", "-m", "bench.two_models", *(argv if argv is not None else sys.argv[1:])]),
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine.describe(),
        **{k: getattr(args, k) for k in ("rate", "seconds", "warmup_s", "repeats", "kafka_client",
                                         "light_batch_size", "light_wait_ms", "heavy_batch_size", "heavy_wait_ms")},
        "light_model": LIGHT_MODEL, "heavy_model": HEAVY_MODEL, "heavy_every": HEAVY_EVERY}
    pool = RequestPool(WORKLOADS["churn"], 5_000)  # both models take churn's 16 numbers
    rows: list[Row] = []
    light: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    for repeat in range(args.repeats):
        for shape in SHAPES if repeat % 2 == 0 else SHAPES[::-1]:  # alternate, so that drift spreads
            row, latencies = run_one(shape, repeat, args, pool)
            rows.append(row)
            light[shape] += latencies
            heavy = row.compute_ms.get(HEAVY, {})
            say(f"{shape} (repeat {repeat + 1}): light p50/p99/max {trio(row.latency_ms.get(LIGHT, {}))} ms"
                + (f", heavy batch compute p50/p99/max {trio(heavy)} ms" if heavy else "")
                + f", worker {row.worker_cores or 0:.2f} cores, machine busy {row.machine_busy or 0:.0%}")
    meta["load_average_at_end"] = machine.load_average()
    summ = summary(rows)
    (args.out / "results.json").write_text(json.dumps({**meta, "summary": summ, "rows": [asdict(r) for r in rows]},
                                                      indent=2))
    table = markdown(meta, summ, rows)
    (args.out / "results.md").write_text(table)
    plot(rows, light, summ, args.out / "two-models.png")
    print(table)
    say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
