"""``python -m bench.sizing``: how many workers, partitions and Redis shards a request rate needs, on paper.

Two parts. First it measures what one request costs the dedup store: it starts a
Redis server on loopback (``redis-server`` from the PATH: ``make up`` installs
it) and makes the worker's own calls to it (worker/dedup/redis_store.py: a claim
per batch, then the done marks with a reply of ``--reply-bytes`` each) for
``--batches`` batches of ``--batch-size``, reading the server's CPU time
(``INFO cpu``), its commands (``INFO commandstats``) and its memory
(``INFO memory``) before and after. Then, for each rate of ``--rates``, it
computes:

- workers: the rate over ``--worker-rate`` (one worker process's measured
  requests a second; default churn on the confluent transport, the lower of two
  ``python -m bench`` runs on this 2-core machine, README) at ``--utilization``
  (plan at half);
- partitions: twice the workers (room to double without repartitioning; a
  partition feeds one worker at a time), at least ``--min-partitions``;
- Redis memory: the measured bytes per request times the done marks alive, the
  rate times ``--ttl-s`` (the dedup TTL, ``--dedup-ttl-s``: how long a
  redelivery is still recognized; the worker's default is a day);
- Redis shards (Redis Cluster primaries, one core each): enough for the CPU
  (the rate times the measured server CPU per request, over one core at
  ``--utilization``) and for the memory (at ``--shard-memory-gb`` each),
  whichever needs more.

Not measured here, so not computed: the Kafka brokers (their disk and network
throughput) and the model's own cost beyond churn's (give ``--worker-rate``).
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import redis

from bench.dedup_replicas import free_port, start
from worker.core.messages import Position, Request
from worker.dedup.redis_store import RedisDedupStore

CONFLUENT_WORKER_RATE = 18_778  # req/s, churn on confluent: the lower of two `python -m bench` runs (README)
RATES = (1_000, 10_000, 100_000, 1_000_000)


def measure(batches: int, size: int, reply_bytes: int) -> dict[str, float]:
    """The dedup store's server CPU µs, commands and bytes per request."""
    reply = b"x" * reply_bytes
    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        server = start(port, Path(directory))
        try:
            client = redis.Redis(port=port)
            store = RedisDedupStore(f"redis://127.0.0.1:{port}/0", "sizing", 3600, 60_000)
            _calls(store, 20, size, reply, "warm")
            client.config_resetstat()
            cpu_before, memory_before = _cpu_s(client), client.info("memory")["used_memory"]
            _calls(store, batches, size, reply, "run")
            cpu_s, memory = _cpu_s(client) - cpu_before, client.info("memory")["used_memory"] - memory_before
            commands = sum(int(stats["calls"]) for stats in client.info("commandstats").values())
            store.close()
        finally:
            server.kill()
            server.wait()
    requests = batches * size
    return {"cpu_us": cpu_s * 1e6 / requests, "commands": commands / requests, "bytes": memory / requests}


def _calls(store: RedisDedupStore, batches: int, size: int, reply: bytes, label: str) -> None:
    for number in range(batches):
        requests = [Request(f"{label}-{number}-{i}", None, Position("requests", 0, number * size + i))
                    for i in range(size)]
        store.claim(requests)
        store.complete([r.id for r in requests], [reply] * len(requests))


def _cpu_s(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def plan(rate: float, cost: dict[str, float], worker_rate: float, utilization: float, ttl_s: float,
         min_partitions: int, shard_memory_gb: float) -> dict[str, float]:
    workers = math.ceil(rate / (worker_rate * utilization))
    memory_gb = rate * ttl_s * cost["bytes"] / 1e9
    for_cpu = math.ceil(rate * cost["cpu_us"] / (1e6 * utilization))
    for_memory = math.ceil(memory_gb / shard_memory_gb)
    return {"rate": rate, "workers": workers, "partitions": max(min_partitions, 2 * workers),
            "shards": max(for_cpu, for_memory), "shards_cpu": for_cpu, "redis_ops": rate * cost["commands"],
            "memory_gb": memory_gb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sizing", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="requests a second to plan for")
    parser.add_argument("--worker-rate", type=float, default=CONFLUENT_WORKER_RATE,
                        help="one worker process's measured requests a second (default: churn, confluent, 2 cores)")
    parser.add_argument("--utilization", type=float, default=0.5, help="the share of capacity to plan on")
    parser.add_argument("--ttl-s", type=float, default=3600, help="the dedup TTL (--dedup-ttl-s) to size memory for")
    parser.add_argument("--min-partitions", type=int, default=4)
    parser.add_argument("--shard-memory-gb", type=float, default=25, help="the memory one Redis primary may use")
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--reply-bytes", type=int, default=110, help="a reply's size (churn's JSON: about 110)")
    args = parser.parse_args(argv)
    cost = measure(args.batches, args.batch_size, args.reply_bytes)
    print(f"dedup store, measured ({args.batches} batches of {args.batch_size}, {args.reply_bytes}-byte replies): "
          f"{cost['cpu_us']:.2f} µs of Redis CPU, {cost['commands']:.2f} Redis commands (those its scripts call "
          f"included) and {cost['bytes']:.0f} bytes per request")
    print(f"planned at {args.utilization:.0%} of a worker's {args.worker_rate:,.0f} req/s and of a Redis core, "
          f"{args.shard_memory_gb:g} GB per Redis primary; done marks kept {args.ttl_s:,.0f} s\n")
    print("| requests/s | workers | partitions | Redis shards (for CPU alone) | Redis commands/s | Redis memory |")
    print("|---:|---:|---:|---:|---:|---:|")
    for rate in args.rates:
        row = plan(rate, cost, args.worker_rate, args.utilization, args.ttl_s, args.min_partitions,
                   args.shard_memory_gb)
        print(f"| {row['rate']:,.0f} | {row['workers']:,} | {row['partitions']:,} | {row['shards']:,} "
              f"({row['shards_cpu']:,}) | {row['redis_ops']:,.0f} | {row['memory_gb']:,.1f} GB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
