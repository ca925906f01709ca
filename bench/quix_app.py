"""streamscore's job as a Quix Streams application: the per-message stream processor users pick instead.

``.venv-quix/bin/python -m bench.quix_app --bootstrap-servers B --requests-topic T --reply-topic R --group G
--redis-url U`` runs until SIGTERM. It needs its own environment (Quix Streams
pins an older confluent-kafka than the worker's): ``bash bench/quix_venv.sh``
builds ``.venv-quix/``, which sees the worker's other dependencies.

What a Quix user would write for the job, in Quix's own idiom, one message at
a time: the value deserialised as JSON by the topic, the id claimed in Redis
(streamscore's own store and script, one call a message), the churn model run
on that one request, the reply's seven headers and its own time set (Quix
would give it the request's), the reply produced to the reply topic keyed by
the id (Quix's producer: acks=all, idempotent, lingering as the worker's sink
does), the done mark written (one call a message), and Quix's checkpoint
committing every ``--commit-interval-s`` (its default 5 s). The done mark is
written once the reply is handed to the producer, not once the broker has
it: a Quix pipeline has no step after delivery, so this is weaker than the
worker's and the job by hand's order, and a little cheaper.
``--dedup quix-state`` remembers answered ids in Quix's own state instead
(RocksDB, with its changelog topic, keyed by the request's key, which is its
id): Quix's idiom, a per-partition memory where the worker's is shared by the
group. ``--dedup none`` skips dedup: the lightest per-message app, not the
same job, to show what dedup costs it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import orjson
import torch
from confluent_kafka.admin import AdminClient
from quixstreams import Application, message_context

from bench.plain_kafka import log_event
from worker.core import wire
from worker.core.messages import Position, Request
from worker.dedup.redis_store import RedisDedupStore
from worker.models import load_model
from worker.models.spec import call_module
from worker.ports import FRESH

LINGER_MS = 2  # the worker's sink


class _LoggedApplication(Application):  # type: ignore[misc]
    """Logs the ``partitions_assigned`` line the harness times from (through Quix's own assignment callback)."""

    def _on_assign(self, consumer: Any, topic_partitions: list[Any]) -> None:
        super()._on_assign(consumer, topic_partitions)
        log_event("partitions_assigned", partitions=sorted([tp.topic, tp.partition] for tp in topic_partitions))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--requests-topic", required=True)
    parser.add_argument("--reply-topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--dedup", choices=("redis", "quix-state", "none"), default="redis",
                        help="where answered ids are remembered (default: Redis, as the worker does)")
    parser.add_argument("--commit-interval-s", type=float, default=5.0, help="Quix's checkpoint (default 5 s)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model("churn")
    store = RedisDedupStore(args.redis_url, args.group, ttl_s=3600, lease_ms=300_000)
    app = _LoggedApplication(
        broker_address=args.bootstrap_servers, consumer_group=args.group, auto_offset_reset="earliest",
        commit_interval=args.commit_interval_s, auto_create_topics=args.dedup == "quix-state", loglevel="WARNING",
        state_dir=tempfile.mkdtemp(prefix="bench-quix-state-"),
        producer_extra_config={"linger.ms": LINGER_MS, "enable.idempotence": True})
    requests = app.topic(args.requests_topic, value_deserializer="json")
    replies = app.topic(args.reply_topic, key_serializer="str", value_serializer="json")
    timing = {"compute_ms": 0.0, "received_ms": 0.0}  # of the message in flight: Quix runs one at a time

    def fresh(body: dict[str, Any]) -> bool:
        return store.claim([Request(body["id"], body["inputs"], Position("", 0, 0))])[0] == FRESH

    def fresh_in_state(body: dict[str, Any], state: Any) -> bool:
        if state.get("answered"):
            return False
        state.set("answered", True)
        return True

    def score(body: dict[str, Any]) -> dict[str, Any]:
        timing["received_ms"] = time.time() * 1000
        began = time.perf_counter()
        with torch.inference_mode():
            [output] = model.split(call_module(model.module, model.collate([model.prepare(body["inputs"])])))
        timing["compute_ms"] = (time.perf_counter() - began) * 1000
        return {"id": body["id"], "status": "ok", "outputs": output, "model": model.name,
                "model_version": model.version}

    def with_headers(reply: dict[str, Any], key: Any, timestamp: int, headers: Any) -> list[tuple[str, bytes]]:
        waited = f"{time.time() * 1000 - timing['received_ms']:.3f}".encode()
        source = message_context()
        return [(wire.H_QUEUE_WAIT, waited), (wire.H_BATCH_WAIT, waited),
                (wire.H_COMPUTE, f"{timing['compute_ms']:.3f}".encode()), (wire.H_BATCH_SIZE, b"1"),
                (wire.H_SOURCE_TOPIC, source.topic.encode()),
                (wire.H_SOURCE_PARTITION, str(source.partition).encode()),
                (wire.H_SOURCE_OFFSET, str(source.offset).encode())]

    def now_ms(reply: dict[str, Any], key: Any, timestamp: int, headers: Any) -> int:
        return time.time_ns() // 1_000_000

    def mark_done(reply: dict[str, Any]) -> None:
        store.complete([reply["id"]], [orjson.dumps(reply)])

    sdf = app.dataframe(requests)
    if args.dedup == "redis":
        sdf = sdf.filter(fresh)
    elif args.dedup == "quix-state":
        sdf = sdf.filter(fresh_in_state, stateful=True)
    # Quix gives an output the input's timestamp; the reply's own time is what the harness (and a reader) times.
    sdf = sdf.apply(score).set_headers(with_headers).set_timestamp(now_ms)
    sdf = sdf.to_topic(replies, key=lambda reply: reply["id"])
    if args.dedup == "redis":
        sdf.update(mark_done)
    app.run()
    store.close()
    if args.dedup == "quix-state":  # the changelog topics Quix created for this run's group
        admin = AdminClient({"bootstrap.servers": args.bootstrap_servers})
        ours = [name for name in admin.list_topics(timeout=10).topics if name.startswith(f"changelog__{args.group}")]
        for future in admin.delete_topics(ours).values() if ours else ():
            future.result()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
