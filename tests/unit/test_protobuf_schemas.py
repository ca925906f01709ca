"""Protobuf payloads read from a registry's schema, with no generated class (worker/formats/protobuf.py).

Both forms a registry may hold are read: ``.proto`` source (compiled by
grpcio-tools' protoc) and a base64 FileDescriptorProto (what Confluent's
Python serializer registers). The payloads are written by protobuf's own
message classes, built from descriptors protoc made, never by hand.
"""

from __future__ import annotations

import base64

import pytest

from worker.core.errors import SchemaRefused
from worker.core.framing import write_message_indexes
from worker.formats import codecs
from worker.formats.protobuf import ProtoSchema
from worker.formats.requests import DEFAULT_PROTOBUF_SCHEMA

pytest.importorskip("grpc_tools")

NESTED = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Unused { int32 x = 1; }
message Envelope {
  message Order {
    enum Channel { WEB = 0; MOBILE = 1; }
    string id = 1;
    repeated double inputs = 2;
    map<string, double> extra = 3;
    google.protobuf.Timestamp at = 4;
    Channel channel = 5;
  }
}
"""


def test_a_request_round_trips_through_the_default_schema():
    payload = codecs.writer("protobuf", DEFAULT_PROTOBUF_SCHEMA)({"id": "r1", "inputs": [0.5, 1.5],
                                                                   "deadline_ms": 250})
    assert payload[:1] == b"\x00"  # the message index of the first message
    read = codecs.reader("protobuf", "PROTOBUF", DEFAULT_PROTOBUF_SCHEMA, 7)
    assert read(memoryview(payload)) == {"id": "r1", "inputs": [0.5, 1.5], "deadline_ms": 250}


def test_a_nested_message_is_found_by_its_indexes_and_read_to_plain_values():
    schema = ProtoSchema(NESTED)
    order = schema.message_class([1, 0])(id="o1", inputs=[1.0, 2.0], extra={"k": 3.0}, channel=1)
    order.at.seconds = 5
    body = schema.reader()(memoryview(write_message_indexes([1, 0]) + order.SerializeToString()))
    assert body == {"id": "o1", "inputs": [1.0, 2.0], "extra": {"k": 3.0}, "at": {"seconds": 5},
                    "channel": "MOBILE"}


def test_the_descriptor_form_is_read_as_the_source_form_is():
    source = ProtoSchema(NESTED)
    described = base64.b64encode(source.message_class([1, 0]).DESCRIPTOR.file.serialized_pb).decode()
    from_registry = ProtoSchema(described)
    order = source.message_class([1, 0])(id="o2", inputs=[4.0])
    payload = write_message_indexes([1, 0]) + order.SerializeToString()
    assert from_registry.reader()(memoryview(payload)) == {"id": "o2", "inputs": [4.0]}


def test_an_import_comes_from_the_references():
    common = 'syntax = "proto3"; package common; message Money { double amount = 1; }'
    main = 'syntax = "proto3"; import "common/money.proto"; message Price { string id = 1; common.Money m = 2; }'
    schema = ProtoSchema(main, {"common/money.proto": common})
    price = schema.message_class([0])(id="p")
    price.m.amount = 2.5
    assert schema.reader()(memoryview(b"\x00" + price.SerializeToString())) == {"id": "p", "m": {"amount": 2.5}}


@pytest.mark.parametrize(("text", "references", "says"), [
    ('syntax = "proto3"; message X { strin a = 1; }', {}, r'"strin" is not defined'),
    ('syntax = "proto3"; import "missing.proto"; message X { int32 a = 1; }', {}, "missing.proto"),
    ('syntax = "proto3"; enum E { A = 0; }', {}, "defines no message"),
    ('syntax = "proto3"; import "../../etc/x.proto"; message X { int32 a = 1; }', {"../../etc/x.proto": ""},
     "outside the schema's files"),
])
def test_a_schema_that_cannot_be_used_is_refused_saying_why(text, references, says):
    with pytest.raises(SchemaRefused, match=says):
        ProtoSchema(text, references)


def test_a_payload_that_is_not_the_message_raises_for_a_dead_letter():
    read = ProtoSchema(DEFAULT_PROTOBUF_SCHEMA).reader()
    with pytest.raises(Exception, match="no message at index path"):
        read(memoryview(write_message_indexes([2])))
    with pytest.raises(Exception, match="parsing"):
        read(memoryview(b"\x00\xff\xff\xff"))
