"""``python -m bench.hot_path``: the CPU a request of the hot path's two ends, each way the worker can take it.

In this process, with no broker, Redis or model run, on churn requests
(16 numbers each), best of ``--repeats``:

- decoding a poll of 500 records: by the full path of the wire contract
  (``decode_request``: orjson, every check, the model's ``prepare``), by
  the model's reader of plain requests (msgspec, worker/models/spec.py), which
  the worker takes for a record with no headers and only an id and inputs,
  and, not in the worker, the poll's values read in one msgspec call into the
  same requests (the columnar job's way, with no record needing another path);
- answering a scored batch of 64: per request (a Reply, its Timings, the
  encoder, what a tracer or another reply format needs) and in one pass (the
  wire contract's JSON, headers built once a batch), each sent to a sink that
  only records them;
- the offsets' bookkeeping (worker/core/offsets.py): a poll of 500 tracked,
  then acknowledged a batch of 64 at a time, the committable offsets asked
  after each batch, with the poll's records in runs of a partition (as both
  Kafka clients hand them over) and with its partitions interleaved record by
  record (the worst case for runs).

``make bench-cpu`` measures the whole worker; this shows where two of its
steps stand, and what each path costs, without the noise of a broker on the
same two cores.
"""

from __future__ import annotations

import argparse
import random
import timeit
from collections.abc import Callable, Sequence
from functools import partial
from typing import Annotated, Any

import msgspec
import orjson

from worker.core.messages import Headers, Position, RawRecord, Request
from worker.core.offsets import OffsetTracker
from worker.core.routes import Route, Routes
from worker.core.stats import WorkerStats
from worker.core.wire import MAX_ID_LENGTH, encode_reply
from worker.models import load_model
from worker.models.base import DeclaredModel
from worker.models.spec import MAX_MAGNITUDE
from worker.ports import Delivery, Outcome, Record, Scored, Tag
from worker.stream.json_requests import JsonRequests
from worker.stream.replies import Responder

POLL = 500
BATCH = 64


class RecordingSink:
    """A sink that records every send (a group as one entry, as it came) and reports nothing
    (tests/unit/test_answer_in_one_pass.py reads it)."""

    pending = 0

    def __init__(self) -> None:
        self.made: list[tuple[Record, Tag] | tuple[Sequence[Record], Callable[[int], Tag]]] = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: Tag) -> None:
        self.made.append(((topic, key, value, headers), tag))

    def send_group(self, records: Sequence[Record], tag: Tag, member: Callable[[int], Tag]) -> None:
        self.made.append((records, member))

    def sends(self) -> list[tuple[str, bytes | None, bytes | None, Headers, Tag]]:
        """Every send in the order made, each with its own tag (as a sink reports a group with a failed send)."""
        sends: list[tuple[str, bytes | None, bytes | None, Headers, Tag]] = []
        for made, tag in self.made:
            if callable(tag):
                sends += [(*record, tag(i)) for i, record in enumerate(made)]  # type: ignore[misc]
            else:
                sends.append((*made, tag))
        return sends

    def settle(self, timeout_s: float = 0.0) -> list[Delivery[Tag]]:
        return []

    def close(self, timeout_s: float = 0.0) -> None:
        pass


class PlainChurn(msgspec.Struct, forbid_unknown_fields=True):
    """A plain churn request as the model's reader checks it (worker/models/spec.py ``vector_reader``)."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
    inputs: Annotated[list[Annotated[float, msgspec.Meta(ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)]],
                      msgspec.Meta(min_length=16, max_length=16)]


def decode_in_one_call(decode: Callable[[bytes], list[PlainChurn]], route: Route,
                       records: Sequence[RawRecord]) -> list[tuple[RawRecord, Request]]:
    """A poll's values read in one msgspec call, then a Request each, as the plain reader's path makes them."""
    bodies = decode(b"[%s]" % b",".join([record.value or b"" for record in records]))
    return [(record, Request(body.id, body.inputs, record.position, None, None, None, record.timestamp_ms,
                             record.received_at, route)) for record, body in zip(records, bodies, strict=True)]


def per_request(reply: Any) -> tuple[bytes, bytes, Headers]:
    """The default encoder under another name: the Responder then answers request by request."""
    return encode_reply(reply)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot_path", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="best of this many (default 7)")
    args = parser.parse_args(argv)
    model = load_model("churn")
    assert isinstance(model, DeclaredModel), "churn is served by its declared inputs"
    rng = random.Random(0)
    records = [RawRecord(Position("requests", i % 4, i), None,
                         orjson.dumps({"id": f"req-{i:08d}", "inputs": model.sample_inputs(rng)}), [], 0, 0.0)
               for i in range(POLL)]
    full = Route("churn", "churn", model.version, model.prepare)
    plain = Route("churn", "churn", model.version, model.prepare, read_plain=model.read_plain)
    print(f"churn, best of {args.repeats}, CPU µs a request:")
    for label, route in (("decode, full path", full), ("decode, plain reader", plain)):
        requests = JsonRequests(Routes.single(route), 1 << 20)
        print(f"  {label:28s} {_best(lambda r=requests: r.decode(records, 0.0), args.repeats) / POLL:.2f}")
    one_call = partial(decode_in_one_call, msgspec.json.Decoder(list[PlainChurn]).decode, plain)
    print(f"  {'decode, one call a poll':28s} {_best(lambda: one_call(records), args.repeats) / POLL:.2f}")
    batch = [Request(f"req-{i:08d}", None, Position("requests", i % 4, i), produced_ms=1_700_000_000_000,
                     received_at=1.0, route=plain) for i in range(BATCH)]
    scored = Scored("churn", batch, [Outcome({"churn_probability": rng.random()}) for _ in batch], 1.002, 0.0004)
    for label, encode in (("answer, per request", per_request), ("answer, one pass", None)):
        sink = RecordingSink()
        responder = Responder(sink, "replies", "dead-letters", lambda: plain, WorkerStats(), encode=encode)

        def answer(sink: RecordingSink = sink, responder: Responder = responder) -> None:
            sink.made.clear()  # a batch's sends at a time, as the worker's sink holds them until settled
            responder.answer_scored(scored, 1_700_000_000_005, set())

        print(f"  {label:28s} {_best(answer, args.repeats) / BATCH:.2f}")
    in_runs = [Position("requests", i // (POLL // 4), i) for i in range(POLL)]
    for label, positions in (("offsets, runs of a partition", in_runs),
                             ("offsets, interleaved", [record.position for record in records])):
        print(f"  {label:28s} {_best(partial(track_and_ack, positions), args.repeats, number=50) / POLL:.2f}")
    return 0


def track_and_ack(positions: list[Position]) -> None:
    """A poll's offsets tracked by a fresh tracker, then acknowledged a batch at a time, asked what to commit
    after each batch."""
    offsets = OffsetTracker()
    offsets.track_all(positions)
    for start in range(0, len(positions), BATCH):
        offsets.ack_all(positions[start:start + BATCH])
        offsets.committable()


def _best(work: Any, repeats: int, number: int = 200) -> float:
    """The fastest of ``repeats`` runs of ``number`` calls, in µs a call."""
    return min(timeit.repeat(work, number=number, repeat=repeats)) / number * 1e6


if __name__ == "__main__":
    raise SystemExit(main())
