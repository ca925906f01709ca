import io
from dataclasses import dataclass

import orjson
import pytest

from producer.collect import ReplyTally, collect_replies, join_report, request_ids_from_records
from worker.core.messages import Position, RawRecord, Request
from worker.core.routes import Route, Routes
from worker.core.wire import answered_under, decode_request
from worker.models.spec import VectorInputs


@dataclass
class Record:
    key: bytes | None
    value: bytes | None


def test_requests_and_replies_are_joined_by_id():
    tally = ReplyTally(status={"a": "ok", "b": "error", "c": "expired", "zz": "ok"},
                       error_codes={"b": "wrong_input_length", "c": "deadline_exceeded"}, duplicates=2)
    report = join_report(["a", "b", "c", "d", "a", None], tally)
    assert (report.requests, report.answered, report.ok, report.error, report.expired, report.missing) == (
        4, 3, 1, 1, 1, 1)
    assert report.missing_ids == ["d"]
    assert report.requests_without_id == 1 and report.repeated_request_ids == 1
    assert report.error_codes == {"wrong_input_length": 1, "deadline_exceeded": 1}
    assert report.duplicate_replies == 2 and report.replies_to_other_requests == 1
    assert "missing  1" in report.render()
    assert orjson.loads(orjson.dumps(report))["missing_ids"] == ["d"]


def test_request_ids_are_read_as_the_worker_reads_them():
    records = [Record(b"key-a", orjson.dumps({"id": "value-a", "inputs": []})),
               Record(b"key-b", orjson.dumps({"inputs": []})),
               Record(b"key-c", b"{not json"),
               Record(None, orjson.dumps({"inputs": []})),
               Record(None, None),
               Record(b"key-f", orjson.dumps({"id": "value-f", "inputs": [0.0] * 40})),  # over the limit: unread
               Record(None, orjson.dumps({"id": "value-g", "inputs": [0.0] * 40})),
               Record(b"key-h", orjson.dumps({"id": 123})),
               Record(b"key-i", orjson.dumps({"id": None}))]
    assert list(request_ids_from_records(records, max_record_bytes=100)) == [
        "value-a", "key-b", "key-c", None, None, "key-f", None, "key-h", "key-i"]


KEYS = [None, b"key", b"", b"k" * 300, b"\xff"]
VALUES = [None, b"", b"{not json", b"[]", b"12", orjson.dumps({"inputs": [0.5] * 16}),
          *(orjson.dumps({"id": found, "inputs": [0.5] * 16}) for found in ("v", "", None, 7, "x" * 257, "é")),
          orjson.dumps({"id": "big", "inputs": [0.5] * 400}),
          b'{"id": "nan", "inputs": [NaN]}', b'{"id": 7, "inputs": [Infinity]}', b'{"inputs": [1e999]}']


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", VALUES)
def test_the_id_a_record_is_answered_under_is_the_one_decode_request_reads(key, value):
    record = RawRecord(Position("requests", 0, 0), key, value, [], 0, 0.0)
    decoded = decode_request(record, Routes.single(Route("churn", "churn", "1", VectorInputs(16).prepare)), 1_000)
    read = decoded.id if isinstance(decoded, Request) else decoded.request_id
    assert answered_under(key, value, 1_000) == read


class SpanOf:
    """A TopicSpanReader over records given."""

    def __init__(self, records):
        self._records = records

    def records(self, follow_idle_s=0.0, progress=False, what="reading"):
        return iter(self._records)


def test_ok_replies_are_counted_by_the_model_and_version_that_gave_them():
    def reply(request_id, status="ok", model="churn", version="1"):
        return Record(None, orjson.dumps({"id": request_id, "status": status, "model": model,
                                          "model_version": version}))

    out = io.BytesIO()
    tally = collect_replies(SpanOf([reply("a"), reply("b", version="2"), reply("c"), reply("a", version="2"),
                                    reply("d", "error", "nope"), Record(None, b'{"id": "e", "status": "ok"}')]), out)
    assert tally.ok_by_model == {("churn", "1"): 2, ("churn", "2"): 1}  # a duplicate, an error, no model: not
    assert tally.render_models() == "churn 1: 2, churn 2: 1"
    assert ReplyTally().render_models() == "none"
    assert len(out.getvalue().splitlines()) == 5
