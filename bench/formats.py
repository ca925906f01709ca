"""``python -m bench.formats``: what decoding a request costs in each request format.

Times the worker's decoding of a poll's records into requests (stream/json_requests.py for ``json``,
stream/framed.py for the registry-framed formats: frame read, schema looked up in the cache, payload
decoded, the wire contract's checks, the churn model's ``prepare``) over ``--requests`` churn requests
(16 numbers each) in polls of ``--poll`` records. The framed records are written with the project's
default request schemas, each already fetched (a registry stand-in answers from memory: the fetch happens
once per schema id, off this measure). No broker, no registry: the decoding alone.

Prints microseconds per request (best of ``--repeats``) and the difference against ``json``.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from worker.core.framing import frame
from worker.core.messages import Position, RawRecord
from worker.core.routes import Route, Routes
from worker.core.wire import encode_request
from worker.formats import codecs
from worker.formats.registry_client import AVRO, JSON, PROTOBUF
from worker.formats.requests import DEFAULT_SCHEMAS
from worker.models.churn import churn_model
from worker.ports import PayloadReader
from worker.stream.framed import FramedRequests
from worker.stream.json_requests import JsonRequests

SCHEMA_ID = 1
FORMATS = ("json", "avro", "json-schema", "protobuf")
MAX_RECORD_BYTES = 1 << 20


class InMemorySchemas:
    """A SchemaResolver holding one schema, read already."""

    def __init__(self, request_format: str) -> None:
        schema_type = {"avro": AVRO, "json-schema": JSON, "protobuf": PROTOBUF}[request_format]
        self._reader = codecs.reader(request_format, schema_type, DEFAULT_SCHEMAS[request_format], SCHEMA_ID)

    def cached(self, schema_id: int | str) -> PayloadReader | None:
        return self._reader

    def reader(self, schema_id: int | str) -> PayloadReader:
        return self._reader


def polls(request_format: str, count: int, poll: int) -> list[list[RawRecord]]:
    rng = random.Random(7)
    write = None if request_format == "json" else codecs.writer(request_format, DEFAULT_SCHEMAS[request_format])
    now_ms = int(time.time() * 1000)
    records = []
    for n in range(count):
        inputs = [round(rng.random(), 6) for _ in range(16)]
        body: dict[str, Any] = {"id": f"r{n}", "inputs": inputs}
        value = encode_request(inputs, f"r{n}") if write is None else frame(SCHEMA_ID, write(body))
        records.append(RawRecord(Position("requests", 0, n), None, value, [], now_ms, time.monotonic()))
    return [records[at:at + poll] for at in range(0, count, poll)]


def per_request_us(request_format: str, batches: list[list[RawRecord]], routes: Routes, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        decoder: Any = (JsonRequests(routes, MAX_RECORD_BYTES) if request_format == "json" else
                        FramedRequests(InMemorySchemas(request_format), routes, MAX_RECORD_BYTES, {}, 0))
        started = time.perf_counter()
        for records in batches:
            decided = decoder.decode(records, 0.0)
        best = min(best, time.perf_counter() - started)
        assert len(decided) == len(batches[-1]) and all(d[1].__class__.__name__ == "Request" for d in decided)
    return best / sum(len(records) for records in batches) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.formats", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--poll", type=int, default=500, help="records decoded together (the worker's poll)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    model = churn_model()
    routes = Routes.single(Route("churn", "churn", model.version, model.prepare))
    print(f"{args.requests} churn requests in polls of {args.poll}, best of {args.repeats}")
    print("| request format | µs per request | added |\n|---|---:|---:|")
    base = None
    for name in FORMATS:
        us = per_request_us(name, polls(name, args.requests, args.poll), routes, args.repeats)
        base = us if base is None else base
        print(f"| {name} | {us:.1f} | {us - base:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
