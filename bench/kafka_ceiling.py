"""The Kafka ceiling: consume request records and produce same-sized replies, no model, no Redis.

``python -m bench.kafka_ceiling --bootstrap-servers B --requests-topic T --reply-topic R --group G
--reply-bytes N`` runs until SIGTERM. Per poll (up to 500 records): send one
reply per record, keyed by the record's key, with a value of exactly N bytes
and the seven headers the worker sets; flush; check every send; commit the
polled offsets. That is streamscore's acks and commit policy (``acks=all``,
idempotent producer, commit after the poll's replies are acknowledged)
without decoding, dedup, batching or the model: the most a one-process
kafka-python worker can answer.
"""

from __future__ import annotations

from kafka import OffsetAndMetadata, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from bench.plain_kafka import arguments, log_event, reliable_producer, stop_flag, subscribed_consumer
from worker.core import wire

LINGER_MS = 2  # the worker's sink


def reply_value(key: bytes, size: int) -> bytes:
    """A JSON object with the request id, padded to ``size`` bytes (as long as a real reply)."""
    head = b'{"id":"' + key + b'","status":"ok","pad":"'
    return head + b"x" * max(0, size - len(head) - 2) + b'"}'


# The four reply headers a batch shares (timings, batch size), with values of the usual width.
BATCH_HEADERS = ((wire.H_QUEUE_WAIT, b"1.234"), (wire.H_BATCH_WAIT, b"1.234"), (wire.H_COMPUTE, b"1.234"),
                 (wire.H_BATCH_SIZE, b"64"))


def reply_headers(record: ConsumerRecord) -> list[tuple[str, bytes]]:
    """The worker's seven reply headers, with values of the usual width."""
    return [*BATCH_HEADERS, (wire.H_SOURCE_TOPIC, record.topic.encode()),
            (wire.H_SOURCE_PARTITION, str(record.partition).encode()),
            (wire.H_SOURCE_OFFSET, str(record.offset).encode())]


def main() -> int:
    parser = arguments("Plain kafka-python consume-and-reply loop (the Kafka ceiling).")
    parser.add_argument("--reply-bytes", type=int, required=True)
    args = parser.parse_args()
    stop = stop_flag()
    consumer = subscribed_consumer(args)
    producer = reliable_producer(args, LINGER_MS)
    replied = 0
    while not stop.is_set():
        polled = consumer.poll(timeout_ms=200, max_records=500)
        if not polled:
            continue
        futures = [producer.send(args.reply_topic, key=r.key, value=reply_value(r.key, args.reply_bytes),
                                 headers=reply_headers(r))
                   for records in polled.values() for r in records]
        producer.flush()
        for future in futures:
            future.get()  # raises if the broker did not take it: nothing is committed then
        consumer.commit({TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(records[-1].offset + 1, "", -1)
                         for tp, records in polled.items()})
        replied += len(futures)
    consumer.close(autocommit=False)
    producer.close()
    log_event("loop_stopped", replied=replied)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
