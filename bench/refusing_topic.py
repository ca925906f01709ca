"""How long a worker takes to answer requests whose reply topic refuses every reply: the refusal ladder's cost
(worker/core/refusals.py), a record at a time or a batch at a time.

    python -m bench.refusing_topic --requests 300 --out docs/bench/refusing-topic-2026-12-07/after.md

Needs the local services up (`deploy/local/services.sh up`, and its export lines in the environment). For each
client: a requests topic of one partition filled with churn requests before the worker starts, a reply topic of
``max.message.bytes`` 100 (below every reply and every error reply), and the time from the worker's start until
every request is on the dead-letter topic (its start of a few seconds included), then the time its stop took.
Run it on a checkout of the commit to measure (the worker run is the checkout's: ``python -m worker``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from tests.integration.kit import Producer, TopicReader, Topics, start_worker

REPLY_TOPIC_BYTES = 100
CLIENTS = ("kafka-python", "confluent")


def one_run(bootstrap: str, redis_url: str, client: str, requests: int, scratch: Path) -> tuple[float, float, int]:
    """(seconds until every request was dead-lettered, seconds the stop took, the worker's exit code)."""
    made = Topics.create(bootstrap, partitions=1)
    refusing = made.requests.removesuffix(".requests") + ".refusing"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(refusing, 1, 1, topic_configs={"max.message.bytes": str(REPLY_TOPIC_BYTES)})])
    finally:
        admin.close()
    producer = Producer(bootstrap)
    producer.send_requests(made.requests, "r", [[0.5] * 16] * requests)
    producer.close()
    started = time.monotonic()
    worker = start_worker(bootstrap, redis_url, Topics(made.requests, refusing, made.dlq), scratch,
                          "--kafka-client", client, "--max-batch-size", "64")
    letters = TopicReader(bootstrap, made.dlq)
    try:
        letters.read_until(lambda got: len(got.records) >= requests, 900, "every request dead-lettered", watch=worker)
        answered_s = time.monotonic() - started
        stopping = time.monotonic()
        code = worker.stop()
        return answered_s, time.monotonic() - stopping, code
    finally:
        letters.close()
        if worker.process.poll() is None:
            worker.process.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests sent before the worker starts")
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ["KAFKA_BOOTSTRAP_SERVERS"], os.environ["REDIS_URL"]
    lines = [f"{args.requests} requests, reply topic of max.message.bytes {REPLY_TOPIC_BYTES}, batch 64", "",
             "| client | every request dead-lettered, s after start | stop, s | exit code |", "|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="refusing-topic-") as scratch:
        for client in args.clients:
            answered_s, stop_s, code = one_run(bootstrap, redis_url, client, args.requests, Path(scratch))
            lines.append(f"| {client} | {answered_s:.1f} | {stop_s:.1f} | {code} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
