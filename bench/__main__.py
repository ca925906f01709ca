"""``python -m bench``: every benchmark in one run on one broker; results in bench/results/.

Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL; ``make bench`` runs it under
deploy/local/with-services.sh, which starts local ones when they are unset.
Exits 0 when every step ran (targets met or not: they are reported, not
asserted), 1 when a contender failed or streamscore left a request
unanswered, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import machine, plots, report
from bench.contender import REPO
from bench.results import DEFINITIONS, WorkloadResult
from bench.runs import RunContext, say
from bench.suite import run_workload
from bench.topics import default_load_client
from bench.workloads import WORKLOADS
from producer.transport import KAFKA_CLIENTS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (CI, under ~2 minutes)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="worker --torch-threads, also for the model ceiling and the naive loop (default 1: "
                             "leaves a core to the broker and the clients)")
    parser.add_argument("--batch-size", type=int, default=64, help="chosen --max-batch-size (default 64)")
    parser.add_argument("--max-wait-ms", type=int, default=10, help="chosen --max-wait-ms (default 10)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of every requests topic (default 4)")
    parser.add_argument("--replication", type=int, default=1,
                        help="copies of each partition of the run's topics (default 1; 3 on the three-broker "
                             "cluster: make bench CLUSTER=1)")
    parser.add_argument("--worker-args", default="",
                        help='extra streamscore settings for every worker of the run, e.g. '
                             '--worker-args="--commit-interval-ms 100" (the ceilings are not affected)')
    parser.add_argument("--load-client", choices=KAFKA_CLIENTS, default=default_load_client(),
                        help="Kafka client of the pre-fill and the open-loop sender and reader (default: "
                             "confluent when confluent-kafka is installed, else kafka-python; see bench/topics.py)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="results folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if not bootstrap or not redis_url or unknown:
        say(f"error: unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}" if unknown else
            "error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set "
            "(`make bench`, or deploy/local/with-services.sh .venv/bin/python -m bench)")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(bootstrap, args.partitions, args.torch_threads, args.out / "logs", not args.no_progress,
                     tuple(shlex.split(args.worker_args)), load_client=args.load_client,
                     replication=args.replication, redis_url=redis_url)
    meta = _meta(args, argv)
    started = time.monotonic()
    results: list[WorkloadResult] = []
    try:
        for name in names:
            results.append(run_workload(ctx, redis_url, WORKLOADS[name], args.quick,
                                        (args.batch_size, args.max_wait_ms)))
            _write(args.out, meta, results, started, final=False)
    finally:
        table = _write(args.out, meta, results, started, final=True)
    print(table)
    problems = [p for r in results for p in _problems(r)]
    for problem in problems:
        say(f"problem: {problem}")
    return 1 if problems else 0


def _meta(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    python = Path(sys.executable)
    shown = python.relative_to(REPO) if python.is_relative_to(REPO) else python
    return {
        "schema": "streamscore-bench/1",
        "command": shlex.join([str(shown), "-m", "bench", *argv]),
        "size": "quick" if args.quick else "default",
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine.describe(),
        "torch_threads": args.torch_threads,
        "batch_size": args.batch_size,
        "max_wait_ms": args.max_wait_ms,
        "partitions": args.partitions,
        "worker_args": args.worker_args,
        "load_client": args.load_client,
        "definitions": DEFINITIONS,
    }


def _write(out: Path, meta: dict[str, Any], results: list[WorkloadResult], started: float, final: bool) -> str:
    """results.json and results.md (and, when final, the plots); returns the markdown."""
    meta = {**meta, "duration_s": round(time.monotonic() - started, 1), "complete": final}
    meta["machine"] = {**meta["machine"], "load_average_at_end": machine.load_average()}
    (out / "results.json").write_text(json.dumps({**meta, "workloads": [asdict(r) for r in results]}, indent=2))
    table = report.markdown(meta, results)
    (out / "results.md").write_text(table)
    if final:
        for r in results:
            if r.status == "ran":
                plots.throughput_plot(r, out / f"throughput-{r.name}.png")
                plots.latency_plot(r, meta["batch_size"], meta["max_wait_ms"], out / f"latency-{r.name}.png")
    return table


def _problems(r: WorkloadResult) -> list[str]:
    found = []
    for run in [r.kafka_ceiling, r.naive, *(p.throughput for p in r.grid)]:
        if run is not None and run.exit_code not in (0, None):
            found.append(f"{r.name}: {run.contender} exited with {run.exit_code} ({run.log})")
    for p in r.grid:
        found += [f"{r.name}: streamscore batch {p.batch_size} wait {p.max_wait_ms} ms, a failed try: {note}"
                  for note in p.failed_attempts]
        if not p.throughput.complete:
            found.append(f"{r.name}: streamscore batch {p.batch_size} wait {p.max_wait_ms} ms left "
                         f"{p.throughput.requests - p.throughput.replies} requests unanswered ({p.throughput.log})")
        found += [f"{r.name}: batch {p.batch_size} wait {p.max_wait_ms} ms, {x.load:.0%} load: {x.missing} requests "
                  "without a reply" for x in p.latency if x.missing]
    if r.kafka_ceiling is not None and not r.kafka_ceiling.complete:
        found.append(f"{r.name}: the Kafka ceiling loop did not answer every request ({r.kafka_ceiling.log})")
    return found


if __name__ == "__main__":
    raise SystemExit(main())
