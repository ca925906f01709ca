import io
from dataclasses import dataclass

import orjson

from producer.collect import ReplyTally, collect_replies, join_report, request_ids_from_records


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
               Record(None, None)]
    assert list(request_ids_from_records(records)) == ["value-a", "key-b", "key-c", None, None]


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
