"""``python -m bench.commit_interval``: what the commit interval costs, to choose its default by measurement.

For each Kafka client and each interval, steps a worker in this process over a
freshly filled topic (bench/profile_worker.py's run), the intervals taken in
turn and each run repeated, and prints the median throughput and CPU per
request, per delivery mode (``--deliveries``). A longer interval commits
less often; at-least-once, what it costs is the records a crash gives out
again (up to an interval's worth, which the dedup store then answers as
duplicates); exactly-once, the interval is how long one transaction stays
open, which delays every reply for a read_committed reader by up to that
much. Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from importlib.util import find_spec

from bench.profile_worker import timed_run
from bench.workloads import WORKLOADS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.commit_interval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="churn", choices=sorted(WORKLOADS))
    parser.add_argument("--requests", type=int, default=60_000, help="per run (default 60,000)")
    parser.add_argument("--intervals-ms", default="0,100,1000", help="comma-separated (default 0,100,1000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per point, interleaved (default 3)")
    parser.add_argument("--kafka-clients", default="kafka-python,confluent")
    parser.add_argument("--deliveries", default="at-least-once",
                        help="comma-separated delivery modes (exactly-once: the interval spans one transaction)")
    args = parser.parse_args(argv)
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap or not os.environ.get("REDIS_URL"):
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make up`, then eval its env)",
              file=sys.stderr)
        return 2
    intervals = [int(ms) for ms in args.intervals_ms.split(",")]
    clients = [c for c in args.kafka_clients.split(",") if c != "confluent" or find_spec("confluent_kafka")]
    deliveries = args.deliveries.split(",")
    runs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for repeat in range(args.repeats):
        for client in clients:
            for delivery in deliveries:
                for interval in intervals:
                    wall_s, cpu_s, _ = timed_run(bootstrap, args.workload, args.requests,
                                              ["--kafka-client", client, "--delivery", delivery,
                                               "--commit-interval-ms", str(interval)])
                    runs.setdefault((client, delivery, interval), []).append((wall_s, cpu_s))
                    print(f"run {repeat + 1}/{args.repeats}: {client}, {delivery}, {interval} ms: "
                          f"{args.requests / wall_s:,.0f} req/s", file=sys.stderr)
    print(f"\n{args.workload}, {args.requests:,} requests a run, median of {args.repeats}\n")
    print("| client | delivery | commit interval ms | req/s | CPU µs a request |")
    print("|---|---|---:|---:|---:|")
    for (client, delivery, interval), timings in runs.items():
        rate = statistics.median(args.requests / wall for wall, _ in timings)
        cpu_us = statistics.median(cpu / args.requests * 1e6 for _, cpu in timings)
        print(f"| {client} | {delivery} | {interval} | {rate:,.0f} | {cpu_us:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
