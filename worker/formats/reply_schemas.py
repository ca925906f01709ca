"""The reply schema of a served model, in Avro, Protobuf or JSON Schema, made from what its outputs look like.

A model's outputs are typed from a sample of them (the reply to its sample
request, scored at start): a float is a double, an int a long, a string a
string, a bool a boolean, a list an array of its items' type, an object whose
keys are all identifiers a record (``{"churn_probability": 0.2}``), any other
object a map (``{"late-payment": 0.7}``, labels as keys). The reply around the
outputs is the wire contract's: ``id``, ``status``, ``outputs`` (absent unless
``ok``), ``error`` (``code`` and ``message``, absent when ``ok``), ``model``,
``model_version``. Records are named after the model (``churn`` ->
``streamscore.ChurnReply``), so that the record subject-name strategies give
each model a subject of its own. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from worker.core.errors import ConfigError

NAMESPACE = "streamscore"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Scalar:
    kind: str  # double, long, string, boolean


@dataclass(frozen=True)
class Array:
    items: Any


@dataclass(frozen=True)
class Record:
    fields: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Map:
    values: Any


@dataclass(frozen=True)
class ReplySchema:
    """A schema's text and the fully qualified name of its record (the record strategies' subject)."""

    text: str
    record_name: str


def record_name(model: str) -> str:
    """``churn`` -> ``ChurnReply``; ``doc-classifier`` -> ``DocClassifierReply``."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", model) if w]
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Model"
    return ("M" + name if name[0].isdigit() else name) + "Reply"


def type_of(value: Any, where: str = "outputs") -> Any:
    """The type of a sample value. Raises ConfigError for one that cannot be typed (a null, an empty object)."""
    if isinstance(value, bool):
        return Scalar("boolean")
    if isinstance(value, int):
        return Scalar("long")
    if isinstance(value, float):
        return Scalar("double")
    if isinstance(value, str):
        return Scalar("string")
    if isinstance(value, (list, tuple)):
        if not value:
            return Array(Scalar("double"))
        kinds = {type_of(item, f"{where}[]") for item in value}
        if kinds <= {Scalar("long"), Scalar("double")}:
            return Array(Scalar("double") if Scalar("double") in kinds else Scalar("long"))
        if len(kinds) > 1:
            raise ConfigError(f"the model's {where} mixes types ({', '.join(sorted(map(str, kinds)))}): a registry "
                              "format needs one; use --reply-format json")
        return Array(kinds.pop())
    if isinstance(value, dict) and value:
        if all(isinstance(key, str) and _IDENTIFIER.match(key) for key in value):
            return Record(tuple((key, type_of(item, f"{where}.{key}")) for key, item in value.items()))
        first = next(iter(value.values()))
        return Map(type_of(first, f"{where}{{}}"))
    raise ConfigError(f"the model's {where} in its sample reply is {value!r}, which gives no type: a registry format "
                      "needs outputs of a known shape; use --reply-format json")


def avro_schema(model: str, outputs: Any) -> ReplySchema:
    name = record_name(model)
    prefix = name.removesuffix("Reply")

    def avro(t: Any, path: str) -> Any:
        if isinstance(t, Scalar):
            return t.kind
        if isinstance(t, Array):
            return {"type": "array", "items": avro(t.items, path + "Item")}
        if isinstance(t, Map):
            return {"type": "map", "values": avro(t.values, path + "Value")}
        return {"type": "record", "name": path,
                "fields": [{"name": key, "type": avro(item, path + _camel(key))} for key, item in t.fields]}

    schema = {"type": "record", "name": name, "namespace": NAMESPACE, "fields": [
        {"name": "id", "type": "string"},
        {"name": "status", "type": "string"},
        {"name": "outputs", "type": ["null", avro(outputs, prefix + "Outputs")], "default": None},
        {"name": "error", "type": ["null", {"type": "record", "name": prefix + "Error", "fields": [
            {"name": "code", "type": "string"}, {"name": "message", "type": "string"}]}], "default": None},
        {"name": "model", "type": "string"},
        {"name": "model_version", "type": "string"},
    ]}
    return ReplySchema(orjson.dumps(schema).decode(), f"{NAMESPACE}.{name}")


def json_schema(model: str, outputs: Any) -> ReplySchema:
    name = record_name(model)

    def json_type(t: Any) -> dict[str, Any]:
        if isinstance(t, Scalar):
            return {"type": {"double": "number", "long": "integer", "string": "string", "boolean": "boolean"}[t.kind]}
        if isinstance(t, Array):
            return {"type": "array", "items": json_type(t.items)}
        if isinstance(t, Map):
            return {"type": "object", "additionalProperties": json_type(t.values)}
        return {"type": "object", "properties": {key: json_type(item) for key, item in t.fields},
                "required": [key for key, _ in t.fields]}

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": f"{NAMESPACE}.{name}",
              "type": "object", "properties": {
                  "id": {"type": "string"}, "status": {"type": "string", "enum": ["ok", "error", "expired"]},
                  "outputs": json_type(outputs),
                  "error": {"type": "object", "properties": {"code": {"type": "string"},
                                                             "message": {"type": "string"}},
                            "required": ["code", "message"]},
                  "model": {"type": "string"}, "model_version": {"type": "string"}},
              "required": ["id", "status", "model", "model_version"]}
    return ReplySchema(orjson.dumps(schema).decode(), f"{NAMESPACE}.{name}")


def protobuf_schema(model: str, outputs: Any) -> ReplySchema:
    """The reply message first in the file (a writer writes the first message), its types nested in it; scalars
    ``optional``, so that a zero (a 0.0 score, an empty version) is said, as in JSON."""
    name = record_name(model)
    nested: list[str] = []

    def proto(t: Any, path: str, where: str) -> str:
        if isinstance(t, Scalar):
            return {"double": "double", "long": "int64", "string": "string", "boolean": "bool"}[t.kind]
        if isinstance(t, Map):
            if not isinstance(t.values, (Scalar, Record)):
                raise ConfigError(f"the model's {where} is a map of lists or maps, which Protobuf cannot hold: use "
                                  "--reply-format avro or json-schema")
            return f"map<string, {proto(t.values, path + 'Value', where + '{}')}>"
        if isinstance(t, Array):
            raise ConfigError(f"the model's {where} is a list of lists, which Protobuf cannot hold: use "
                              "--reply-format avro or json-schema")
        lines = [f"message {path} {{"]
        for number, (key, item) in enumerate(t.fields, start=1):
            lines.append(f"  {field(item, path + _camel(key), f'{where}.{key}')} {key} = {number};")
        nested.append("\n".join([*lines, "}"]))
        return path

    def field(t: Any, path: str, where: str) -> str:
        """proto3 drops a scalar at its zero value unless it is optional: a 0.0 score must stay said."""
        if isinstance(t, Array):
            return "repeated " + proto(t.items, path + "Item", where + "[]")
        return ("optional " if isinstance(t, Scalar) else "") + proto(t, path, where)

    outputs_field = field(outputs, "Outputs", "outputs")
    body = "\n".join("  " + line for text in nested for line in text.splitlines())
    text = f"""syntax = "proto3";
package {NAMESPACE};

message {name} {{
  string id = 1;
  string status = 2;
  {outputs_field} outputs = 3;
  Error error = 4;
  optional string model = 5;
  optional string model_version = 6;
  message Error {{
    string code = 1;
    string message = 2;
  }}
{body}
}}
"""
    return ReplySchema(text, f"{NAMESPACE}.{name}")


GENERATORS = {"avro": avro_schema, "json-schema": json_schema, "protobuf": protobuf_schema}


def reply_schema(reply_format: str, model: str, sample_outputs: Any) -> ReplySchema:
    """The reply schema of ``model`` whose outputs look like ``sample_outputs``. Raises ConfigError."""
    return GENERATORS[reply_format](model, type_of(sample_outputs))


def _camel(key: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in key.split("_") if part) or "Field"
