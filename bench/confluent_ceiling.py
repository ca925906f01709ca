"""The Kafka ceiling on librdkafka: the job of bench/kafka_ceiling.py, on confluent-kafka.

``python -m bench.confluent_ceiling --bootstrap-servers B --requests-topic T --reply-topic R --group G
--reply-bytes N`` runs until SIGTERM. Per poll (up to 500 records): one reply
per record, keyed by its key, N bytes, the worker's seven headers; flush;
check every delivery report; commit the polled offsets (acks=all, idempotent
producer, commit after the acks), asynchronously by default, as a skilled user
would (``--commit sync`` waits for each commit). No decoding, dedup, batching or model: the
most a one-process confluent-kafka worker can answer, what streamscore on
``--kafka-client confluent`` is compared with.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from bench.kafka_ceiling import BATCH_HEADERS, reply_value
from bench.plain_kafka import MAX_POLL_RECORDS, arguments, log_event, stop_flag
from bench.security import env_security
from worker.core import wire
from worker.dedup.redis_store import RedisDedupStore
from worker.kafka.confluent.connection import client_config

LINGER_MS = 2  # the worker's sink
ProduceHeaders = list[tuple[str, str | bytes | None]]  # what produce() takes


def headers(message: Message) -> ProduceHeaders:
    return [*BATCH_HEADERS, (wire.H_SOURCE_TOPIC, (message.topic() or "").encode()),
            (wire.H_SOURCE_PARTITION, str(message.partition()).encode()),
            (wire.H_SOURCE_OFFSET, str(message.offset()).encode())]


class Failures:
    """The errors of the delivery reports that ``delivered`` (a produce callback) was given."""

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []

    def delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self.errors.append(error)


def sink_like_producer(bootstrap_servers: str, client_id: str, **config: str | int) -> Producer:
    """An idempotent ``acks=all`` producer lingering as the worker's sink does, with ``config`` besides."""
    return Producer({**client_config(bootstrap_servers, env_security()), "client.id": client_id, "acks": "all",
                     "enable.idempotence": True, "linger.ms": LINGER_MS, **config})


def subscribed_clients(args: argparse.Namespace, client_id: str) -> tuple[Consumer, Producer]:
    """A consumer of ``args.group`` subscribed to the requests topic (its assignments logged as the worker logs
    them), and a ``sink_like_producer``."""
    connection = client_config(args.bootstrap_servers, env_security())
    consumer = Consumer({**connection, "group.id": args.group, "client.id": client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "allow.auto.create.topics": False})
    producer = sink_like_producer(args.bootstrap_servers, client_id)

    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log_event("partitions_assigned", partitions=sorted([tp.topic, tp.partition] for tp in partitions))

    consumer.subscribe([args.requests_topic], on_assign=on_assign)
    return consumer, producer


def polls(consumer: Consumer, stop: threading.Event) -> Iterator[list[Message]]:
    """Each poll's records (up to MAX_POLL_RECORDS, those without an error) until ``stop`` is set."""
    while not stop.is_set():
        first = consumer.poll(0.2)
        if first is not None:
            yield [m for m in [first, *consumer.consume(MAX_POLL_RECORDS - 1, 0)] if m.error() is None]


def settle_and_commit(producer: Producer, failures: Failures, consumer: Consumer, messages: list[Message],
                      asynchronous: bool = True, mark_done: Callable[[], None] | None = None) -> None:
    """The end of a poll: flush, check every delivery report (raising, and so committing nothing, when the broker
    did not take a reply), ``mark_done`` (the done marks), then commit the poll's offsets."""
    producer.flush()
    if failures.errors:
        raise RuntimeError(f"the broker did not take a reply: {failures.errors[0]}")
    if mark_done is not None:
        mark_done()
    ends = {(m.topic() or "", m.partition() or 0): (m.offset() or 0) + 1 for m in messages}
    if ends:
        offsets = [TopicPartition(t, p, o) for (t, p), o in ends.items()]
        if asynchronous:
            consumer.commit(offsets=offsets, asynchronous=True)
        else:
            consumer.commit(offsets=offsets, asynchronous=False)


def closed(consumer: Consumer, producer: Producer, store: RedisDedupStore | None = None) -> int:
    """Close the clients (the producer's last sends flushed) and the store; the exit code, 0."""
    consumer.close()
    producer.flush()
    if store is not None:
        store.close()
    return 0


def main() -> int:
    parser = arguments("Plain confluent-kafka consume-and-reply loop (the librdkafka Kafka ceiling).")
    parser.add_argument("--reply-bytes", type=int, required=True)
    parser.add_argument("--commit", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    stop = stop_flag()
    consumer, producer = subscribed_clients(args, "bench-confluent")
    failures = Failures()
    for messages in polls(consumer, stop):
        for m in messages:
            key = m.key() or b""
            producer.produce(args.reply_topic, key=key, value=reply_value(key, args.reply_bytes),
                             headers=headers(m), on_delivery=failures.delivered)
        settle_and_commit(producer, failures, consumer, messages, asynchronous=args.commit == "async")
    return closed(consumer, producer)


if __name__ == "__main__":
    raise SystemExit(main())
