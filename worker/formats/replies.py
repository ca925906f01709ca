"""Replies written in a registry format (--reply-format avro, protobuf, json-schema): the worker's side.

Each served model name gets a reply schema made from its outputs
(formats/reply_schemas.py), registered at start, or looked up only, with
``--reply-schema-mode lookup`` for read-only credentials, under the subject
its strategy (formats/subjects.py) names: ``topic`` (``<reply topic>-value``: one schema per topic,
so one model per reply topic), ``record`` (the record's full name,
``streamscore.ChurnReply``) or ``topic-record`` (``<reply topic>-<record
name>``). A reply is then framed with its model's schema id; one for a name not
served (an unreadable request's error reply) with the default model's, its
outputs being absent. A reply sent to a request's own ``reply_to`` topic
carries the same schema id, its subject registered for the default reply
topic only. Outputs the schema cannot hold raise UnencodableReply: the
responder answers ``reply_unencodable`` instead (stream/replies.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from worker.core.errors import ConfigError, UnencodableReply
from worker.core.formats import Formats
from worker.core.framing import frame
from worker.core.messages import Headers, Reply
from worker.core.wire import reply_body, reply_headers
from worker.formats import codecs
from worker.formats.codecs import Writer
from worker.formats.registry_client import RegistryClient
from worker.formats.reply_schemas import reply_schema
from worker.formats.subjects import subject


class FramedReplies:
    """Encodes replies as ``worker.core.wire.encode_reply`` does, each value framed with its model's schema."""

    def __init__(self, reply_format: str, schemas: Mapping[str, tuple[int, Writer]], default: str) -> None:
        """``schemas``: each reply name's schema id and payload writer; ``default``: the name whose schema
        frames the replies of names not served."""
        self._keep_nulls = reply_format == "avro"  # Avro writes every field, the others leave unset ones out
        self._schemas = dict(schemas)
        self._default = self._schemas[default]

    def __call__(self, reply: Reply) -> tuple[bytes, bytes, Headers]:
        schema_id, write = self._schemas.get(reply.model, self._default)
        body = reply_body(reply)
        if self._keep_nulls:
            body.setdefault("outputs", None)
            body.setdefault("error", None)
        else:
            body = {key: value for key, value in body.items() if value is not None}
        if body.get("error") is not None and body["error"].get("message") is None:
            body["error"]["message"] = ""
        try:
            payload = write(body)
        except Exception:  # numpy values, perhaps: the JSON path serializes those too
            try:
                payload = write(orjson.loads(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)))
            except Exception as exc:  # the codec's own exception types say why
                raise UnencodableReply(f"the outputs do not fit the reply schema of model {reply.model!r} "
                                       f"(schema id {schema_id}): {type(exc).__name__}: {exc}"[:300]) from None
        return reply.id.encode(), frame(schema_id, payload), reply_headers(reply)


def framed_replies(formats: Formats, reply_topic: str, samples: Mapping[str, Any], default: str,
                   client: RegistryClient | None = None) -> FramedReplies:
    """Registers (or looks up) the reply schema of each name in ``samples`` (name -> a sample of its outputs)
    for ``reply_topic``. Raises ConfigError (outputs of no registry type; the topic strategy with several
    names), SchemaRefused, SchemaNotFound (looked up and absent), RegistryUnavailable."""
    reply_format = formats.reply_format
    codecs.check_installed(reply_format)
    if formats.subject_strategy == "topic" and len(samples) > 1:
        raise ConfigError(f"subject_strategy (--subject-strategy) topic registers one reply schema per "
                          f"reply topic, and models {', '.join(sorted(samples))} all reply to {reply_topic}: use "
                          "record or topic-record (a subject per model)")
    client = client or RegistryClient.from_formats(formats)
    schema_type = codecs.SCHEMA_TYPES[reply_format]
    schemas: dict[str, tuple[int, Writer]] = {}
    for name, outputs in samples.items():
        made = reply_schema(reply_format, name, outputs)
        where = subject(formats.subject_strategy, reply_topic, made.record_name)
        schema_id = (client.register(where, schema_type, made.text) if formats.reply_schema_mode == "register"
                     else client.lookup(where, schema_type, made.text))
        schemas[name] = (schema_id, codecs.writer(reply_format, made.text))
    return FramedReplies(reply_format, schemas, default)
