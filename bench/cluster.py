"""``python -m bench.cluster``: streamscore on one broker and on the three-broker cluster, side by side.

What replication costs: the same worker, requests and settings against
the local single broker (topics of one copy) and against the local
three-broker cluster (``deploy/local/cluster.sh``: topics of three copies,
``min.insync.replicas=2``; every send acknowledged by the in-sync replicas,
``acks=all``). For each Kafka client and each target, interleaved over
``--repeats``: a closed-loop run over ``--requests`` pre-filled requests
(throughput, the worker's CPU per reply), then, with the worker idle, open
loops at each of ``--rates`` requests a second (latency from each request's
send to its reply being read, p50 / p99). Every request must be answered.
Beside them, the floor each target sets: a bare librdkafka producer
(``acks=all``, idempotent, no linger) sending 200-byte records at each rate,
the time from each send to the broker's acknowledgement (``acks`` rows).

Needs KAFKA_BOOTSTRAP_SERVERS (the single broker), CLUSTER_BOOTSTRAP_SERVERS
(the cluster; ``deploy/local/cluster.sh env`` prints it) and REDIS_URL:
``make bench-cluster`` starts all of them. All the brokers share the machine
with the worker and the load: on 2 cores the cluster's three JVMs take CPU
the single broker does not, which is part of what this shows. Writes
results.json and results.md under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from bench import commands, machine
from bench.openloop import open_loop
from bench.results import LatencyRun, ThroughputRun, percentile
from bench.runs import RunContext, closed_loop, say
from bench.topics import RunTopics
from bench.workloads import WORKLOADS, RequestPool
from producer.transport import KAFKA_CLIENTS

TARGETS = {"one broker": 1, "three brokers": 3}  # the copies of each partition


@dataclass
class Row:
    target: str
    client: str
    throughput: list[ThroughputRun] = field(default_factory=list)
    latency: dict[float, list[LatencyRun]] = field(default_factory=dict)  # by offered rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=30_000, help="closed-loop run (default 30,000)")
    parser.add_argument("--rates", default="1000,2000", help="open-loop requests a second (default 1000,2000)")
    parser.add_argument("--open-loop-s", type=float, default=10.0, help="open-loop seconds (default 10)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats (default 2)")
    parser.add_argument("--clients", default=",".join(KAFKA_CLIENTS),
                        help=f"the workers' Kafka clients (default {','.join(KAFKA_CLIENTS)})")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-wait-ms", type=int, default=0, help="the worker's (default 0, its default)")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/cluster"))
    args = parser.parse_args(argv)
    bootstraps = {"one broker": os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
                  "three brokers": os.environ.get("CLUSTER_BOOTSTRAP_SERVERS")}
    redis_url = os.environ.get("REDIS_URL")
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    try:
        rates = [float(rate) for rate in args.rates.split(",")]
    except ValueError:
        print(f"error: --rates {args.rates!r}: give requests a second, comma-separated (1000,2000)", file=sys.stderr)
        return 2
    if not all(bootstraps.values()) or not redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS, CLUSTER_BOOTSTRAP_SERVERS and REDIS_URL must be set "
              "(`make bench-cluster` starts the single broker, Redis and the cluster)", file=sys.stderr)
        return 2
    if unknown := [c for c in clients if c not in KAFKA_CLIENTS]:
        print(f"error: --clients: unknown {unknown}; known: {', '.join(KAFKA_CLIENTS)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    workload = WORKLOADS["churn"]
    pool = RequestPool(workload, args.requests)
    rows = {(target, client): Row(target, client) for client in clients for target in TARGETS}
    for repeat in range(args.repeats):
        for target, replication in TARGETS.items():
            row = rows.setdefault((target, "acks"), Row(target, "acks"))
            for rate in rates:
                row.latency.setdefault(rate, []).append(acks_latency(str(bootstraps[target]), replication, rate,
                                                                     args.open_loop_s))
            say(f"repeat {repeat + 1}/{args.repeats}: acks on {target}: " + "; ".join(
                f"{rate:,.0f}/s: p50 {runs[-1].p50_ms:.1f} p99 {runs[-1].p99_ms:.1f} ms"
                for rate, runs in row.latency.items()))
        for client in clients:
            for target, replication in TARGETS.items():
                ctx = RunContext(str(bootstraps[target]), 4, args.torch_threads, args.out / "logs", progress=False,
                                 load_client="confluent", replication=replication, redis_url=redis_url)
                row = rows[(target, client)]
                say(f"repeat {repeat + 1}/{args.repeats}: {client} on {target}")
                command = partial(_worker, ctx, redis_url, client, args.batch_size, args.max_wait_ms)
                after = partial(_open_loops, ctx, pool, rates, args.open_loop_s, row)
                run = closed_loop(ctx, f"cluster-{client}-{replication}", pool.take(args.requests), command,
                                  timeout_s=300, from_worker=True, after_drain=after)
                row.throughput.append(run)
                say(f"  {run.per_s or 0:,.0f} req/s, {run.cpu_us_per_request or 0:,.0f} us CPU a reply; "
                    + "; ".join(f"{rate:,.0f}/s: p50 {_figure(runs[-1].p50_ms, '{:.1f}')} "
                                f"p99 {_figure(runs[-1].p99_ms, '{:.1f}')} ms" for rate, runs in row.latency.items())
                    + (f" [{run.note}]" if run.note else ""))
    table = _table(list(rows.values()), args)
    (args.out / "results.md").write_text(table)
    (args.out / "results.json").write_text(json.dumps(
        {"argv": sys.argv[1:] if argv is None else argv, "machine": machine.describe(),
         "rows": [asdict(row) for row in rows.values()]}, indent=2, default=str))
    print(table)
    unanswered = [r for row in rows.values() for r in row.throughput if not r.complete]
    missing = [r for row in rows.values() for runs in row.latency.values() for r in runs if r.missing]
    return 1 if unanswered or missing else 0


def acks_latency(bootstrap: str, replication: int, rate: float, seconds: float) -> LatencyRun:
    """A bare producer's send -> acknowledgement times at ``rate``, on a fresh topic of ``replication`` copies
    (the first fifth of the sends a warmup)."""
    from confluent_kafka import Producer

    topics = RunTopics.fresh(f"acks-{replication}")
    topics.create(bootstrap, 4, replication)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0})
    acked_ms: list[float] = []
    total = round(rate * seconds)
    began = time.perf_counter()
    try:
        for i in range(total):
            time.sleep(max(0.0, began + i / rate - time.perf_counter()))  # not a spin: the brokers need the cores
            producer.produce(topics.requests, b"x" * 200, key=str(i).encode(),
                             on_delivery=partial(_acked, acked_ms, time.perf_counter()))
            producer.poll(0)
        producer.flush(60)
    finally:
        topics.delete(bootstrap)
    measured = sorted(acked_ms[total // 5:])
    return LatencyRun(1.0, rate, rate, total, len(measured), total - len(acked_ms), percentile(measured, 50),
                      percentile(measured, 95), percentile(measured, 99), measured[-1] if measured else None, None)


def _worker(ctx: RunContext, redis_url: str, client: str, batch_size: int, wait_ms: int,
            topics: RunTopics) -> list[str]:
    return commands.worker(ctx.bootstrap, redis_url, topics, "churn", batch_size, wait_ms, ctx.torch_threads,
                           ("--kafka-client", client))


def _open_loops(ctx: RunContext, pool: RequestPool, rates: list[float], seconds: float, row: Row,
                topics: RunTopics, run: ThroughputRun) -> None:
    for rate in rates:
        row.latency.setdefault(rate, []).append(open_loop(
            ctx.bootstrap, topics.requests, topics.replies, pool.take(round(rate * seconds)), rate,
            rate / run.per_s if run.per_s else 0.0, warmup_s=2.0, progress=False, kafka_client=ctx.load_client))


def _table(rows: list[Row], args: argparse.Namespace) -> str:
    rates = sorted({rate for row in rows for rate in row.latency})
    lines = [f"churn, batch {args.batch_size}, wait {args.max_wait_ms} ms, 4 partitions, medians of "
             f"{args.repeats} interleaved repeats; closed loop over {args.requests:,} requests, open loops of "
             f"{args.open_loop_s:.0f} s; p50 / p99 in ms",
             "",
             "| client | target | req/s closed loop | CPU µs a reply | "
             + " | ".join(f"p50 / p99 at {rate:,.0f}/s" for rate in rates) + " | unanswered |",
             "|---|---|---:|---:|" + "---:|" * len(rates) + "---:|"]
    for row in rows:
        if not row.throughput:  # a bare producer's acknowledgements: latency only
            lines.append(f"| bare producer, acks=all | {row.target} | | | " + " | ".join(
                f"{_figure(_median([r.p50_ms for r in runs]), '{:.1f}')} / "
                f"{_figure(_median([r.p99_ms for r in runs]), '{:.1f}')}"
                for runs in (row.latency.get(rate, []) for rate in rates))
                + f" | {sum(r.missing for runs in row.latency.values() for r in runs)} |")
            continue
        per_s = _median([r.per_s for r in row.throughput])
        cpu = _median([r.cpu_us_per_request for r in row.throughput])
        latencies = [row.latency.get(rate, []) for rate in rates]
        unanswered = (sum(r.requests - r.replies for r in row.throughput)
                      + sum(r.missing for runs in latencies for r in runs))
        lines.append(f"| {row.client} | {row.target} | {_figure(per_s, '{:,.0f}')} | {_figure(cpu, '{:,.0f}')} | "
                     + " | ".join(f"{_figure(_median([r.p50_ms for r in runs]), '{:.1f}')} / "
                                  f"{_figure(_median([r.p99_ms for r in runs]), '{:.1f}')}" for runs in latencies)
                     + f" | {unanswered} |")
    return "\n".join(lines) + "\n"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _figure(value: float | None, form: str) -> str:
    return "n/a" if value is None else form.format(value)


def _acked(acked_ms: list[float], sent: float, error: object, _message: object) -> None:
    """A delivery report: the milliseconds since ``sent`` (perf_counter) if the broker took the record."""
    if error is None:
        acked_ms.append((time.perf_counter() - sent) * 1000)


if __name__ == "__main__":
    raise SystemExit(main())
