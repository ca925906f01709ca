"""The whole pipeline on local services: topics, a worker, 20,000 requests, every reply.

Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL (``make demo`` starts local ones).
Each run uses fresh topic names, so runs never see each other's records.
Exits non-zero if any request is left without a reply.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from producer.collect import Collection, ReplyCollector
from producer.send import send_requests, synthetic_requests
from producer.topics import create_topics
from worker.core.security import PLAINTEXT, KafkaSecurity


@dataclass(frozen=True)
class DemoConfig:
    bootstrap_servers: str
    redis_url: str
    security: KafkaSecurity = PLAINTEXT
    requests: int = 20_000
    partitions: int = 4
    model: str = "churn"
    max_batch_size: int = 64
    max_wait_ms: int = 0
    kafka_client: str = "kafka-python"  # the demo's sends and its worker's
    log_dir: Path = Path(".local-services")


def run_demo(config: DemoConfig) -> int:
    run_id = time.strftime("%Y%m%d-%H%M%S")
    topic = f"demo-{run_id}.requests"
    reply_topic = f"demo-{run_id}.replies"
    create_topics(config.bootstrap_servers, {topic: config.partitions, reply_topic: config.partitions,
                                             f"demo-{run_id}.dlq": 1}, security=config.security)
    print(f"topics: {topic} ({config.partitions} partitions) -> {reply_topic}", file=sys.stderr)
    collector = ReplyCollector(config.bootstrap_servers, reply_topic, security=config.security)
    worker, worker_log = _start_worker(config, topic, reply_topic, run_id)
    try:
        sent = send_requests(config.bootstrap_servers, topic, synthetic_requests(config.model, config.requests),
                             total=config.requests, security=config.security, kafka_client=config.kafka_client)
        missing = collector.wait_for(set(sent.sent_at_ms), idle_timeout_s=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        exit_code = worker.wait(timeout=60)
        collector.close()
    print(_summary(config, sent.sent_at_ms, collector.collection, missing, exit_code, worker_log))
    return 1 if missing or exit_code != 0 else 0


def _start_worker(config: DemoConfig, topic: str, reply_topic: str,
                  run_id: str) -> tuple[subprocess.Popen[bytes], Path]:
    config.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = config.log_dir / f"demo-worker-{run_id}.log"
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=config.bootstrap_servers, REDIS_URL=config.redis_url)
    command = [sys.executable, "-m", "worker", "run", "--requests-topic", topic, "--reply-topic", reply_topic,
               "--dead-letter-topic", f"demo-{run_id}.dlq", "--model", config.model, "--group", f"demo-{run_id}",
               "--dedup-namespace", f"demo-{run_id}",
               "--max-batch-size", str(config.max_batch_size), "--max-wait-ms", str(config.max_wait_ms),
               "--kafka-client", config.kafka_client, "--log-format", "json"]
    with log_path.open("wb") as log_file:
        worker = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    print(f"worker started (pid {worker.pid}), log: {log_path}", file=sys.stderr)
    return worker, log_path


def _summary(config: DemoConfig, sent_at_ms: dict[str, int], collection: Collection, missing: set[str],
             worker_exit: int, worker_log: Path) -> str:
    answered = [collection.replies[i] for i in sent_at_ms if i in collection.replies]
    statuses = Counter(entry.reply.get("status") for entry in answered)
    latencies = sorted(entry.received_at_ms - sent_at_ms[entry.reply["id"]] for entry in answered)
    span_s = (max(e.received_at_ms for e in answered) - min(sent_at_ms.values())) / 1000 if answered else 0
    sizes = Counter(entry.batch_size for entry in answered if entry.batch_size)
    lines = [
        "",
        "streamscore demo summary",
        f"  model             {config.model} (max batch {config.max_batch_size}, max wait {config.max_wait_ms} ms)",
        f"  kafka client      {config.kafka_client} (sends and worker)",
        f"  requests sent     {len(sent_at_ms)}",
        f"  answered          {len(answered)}  ({', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))})",
        f"  missing           {len(missing)}",
        f"  duplicate replies {collection.duplicates}",
        f"  throughput        {len(answered) / span_s:,.0f} requests/s end to end ({span_s:.1f} s)" if span_s else
        "  throughput        n/a",
        f"  latency (ms)      p50 {_pct(latencies, 50)}  p95 {_pct(latencies, 95)}  p99 {_pct(latencies, 99)}"
        "  (request sent -> reply received)",
        "  batch sizes       (share of requests scored in batches of that size)",
    ]
    lines += _histogram(sizes)
    lines.append(f"  worker exit code  {worker_exit}  (log: {worker_log})")
    lines.append("  result            " + ("OK: every request answered" if not missing and worker_exit == 0
                                         else "FAILED: see above"))
    return "\n".join(lines)


def _pct(values: list[int], pct: int) -> str:
    if not values:
        return "n/a"
    return str(values[min(len(values) - 1, len(values) * pct // 100)])


def _histogram(sizes: Counter[int]) -> list[str]:
    total = sum(sizes.values())
    if not total:
        return ["    (no batch sizes reported)"]
    buckets = [(1, 1), (2, 7), (8, 15), (16, 31), (32, 63), (64, 127), (128, 1 << 30)]
    lines = []
    for low, high in buckets:
        count = sum(v for size, v in sizes.items() if low <= size <= high)
        if count:
            label = f"{low}" if low == high else (f"{low}+" if high == 1 << 30 else f"{low}-{high}")
            share = count / total
            lines.append(f"    {label:>7}  {'#' * max(1, round(share * 40)):<40} {share:6.1%}")
    return lines
