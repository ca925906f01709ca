"""streamscore's job written by hand on confluent-kafka: the floor of the job itself, without the framework.

``python -m bench.confluent_by_hand --bootstrap-servers B --requests-topic T --reply-topic R --group G
--redis-url U`` runs until SIGTERM. Per poll (up to 500 records), what a
skilled user would write for the same guarantees, and nothing more:
decode each record's JSON, claim the ids in Redis (streamscore's own
store, one script call), prepare, collate, run and split the churn model
in batches of 64, reply to the fresh ones (JSON, the seven headers, acks=all,
idempotent), flush and check every delivery report, write the done marks
(one script call), commit asynchronously. No batcher, no deadlines, no
stats, no per-record error replies (a record that does not decode stops the
loop), no refusal ladder, no rebalance handling: what is left when every
feature but the job is taken away. Compared with the bare loop
(bench/confluent_ceiling.py) it shows what the job costs; with streamscore,
what the framework around it costs.
"""

from __future__ import annotations

import time

import orjson
import torch
from confluent_kafka import TopicPartition

from bench.confluent_ceiling import Failures, subscribed_clients
from bench.plain_kafka import MAX_POLL_RECORDS, arguments, stop_flag
from worker.core import wire
from worker.core.messages import Position, Request
from worker.dedup.redis_store import RedisDedupStore
from worker.models import load_model
from worker.models.spec import call_module
from worker.ports import Completed

BATCH = 64


def main() -> int:
    parser = arguments("streamscore's job by hand on confluent-kafka (the floor of the job itself).")
    parser.add_argument("--redis-url", required=True)
    args = parser.parse_args()
    stop = stop_flag()
    torch.set_num_threads(1)
    model = load_model("churn")
    store = RedisDedupStore(args.redis_url, args.group, ttl_s=3600, lease_ms=300_000)
    consumer, producer = subscribed_clients(args, "bench-by-hand")
    failures = Failures()
    while not stop.is_set():
        first = consumer.poll(0.2)
        if first is None:
            continue
        messages = [m for m in [first, *consumer.consume(MAX_POLL_RECORDS - 1, 0)] if m.error() is None]
        polled_ms = time.time() * 1000
        requests = [Request(body["id"], body["inputs"], Position(m.topic() or "", m.partition() or 0, m.offset() or 0))
                    for m in messages for body in (orjson.loads(m.value() or b""),)]
        fresh = [r for r, new in zip(requests, store.claim(requests), strict=True) if new]
        done: list[Completed] = []
        for start in range(0, len(fresh), BATCH):
            batch = fresh[start:start + BATCH]
            began = time.perf_counter()
            with torch.inference_mode():
                outputs = model.split(call_module(model.module, model.collate([model.prepare(r.item) for r in batch])))
            compute = f"{(time.perf_counter() - began) * 1000:.3f}".encode()
            size = str(len(batch)).encode()
            for request, output in zip(batch, outputs, strict=True):
                value = orjson.dumps({"id": request.id, "status": "ok", "outputs": output, "model": model.name,
                                      "model_version": model.version}, option=orjson.OPT_SERIALIZE_NUMPY)
                waited = f"{time.time() * 1000 - polled_ms:.3f}".encode()
                position = request.position
                headers = [(wire.H_QUEUE_WAIT, waited), (wire.H_BATCH_WAIT, waited), (wire.H_COMPUTE, compute),
                           (wire.H_BATCH_SIZE, size), (wire.H_SOURCE_TOPIC, position.topic.encode()),
                           (wire.H_SOURCE_PARTITION, str(position.partition).encode()),
                           (wire.H_SOURCE_OFFSET, str(position.offset).encode())]
                producer.produce(args.reply_topic, value, request.id.encode(), headers=headers,
                                 on_delivery=failures.delivered)
                done.append(Completed(request.id, value))
        producer.flush()
        if failures.errors:
            raise RuntimeError(f"the broker did not take a reply: {failures.errors[0]}")  # nothing is committed then
        store.complete(done)
        ends = {(m.topic() or "", m.partition() or 0): (m.offset() or 0) + 1 for m in messages}
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in ends.items()], asynchronous=True)
    consumer.close()
    producer.flush()
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
