"""Subject-name strategies: under which subject a schema is registered (or looked up), as Confluent's clients
name them.

``topic``: ``<topic>-value``, one schema (and its versions) per topic;
``record``: the record's fully qualified name, one subject per record type
whatever the topic; ``topic-record``: ``<topic>-<record name>``. A record's
name is an Avro schema's ``namespace.name``, a Protobuf file's
``package.Message`` (its first message), a JSON Schema's ``title``. Pure, but
for compiling a Protobuf schema to find its first message.
"""

from __future__ import annotations

import orjson

from worker.core.errors import SchemaRefused
from worker.formats import protobuf

STRATEGIES = ("topic", "record", "topic-record")


def subject(strategy: str, topic: str, record_name: str) -> str:
    """The subject of a value schema whose record is ``record_name``, written to ``topic``."""
    return {"topic": f"{topic}-value", "record": record_name, "topic-record": f"{topic}-{record_name}"}[strategy]


def record_name(schema_format: str, text: str) -> str:
    """The fully qualified record name of a schema in ``schema_format`` (avro, protobuf, json-schema). Raises
    SchemaRefused for a schema that names none (a JSON Schema without a title, say)."""
    if schema_format == "protobuf":
        return str(protobuf.ProtoSchema(text).message_class([0]).DESCRIPTOR.full_name)
    try:
        schema = orjson.loads(text)
    except orjson.JSONDecodeError:
        schema = None
    if schema_format == "avro" and isinstance(schema, dict) and isinstance(schema.get("name"), str):
        name, namespace = schema["name"], schema.get("namespace")
        return f"{namespace}.{name}" if isinstance(namespace, str) and namespace and "." not in name else name
    if schema_format == "json-schema" and isinstance(schema, dict) and isinstance(schema.get("title"), str):
        return str(schema["title"])
    raise SchemaRefused(f"the {schema_format} schema names no record (an Avro record's name, a JSON Schema's "
                        "title): the record subject strategies need one")
