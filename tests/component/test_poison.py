"""Poison in the worker loop: a bug in the user's code, a reply or a dead letter too large to send,
a dedup store that fails at any moment. Each ends as a reply, a dead letter or a counted duplicate;
the worker never stops, and the good requests around them are answered."""

from __future__ import annotations

import kafka.errors
import orjson
import pytest
from structlog.testing import capture_logs

from tests.component.harness import INPUTS, Harness
from tests.integration.faulty_model import STAGES, FaultyModel, expected_score
from worker.core.errors import DeliveryError
from worker.core.wire import MAX_SEND_BYTES, send_size
from worker.models.runner import TorchRunner

VALUES = [0.5] * 16


def faulty_harness(exactly_once: bool = False) -> Harness:
    h = Harness(exactly_once=exactly_once, max_batch_size=8, max_wait_ms=5)
    h.runner = TorchRunner(FaultyModel(), "cpu", 8)
    h.worker = h.build_worker()
    return h


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_each_stage_of_the_users_code_fails_only_its_own_request(exactly_once):
    h = faulty_harness(exactly_once)
    for i in range(6):
        h.source.produce({"id": f"good-{i}", "inputs": {"values": VALUES}})
        h.source.produce({"id": f"bad-{i}", "inputs": {"values": VALUES, "fail_in": STAGES[i % 4]}})
    h.source.produce({"id": "no-values", "inputs": {"other": 1}})  # the user's prepare reads inputs["values"]
    h.source.produce({"id": "not-an-object", "inputs": [1, 2, 3]})
    with capture_logs() as logs:
        h.steps(10)
    replies = {r["id"]: r for r in h.replies()}
    assert len(replies) == 14
    for i in range(6):
        assert replies[f"good-{i}"]["outputs"]["score"] == pytest.approx(expected_score(VALUES), abs=1e-6)
        error = replies[f"bad-{i}"]["error"]
        assert error["code"] == "model_error" and error["message"].startswith(f"{STAGES[i % 4]} raised ")
    assert replies["no-values"]["error"] == {"code": "model_error", "message": "prepare raised KeyError: 'values'"}
    assert replies["not-an-object"]["error"]["message"].startswith("prepare raised AttributeError")
    # One traceback per kind (stage, exception type), not per record.
    kinds = [(e["stage"], e["error_type"]) for e in logs if e["event"] == "model_code_failed"]
    assert sorted(kinds) == sorted({("prepare", "ValueError"), ("prepare", "KeyError"), ("prepare", "AttributeError"),
                                    ("collate", "TypeError"), ("forward", "RuntimeError"), ("split", "IndexError")})
    assert h.runner.faults.counts[("prepare", "ValueError")] == 2
    assert h.source.committed == {("requests", 0): 14}


def test_a_reply_too_large_to_send_is_answered_reply_too_large():
    class Echo(FaultyModel):
        def split(self, output):
            return [{"blob": "x" * (MAX_SEND_BYTES + 10)} for _ in range(len(output))]

    h = Harness(max_batch_size=8, max_wait_ms=5)
    h.runner = TorchRunner(Echo(), "cpu", 8)
    h.worker = h.build_worker()
    h.source.produce({"id": "big", "inputs": {"values": VALUES}})
    h.steps()
    (reply,) = h.replies()
    assert reply["status"] == "error" and reply["error"]["code"] == "reply_too_large"
    assert h.worker.stats.error_codes["reply_too_large"] == 1
    assert h.dedup.reply_for("big") is None  # released: a retry may be scored again
    assert h.source.committed == {("requests", 0): 1}


def test_a_dead_letter_too_large_to_send_is_cut_to_fit():
    h = Harness()
    value = b"\xff" * (MAX_SEND_BYTES - 100)  # key-less, not JSON: a dead letter with its own bytes
    headers = [("big", b"h" * 50_000), ("traceparent", b"t" * 10_000)]
    h.source.produce(value, headers=headers)
    h.source.produce({"id": "after", "inputs": INPUTS})
    h.steps()
    (letter,) = h.sink.to("requests.dlq")
    got = dict(letter.headers)
    assert send_size(letter.key, letter.value, letter.headers) <= MAX_SEND_BYTES
    assert got["dlq-error-code"] == b"invalid_json"
    assert int(got["dlq-original-bytes"]) > MAX_SEND_BYTES and b"requests/0/0" in got["dlq-truncated"]
    assert value.startswith(letter.value) and len(letter.value) > MAX_SEND_BYTES - 2000
    assert "big" not in got
    assert [r["id"] for r in h.replies()] == ["after"]
    assert h.source.committed == {("requests", 0): 2}


def test_a_traceparent_too_long_to_be_one_is_not_passed_through():
    h = Harness()
    h.source.produce({"id": "t", "inputs": INPUTS}, headers=[("traceparent", b"0" * 100_000)])
    h.steps()
    (sent,) = h.sink.to("requests.replies")
    assert "traceparent" not in dict(sent.headers) and orjson.loads(sent.value)["status"] == "ok"


def test_a_reply_to_naming_the_requests_topic_is_refused_not_answered_into_it():
    h = Harness()
    h.source.produce({"id": "loop", "inputs": INPUTS, "reply_to": "requests"})
    h.steps()
    (reply,) = h.replies()
    assert reply["error"]["code"] == "invalid_reply_to" and "requests topic" in reply["error"]["message"]
    assert h.sink.to("requests") == []  # nothing was written into the requests topic


@pytest.mark.parametrize("topic, why", [
    ("__consumer_offsets", "one of Kafka's internal topics"),
    ("__transaction_state", "one of Kafka's internal topics"),
    ("requests.dlq", "this worker's dead-letter topic"),
])
def test_a_reply_to_naming_a_topic_no_reply_may_go_to_is_refused_not_sent_there(topic, why):
    h = Harness()
    h.source.produce({"id": "r", "inputs": INPUTS, "reply_to": topic})
    h.source.produce({"id": "after", "inputs": INPUTS})
    h.steps()
    refused, after = h.replies()
    assert refused["error"]["code"] == "invalid_reply_to" and why in refused["error"]["message"]
    assert after["status"] == "ok"
    assert h.sink.to(topic) == []


def test_a_failed_topic_lookup_answers_unknown_reply_topic_and_the_worker_goes_on():
    h = Harness()

    def broker_away():
        raise TimeoutError("metadata request timed out")

    h.source.list_topics = broker_away
    h.worker = h.build_worker()
    h.source.produce({"id": "where", "inputs": INPUTS, "reply_to": "elsewhere"})
    h.source.produce({"id": "fine", "inputs": INPUTS})
    h.steps()
    assert {r["id"]: r["status"] for r in h.replies()} == {"where": "error", "fine": "ok"}


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_an_answered_id_gets_no_second_reply_whatever_is_sent_again_under_it(exactly_once):
    h = Harness(exactly_once=exactly_once, max_wait_ms=0)
    h.source.produce({"id": "once", "inputs": INPUTS}, key=b"once")
    h.steps()
    h.source.produce({"id": "once", "inputs": [1.0]})  # wrong input length
    h.source.produce(b"not json", key=b"once")  # invalid JSON, the id in the key
    h.source.produce({"id": "once", "inputs": INPUTS, "deadline_ms": "soon"})
    h.steps()
    assert [r["status"] for r in h.replies()] == ["ok"]
    assert h.worker.stats.duplicates == 3
    assert h.source.committed == {("requests", 0): 4}


def test_a_refused_id_is_released_so_that_a_corrected_retry_is_scored():
    h = Harness(max_wait_ms=0)
    h.source.produce({"id": "fixme", "inputs": [1.0]})
    h.steps()
    h.source.produce({"id": "fixme", "inputs": INPUTS})
    h.steps()
    assert [r["status"] for r in h.replies()] == ["error", "ok"]


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_reply_its_topic_refuses_as_too_large_is_answered_reply_too_large_there(exactly_once):
    h = faulty_harness(exactly_once)
    h.sink.max_bytes["private"] = 2000  # a reply_to topic with a max.message.bytes far below the worker's
    h.source.produce({"id": "big", "inputs": {"values": VALUES, "pad": 5000}, "reply_to": "private"})
    h.source.produce({"id": "small", "inputs": {"values": VALUES}, "reply_to": "private"})
    h.source.produce({"id": "big-elsewhere", "inputs": {"values": VALUES, "pad": 5000}})
    with capture_logs() as logs:
        h.steps(10)
    replies = {s.json()["id"]: s.json() for s in h.sink.to("private")}
    assert replies["small"]["status"] == "ok"
    error = replies["big"]["error"]
    assert error["code"] == "reply_too_large" and "private refused it for good: MESSAGE_TOO_LARGE" in error["message"]
    assert [r["id"] for r in h.replies()] == ["big-elsewhere"]  # the default topic takes it
    assert h.dedup.reply_for("big") is None  # released: a retry may be scored again
    refused = [e for e in logs if e["event"] == "send_refused"]
    assert refused[0]["topic"] == "private" and "max.message.bytes" in refused[0]["advice"]
    assert h.source.committed == {("requests", 0): 3}
    if not exactly_once:  # an aborted transaction's replies are sent, and counted, again
        assert (h.worker.stats.replied_ok, h.worker.stats.replied_error) == (2, 1)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_reply_its_topic_denies_becomes_a_dead_letter_that_carries_it(exactly_once):
    h = faulty_harness(exactly_once)
    h.sink.denied_topics.add("private")
    h.source.produce({"id": "denied", "inputs": {"values": VALUES}, "reply_to": "private"})
    h.source.produce({"id": "after", "inputs": {"values": VALUES}})
    h.steps(10)
    assert h.sink.to("private") == []
    (letter,) = h.sink.to("requests.dlq")
    got = dict(letter.headers)
    assert got["dlq-error-code"] == b"reply_refused"
    assert b"private refused it for good: TOPIC_AUTHORIZATION_FAILED" in got["dlq-error-message"]
    assert letter.key == b"denied" and got["source-offset"] == b"0"
    assert orjson.loads(letter.value)["outputs"]["score"] == pytest.approx(expected_score(VALUES), abs=1e-6)
    assert [r["id"] for r in h.replies()] == ["after"]
    assert h.dedup.reply_for("denied") is None
    assert h.source.committed == {("requests", 0): 2}


def deleted_after_its_check(h: Harness, topic: str) -> list[int]:
    """The broker has ``topic`` at the first lookup and not after it; every send to it fails. Returns the
    lookups made so far (a list of one item each)."""
    lookups: list[int] = []

    def list_topics() -> set[str]:
        lookups.append(1)
        return {"requests", "requests.replies", "requests.dlq", *([topic] if len(lookups) == 1 else [])}

    h.source.list_topics = list_topics
    h.sink.fail_topics.add(topic)
    h.worker = h.build_worker()
    return lookups


def test_a_reply_to_topic_deleted_after_its_check_gets_a_dead_letter_that_carries_the_reply():
    h = faulty_harness()
    lookups = deleted_after_its_check(h, "theirs")
    h.source.produce({"id": "orphan", "inputs": {"values": VALUES}, "reply_to": "theirs"})
    h.source.produce({"id": "after", "inputs": {"values": VALUES}})
    with capture_logs() as logs:
        h.steps(10)
    (letter,) = h.sink.to("requests.dlq")
    got = dict(letter.headers)
    assert got["dlq-error-code"] == b"reply_refused"
    assert b"theirs refused it for good: UNKNOWN_TOPIC_OR_PARTITION" in got["dlq-error-message"]
    assert orjson.loads(letter.value)["outputs"]["score"] == pytest.approx(expected_score(VALUES), abs=1e-6)
    assert [r["id"] for r in h.replies()] == ["after"]
    assert h.source.committed == {("requests", 0): 2}
    assert len(lookups) == 2  # the check, then one lookup for the failed send
    refused = [e for e in logs if e["event"] == "send_refused"]
    assert refused[0]["topic"] == "theirs" and "deleted" in refused[0]["advice"]


def test_in_exactly_once_a_reply_to_topic_deleted_after_its_check_is_answered_unknown_on_the_reply_topic():
    h = faulty_harness(exactly_once=True)
    deleted_after_its_check(h, "theirs")
    h.source.produce({"id": "orphan", "inputs": {"values": VALUES}, "reply_to": "theirs"})
    h.source.produce({"id": "after", "inputs": {"values": VALUES}})
    h.steps(10)  # the failed send aborts the transaction; consumed again, the record is checked again
    assert {r["id"]: r["status"] for r in h.replies()} == {"orphan": "error", "after": "ok"}
    (error,) = [r["error"] for r in h.replies() if r["status"] == "error"]
    assert error["code"] == "unknown_reply_topic" and "theirs" in error["message"]
    assert h.sink.to("requests.dlq") == []
    assert h.source.committed == {("requests", 0): 2}


def test_a_failed_send_to_a_reply_to_topic_that_still_exists_is_not_refused_for_good():
    h = faulty_harness()
    h.source.list_topics = lambda: {"requests", "requests.replies", "requests.dlq", "theirs"}
    h.sink.fail_topics.add("theirs")
    h.worker = h.build_worker()
    h.source.produce({"id": "unlucky", "inputs": {"values": VALUES}, "reply_to": "theirs"})
    with pytest.raises(DeliveryError, match="not delivered"):  # consumed again after a restart, as before
        h.steps(10)
    assert h.sink.to("requests.dlq") == []


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_dead_letter_its_topic_refuses_is_sent_cut_and_keyed(exactly_once):
    h = Harness(exactly_once=exactly_once, max_wait_ms=0)
    h.sink.max_bytes["requests.dlq"] = 20_000
    h.sink.compacted.add("requests.dlq")  # a compacted topic: a key-less record is refused
    h.source.produce(b"\xff" * 50_000)  # key-less, not JSON: refused as too large, then as key-less
    h.source.produce(b"short garbage")  # key-less: refused by the compacted topic
    h.source.produce({"id": "after", "inputs": INPUTS})
    h.steps(10)
    big, small = h.sink.to("requests.dlq")
    assert big.key == b"requests/0/0" and send_size(big.key, big.value, big.headers) <= 4096
    assert dict(big.headers)["dlq-original-bytes"] and big.value == b"\xff" * len(big.value)
    assert small.key == b"requests/0/1" and small.value == b"short garbage"
    assert [r["id"] for r in h.replies()] == ["after"]
    assert h.source.committed == {("requests", 0): 3}


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_dead_letter_topic_that_takes_nothing_stops_the_worker_naming_it(exactly_once):
    h = Harness(exactly_once=exactly_once, max_wait_ms=0)
    h.sink.denied_topics.add("requests.dlq")
    h.source.produce(b"garbage")
    with pytest.raises(DeliveryError, match="dead-letter topic 'requests.dlq' refused even a cut dead letter"):
        h.steps(10)
    assert h.source.committed == {}


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_records_refused_together_are_sent_again_alone_and_only_the_culprit_goes_down_the_ladder(exactly_once):
    h = faulty_harness(exactly_once)
    h.sink.max_bytes["private"] = 2000
    refuse_one = h.sink._refusal

    def refuse_the_batch(record):  # as a broker does: one record too large, and its whole batch is refused
        batch = [sent for sent, _, _ in h.sink._pending if sent.topic == "private"] + [record]
        if record.topic == "private" and any(refuse_one(sent) for sent in batch):
            return kafka.errors.MessageSizeTooLargeError()
        return refuse_one(record)

    h.sink._refusal = refuse_the_batch
    h.source.produce({"id": "big", "inputs": {"values": VALUES, "pad": 5000}, "reply_to": "private"})
    for n in range(3):
        h.source.produce({"id": f"small-{n}", "inputs": {"values": VALUES}, "reply_to": "private"})
    h.steps(12)
    replies = {s.json()["id"]: s.json() for s in h.sink.to("private")}
    assert sorted(replies) == ["big", "small-0", "small-1", "small-2"]
    assert replies["big"]["error"]["code"] == "reply_too_large"
    assert all(replies[f"small-{n}"]["status"] == "ok" for n in range(3))
    assert h.source.committed == {("requests", 0): 4}
