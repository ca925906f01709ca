"""Writing requests in the configured format: the producer side of docs/formats.md.

``request_encoder`` gives the function that turns a request into a record
value: the wire contract's JSON, or a registry-framed Avro / JSON Schema
payload whose schema is registered (or, for read-only credentials, looked up)
under the topic-name strategy's subject, ``<topic>-value``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from worker.core.formats import Formats
from worker.core.framing import frame
from worker.core.wire import encode_request
from worker.formats import codecs
from worker.formats.registry_client import RegistryClient

RequestEncode = Callable[[Any, str, str | None, int | None], bytes]  # (inputs, id, reply_to, deadline_ms) -> value

# The request schemas used when none is given: inputs as an array of numbers (the tabular models). Another
# model's inputs need a schema of their own (--request-schema): text is a string.
DEFAULT_AVRO_SCHEMA = orjson.dumps({
    "type": "record", "name": "ScoringRequest", "namespace": "streamscore", "fields": [
        {"name": "id", "type": "string"},
        {"name": "inputs", "type": {"type": "array", "items": "double"}},
        {"name": "reply_to", "type": ["null", "string"], "default": None},
        {"name": "deadline_ms", "type": ["null", "long"], "default": None},
    ]}).decode()
DEFAULT_JSON_SCHEMA = orjson.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "ScoringRequest", "type": "object",
    "properties": {"id": {"type": "string"}, "inputs": {"type": "array", "items": {"type": "number"}},
                   "reply_to": {"type": "string"}, "deadline_ms": {"type": "integer"}},
    "required": ["id", "inputs"]}).decode()
DEFAULT_SCHEMAS = {"avro": DEFAULT_AVRO_SCHEMA, "json-schema": DEFAULT_JSON_SCHEMA}


def subject_of(topic: str) -> str:
    """The topic-name strategy's subject for a topic's values."""
    return f"{topic}-value"


def request_encoder(formats: Formats, topic: str, schema: str | None = None, register: bool = True) -> RequestEncode:
    """How to write requests to ``topic``. For a framed format, registers ``schema`` (default: DEFAULT_SCHEMAS)
    under ``<topic>-value`` now, or only looks it up (``register`` False). Raises ConfigError, SchemaRefused,
    SchemaNotFound (looked up and absent), RegistryUnavailable."""
    if not formats.framed:
        return encode_request
    codecs.check_installed(formats.request_format)
    text = schema or DEFAULT_SCHEMAS[formats.request_format]
    write = codecs.writer(formats.request_format, text)
    client = RegistryClient.from_formats(formats)
    schema_type = codecs.SCHEMA_TYPES[formats.request_format]
    subject = subject_of(topic)
    schema_id = client.register(subject, schema_type, text) if register else client.lookup(subject, schema_type, text)
    names = formats.field_names()
    keep_nulls = formats.request_format == "avro"  # Avro writes every field; JSON leaves the unset ones out

    def encode(inputs: Any, request_id: str, reply_to: str | None = None, deadline_ms: int | None = None) -> bytes:
        body = {"id": request_id, "inputs": inputs, "reply_to": reply_to, "deadline_ms": deadline_ms}
        if not keep_nulls:
            body = {name: value for name, value in body.items() if value is not None}
        if names:
            body = {names.get(name, name): value for name, value in body.items()}
        return frame(schema_id, write(body))

    return encode
