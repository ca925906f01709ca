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

import threading
import time
from functools import partial
from typing import Annotated

import msgspec
import numpy
import orjson
import torch
from confluent_kafka import Consumer, Producer

from bench.confluent_by_hand import job
from bench.confluent_ceiling import Failures, closed, polls, settle_and_commit, subscribed_clients
from worker.core import wire
from worker.dedup.redis_store import RedisDedupStore
from worker.models.base import Servable
from worker.ports import FRESH

BATCH = 64
FEATURES = 16


class PlainRequest(msgspec.Struct):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=wire.MAX_ID_LENGTH)]
    inputs: Annotated[list[float], msgspec.Meta(min_length=FEATURES, max_length=FEATURES)]


def reply_parts(model: str, version: str) -> tuple[bytes, bytes, bytes]:
    """What goes before a reply's id, between its id and its probability, and after: the bytes that
    wire.ok_reply_value writes for churn, with the id and the probability each written by orjson."""
    return (b'{"id":', b',"status":"ok","outputs":{"churn_probability":',
            b'},"model":%s,"model_version":%s}' % (orjson.dumps(model), orjson.dumps(version)))


class Laps:
    """The calling thread's CPU by stage: each ``lap(label)`` adds what it spent since the last lap to ``label``
    (``python -m bench.profile_worker --floor``). A lap costs about a microsecond: a few a poll of 500."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._at = time.thread_time()

    def lap(self, label: str) -> None:
        now = time.thread_time()
        self.seconds[label] = self.seconds.get(label, 0.0) + now - self._at
        self._at = now


class NoLaps(Laps):
    def lap(self, label: str) -> None:
        pass


def run(consumer: Consumer, producer: Producer, store: RedisDedupStore, model: Servable, reply_topic: str,
        stop: threading.Event, until: int = 0, laps: Laps | None = None) -> int:
    """Answer each poll until ``stop`` is set (or, given ``until``, that many records were answered); returns how
    many. ``laps`` takes the thread's CPU in each stage of a poll."""
    laps = laps or NoLaps()
    head, middle, tail = reply_parts(model.name, model.version)
    read_poll = msgspec.json.Decoder(list[PlainRequest])
    failures = Failures()
    answered = 0
    for messages in polls(consumer, stop):
        laps.lap("poll")
        polled_ms = time.time() * 1000
        requests = read_poll.decode(b"[%s]" % b",".join([m.value() or b"" for m in messages]))
        laps.lap("decode")
        verdicts = store.claim_columns([r.id for r in requests],
                                       [f"{m.topic()}/{m.partition()}/{m.offset()}" for m in messages])
        fresh = [i for i, verdict in enumerate(verdicts) if verdict == FRESH]
        laps.lap("claim")
        inputs = numpy.array([requests[i].inputs for i in fresh], dtype=numpy.float32).reshape(-1, FEATURES)
        done_ids: list[str] = []
        done_values: list[bytes] = []
        topics: dict[str, bytes] = {}
        laps.lap("inputs")
        for start in range(0, len(fresh), BATCH):
            began = time.perf_counter()
            with torch.inference_mode():
                probabilities = model.module(torch.from_numpy(inputs[start:start + BATCH])).reshape(-1).tolist()
            laps.lap("forward")
            compute = (wire.H_COMPUTE, f"{(time.perf_counter() - began) * 1000:.3f}".encode())
            size = (wire.H_BATCH_SIZE, b"%d" % len(probabilities))
            waited = f"{time.time() * 1000 - polled_ms:.3f}".encode()
            for i, probability in zip(fresh[start:start + BATCH], probabilities, strict=True):
                request_id, message = requests[i].id, messages[i]
                value = b"%s%s%s%s%s" % (head, orjson.dumps(request_id), middle, orjson.dumps(probability), tail)
                topic = message.topic() or ""
                source = topics.get(topic) or topics.setdefault(topic, topic.encode())
                producer.produce(reply_topic, value, request_id.encode(), on_delivery=failures.delivered,
                                 headers=[(wire.H_QUEUE_WAIT, waited), (wire.H_BATCH_WAIT, waited), compute, size,
                                          (wire.H_SOURCE_TOPIC, source),
                                          (wire.H_SOURCE_PARTITION, b"%d" % (message.partition() or 0)),
                                          (wire.H_SOURCE_OFFSET, b"%d" % (message.offset() or 0))])
                done_ids.append(request_id)
                done_values.append(value)
            laps.lap("answer")
        settle_and_commit(producer, failures, consumer, messages,
                          mark_done=partial(store.complete, done_ids, done_values))
        laps.lap("settle")
        answered += len(messages)
        if until and answered >= until:
            break
    return answered


def main() -> int:
    args, stop, model, store = job("streamscore's job by hand on confluent-kafka, by columns (a columnar design's "
                                   "floor).")
    consumer, producer = subscribed_clients(args, "bench-columnar")
    run(consumer, producer, store, model, args.reply_topic, stop)
    return closed(consumer, producer, store)


if __name__ == "__main__":
    raise SystemExit(main())
