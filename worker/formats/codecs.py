"""Payload readers and writers for a schema's text: Avro (fastavro), Protobuf (formats/protobuf.py), JSON Schema.

A reader decodes one payload (the bytes after the frame) and raises for one
that does not match its schema; a writer encodes a request body. Building
either raises SchemaRefused for a schema of another format or one that cannot
be read, and ConfigError when its library (the ``formats`` extra) is missing.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from worker.core.errors import ConfigError, SchemaRefused
from worker.core.table_cells import decimals_as_numbers
from worker.formats import protobuf
from worker.formats.registry_client import AVRO, JSON, PROTOBUF

Reader = Callable[[memoryview], Any]
Writer = Callable[[dict[str, Any]], bytes]
# --request-format -> the registry's schemaType
SCHEMA_TYPES = {"avro": AVRO, "json-schema": JSON, "protobuf": PROTOBUF}


def reader(request_format: str | None, schema_type: str, text: str, schema_id: int | str,
           references: Mapping[str, str] | None = None) -> Reader:
    """The payload reader of a schema registered as ``schema_type`` with ``text``; ``references``: the texts it
    imports, by the name it imports them under (Protobuf). ``request_format`` None: a schema of any type."""
    if request_format is not None:
        _check_type(request_format, schema_type, schema_id)
    elif schema_type not in SCHEMA_TYPES.values():
        raise SchemaRefused(f"schema {schema_id} is of type {schema_type}, which is not read here")
    else:
        check_installed(next(name for name, kind in SCHEMA_TYPES.items() if kind == schema_type))
    if schema_type == AVRO:
        return _avro_reader(_avro_schema(text, schema_id), decimals='"decimal"' in text)
    if schema_type == PROTOBUF:
        return protobuf.ProtoSchema(text, references, _named(schema_id)).reader()
    return _json_reader(_json_schema(text, schema_id))


def writer(request_format: str, text: str) -> Writer:
    """The payload writer for schema ``text`` (the producer side). Raises SchemaRefused for a bad schema."""
    schema_type = SCHEMA_TYPES[request_format]
    if schema_type == AVRO:
        return _avro_writer(_avro_schema(text, None))
    if schema_type == PROTOBUF:
        return protobuf.ProtoSchema(text).writer()
    _json_schema(text, None)
    return orjson.dumps


def check_installed(request_format: str) -> None:
    """Raises ConfigError, naming the extra, when the library ``request_format`` needs is not installed."""
    schema_type = SCHEMA_TYPES.get(request_format)
    if schema_type == AVRO:
        _fastavro()
    elif schema_type == PROTOBUF:
        protobuf.check_installed()


def _check_type(request_format: str, schema_type: str, schema_id: int | str) -> None:
    expected = SCHEMA_TYPES[request_format]
    if schema_type != expected:
        raise SchemaRefused(f"schema {schema_id} is a {schema_type} schema, and --request-format {request_format} "
                            f"reads {expected} ones")


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError:
        raise ConfigError("--request-format avro needs the fastavro package, which is not installed: install the "
                          "`formats` extra (pip install 'streamscore[formats]')") from None
    return fastavro


def _avro_schema(text: str, schema_id: int | str | None) -> Any:
    fastavro = _fastavro()
    try:
        return fastavro.parse_schema(orjson.loads(text))
    except Exception as exc:  # fastavro's SchemaParseException, UnknownType, a ValueError or KeyError
        raise SchemaRefused(f"{_named(schema_id)} is not a usable Avro schema: {type(exc).__name__}: {exc}") from None


def _avro_reader(parsed: Any, decimals: bool = False) -> Reader:
    """``decimals``: the schema may hold a ``decimal`` logical type, whose values fastavro reads as Decimal: each
    read body then has them as numbers, as ``score-file`` reads a Parquet decimal (whatever field holds the
    inputs: a schema may call it otherwise)."""
    read = _fastavro().schemaless_reader

    def read_payload(payload: memoryview) -> Any:
        buffer = io.BytesIO(payload)
        body = read(buffer, parsed, None)
        if buffer.tell() != len(payload):
            raise ValueError(f"{len(payload) - buffer.tell()} bytes left over after the record: "
                             "written with another schema?")
        return decimals_as_numbers(body) if decimals else body

    return read_payload


def _avro_writer(parsed: Any) -> Writer:
    write = _fastavro().schemaless_writer

    def write_payload(body: dict[str, Any]) -> bytes:
        buffer = io.BytesIO()
        write(buffer, parsed, body)
        return buffer.getvalue()

    return write_payload


def _json_schema(text: str, schema_id: int | str | None) -> dict[str, Any]:
    try:
        schema = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SchemaRefused(f"{_named(schema_id)} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise SchemaRefused(f"{_named(schema_id)} is not a JSON Schema object")
    return schema


def _json_reader(schema: dict[str, Any]) -> Reader:
    """Parses the JSON and checks what is cheap: an object, with the schema's required properties. The full
    JSON Schema validation is left out (docs/formats.md): the wire contract's checks follow anyway."""
    required = tuple(name for name in schema.get("required", ()) if isinstance(name, str))

    def read_payload(payload: memoryview) -> Any:
        body = orjson.loads(payload)
        if isinstance(body, dict):
            missing = [name for name in required if name not in body]
            if missing:
                raise ValueError(f"required by the schema, missing: {', '.join(missing)}")
        return body

    return read_payload


def _named(schema_id: int | str | None) -> str:
    return "the schema" if schema_id is None else f"schema {schema_id}"
