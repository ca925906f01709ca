"""What the two plain kafka-python contenders share: clients set up as the worker sets up its own,
a stop flag for SIGTERM, and the ``partitions_assigned`` log line the harness times from.

Consumer: a fresh group, auto-commit off, earliest offset, 500 records per
poll (the worker's defaults). Producer: ``acks=all``, idempotent.
"""

from __future__ import annotations

import argparse
import datetime
import signal
import sys
import threading
import time
from collections.abc import Iterable
from types import FrameType
from typing import Any

import orjson
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition

from bench.security import connection

MAX_POLL_RECORDS = 500  # the worker's --max-poll-records default


def log_event(event: str, **fields: Any) -> None:
    """One JSON line on stderr, shaped like the worker's structlog lines (``event``, ISO UTC ``timestamp``)."""
    now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
    sys.stderr.write(orjson.dumps({"event": event, "timestamp": now, **fields}).decode() + "\n")
    sys.stderr.flush()


class _AssignmentLogger(ConsumerRebalanceListener):  # type: ignore[misc]
    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        log_event("partitions_assigned", partitions=sorted([tp.topic, tp.partition] for tp in assigned))

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        log_event("partitions_revoked", partitions=sorted([tp.topic, tp.partition] for tp in revoked))


def stop_flag() -> threading.Event:
    """An event set by SIGTERM or SIGINT: the loop finishes what it holds, commits, and exits 0."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--requests-topic", required=True)
    parser.add_argument("--reply-topic", required=True)
    parser.add_argument("--group", required=True)
    return parser


def subscribed_consumer(args: argparse.Namespace, wait_s: float = 10.0) -> KafkaConsumer:
    """A consumer subscribed to the requests topic, joined the way the worker's source joins.

    It waits until the topic's partitions are known (subscribing earlier can
    leave a fresh group with none), and refreshes metadata once subscribed
    (else kafka-python rejoins right after its first assignment).
    """
    consumer = KafkaConsumer(**connection(args.bootstrap_servers), group_id=args.group,
                             client_id="bench-plain", enable_auto_commit=False, auto_offset_reset="earliest",
                             allow_auto_create_topics=False, max_poll_records=MAX_POLL_RECORDS)
    deadline = time.monotonic() + wait_s
    while not consumer.partitions_for_topic(args.requests_topic):
        if time.monotonic() > deadline:
            raise LookupError(f"requests topic {args.requests_topic!r} does not exist")
        time.sleep(0.5)
    consumer.subscribe([args.requests_topic], listener=_AssignmentLogger())
    consumer.topics()
    return consumer


def reliable_producer(args: argparse.Namespace, linger_ms: int) -> KafkaProducer:
    return KafkaProducer(**connection(args.bootstrap_servers), client_id="bench-plain",
                         acks="all", enable_idempotence=True, linger_ms=linger_ms, max_block_ms=15_000)
