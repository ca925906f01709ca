"""The command line of each contender, all run with this Python from the repository root (the Quix Streams
contender with its own environment's)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from bench.topics import RunTopics

CommandFor = Callable[[RunTopics], list[str]]
QUIX_PYTHON = Path(__file__).resolve().parents[1] / ".venv-quix" / "bin" / "python"


def kafka_ceiling(bootstrap: str, topics: RunTopics, reply_bytes: int) -> list[str]:
    return [sys.executable, "-m", "bench.kafka_ceiling", "--bootstrap-servers", bootstrap,
            "--requests-topic", topics.requests, "--reply-topic", topics.replies, "--group", topics.group,
            "--reply-bytes", str(reply_bytes)]


def confluent_ceiling(bootstrap: str, topics: RunTopics, reply_bytes: int) -> list[str]:
    return [sys.executable, "-m", "bench.confluent_ceiling", "--bootstrap-servers", bootstrap,
            "--requests-topic", topics.requests, "--reply-topic", topics.replies, "--group", topics.group,
            "--reply-bytes", str(reply_bytes)]


def confluent_by_hand(bootstrap: str, redis_url: str, topics: RunTopics,
                      job: str = "bench.confluent_by_hand") -> list[str]:
    return [sys.executable, "-m", job, "--bootstrap-servers", bootstrap,
            "--requests-topic", topics.requests, "--reply-topic", topics.replies, "--group", topics.group,
            "--redis-url", redis_url]


def confluent_columnar(bootstrap: str, redis_url: str, topics: RunTopics) -> list[str]:
    return confluent_by_hand(bootstrap, redis_url, topics, job="bench.confluent_columnar")


def quix(bootstrap: str, redis_url: str, topics: RunTopics, dedup: str = "redis") -> list[str]:
    """The Quix Streams contender, on its own environment's interpreter (``bash bench/quix_venv.sh``)."""
    return [str(QUIX_PYTHON), "-m", "bench.quix_app", "--bootstrap-servers", bootstrap,
            "--requests-topic", topics.requests, "--reply-topic", topics.replies, "--group", topics.group,
            "--redis-url", redis_url, "--dedup", dedup]


def naive(bootstrap: str, topics: RunTopics, model: str, torch_threads: int) -> list[str]:
    return [sys.executable, "-m", "bench.naive", "--bootstrap-servers", bootstrap,
            "--requests-topic", topics.requests, "--reply-topic", topics.replies, "--group", topics.group,
            "--model", model, "--torch-threads", str(torch_threads)]


def worker(bootstrap: str, redis_url: str, topics: RunTopics, model: str, batch_size: int, wait_ms: int,
           torch_threads: int, extra: tuple[str, ...] = (), *, wait_to_fill: bool = False,
           latency_target_ms: int = 0) -> list[str]:
    """streamscore itself: a fresh group and dedup namespace, JSON logs, no periodic stats, then ``extra``.

    The batching settings are parameters, not ``extra``, so that each flag appears once; ``latency_target_ms``
    0 leaves the target off."""
    batching = ["--max-batch-size", str(batch_size), "--max-wait-ms", str(wait_ms)]
    if wait_to_fill:
        batching.append("--wait-to-fill")
    if latency_target_ms:
        batching += ["--latency-target-ms", str(latency_target_ms)]
    return [sys.executable, "-m", "worker", "run", "--bootstrap-servers", bootstrap, "--redis-url", redis_url,
            "--requests-topic", topics.requests, "--reply-topic", topics.replies,
            "--dead-letter-topic", topics.dlq, "--model", model, "--group", topics.group,
            "--dedup-namespace", topics.group, *batching, "--torch-threads", str(torch_threads),
            "--log-format", "json", "--stats-interval-s", "0", *extra]
