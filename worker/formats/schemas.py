"""RegistrySchemas: the schema registry's schemas by id, as payload readers, in a bounded cache.

Implements worker.ports.SchemaResolver. A schema id names one schema for
good, so a cached reader never goes stale; the least recently used is dropped
past ``max_size``. A Protobuf schema's references (the files it imports) are fetched with it.
For the loop's thread only.
"""

from __future__ import annotations

from collections import OrderedDict

from worker.core.errors import SchemaRefused
from worker.core.formats import Formats
from worker.formats import codecs
from worker.formats.registry_client import Reference, RegistryClient
from worker.ports import PayloadReader

MAX_REFERENCES = 100


class RegistrySchemas:
    def __init__(self, client: RegistryClient, request_format: str | None, max_size: int) -> None:
        """``request_format``: the format every schema must be of (None: any; a reader of replies)."""
        self._client = client
        self._format = request_format
        self._max_size = max_size
        self._readers: OrderedDict[int | str, PayloadReader] = OrderedDict()

    @classmethod
    def from_formats(cls, formats: Formats, request_format: str) -> RegistrySchemas:
        """The schemas of ``request_format``'s records (one of the formats ``formats`` reads)."""
        return cls(RegistryClient.from_formats(formats), request_format, formats.registry_cache_size)

    def cached(self, schema_id: int | str) -> PayloadReader | None:
        found = self._readers.get(schema_id)
        if found is not None:
            self._readers.move_to_end(schema_id)
        return found

    def reader(self, schema_id: int | str) -> PayloadReader:
        found = self.cached(schema_id)
        if found is not None:
            return found
        # RegistryUnavailable, SchemaNotFound, ConfigError; a str is a GUID (from a __value_schema_id header)
        client = self._client
        schema = client.schema(schema_id) if isinstance(schema_id, int) else client.schema_by_guid(schema_id)
        references = self._references(schema.references, schema_id) if schema.references else None
        made = codecs.reader(self._format, schema.schema_type, schema.text, schema_id, references)  # SchemaRefused
        self._readers[schema_id] = made
        if len(self._readers) > self._max_size:
            self._readers.popitem(last=False)
        return made

    def _references(self, references: tuple[Reference, ...], schema_id: int | str) -> dict[str, str]:
        """The texts a schema imports, and those they import, by import name (bounded: a cycle is refused)."""
        texts: dict[str, str] = {}
        pending = list(references)
        while pending:
            ref = pending.pop()
            if ref.name in texts:
                continue
            if len(texts) >= MAX_REFERENCES:
                raise SchemaRefused(f"schema {schema_id} references more than {MAX_REFERENCES} schemas")
            found = self._client.version(ref.subject, ref.version)  # a missing one: SchemaNotFound
            texts[ref.name] = found.text
            pending.extend(found.references)
        return texts
