"""bench/hot_path.py: the one-call decode it measures gives the requests the plain reader's path gives, and it
prints every way it times."""

import random

import msgspec
import orjson

from bench.hot_path import PlainChurn, decode_in_one_call, main
from worker.core.messages import Position, RawRecord
from worker.core.routes import Route, Routes
from worker.models import load_model
from worker.stream.json_requests import JsonRequests


def test_one_call_a_poll_reads_what_the_plain_reader_reads():
    model = load_model("churn")
    rng = random.Random(3)
    records = [RawRecord(Position("requests", i % 2, i), None,
                         orjson.dumps({"id": f"r{i}", "inputs": model.sample_inputs(rng)}), [], 1_000 + i, 2.0)
               for i in range(20)]
    route = Route("churn", "churn", model.version, model.prepare, read_plain=model.read_plain)
    by_reader = JsonRequests(Routes.single(route), 1 << 20).decode(records, 0.0)
    in_one_call = decode_in_one_call(msgspec.json.Decoder(list[PlainChurn]).decode, route, records)
    assert in_one_call == by_reader


def test_it_prints_each_way(capsys):
    assert main(["--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for way in ("decode, full path", "decode, plain reader", "decode, one call a poll", "answer, per request",
                "answer, one pass"):
        assert way in out
