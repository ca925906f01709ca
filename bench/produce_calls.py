"""``python -m bench.produce_calls``: what sending one reply costs in confluent-kafka, with the wire contract's
headers and without.

Every design of the churn job on confluent-kafka sends each reply with its own ``produce`` call and takes one
delivery report for it. This is true of streamscore, of the job by hand, of its columnar floor and of the bare
loop. The wire contract puts timings, batch size and the source's topic, partition and offset on every reply,
seven headers in all, and confluent-kafka's one batched call, ``produce_batch``, takes no headers (its own
documentation, 2.16: "not currently supported in batch mode"). This times that part alone. The same replies
(churn-sized values, keyed by id) go to a real broker five ways:

- ``produce``, seven headers: how every contender of ``python -m bench.cpu_per_reply`` sends;
- ``produce``, one header (the source offset): what having headers at all costs;
- ``produce``, no headers;
- ``produce_batch``, no headers: one call a poll's worth of replies;
- ``produce``, seven headers, reports of failures only (``delivery.report.only.error``: no Python call a reply
  delivered; a flush that empties the queue delivered every send without a report): what a report a delivered
  send costs. The worker does not send so: a send could then be told finished only by the whole queue
  emptying (tried in commit 41634ba, reverted in 0a854be; docs/benchmarks.md says why).

Each way sends polls of 500 replies (the worker's ``max.poll.records``) from a producer configured as the worker's
sink is (idempotent, ``acks=all``, lingering 2 ms, the Java client's partitioner), warmed by one untimed poll; all
but the last report every delivery. It flushes after each poll and checks the delivery reports: one a reply, or
none for the last way. The ways are interleaved over ``--repeats``, each repeat starting one way later. Per reply
it gives: the calling thread's CPU in the send calls and in the flush that hands it the delivery reports;
librdkafka's own threads; the whole process; medians of the repeats. Needs KAFKA_BOOTSTRAP_SERVERS (``make up``,
then eval its env).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, Producer

from bench.confluent_ceiling import ProduceHeaders, sink_like_producer
from bench.kafka_ceiling import BATCH_HEADERS
from bench.thread_cpu import ThreadCpu
from bench.topics import RunTopics
from worker.core import wire

POLL = 500  # replies sent between two flushes: a poll's worth (bench.plain_kafka.MAX_POLL_RECORDS)
PARTITIONS = 4


@dataclass(frozen=True)
class Replies:
    """The replies each way sends: values as long as churn's, ids as keys, each one's seven headers."""

    values: list[bytes]
    keys: list[bytes]
    headers: list[ProduceHeaders]
    offsets: list[ProduceHeaders]  # each reply's source offset header alone

    @classmethod
    def churn(cls, count: int, source_topic: str) -> Replies:
        keys = [b"req-%08d" % i for i in range(count)]
        values = [b'{"id":"%s","status":"ok","outputs":{"churn_probability":0.4217},"model":"churn",'
                  b'"model_version":"mlp16-seed20261130"}' % key for key in keys]
        source = source_topic.encode()
        headers: list[ProduceHeaders] = [
            [*BATCH_HEADERS, (wire.H_SOURCE_TOPIC, source),
             (wire.H_SOURCE_PARTITION, b"%d" % (i % PARTITIONS)), (wire.H_SOURCE_OFFSET, b"%d" % (i // PARTITIONS))]
            for i in range(count)]
        return cls(values, keys, headers, [seven[-1:] for seven in headers])


Delivered = Callable[[KafkaError | None, Message], None]
Send = Callable[[Producer, str, Replies, range, Delivered], None]


def with_seven_headers(producer: Producer, topic: str, replies: Replies, poll: range, delivered: Delivered) -> None:
    for i in poll:
        producer.produce(topic, replies.values[i], replies.keys[i], on_delivery=delivered, headers=replies.headers[i])


def with_one_header(producer: Producer, topic: str, replies: Replies, poll: range, delivered: Delivered) -> None:
    for i in poll:
        producer.produce(topic, replies.values[i], replies.keys[i], on_delivery=delivered,
                         headers=replies.offsets[i])


def without_headers(producer: Producer, topic: str, replies: Replies, poll: range, delivered: Delivered) -> None:
    for i in poll:
        producer.produce(topic, replies.values[i], replies.keys[i], on_delivery=delivered)


def batched_without_headers(producer: Producer, topic: str, replies: Replies, poll: range,
                            delivered: Delivered) -> None:
    messages = [{"value": replies.values[i], "key": replies.keys[i]} for i in poll]
    queued = producer.produce_batch(topic, messages, on_delivery=delivered)
    if queued != len(poll):
        errors = [m["_error"] for m in messages if "_error" in m]
        raise RuntimeError(f"produce_batch queued {queued} of {len(poll)} replies: {errors[:1]}")


SINK_PARTITIONER = {"partitioner": "murmur2_random"}  # worker/kafka/confluent/sink.py's
FAILURES_ONLY = {"delivery.report.only.error": True}  # the last way's: no Python call a delivered send
WAYS: dict[str, tuple[Send, bool]] = {  # each way's send, and whether its producer reports failures only
    "produce, seven headers": (with_seven_headers, False),
    "produce, one header": (with_one_header, False),
    "produce, no headers": (without_headers, False),
    "produce_batch, no headers": (batched_without_headers, False),
    "produce, seven headers, reports of failures only": (with_seven_headers, True),
}


def sink_like_producers(bootstrap: str, client_id: str) -> dict[bool, Producer]:
    """A producer configured as the worker's sink is, by whether it reports failures only (the last way's)."""
    return {failures_only: sink_like_producer(bootstrap, client_id, **SINK_PARTITIONER,
                                              **(FAILURES_ONLY if failures_only else {}))
            for failures_only in (False, True)}


@dataclass(frozen=True)
class Cost:
    """One way's CPU, µs a reply."""

    send: float
    deliveries: float
    librdkafka: float
    process: float


def measure(producer: Producer, topic: str, replies: Replies, send: Send, failures_only: bool = False) -> Cost:
    """Send every reply ``send``'s way, a poll at a time, each poll flushed and its delivery reports checked:
    one a reply, or, from a producer that reports ``failures_only``, none (an emptied queue delivered them)."""
    reports: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        reports.append(error)

    count, send_s, deliveries_s = len(replies.values), 0.0, 0.0
    threads = ThreadCpu()
    threads.start()
    process_began = time.process_time()
    for start in range(0, count, POLL):
        began = time.thread_time()
        send(producer, topic, replies, range(start, min(start + POLL, count)), delivered)
        sent = time.thread_time()
        left = producer.flush(30)
        send_s, deliveries_s = send_s + sent - began, deliveries_s + time.thread_time() - sent
        if left:
            raise RuntimeError(f"{left} replies still unsent after 30 s: is the broker up?")
    process_s = time.process_time() - process_began
    threads.stop()
    failed = [error for error in reports if error is not None]
    if len(reports) != (0 if failures_only else count) or failed:
        raise RuntimeError(f"{len(reports)} delivery reports for {count} replies, {len(failed)} failed: "
                           f"{failed[:1]}")
    librdkafka_s = sum(seconds for name, seconds in threads.seconds.items() if name.startswith("rdk:"))
    return Cost(*(seconds / count * 1e6 for seconds in (send_s, deliveries_s, librdkafka_s, process_s)))


def table(costs: dict[str, list[Cost]], replies: int) -> str:
    repeats = len(next(iter(costs.values())))
    lines = [f"{replies:,} replies a repeat, polls of {POLL}, medians of {repeats} interleaved repeats, "
             "CPU µs a reply", "",
             "| way | the send calls | the flush (delivery reports) | librdkafka's threads | the process "
             "| runs (the process) |",
             "|---|---:|---:|---:|---:|---|"]
    for way, runs in costs.items():
        medians = [statistics.median(getattr(c, field) for c in runs)
                   for field in ("send", "deliveries", "librdkafka", "process")]
        lines.append(f"| {way} | " + " | ".join(f"{m:.2f}" for m in medians)
                     + " | " + ", ".join(f"{c.process:.2f}" for c in runs) + " |")
    if not ThreadCpu.available:
        lines += ["", "(librdkafka's threads: not measured here, no /proc/self/task)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.produce_calls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replies", type=int, default=64_000, help="replies each way sends a repeat "
                        "(default 64,000)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the five ways (default 5)")
    args = parser.parse_args(argv)
    if args.replies < 1 or args.repeats < 1:
        parser.error("--replies and --repeats must be at least 1")
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        print("error: KAFKA_BOOTSTRAP_SERVERS must be set (`make up`, then eval its env)", file=sys.stderr)
        return 2
    topics = RunTopics.fresh("produce-calls")
    topics.create(bootstrap, PARTITIONS)
    producers = sink_like_producers(bootstrap, "bench-produce-calls")
    try:
        replies = Replies.churn(args.replies, topics.requests)
        for failures_only, producer in producers.items():  # connected
            measure(producer, topics.replies, Replies.churn(POLL, topics.requests), with_seven_headers, failures_only)
        costs: dict[str, list[Cost]] = {way: [] for way in WAYS}
        ways = list(WAYS.items())
        for repeat in range(1, args.repeats + 1):
            shift = (repeat - 1) % len(ways)
            for way, (send, failures_only) in ways[shift:] + ways[:shift]:
                cost = measure(producers[failures_only], topics.replies, replies, send, failures_only)
                costs[way].append(cost)
                print(f"repeat {repeat}/{args.repeats}: {way}: {cost.process:.2f} µs a reply", file=sys.stderr)
        print(table(costs, args.replies))
    finally:
        for producer in producers.values():
            producer.flush(10)
        topics.delete(bootstrap)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
