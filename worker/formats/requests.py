"""Writing requests in the configured format: the producer side of docs/formats.md.

``request_encoder`` gives the function that turns a request into a record
value: the wire contract's JSON, or a registry-framed Avro, Protobuf or JSON
Schema payload whose schema is registered (or, for read-only credentials,
looked up) under the subject its strategy names (formats/subjects.py; by
default the topic-name strategy's, ``<topic>-value``).
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from worker.core.errors import ConfigError
from worker.core.formats import Formats
from worker.core.framing import frame
from worker.core.wire import encode_request
from worker.formats import codecs, subjects
from worker.formats.registry_client import RegistryClient


class RequestEncode(Protocol):
    """Writes one request's record value; worker/core/wire.py's ``encode_request`` is one."""

    def __call__(self, inputs: Any, request_id: str, reply_to: str | None = None, deadline_ms: int | None = None,
                 model: str | None = None, model_version: str | None = None) -> bytes: ...


ROUTING_FIELDS = ("model", "model_version")  # which served model answers: optional, never renamed

# The request schemas used when none is given: inputs as an array of numbers (the tabular models). Another
# model's inputs need a schema of their own (--request-schema): text is a string. The routing fields are
# optional, so that either schema stays compatible with the one registered before they were added (Avro:
# nullable with a default; JSON Schema: no type, as Confluent's BACKWARD check, the default, refuses a typed
# property added to an open object).
DEFAULT_AVRO_SCHEMA = orjson.dumps({
    "type": "record", "name": "ScoringRequest", "namespace": "streamscore", "fields": [
        {"name": "id", "type": "string"},
        {"name": "inputs", "type": {"type": "array", "items": "double"}},
        {"name": "reply_to", "type": ["null", "string"], "default": None},
        {"name": "deadline_ms", "type": ["null", "long"], "default": None},
        {"name": "model", "type": ["null", "string"], "default": None},
        {"name": "model_version", "type": ["null", "string"], "default": None},
    ]}).decode()
DEFAULT_JSON_SCHEMA = orjson.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "ScoringRequest", "type": "object",
    "properties": {"id": {"type": "string"}, "inputs": {"type": "array", "items": {"type": "number"}},
                   "reply_to": {"type": "string"}, "deadline_ms": {"type": "integer"},
                   "model": {"description": "the served model to answer (a string; default: the worker's)"},
                   "model_version": {"description": "that model's version (a string; default: any arm)"}},
    "required": ["id", "inputs"]}).decode()
# Protobuf: proto3 `optional` marks the fields a request may leave out (a text model's schema has
# `string inputs = 2;`).
DEFAULT_PROTOBUF_SCHEMA = """syntax = "proto3";
package streamscore;

message ScoringRequest {
  string id = 1;
  repeated double inputs = 2;
  optional string reply_to = 3;
  optional int64 deadline_ms = 4;
  optional string model = 5;
  optional string model_version = 6;
}
"""
DEFAULT_SCHEMAS = {"avro": DEFAULT_AVRO_SCHEMA, "json-schema": DEFAULT_JSON_SCHEMA,
                   "protobuf": DEFAULT_PROTOBUF_SCHEMA}


def request_encoder(formats: Formats, topic: str, schema: str | None = None, register: bool = True) -> RequestEncode:
    """How to write requests to ``topic``, in its format (``formats.format_of``).

    Args:
        formats: the request formats and the schema registry.
        topic: the requests topic written to.
        schema: the schema of a registry-framed format (default: the built-in one of that format).
        register: register ``schema`` under its subject now; False: only look it up (read-only credentials).

    Returns:
        A function with ``encode_request``'s parameters (inputs, request id, ``reply_to``, ``deadline_ms``,
        ``model``, ``model_version``) that returns the record value's bytes. It raises ConfigError for a request that
        names a model when the Avro schema has no field for it (Avro would leave it out unsaid).

    Raises:
        ConfigError: the format's extra is not installed, or the settings do not fit together.
        SchemaRefused: the registry refused the schema.
        SchemaNotFound: looked up (``register`` False) and not registered.
        RegistryUnavailable: the registry does not answer.
    """
    request_format = formats.format_of(topic)
    if request_format == "json":
        return encode_request
    codecs.check_installed(request_format)
    text = schema or DEFAULT_SCHEMAS[request_format]
    write = codecs.writer(request_format, text)
    client = RegistryClient.from_formats(formats)
    schema_type = codecs.SCHEMA_TYPES[request_format]
    strategy = formats.subject_strategy
    subject = subjects.subject(strategy, topic,
                               "" if strategy == "topic" else subjects.record_name(request_format, text))
    schema_id = client.register(subject, schema_type, text) if register else client.lookup(subject, schema_type, text)
    names = formats.field_names()
    keep_nulls = request_format == "avro"  # Avro writes every field; JSON and Protobuf leave the unset ones out
    missing = _missing_routing_fields(text) if keep_nulls else ()

    def encode(inputs: Any, request_id: str, reply_to: str | None = None, deadline_ms: int | None = None,
               model: str | None = None, model_version: str | None = None) -> bytes:
        body = {"id": request_id, "inputs": inputs, "reply_to": reply_to, "deadline_ms": deadline_ms,
                "model": model, "model_version": model_version}
        for name in missing:
            if body[name] is not None:
                raise ConfigError(f"request {request_id} names a {name}, and the request schema of "
                                  f"{subject} has no {name!r} field to write it in: add "
                                  f'{{"name": "{name}", "type": ["null", "string"], "default": null}} to it')
        if not keep_nulls:
            body = {name: value for name, value in body.items() if value is not None}
        if names:
            body = {names.get(name, name): value for name, value in body.items()}
        return frame(schema_id, write(body))

    return encode


def _missing_routing_fields(avro_text: str) -> tuple[str, ...]:
    """The routing fields an Avro record schema lacks (the default has both)."""
    schema = orjson.loads(avro_text)
    fields = schema.get("fields") if isinstance(schema, dict) else None
    names = {f.get("name") for f in fields if isinstance(f, dict)} if isinstance(fields, list) else set()
    return tuple(name for name in ROUTING_FIELDS if name not in names)
