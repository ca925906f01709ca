"""``python -m bench.dedup_replicas``: what ``--dedup-min-replicas 1`` costs a batch's done marks.

Starts a Redis primary and one replica on loopback (``redis-server`` from the
PATH: ``make up`` installs it), then times the dedup store's calls for
``--batches`` batches of ``--batch-size`` request ids, as the worker makes them
(worker/dedup/redis_store.py): a claim, then the done marks with a reply of
``--reply-bytes`` each. Once with ``min_replicas`` 0 (the default: the marks are
written to the primary only) and once with 1 (the marks and a ``WAIT 1`` in one
round trip, returning once the replica has them). Prints the median and p99
milliseconds per call and the microseconds per request, for each.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from bench.results import percentile
from worker.core.messages import Position, Request
from worker.dedup.redis_store import RedisDedupStore


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(port: int, directory: Path, *extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(directory), "--repl-diskless-sync-delay", "0",
                                *extra], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port).ping():
                return process
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on :{port} did not start")


def timed(store: RedisDedupStore, batches: int, size: int, reply: bytes, label: str) -> list[float]:
    """Milliseconds of each complete call (the claims are made first, untimed)."""
    took = []
    for number in range(batches):
        requests = [Request(f"{label}-{number}-{i}", None, Position("requests", 0, number * size + i))
                    for i in range(size)]
        store.claim(requests)
        ids = [r.id for r in requests]
        started = time.perf_counter()
        store.complete(ids, [reply] * len(ids))
        took.append((time.perf_counter() - started) * 1000)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_replicas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--reply-bytes", type=int, default=200)
    args = parser.parse_args(argv)
    reply = b"x" * args.reply_bytes
    with tempfile.TemporaryDirectory() as directory:
        primary_port, replica_port = free_port(), free_port()
        servers = [start(primary_port, Path(directory))]
        try:
            servers.append(start(replica_port, Path(directory), "--replicaof", "127.0.0.1", str(primary_port)))
            while redis.Redis(port=replica_port).info("replication").get("master_link_status") != "up":
                time.sleep(0.05)
            print(f"{args.batches} batches of {args.batch_size} done marks ({args.reply_bytes}-byte replies), "
                  "a primary and one replica on loopback")
            print("| dedup_min_replicas | median ms per batch | p99 ms | µs per request |\n|---|---:|---:|---:|")
            for min_replicas in (0, 1):
                store = RedisDedupStore(f"redis://127.0.0.1:{primary_port}/0", f"bench{min_replicas}", 600, 60_000,
                                        min_replicas=min_replicas)
                timed(store, 20, args.batch_size, reply, f"warm{min_replicas}")
                took = sorted(timed(store, args.batches, args.batch_size, reply, f"run{min_replicas}"))
                median = statistics.median(took)
                print(f"| {min_replicas} | {median:.2f} | {percentile(took, 99):.2f} | "
                      f"{median * 1000 / args.batch_size:.1f} |")
                store.close()
        finally:
            for server in servers:
                server.kill()
                server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
