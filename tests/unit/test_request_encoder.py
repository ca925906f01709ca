"""The producer's request encoder (worker/formats/requests.py) over a stand-in registry: each format writes the
request's model and version where the worker reads them, framed requests written by it are routed by them
(worker/stream/framed.py), and an Avro schema with nowhere to put a model is refused rather than dropping it."""

from __future__ import annotations

import orjson
import pytest

from worker.core.errors import ConfigError
from worker.core.formats import JSON, Formats
from worker.core.framing import read_frame
from worker.core.messages import Position, RawRecord, Request
from worker.core.routes import Arm, Route, Routes
from worker.formats import codecs, requests
from worker.formats.requests import DEFAULT_AVRO_SCHEMA, DEFAULT_SCHEMAS, request_encoder
from worker.stream.framed import FramedRequests

SCHEMA_ID = 11


class StandInRegistry:
    """Registers (or looks up) every schema as SCHEMA_ID; resolves that id to the schema last registered."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, str, str]] = []

    def register(self, subject: str, schema_type: str, text: str) -> int:
        self.registered.append((subject, schema_type, text))
        return SCHEMA_ID

    lookup = register

    def cached(self, schema_id: int):
        return None

    def reader(self, schema_id: int):
        _, schema_type, text = self.registered[-1]
        return codecs.reader(None, schema_type, text, schema_id)


@pytest.fixture
def registry(monkeypatch):
    stand_in = StandInRegistry()
    monkeypatch.setattr(requests.RegistryClient, "from_formats", classmethod(lambda cls, formats: stand_in))
    return stand_in


def framed(request_format: str, **options) -> Formats:
    return Formats(request_format=request_format, registry_url="http://registry.invalid", **options)


def two_models() -> Routes:
    def route(model: str, version: str) -> Route:
        return Route(f"{model}-{version}", model, version, lambda inputs: inputs)

    return Routes({"churn": [Arm(route("churn", "1"), 0.5), Arm(route("churn", "2"), 0.5)],
                   "fraud": [Arm(route("fraud", "7"), 1.0)]}, "churn")


def test_json_requests_carry_the_model_and_version_only_when_named():
    encode = request_encoder(JSON, "requests")
    assert orjson.loads(encode([1.0], "a", model="fraud", model_version="7")) == {
        "id": "a", "inputs": [1.0], "model": "fraud", "model_version": "7"}
    assert orjson.loads(encode([1.0], "b")) == {"id": "b", "inputs": [1.0]}


@pytest.mark.parametrize("request_format", ["avro", "json-schema", "protobuf"])
@pytest.mark.parametrize("renames", [{}, {"id": "requestId", "inputs": "features"}])
def test_framed_requests_written_with_the_default_schemas_are_routed_by_their_model(
        registry, request_format, renames):
    if request_format == "avro":
        pytest.importorskip("fastavro")
    request_fields = ",".join(f"{ours}={theirs}" for ours, theirs in renames.items())
    schema = DEFAULT_SCHEMAS[request_format]
    for ours, theirs in renames.items():  # the schema calls the renamed fields by its names
        schema = (schema.replace(f" {ours} =", f" {theirs} =") if request_format == "protobuf"
                  else schema.replace(f'"{ours}"', f'"{theirs}"'))
    encode = request_encoder(framed(request_format, request_fields=request_fields), "requests", schema)
    assert registry.registered[0][0] == "requests-value"
    worker = FramedRequests(registry, two_models(), 1 << 20, renames, unknown_retries=0)
    values = [encode([1.0], "a", model="fraud"), encode([1.0], "b", model="churn", model_version="2"),
              encode([1.0], "c", "requests.replies", 5), encode([1.0], "d", model="nope")]
    records = [RawRecord(Position("requests", 0, n), None, v, [], 0, 0.0) for n, v in enumerate(values)]
    outcomes = [(r.id, r.route.model, r.route.version) if isinstance(r, Request) else (r.request_id, r.code)
                for _, r in worker.decode(records, 0.0)]
    default = outcomes[2]
    assert outcomes == [("a", "fraud", "7"), ("b", "churn", "2"), default, ("d", "unknown_model")]
    assert default[:2] == ("c", "churn")  # no model named: the default's canary split picks the arm


@pytest.mark.parametrize(("request_format", "strategy", "expected"), [
    ("avro", "record", "streamscore.ScoringRequest"),
    ("protobuf", "topic-record", "requests-streamscore.ScoringRequest"),
    ("json-schema", "topic", "requests-value")])
def test_the_request_schema_is_registered_under_the_strategys_subject(registry, request_format, strategy, expected):
    request_encoder(framed(request_format, subject_strategy=strategy), "requests")
    assert registry.registered[0][0] == expected


def test_json_schema_payloads_leave_unnamed_routing_fields_out(registry):
    encode = request_encoder(framed("json-schema"), "requests")
    _, payload = read_frame(encode([1.0], "a"))
    assert orjson.loads(bytes(payload)) == {"id": "a", "inputs": [1.0]}


def test_an_avro_schema_without_a_model_field_refuses_a_request_that_names_one(registry):
    pytest.importorskip("fastavro")
    schema = orjson.loads(DEFAULT_AVRO_SCHEMA)
    schema["fields"] = [f for f in schema["fields"] if f["name"] not in ("model", "model_version")]
    encode = request_encoder(framed("avro"), "requests", orjson.dumps(schema).decode())
    assert read_frame(encode([1.0], "a"))[0] == SCHEMA_ID  # no model named: written as before
    with pytest.raises(ConfigError, match="request b names a model_version, and the request schema of "
                                          "requests-value has no 'model_version' field"):
        encode([1.0], "b", model_version="2")
