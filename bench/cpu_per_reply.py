"""``python -m bench.cpu_per_reply``: streamscore's CPU per reply against the bare librdkafka loop's, in one run.

Issue #19's fourth target: on the confluent transport streamscore spends at
most twice the bare loop's CPU per reply, with dedup on and every guarantee
kept. Both contenders drain the same pre-filled churn requests (closed
loop, fresh topics each run, interleaved over ``--repeats``):

- the bare loop, ``bench/confluent_ceiling.py``: poll up to 500 records,
  one reply each with the worker's seven headers, flush, check every
  delivery report, commit asynchronously; no decoding, dedup, batching or
  model;
- streamscore on ``--kafka-client confluent`` (churn, ``--max-batch-size``
  64, its default wait), plus ``--worker-args`` (e.g. an experiment's flag);
- with ``--kafka-python``, also the bare kafka-python loop
  (``bench/kafka_ceiling.py``, the same work as the bare librdkafka loop) and
  streamscore on ``--kafka-client kafka-python``;
- with ``--quix``, also the same job as a Quix Streams application
  (``bench/quix_app.py``, one message at a time, in its own environment:
  ``bash bench/quix_venv.sh`` first; ``make bench-quix`` does both), the same
  application with its dedup in Quix's own state (RocksDB and a changelog
  topic) instead of Redis, and without dedup (not the same job: what the
  lightest per-message app costs);
- the same job by hand, ``bench/confluent_by_hand.py``: decode, claim in
  Redis, prepare and run the model in batches of 64, reply, flush, write the
  done marks, commit asynchronously, and nothing else: what the job itself
  costs, so that the rest of streamscore's CPU is its framework;
- with ``--columnar``, the same job by hand written a poll at a time,
  ``bench/confluent_columnar.py`` (one decode call a poll, the model's input
  one array, replies from a template): how far a columnar design could go.

Beside the CPU, the model's share: its compute per reply, from the replies'
own compute and batch-size headers.

The CPU is the contender process's (all threads, user + system) between its
partitions being assigned and its last reply, divided by the replies it sent
meanwhile; of it, its main thread's: each contender's own Python loop (the
rest is the Kafka client's C threads, and in streamscore its Redis claim
helper and its other helper threads; on kafka-python the client's own I/O
thread, in Python). Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL (``make bench-cpu``
starts local ones). Writes results.md and results.json under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

from bench import commands, machine
from bench.results import ThroughputRun
from bench.runs import RunContext, closed_loop, say
from bench.topics import RunTopics
from bench.workloads import WORKLOADS, RequestPool, reply_size
from worker.models import load_model

BARE = "bare librdkafka loop"
STREAMSCORE = "streamscore on confluent"
BY_HAND = "the same job by hand"
COLUMNAR = "the same job by hand, by columns"
BARE_KAFKA_PYTHON = "bare kafka-python loop"
STREAMSCORE_KAFKA_PYTHON = "streamscore on kafka-python"
QUIX = "Quix Streams, one message at a time"
QUIX_STATE = "Quix Streams, one message at a time, dedup in its state"
QUIX_NO_DEDUP = "Quix Streams, one message at a time, no dedup"
LABELS = {BARE: "bare", BY_HAND: "by-hand", COLUMNAR: "columnar", STREAMSCORE: "streamscore",
          BARE_KAFKA_PYTHON: "bare-kafka-python", STREAMSCORE_KAFKA_PYTHON: "streamscore-kafka-python", QUIX: "quix",
          QUIX_STATE: "quix-state", QUIX_NO_DEDUP: "quix-no-dedup"}
BARE_LOOPS = (BARE, BARE_KAFKA_PYTHON)
REPLY_SAMPLES = 200


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_per_reply", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=40_000, help="each closed-loop run (default 40,000)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    parser.add_argument("--worker-args", default="", help="extra streamscore settings, e.g. "
                        "--worker-args='--commit-interval-ms 100'")
    parser.add_argument("--kafka-python", action="store_true",
                        help="also a bare kafka-python loop (bench/kafka_ceiling.py) and streamscore on kafka-python")
    parser.add_argument("--columnar", action="store_true",
                        help="also the same job by hand written a poll at a time (bench/confluent_columnar.py): the "
                             "floor of a columnar design")
    parser.add_argument("--quix", action="store_true",
                        help="also the same job as a Quix Streams application (bench/quix_app.py; needs "
                             "`bash bench/quix_venv.sh` first)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/cpu-per-reply"))
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make bench-cpu` starts local ones)",
              file=sys.stderr)
        return 2
    if args.requests < 1000 or args.repeats < 1:
        print("error: --requests must be at least 1,000 and --repeats at least 1", file=sys.stderr)
        return 2
    if args.quix and not commands.QUIX_PYTHON.exists():
        print(f"error: --quix needs {commands.QUIX_PYTHON}: run `bash bench/quix_venv.sh` first", file=sys.stderr)
        return 2
    workload = WORKLOADS["churn"]
    pool = RequestPool(workload, args.requests)
    reply_bytes = reply_size(load_model(workload.model), pool.take(REPLY_SAMPLES))
    ctx = RunContext(bootstrap, 4, 1, args.out / "logs", progress=False, load_client="confluent", redis_url=redis_url)
    extra = tuple(shlex.split(args.worker_args))
    contenders: dict[str, commands.CommandFor] = {
        BARE: lambda topics: commands.confluent_ceiling(bootstrap, topics, reply_bytes),
        BY_HAND: lambda topics: commands.confluent_by_hand(bootstrap, redis_url, topics),
        STREAMSCORE: partial(_worker, ctx, redis_url, "confluent", extra),
    }
    if args.columnar:
        contenders[COLUMNAR] = lambda topics: commands.confluent_columnar(bootstrap, redis_url, topics)
    if args.kafka_python:
        contenders[BARE_KAFKA_PYTHON] = lambda topics: commands.kafka_ceiling(bootstrap, topics, reply_bytes)
        contenders[STREAMSCORE_KAFKA_PYTHON] = partial(_worker, ctx, redis_url, "kafka-python", extra)
    if args.quix:
        contenders[QUIX] = lambda topics: commands.quix(bootstrap, redis_url, topics)
        contenders[QUIX_STATE] = lambda topics: commands.quix(bootstrap, redis_url, topics, dedup="quix-state")
        contenders[QUIX_NO_DEDUP] = lambda topics: commands.quix(bootstrap, redis_url, topics, dedup="none")
    runs: dict[str, list[ThroughputRun]] = {name: [] for name in contenders}
    for repeat in range(args.repeats):
        for name, command in contenders.items():
            run = closed_loop(ctx, f"cpu-{LABELS[name]}", pool.take(args.requests), command, timeout_s=300,
                              from_worker=name not in BARE_LOOPS)
            runs[name].append(run)
            say(f"repeat {repeat + 1}/{args.repeats}: {name}: {run.per_s or 0:,.0f} req/s, "
                f"{run.cpu_us_per_request or 0:.1f} us CPU a reply" + (f" [{run.note}]" if run.note else ""))
    table = _table(runs, args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(table)
    (args.out / "results.json").write_text(json.dumps(
        {"argv": sys.argv[1:] if argv is None else argv, "machine": machine.describe(), "reply_bytes": reply_bytes,
         "runs": {name: [asdict(r) for r in rs] for name, rs in runs.items()}}, indent=2, default=str))
    print(table)
    return 0 if all(r.complete for rs in runs.values() for r in rs) else 1


def _worker(ctx: RunContext, redis_url: str, client: str, extra: tuple[str, ...], topics: RunTopics) -> list[str]:
    return commands.worker(ctx.bootstrap, redis_url, topics, "churn", 64, 0, ctx.torch_threads,
                           ("--kafka-client", client, *extra))


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _table(runs: dict[str, list[ThroughputRun]], args: argparse.Namespace) -> str:
    cpu = {name: median([r.cpu_us_per_request for r in rs]) for name, rs in runs.items()}
    lines = [f"churn, closed loop over {args.requests:,} pre-filled requests, medians of {args.repeats} "
             f"interleaved repeats; streamscore settings: --max-batch-size 64 {args.worker_args}".rstrip(), "",
             "| contender | req/s | CPU µs a reply | of it, the main thread | of it, the model's compute "
             "| runs (CPU µs a reply) |",
             "|---|---:|---:|---:|---:|---|"]
    for name, rs in runs.items():
        rate = median([r.per_s for r in rs])
        main_thread = median([r.main_thread_us_per_request for r in rs])
        model = median([_compute_us(r) for r in rs])
        each = ", ".join(f"{r.cpu_us_per_request:.1f}" if r.cpu_us_per_request else "—" for r in rs)
        lines.append(f"| {name} | {_figure(rate, '{:,.0f}')} | {_figure(cpu[name], '{:.1f}')} | "
                     f"{_figure(main_thread, '{:.1f}')} | {_figure(model, '{:.1f}')} | {each} |")
    lines.append("")
    for top, bottom, about in ((STREAMSCORE, BARE, "issue #19's target: at most 2.00"),
                               (BY_HAND, BARE, "what the job itself costs, over the Kafka work alone"),
                               (STREAMSCORE, BY_HAND, "what the framework costs, over the job by hand"),
                               (COLUMNAR, BY_HAND, "a columnar design's floor, over the job by hand"),
                               (STREAMSCORE, COLUMNAR, "what the framework costs, over the columnar floor"),
                               (STREAMSCORE_KAFKA_PYTHON, BARE_KAFKA_PYTHON, "the same on kafka-python"),
                              (QUIX, STREAMSCORE, "the per-message stream processor over streamscore")):
        above, below = cpu.get(top), cpu.get(bottom)
        if above and below:
            lines.append(f"- {top} / {bottom}, CPU a reply: {above / below:.2f} ({about})")
    ours = median([r.per_s for r in runs[STREAMSCORE]])
    for quix, about in ((QUIX, "issue #37's target: at least 2.00"), (QUIX_STATE, "Quix's own dedup"),
                        (QUIX_NO_DEDUP, "not the same job")):
        theirs = median([r.per_s for r in runs.get(quix, [])])
        if ours and theirs:
            lines.append(f"- {STREAMSCORE} / {quix}, req/s: {ours / theirs:.2f} ({about})")
    return "\n".join(lines) + "\n"


def _compute_us(run: ThroughputRun) -> float | None:
    """The model's compute per reply: the median batch's compute over the mean batch size."""
    if run.compute_ms_p50 is None or not run.mean_batch_size:
        return None
    return run.compute_ms_p50 * 1000 / run.mean_batch_size


def _figure(value: float | None, form: str) -> str:
    return "—" if value is None else form.format(value)


if __name__ == "__main__":
    sys.exit(main())
