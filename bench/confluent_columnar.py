"""streamscore's job written by hand on confluent-kafka, by columns: how little CPU a reply Python can spend on it.

``python -m bench.confluent_columnar`` takes the arguments of ``bench.confluent_by_hand`` and does the same
job with the same guarantees (claim in Redis with streamscore's store and scripts, the churn model in batches
of 64, replies in the wire contract's JSON with the seven headers, acks=all and idempotent, every delivery
report checked, done marks, an asynchronous commit), written a poll at a time instead of a request at a time:
the poll's values read in one msgspec call, the ids claimed and marked done as columns, the model's input one
numpy array, its output one list of numbers, each reply's value formatted from the model's template. What
stays per request is what the libraries take per record: a ``produce`` call and its headers. It answers
whether a Python worker can spend much less than the job by hand: the floor of a columnar design.
Only plain churn requests (``{"id": ..., "inputs": [16 numbers]}``); anything else stops the loop.
"""

from __future__ import annotations

import time
from typing import Annotated

import msgspec
import numpy
import orjson
import torch
from confluent_kafka import TopicPartition

from bench.confluent_ceiling import Failures, subscribed_clients
from bench.plain_kafka import MAX_POLL_RECORDS, arguments, stop_flag
from worker.core import wire
from worker.dedup.redis_store import RedisDedupStore
from worker.models import load_model

BATCH = 64
FEATURES = 16


class PlainRequest(msgspec.Struct):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=wire.MAX_ID_LENGTH)]
    inputs: Annotated[list[float], msgspec.Meta(min_length=FEATURES, max_length=FEATURES)]


def main() -> int:
    parser = arguments("streamscore's job by hand on confluent-kafka, by columns (the floor of a columnar design).")
    parser.add_argument("--redis-url", required=True)
    args = parser.parse_args()
    stop = stop_flag()
    torch.set_num_threads(1)
    model = load_model("churn")
    # The reply's value around its id and its probability, as wire.ok_reply_value writes it.
    head, middle = b'{"id":', b',"status":"ok","outputs":{"churn_probability":'
    tail = b'},"model":%s,"model_version":%s}' % (orjson.dumps(model.name), orjson.dumps(model.version))
    read_poll = msgspec.json.Decoder(list[PlainRequest])
    store = RedisDedupStore(args.redis_url, args.group, ttl_s=3600, lease_ms=300_000)
    consumer, producer = subscribed_clients(args, "bench-columnar")
    failures = Failures()
    while not stop.is_set():
        first = consumer.poll(0.2)
        if first is None:
            continue
        messages = [m for m in [first, *consumer.consume(MAX_POLL_RECORDS - 1, 0)] if m.error() is None]
        polled_ms = time.time() * 1000
        requests = read_poll.decode(b"[%s]" % b",".join([m.value() or b"" for m in messages]))
        fresh = [i for i, new in enumerate(store.claim_columns(
            [r.id for r in requests], [f"{m.topic()}/{m.partition()}/{m.offset()}" for m in messages])) if new]
        inputs = numpy.array([requests[i].inputs for i in fresh], dtype=numpy.float32).reshape(-1, FEATURES)
        done_ids: list[str] = []
        done_values: list[bytes] = []
        topics: dict[str, bytes] = {}
        for start in range(0, len(fresh), BATCH):
            began = time.perf_counter()
            with torch.inference_mode():
                probabilities = model.module(torch.from_numpy(inputs[start:start + BATCH])).reshape(-1).tolist()
            compute = (wire.H_COMPUTE, f"{(time.perf_counter() - began) * 1000:.3f}".encode())
            size = (wire.H_BATCH_SIZE, b"%d" % len(probabilities))
            waited = f"{time.time() * 1000 - polled_ms:.3f}".encode()
            for i, probability in zip(fresh[start:start + BATCH], probabilities, strict=True):
                request_id, message = requests[i].id, messages[i]
                value = b"%s%s%s%s%s" % (head, orjson.dumps(request_id), middle, orjson.dumps(probability), tail)
                topic = message.topic() or ""
                source = topics.get(topic) or topics.setdefault(topic, topic.encode())
                producer.produce(args.reply_topic, value, request_id.encode(), on_delivery=failures.delivered,
                                 headers=[(wire.H_QUEUE_WAIT, waited), (wire.H_BATCH_WAIT, waited), compute, size,
                                          (wire.H_SOURCE_TOPIC, source),
                                          (wire.H_SOURCE_PARTITION, b"%d" % (message.partition() or 0)),
                                          (wire.H_SOURCE_OFFSET, b"%d" % (message.offset() or 0))])
                done_ids.append(request_id)
                done_values.append(value)
        producer.flush()
        if failures.errors:
            raise RuntimeError(f"the broker did not take a reply: {failures.errors[0]}")  # nothing is committed then
        store.complete_columns(done_ids, done_values)
        ends = {(m.topic() or "", m.partition() or 0): (m.offset() or 0) + 1 for m in messages}
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in ends.items()], asynchronous=True)
    consumer.close()
    producer.flush()
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
