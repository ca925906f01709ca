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

import argparse
import threading
import time
from functools import partial

import orjson
import torch

from bench.confluent_ceiling import Failures, ProduceHeaders, closed, polls, settle_and_commit, subscribed_clients
from bench.plain_kafka import arguments, stop_flag
from worker.core import wire
from worker.core.messages import Position, Request
from worker.dedup.redis_store import RedisDedupStore
from worker.models import load_model
from worker.models.base import Servable
from worker.models.spec import call_module
from worker.ports import FRESH

BATCH = 64


def job(description: str) -> tuple[argparse.Namespace, threading.Event, Servable, RedisDedupStore]:
    """A job by hand's arguments, its stop flag, the churn model (torch on one thread) and the dedup store."""
    parser = arguments(description)
    parser.add_argument("--redis-url", required=True)
    args = parser.parse_args()
    stop = stop_flag()
    torch.set_num_threads(1)
    return args, stop, load_model("churn"), RedisDedupStore(args.redis_url, args.group, ttl_s=3600, lease_ms=300_000)


def main() -> int:
    args, stop, model, store = job("streamscore's job by hand on confluent-kafka (the floor of the job itself).")
    consumer, producer = subscribed_clients(args, "bench-by-hand")
    failures = Failures()
    for messages in polls(consumer, stop):
        polled_ms = time.time() * 1000
        requests = [Request(body["id"], body["inputs"], Position(m.topic() or "", m.partition() or 0, m.offset() or 0))
                    for m in messages for body in (orjson.loads(m.value() or b""),)]
        fresh = [r for r, verdict in zip(requests, store.claim(requests), strict=True) if verdict == FRESH]
        done_ids: list[str] = []
        done_values: list[bytes] = []
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
                headers: ProduceHeaders = [
                    (wire.H_QUEUE_WAIT, waited), (wire.H_BATCH_WAIT, waited), (wire.H_COMPUTE, compute),
                    (wire.H_BATCH_SIZE, size), (wire.H_SOURCE_TOPIC, position.topic.encode()),
                    (wire.H_SOURCE_PARTITION, str(position.partition).encode()),
                    (wire.H_SOURCE_OFFSET, str(position.offset).encode())]
                producer.produce(args.reply_topic, value, request.id.encode(), headers=headers,
                                 on_delivery=failures.delivered)
                done_ids.append(request.id)
                done_values.append(value)
        settle_and_commit(producer, failures, consumer, messages,
                          mark_done=partial(store.complete, done_ids, done_values))
    return closed(consumer, producer, store)


if __name__ == "__main__":
    raise SystemExit(main())
