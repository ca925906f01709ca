"""Reply schemas made from a model's outputs, and replies framed with them (worker/formats/reply_schemas.py,
worker/formats/replies.py, worker/formats/reply_reader.py).

Each generated schema is read back by its format's own library (fastavro,
protoc, orjson), and a reply written with it is read back by the client's
ReplyReader over a stand-in registry that serves what was registered.
"""

from __future__ import annotations

import pytest

from worker.core.errors import ConfigError, UnencodableReply
from worker.core.formats import Formats
from worker.core.framing import read_frame
from worker.core.messages import Position, Reply
from worker.formats.registry_client import AVRO, JSON, PROTOBUF, RegisteredSchema
from worker.formats.replies import framed_replies, subject
from worker.formats.reply_reader import ReplyReader
from worker.formats.reply_schemas import record_name, reply_schema
from worker.stream.replies import encode_sendable

pytest.importorskip("fastavro")
pytest.importorskip("grpc_tools")

URL = "http://127.0.0.1:1/apis/ccompat/v7"
TYPES = {"avro": AVRO, "protobuf": PROTOBUF, "json-schema": JSON}
SHAPES = {
    "named scores": {"churn_probability": 0.25},
    "a row": [0.5, -1.25, 3.0],
    "label and scores by label": {"label": "invoice", "scores": {"invoice": 0.9, "late-payment": 0.1}},
    "nested records in a list": {"top": [{"label": "a", "score": 0.5}, {"label": "b", "score": 0.25}]},
    "ints and a flag": {"count": 3, "flagged": True},
    "zeros, said": {"score": 0.0, "count": 0, "flagged": False, "label": ""},
}


class InMemoryRegistry:
    """Registers and serves schemas as a registry would (one id per text), counting the calls."""

    def __init__(self) -> None:
        self.schemas: dict[int, RegisteredSchema] = {}
        self.subjects: dict[str, int] = {}

    def register(self, subject_name: str, schema_type: str, text: str) -> int:
        known = [schema_id for schema_id, schema in self.schemas.items() if schema.text == text]
        schema_id = known[0] if known else len(self.schemas) + 1
        self.schemas[schema_id] = RegisteredSchema(schema_type, text)
        self.subjects[subject_name] = schema_id
        return schema_id

    def lookup(self, subject_name: str, schema_type: str, text: str) -> int:
        return self.subjects[subject_name]

    def schema(self, schema_id: int) -> RegisteredSchema:
        return self.schemas[schema_id]


def reply(model: str, outputs, status="ok", code=None, version="v1") -> Reply:
    return Reply("r1", status, Position("requests", 0, 7), model, version, outputs=None if code else outputs,
                 error_code=code, error_message="why" if code else None)


@pytest.mark.parametrize("reply_format", ["avro", "protobuf", "json-schema"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_reply_of_each_shape_round_trips_through_its_generated_schema(reply_format, shape):
    outputs = SHAPES[shape]
    registry = InMemoryRegistry()
    formats = Formats(reply_format=reply_format, subject_strategy="record", registry_url=URL)
    encode = framed_replies(formats, "replies", {"m": outputs}, "m", client=registry)
    read = ReplyReader(registry)  # type: ignore[arg-type]

    key, value, headers = encode(reply("m", outputs))
    assert key == b"r1" and read_frame(value).schema_id == registry.subjects["streamscore.MReply"]
    assert read(value) == {"id": "r1", "status": "ok", "outputs": outputs, "model": "m", "model_version": "v1"}
    error = read(encode(reply("m", outputs, "error", "wrong_input_length", version=""))[1])
    assert error == {"id": "r1", "status": "error", "error": {"code": "wrong_input_length", "message": "why"},
                     "model": "m", "model_version": ""}


def test_each_model_gets_its_own_record_and_subject_and_an_unserved_name_the_defaults_schema():
    registry = InMemoryRegistry()
    formats = Formats(reply_format="avro", subject_strategy="topic-record", registry_url=URL)
    encode = framed_replies(formats, "replies", {"churn": {"p": 0.5}, "doc-classifier": {"label": "x"}}, "churn",
                            client=registry)
    assert set(registry.subjects) == {"replies-streamscore.ChurnReply", "replies-streamscore.DocClassifierReply"}
    unknown = encode(reply("nope", None, "error", "unknown_model"))[1]
    assert read_frame(unknown).schema_id == registry.subjects["replies-streamscore.ChurnReply"]


def test_outputs_that_do_not_fit_the_schema_become_the_error_reply_reply_unencodable():
    registry = InMemoryRegistry()
    formats = Formats(reply_format="avro", registry_url=URL)
    encode = framed_replies(formats, "replies", {"m": {"p": 0.5}}, "m", client=registry)
    with pytest.raises(UnencodableReply, match="do not fit the reply schema of model 'm'"):
        encode(reply("m", {"p": "not a number"}))
    sent, (_, value, _) = encode_sendable(reply("m", {"p": "not a number"}), encode)
    assert (sent.status, sent.error_code) == ("error", "reply_unencodable")
    assert ReplyReader(registry)(value)["error"]["code"] == "reply_unencodable"  # type: ignore[arg-type]


@pytest.mark.parametrize(("reply_format", "outputs", "says"), [
    ("avro", None, "gives no type"),
    ("avro", {}, "gives no type"),
    ("avro", ["a", 1], "mixes types"),
    ("protobuf", [[1.0, 2.0]], "list of lists"),
    ("protobuf", {"x-y": [1.0]}, "map of lists"),
])
def test_outputs_a_format_cannot_type_stop_the_worker_saying_what_to_use(reply_format, outputs, says):
    with pytest.raises(ConfigError, match=says):
        reply_schema(reply_format, "m", outputs)


def test_the_topic_strategy_takes_one_model_per_reply_topic():
    formats = Formats(reply_format="avro", registry_url=URL)
    with pytest.raises(ConfigError, match="use record or topic-record"):
        framed_replies(formats, "replies", {"a": [1.0], "b": [2.0]}, "a", client=InMemoryRegistry())


def test_names_and_subjects():
    assert [record_name(m) for m in ("churn", "doc-classifier", "7up")] == ["ChurnReply", "DocClassifierReply",
                                                                           "M7upReply"]
    assert [subject(s, "replies", "streamscore.ChurnReply") for s in ("topic", "record", "topic-record")] == [
        "replies-value", "streamscore.ChurnReply", "replies-streamscore.ChurnReply"]


def test_a_json_reply_is_read_without_a_registry_and_a_framed_one_says_what_is_missing():
    read = ReplyReader(None)
    assert read(b'{"id": "a", "status": "ok", "outputs": [1]}')["outputs"] == [1]
    with pytest.raises(ValueError, match="set SCHEMA_REGISTRY_URL"):
        read(b"\x00\x00\x00\x00\x01payload")
