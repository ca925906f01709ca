"""The producer side names the model that answers: the clients, bulk sends and the CLI put ``model`` and
``model_version`` on the wire (only when named), over a stand-in broker whose worker echoes them back."""

from __future__ import annotations

import asyncio
import queue

import orjson
import pytest

import producer.client as client_module
import producer.send as send_module
from producer.aio import AsyncScoringClient
from producer.cli import _parser, main
from producer.client import ClientRequest, ScoringClient
from producer.ports import Record
from producer.send import BadLine, requests_from_file, send_requests
from worker.core.formats import Formats
from worker.core.wire import encode_request

DEFAULT = ("churn", "1")  # what the stand-in worker answers with when a request names no model


class StandInBroker:
    """A client's Publisher and ReplyReader in one: every request published is kept (decoded) and answered at
    once on the reply topic with the model and version it named, else DEFAULT's."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self._replies: queue.SimpleQueue[Record] = queue.SimpleQueue()

    def prepare(self, topic, timeout_s):
        pass

    def publish(self, topic, key, value, on_done, timeout_s=None, headers=()):
        body = orjson.loads(value)
        self.sent.append(body)
        reply = {"id": body["id"], "status": "ok", "outputs": [0.5],
                 "model": body.get("model", DEFAULT[0]), "model_version": body.get("model_version", DEFAULT[1])}
        self._replies.put(Record(key, orjson.dumps(reply), [], 0))
        on_done(0, None)

    def serve(self):
        pass

    def flush(self, timeout_s=None):
        return 0

    def close(self, timeout_s=1.0):
        return 0

    def partitions(self, topic):
        return [0]

    def follow_from_end(self, topic, partitions):
        pass

    def poll(self, timeout_s):
        try:
            return [self._replies.get(timeout=timeout_s)]
        except queue.Empty:
            return []


@pytest.fixture
def broker(monkeypatch):
    stand_in = StandInBroker()
    monkeypatch.setattr(client_module, "check_kafka", lambda *args, **kwargs: None)
    monkeypatch.setattr(client_module, "open_publisher", lambda *args, **kwargs: stand_in)
    monkeypatch.setattr(client_module, "open_reply_reader", lambda *args, **kwargs: stand_in)
    monkeypatch.setattr(send_module, "open_publisher", lambda *args, **kwargs: stand_in)
    return stand_in


def routing(body: dict) -> tuple:
    return body["id"], body.get("model"), body.get("model_version")


def test_score_names_the_model_and_version_on_the_wire_and_the_reply_says_which_answered(broker):
    with ScoringClient("stand-in:9092", "requests", timeout_s=5) as client:
        reply = client.score([1.0], "a", model="fraud", model_version="7")
        assert (reply["model"], reply["model_version"]) == ("fraud", "7")
        assert client.score([1.0], "b", model="fraud")["model"] == "fraud"
        assert (client.score([1.0], "c")["model"], client.submit([1.0], "d", 99, 5.0).result(5)["model"]) == (
            DEFAULT[0], DEFAULT[0])
    assert [routing(body) for body in broker.sent] == [
        ("a", "fraud", "7"), ("b", "fraud", None), ("c", None, None), ("d", None, None)]
    assert "model" not in broker.sent[2] and "model_version" not in broker.sent[1]  # unnamed: left out
    assert broker.sent[3]["deadline_ms"] == 99  # the positional arguments mean what they meant


def test_score_many_items_name_their_own_model(broker):
    items = [ClientRequest([1.0], "a", model="fraud"), ClientRequest([1.0], "b", model_version="2"), [1.0]]
    with ScoringClient("stand-in:9092", "requests", timeout_s=5) as client:
        results = sorted(client.score_many(items), key=lambda result: result.index)
    assert [r.ok for r in results] == [True, True, True]
    assert [routing(body)[1:] for body in broker.sent] == [("fraud", None), (None, "2"), (None, None)]
    assert [(r.reply["model"], r.reply["model_version"]) for r in results] == [("fraud", "1"), ("churn", "2"),
                                                                              DEFAULT]


def test_the_async_client_names_the_model_too(broker):
    async def scored():
        async with AsyncScoringClient("stand-in:9092", "requests", timeout_s=5) as client:
            return await asyncio.gather(client.score([1.0], "a", model="fraud", model_version="7"),
                                        client.submit([1.0], "b", model="churn"), client.score([1.0], "c"))

    replies = asyncio.run(scored())
    assert [(r["model"], r["model_version"]) for r in replies] == [("fraud", "7"), ("churn", "1"), DEFAULT]
    assert sorted(routing(body) for body in broker.sent) == [("a", "fraud", "7"), ("b", "churn", None),
                                                           ("c", None, None)]


def test_bulk_sends_name_the_given_model_for_requests_that_name_none(broker):
    requests = [{"id": "a", "inputs": [1.0]}, {"id": "b", "inputs": [1.0], "model": "fraud"},
                {"id": "c", "inputs": [1.0], "model_version": "3"}]
    summary = send_requests("stand-in:9092", "requests", requests, progress=False, model="churn",
                            model_version="2")
    assert summary.sent == 3
    assert [routing(body) for body in broker.sent] == [  # a request naming either keeps both its own
        ("a", "churn", "2"), ("b", "fraud", None), ("c", None, "3")]


def test_files_name_the_model_per_request(tmp_path):
    jsonl = tmp_path / "requests.jsonl"
    jsonl.write_text('{"id": "a", "inputs": [1], "model": "fraud", "model_version": "7"}\n'
                     '{"id": "b", "inputs": [1], "model": 7}\n')
    good, bad = requests_from_file(jsonl)
    assert good == {"id": "a", "inputs": [1], "model": "fraud", "model_version": "7"}
    assert bad == BadLine(f"{jsonl}:2", "'model' must be a string, got 7")
    table = tmp_path / "requests.csv"
    table.write_text("id,f1,model,model_version\na,0.5,fraud,\nb,1.5,,\n")
    assert list(requests_from_file(table)) == [{"id": "a", "inputs": [0.5], "model": "fraud"},
                                               {"id": "b", "inputs": [1.5]}]  # not features, and empty: unnamed


@pytest.mark.parametrize("command", [["send", "requests", "--synthetic", "churn"],
                                     ["score", "requests", "requests.replies", "[1]"]])
def test_send_and_score_take_a_model_and_version_and_say_what_they_do(command, capsys):
    args = _parser().parse_args([*command, "--model", "fraud", "--model-version", "7"])
    assert (args.model, args.model_version) == ("fraud", "7")
    assert (_parser().parse_args(command).model, _parser().parse_args(command).model_version) == (None, None)
    with pytest.raises(SystemExit):
        _parser().parse_args([command[0], "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for says in ("the worker's default model, or its requests topic's", "canary", "unknown_model"):
        assert says in text


def test_the_cli_sends_and_scores_with_the_model_named(broker, monkeypatch, capsys):
    import worker.kafka.preflight

    monkeypatch.setattr(worker.kafka.preflight, "check_kafka", lambda *args, **kwargs: None)
    monkeypatch.setattr(send_module, "missing_topics", lambda *args, **kwargs: [])
    assert main(["--bootstrap-servers", "stand-in:9092", "send", "requests", "--synthetic", "churn", "--count",
                 "3", "--no-progress", "--model", "fraud", "--model-version", "7"]) == 0
    assert [routing(body)[1:] for body in broker.sent] == [("fraud", "7")] * 3
    assert main(["--bootstrap-servers", "stand-in:9092", "score", "requests", "requests.replies", "[1.0]",
                 "--model", "fraud"]) == 0
    assert routing(broker.sent[-1])[1:] == ("fraud", None)
    reply = orjson.loads(capsys.readouterr().out)
    assert (reply["model"], reply["model_version"]) == ("fraud", "1")


def test_the_async_client_writes_the_request_format_it_is_given(broker, monkeypatch):
    given = []

    def encoder(formats, topic, schema):
        given.append((formats, topic, schema))
        return encode_request

    monkeypatch.setattr(client_module, "request_encoder", encoder)
    formats = Formats(request_format="json-schema", registry_url="http://registry.invalid")

    async def scored():
        async with AsyncScoringClient("stand-in:9092", "requests", formats=formats, request_schema="{}") as client:
            return await client.score([1.0], model="fraud")

    assert asyncio.run(scored())["model"] == "fraud"
    assert given == [(formats, "requests", "{}")]
