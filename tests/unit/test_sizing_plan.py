"""The sizing calculator's arithmetic (bench/sizing.py ``plan``): workers from the per-worker rate, partitions
twice the workers, Redis shards for whichever of CPU and memory needs more."""

from __future__ import annotations

from bench.sizing import plan

COST = {"cpu_us": 5.0, "commands": 4.0, "bytes": 250.0}


def test_a_million_a_second_needs_memory_more_than_cpu_in_redis():
    row = plan(1_000_000, COST, worker_rate=10_000, utilization=0.5, ttl_s=3600, min_partitions=4,
               shard_memory_gb=25)
    assert (row["workers"], row["partitions"]) == (200, 400)
    assert row["shards_cpu"] == 10  # 5 s of CPU a second, at half a core each
    assert row["memory_gb"] == 900.0 and row["shards"] == 36  # 900 GB at 25 GB a primary
    assert row["redis_ops"] == 4_000_000


def test_a_small_rate_gets_one_of_each_and_the_least_partitions():
    row = plan(100, COST, worker_rate=10_000, utilization=0.5, ttl_s=60, min_partitions=4, shard_memory_gb=25)
    assert (row["workers"], row["partitions"], row["shards"]) == (1, 4, 1)
