"""Registry-framed requests decoded a poll at a time (worker/stream/framed.py), over a stand-in registry:
what is answered, what is dead-lettered and why, what waits while the registry is away."""

from __future__ import annotations

import re
import socket
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from tests.fakes import FakeClock, routes_of
from worker.core.errors import RegistryUnavailable, SchemaNotFound, SchemaRefused
from worker.core.framing import frame
from worker.core.messages import InvalidRecord, Position, RawRecord, Request
from worker.core.wire import ERROR_CODES, SentAs
from worker.formats import codecs
from worker.formats.registry_client import RegistryClient
from worker.formats.requests import DEFAULT_AVRO_SCHEMA
from worker.stream.framed import UNKNOWN_FIRST_BACKOFF_S, FramedRequests

AVRO_ID, JSON_ID, PROTO_ID = 1, 2, 3


class StandInRegistry:
    """A SchemaResolver whose answers a test sets; counts the registry calls it would make."""

    def __init__(self) -> None:
        self.schemas = {AVRO_ID: codecs.reader("avro", "AVRO", DEFAULT_AVRO_SCHEMA, AVRO_ID)}
        self.down = False
        self.calls = 0
        self._cache: dict[int, object] = {}

    def cached(self, schema_id):
        return self._cache.get(schema_id)

    def reader(self, schema_id):
        self.calls += 1
        if self.down:
            raise RegistryUnavailable("connection refused")
        if schema_id == PROTO_ID:
            raise SchemaRefused("schema 3 is a PROTOBUF schema, and --request-format avro reads AVRO ones")
        if schema_id not in self.schemas:
            raise SchemaNotFound(f"no schema {schema_id}")
        self._cache[schema_id] = self.schemas[schema_id]
        return self.schemas[schema_id]


def avro(request_id, inputs, schema_id=AVRO_ID):
    write = codecs.writer("avro", DEFAULT_AVRO_SCHEMA)
    return frame(schema_id, write({"id": request_id, "inputs": inputs, "reply_to": None, "deadline_ms": None}))


def record(value, offset=0, key=None, partition=0):
    return RawRecord(Position("requests", partition, offset), key, value, [], 0, 0.0)


def decoder(registry, retries=2, renames=None, max_record_bytes=1 << 20):
    return FramedRequests(registry, routes_of(lambda inputs: inputs), max_record_bytes, renames or {}, retries)


def outcomes(decoded):
    out = []
    for _, result in decoded:
        if isinstance(result, Request):
            out.append(("request", result.id))
        else:
            assert isinstance(result, InvalidRecord)
            out.append((result.code, result.schema_id, result.request_id))
    return out


def test_framed_requests_decode_to_the_request_model_and_each_schema_is_fetched_once_a_poll():
    registry = StandInRegistry()
    decoded = decoder(registry).decode([record(avro(f"r{n}", [0.5] * 16), n) for n in range(5)], 0.0)
    assert outcomes(decoded) == [("request", f"r{n}") for n in range(5)]
    assert decoded[0][1].item == [0.5] * 16
    assert registry.calls == 1


def test_what_cannot_be_decoded_is_a_dead_letter_with_its_schema_id_and_reason():
    registry = StandInRegistry()
    decoded = decoder(registry).decode([
        record(b'{"id": "x", "inputs": []}', 0, key=b"x"),  # not framed: a dead letter although the key names an id
        record(frame(AVRO_ID, b"\xff\xff\xff"), 1),  # a varint cut short
        record(avro("ok", [1.0]) + b"junk", 2),  # bytes left over: written with another schema
        record(frame(PROTO_ID, b"\x00"), 3),
    ], 0.0)
    assert outcomes(decoded) == [("not_framed", None, None), ("invalid_payload", AVRO_ID, None),
                                 ("invalid_payload", AVRO_ID, None), ("unusable_schema", PROTO_ID, None)]
    assert "bytes left over" in decoded[2][1].message


def test_a_decoded_request_is_checked_as_json_is():
    decoded = decoder(StandInRegistry()).decode([record(avro("", [1.0]), key=b"from-key")], 0.0)
    assert outcomes(decoded) == [("invalid_id", None, "from-key")]  # an error reply, keyed by the record's key


# What each failure of a framed record gets: an error reply to the id its key names (None: no key id, a dead
# letter), or a dead letter whatever the key. docs/formats.md, "What is dead-lettered", says the same.
ANSWERED = "error reply, or dead letter when the key is no request id"
DEAD_LETTERED = "dead letter, even when the key is a request id"
FAILURES = {
    "empty_value": (None, ANSWERED),
    "record_too_large": (b"\x00" * 101, ANSWERED),  # over the 100 bytes allowed below, framed or not
    "not_framed": (b'{"id": "x", "inputs": []}', DEAD_LETTERED),
    "unknown_schema": (frame(99, b"\x00"), DEAD_LETTERED),
    "unusable_schema": (frame(PROTO_ID, b"\x00"), DEAD_LETTERED),
    "invalid_payload": (frame(AVRO_ID, b"\xff\xff\xff"), DEAD_LETTERED),
}


@pytest.mark.parametrize("code", FAILURES)
def test_a_failure_before_the_frame_is_answered_by_the_key_and_one_of_decoding_is_dead_lettered(code):
    value, gets = FAILURES[code]
    framed = decoder(StandInRegistry(), retries=0, max_record_bytes=100)  # retries=0: an unknown id is refused at once
    keyed, keyless = framed.decode([record(value, 0, key=b"k-1"), record(value, 1)], 0.0)
    answered_to = "k-1" if gets == ANSWERED else None
    assert outcomes([keyed, keyless]) == [(code, keyed[1].schema_id, answered_to), (code, keyed[1].schema_id, None)]
    assert ERROR_CODES[code].sent_as == (SentAs.EITHER if gets == ANSWERED else SentAs.DEAD_LETTER)


def test_the_formats_page_says_what_each_failure_gets():
    page = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    section = page.split("\n## What is dead-lettered\n", 1)[1].split("\n## ", 1)[0]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `(\w+)` \| .* \| ([^|]+) \|$", section, re.MULTILINE)}
    assert rows == {code: gets for code, (_, gets) in FAILURES.items()}


def test_an_unknown_schema_id_is_asked_again_backing_off_then_dead_lettered():
    registry, clock = StandInRegistry(), FakeClock(0.0)
    framed = decoder(registry, retries=2)
    assert framed.decode([record(frame(99, b"\x00"), 0)], clock.monotonic()) == []
    assert (framed.waiting, framed.blocked) == (1, False)  # the registry answers: no pause
    assert framed.decode([], clock.monotonic()) == [] and registry.calls == 1  # not due yet
    clock.advance(UNKNOWN_FIRST_BACKOFF_S)
    assert framed.decode([], clock.monotonic()) == [] and registry.calls == 2
    clock.advance(2 * UNKNOWN_FIRST_BACKOFF_S)
    assert outcomes(framed.decode([], clock.monotonic())) == [("unknown_schema", 99, None)]
    assert outcomes(framed.decode([record(frame(99, b"\x00"), 1)], clock.monotonic())) == [
        ("unknown_schema", 99, None)]  # refused at once for a while, without asking again
    assert registry.calls == 3


def test_an_id_registered_while_its_records_wait_is_read():
    registry, clock = StandInRegistry(), FakeClock(0.0)
    framed = decoder(registry)
    registry.schemas[7] = registry.schemas[AVRO_ID]
    del registry.schemas[AVRO_ID]
    assert framed.decode([record(avro("late", [1.0], schema_id=8), 0)], clock.monotonic()) == []
    registry.schemas[8] = registry.schemas[7]
    clock.advance(UNKNOWN_FIRST_BACKOFF_S)
    assert outcomes(framed.decode([], clock.monotonic())) == [("request", "late")]


def test_a_registry_outage_holds_the_records_and_blocks_until_it_answers():
    registry, clock = StandInRegistry(), FakeClock(0.0)
    framed = decoder(registry)
    registry.down = True
    decoded = framed.decode([record(avro("a", [1.0]), 0), record(b"plain", 1)], clock.monotonic())
    assert outcomes(decoded) == [("not_framed", None, None)]  # it needed no schema
    assert framed.blocked and framed.waiting == 1
    clock.advance(10.0)
    assert framed.decode([record(avro("b", [1.0]), 2)], clock.monotonic()) == []
    calls = registry.calls
    assert framed.decode([], clock.monotonic()) == [] and registry.calls == calls  # backing off: not asked
    assert framed.blocked and framed.waiting == 2
    registry.down = False
    clock.advance(10.0)
    assert outcomes(framed.decode([], clock.monotonic())) == [("request", "a"), ("request", "b")]
    assert not framed.blocked and framed.waiting == 0


def test_records_held_for_a_partition_that_left_are_dropped():
    registry = StandInRegistry()
    registry.down = True
    framed = decoder(registry)
    framed.decode([record(avro("a", [1.0]), 0, partition=0), record(avro("b", [1.0]), 0, partition=1)], 0.0)
    assert framed.drop({("requests", 0)}) == 1
    registry.down = False
    assert outcomes(framed.decode([], 100.0)) == [("request", "b")]


def test_a_schema_that_calls_the_fields_otherwise_is_read_with_its_names():
    schema = orjson.dumps({"type": "record", "name": "R", "fields": [
        {"name": "requestId", "type": "string"}, {"name": "features", "type": {"type": "array", "items": "double"}},
        {"name": "reply_to", "type": ["null", "string"], "default": None}]}).decode()
    registry = StandInRegistry()
    registry.schemas[5] = codecs.reader("avro", "AVRO", schema, 5)
    value = frame(5, codecs.writer("avro", schema)({"requestId": "q", "features": [2.0], "reply_to": None}))
    decoded = decoder(registry, renames={"id": "requestId", "inputs": "features"}).decode([record(value)], 0.0)
    assert outcomes(decoded) == [("request", "q")]
    assert decoded[0][1].item == [2.0] and decoded[0][1].reply_to is None


def test_json_schema_payloads_need_the_schemas_required_fields():
    read = codecs.reader("json-schema", "JSON", '{"type": "object", "required": ["id", "inputs"]}', JSON_ID)
    assert read(memoryview(b'{"id": "a", "inputs": [1]}')) == {"id": "a", "inputs": [1]}
    with pytest.raises(ValueError, match="missing: inputs"):
        read(memoryview(b'{"id": "a"}'))


def test_a_schema_of_another_kind_or_unreadable_is_refused():
    with pytest.raises(SchemaRefused, match="is a JSON schema"):
        codecs.reader("avro", "JSON", "{}", 4)
    with pytest.raises(SchemaRefused, match="not a usable Avro schema"):
        codecs.reader("avro", "AVRO", '{"type": "record"}', 4)


def test_a_registry_that_does_not_answer_is_unavailable_not_an_error_of_the_record():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = RegistryClient(f"http://127.0.0.1:{port}/apis/ccompat/v7", timeout_s=0.5)
    with pytest.raises(RegistryUnavailable, match="did not answer"):
        client.schema(1)


GUID = "0b3e7f6a-4d2c-4e8b-9a51-2f0c6d7e8a91"


def test_a_schema_named_in_the_value_schema_id_header_reads_the_bare_payload():
    """Newer Confluent clients put magic byte 1 and a schema GUID (or magic byte 0 and an id) in a header, and
    the payload alone in the value."""
    import uuid

    registry = StandInRegistry()
    registry.schemas[GUID] = registry.schemas[AVRO_ID]
    bare = avro("by-guid", [0.5] * 16)[5:]
    by_guid = RawRecord(Position("requests", 0, 0), None, bare,
                        [("__value_schema_id", b"\x01" + uuid.UUID(GUID).bytes)], 0, 0.0)
    by_id = RawRecord(Position("requests", 0, 1), None, avro("by-id", [0.5] * 16)[5:],
                      [("__value_schema_id", b"\x00\x00\x00\x00\x01")], 0, 0.0)
    bad = RawRecord(Position("requests", 0, 2), None, bare, [("__value_schema_id", b"\x07")], 0, 0.0)
    unknown = RawRecord(Position("requests", 0, 3), None, bare,
                        [("__value_schema_id", b"\x01" + uuid.UUID(int=7).bytes)], 0, 0.0)
    framed = decoder(registry, retries=0)
    assert outcomes(framed.decode([by_guid, by_id, bad, unknown], 0.0)) == [
        ("not_framed", None, None), ("request", "by-guid"), ("request", "by-id"),
        ("unknown_schema", str(uuid.UUID(int=7)), None)]


def test_protobuf_message_indexes_travel_in_the_header_when_the_id_does():
    import uuid

    from worker.core.framing import read_header_id

    schema_id, payload = read_header_id(b"\x01" + uuid.UUID(GUID).bytes + b"\x02\x02\x00", b"message")
    assert (schema_id, bytes(payload)) == (GUID, b"\x02\x02\x00message")


def test_avro_decimal_inputs_are_read_as_numbers_as_a_parquet_decimal_is():
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 4}
    schema = orjson.dumps({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "string"}, {"name": "inputs", "type": {"type": "array", "items": decimal}}]}).decode()
    registry = StandInRegistry()
    registry.schemas[6] = codecs.reader("avro", "AVRO", schema, 6)
    value = frame(6, codecs.writer("avro", schema)({"id": "d", "inputs": [Decimal("0.1250"), Decimal("2")]}))
    decoded = decoder(registry).decode([record(value)], 0.0)
    assert outcomes(decoded) == [("request", "d")]
    assert decoded[0][1].item == [0.125, 2.0] and all(type(x) is float for x in decoded[0][1].item)
