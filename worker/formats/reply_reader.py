"""Reading reply values on the client side: the wire contract's JSON, or registry-framed in any format.

A JSON reply starts with ``{``; a registry-framed one (a worker run with
``--reply-format``) with the magic byte 0. ``ReplyReader`` tells them apart by
that byte, so that a client reads either without being told which: the
framed ones by their schema id, fetched from the registry once and cached,
whatever the schema's type (Avro, Protobuf, JSON Schema). A decoded reply has
the JSON reply's shape: ``outputs`` and ``error`` only where set. For one
thread.
"""

from __future__ import annotations

from typing import Any

from worker.core.formats import Formats
from worker.core.framing import MAGIC, read_frame
from worker.core.wire import decode_reply
from worker.formats.registry_client import RegistryClient
from worker.formats.schemas import RegistrySchemas


class ReplyReader:
    def __init__(self, client: RegistryClient | None, cache_size: int = 1000) -> None:
        """``client``: the registry framed replies' schemas are fetched from (None: JSON replies only)."""
        self._schemas = RegistrySchemas(client, None, cache_size) if client is not None else None

    @classmethod
    def from_formats(cls, formats: Formats) -> ReplyReader:
        """Reads framed replies when the settings name a registry."""
        client = RegistryClient.from_formats(formats) if formats.registry_url else None
        return cls(client, formats.registry_cache_size)

    def __call__(self, value: bytes) -> dict[str, Any]:
        """The reply as a dict. Raises ValueError for a value that is neither (or framed with no registry to
        read it), and RegistryUnavailable, SchemaNotFound, SchemaRefused for a schema that cannot be had."""
        if value[:1] != bytes((MAGIC,)):
            return decode_reply(value)
        if self._schemas is None:
            raise ValueError("the reply is registry-framed (magic byte 0): set SCHEMA_REGISTRY_URL "
                             "(--schema-registry-url) to read it")
        schema_id, payload = read_frame(value)
        body = self._schemas.reader(schema_id)(payload)
        if not isinstance(body, dict):
            raise ValueError(f"schema {schema_id} gives a {type(body).__name__}, a reply is a record")
        for key in ("outputs", "error"):
            if body.get(key) is None:
                body.pop(key, None)
        return body
