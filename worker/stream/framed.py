"""Registry-framed requests: from polled records to requests and dead letters, without blocking on the registry.

Records are decoded a poll at a time: each distinct schema id is resolved once
(the resolver caches schemas by id), then each payload read with its schema's
reader and checked as the wire contract's JSON is (``request_from_body``).

What cannot be decoded becomes a dead letter with the schema id and the reason:
no frame and no ``__value_schema_id`` header (``not_framed``), a schema id the registry does not know after
``unknown_retries`` tries backing off from UNKNOWN_FIRST_BACKOFF_S
(``unknown_schema``), a schema of another format or unreadable
(``unusable_schema``), a payload that does not match its schema
(``invalid_payload``). A registry that does not answer holds the records
whose schema it would give, retried with a backoff while ``blocked`` tells the
loop to pause fetching (as the dedup gate does during a Redis outage):
nothing is lost and nothing dead-lettered for an outage. Time is passed in;
not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from worker.core.errors import RegistryUnavailable, SchemaNotFound, SchemaRefused
from worker.core.framing import SCHEMA_ID_HEADER, NotFramed, read_frame, read_header_id
from worker.core.messages import InvalidRecord, RawRecord, Request
from worker.core.offsets import TopicPartition as TP
from worker.core.routes import Routes
from worker.core.wire import (
    ERR_EMPTY_VALUE,
    ERR_INVALID_PAYLOAD,
    ERR_NOT_FRAMED,
    ERR_RECORD_TOO_LARGE,
    ERR_UNKNOWN_SCHEMA,
    ERR_UNUSABLE_SCHEMA,
    refuse,
    request_from_body,
)
from worker.ports import Decoded, PayloadReader, SchemaResolver

log = structlog.get_logger(__name__)

UNKNOWN_FIRST_BACKOFF_S = 0.5
OUTAGE_FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 5.0
FORGET_REFUSED_S = 60.0  # an id refused for good is asked again after this (it may have been registered since)
MESSAGE_CHARS = 300

class _Refusal:
    """Why the records of one schema id are dead-lettered, until ``until`` (then the id is asked again)."""

    __slots__ = ("code", "message", "until")

    def __init__(self, code: str, message: str, until: float) -> None:
        self.code, self.message, self.until = code, message, until


class FramedRequests:
    def __init__(self, resolver: SchemaResolver, routes: Routes, max_record_bytes: int,
                 field_names: dict[str, str], unknown_retries: int) -> None:
        """``routes``: which served model answers a request (and prepares its inputs); ``field_names``: request
        field -> the schema's name for it, for those it calls otherwise."""
        self._resolver = resolver
        self._routes = routes
        self._max_record_bytes = max_record_bytes
        self._renames = [(theirs, ours) for ours, theirs in field_names.items() if ours != theirs]
        self._unknown_retries = unknown_retries
        self._held: list[RawRecord] = []
        self._unknown: dict[int | str, tuple[int, float]] = {}  # schema id -> (tries so far, next try at)
        self._refused: dict[int | str, _Refusal] = {}
        self._outage_until = 0.0
        self._outage_backoff_s = OUTAGE_FIRST_BACKOFF_S
        self.outage_failures = 0  # registry calls failed in a row
        self.failed_calls = 0

    @property
    def blocked(self) -> bool:
        """Records wait for a registry that did not answer: stop fetching more."""
        return bool(self._held) and self.outage_failures > 0

    @property
    def waiting(self) -> int:
        """Records held until their schema can be had."""
        return len(self._held)

    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        """Decode ``records`` and those held before; returns what was decided now, holds the rest.
        May block on the registry, up to its timeout once per schema id not cached."""
        pending = self._held + list(records) if self._held else list(records)
        self._held = []
        out: list[Decoded] = []
        framed: list[tuple[RawRecord, int | str, memoryview]] = []
        for record in pending:
            value = record.value
            if value is None:
                out.append((record, refuse(record, ERR_EMPTY_VALUE, "the record has no value (tombstone)")))
            elif len(value) > self._max_record_bytes:
                out.append((record, refuse(record, ERR_RECORD_TOO_LARGE, f"record value is {len(value)} bytes, "
                                           f"the limit is {self._max_record_bytes}")))
            else:
                try:
                    header = _schema_header(record.headers)
                    schema_id, payload = read_frame(value) if header is None else read_header_id(header, value)
                except NotFramed as exc:
                    out.append((record, refuse(record, ERR_NOT_FRAMED, str(exc), dead_letter=True)))
                    continue
                framed.append((record, schema_id, payload))
        readers: dict[int | str, PayloadReader | _Refusal | None] = {}
        for record, schema_id, payload in framed:
            if schema_id not in readers:
                readers[schema_id] = self._reader(schema_id, now)
            reader = readers[schema_id]
            if reader is None:
                self._held.append(record)
            elif isinstance(reader, _Refusal):
                out.append((record, refuse(record, reader.code, reader.message, dead_letter=True,
                                           schema_id=schema_id)))
            else:
                out.append((record, self._request(record, schema_id, reader, payload)))
        return out

    def drop(self, partitions: set[TP]) -> int:
        """Forget held records of partitions we no longer own; returns how many."""
        kept = [r for r in self._held if (r.position.topic, r.position.partition) not in partitions]
        dropped = len(self._held) - len(kept)
        self._held = kept
        return dropped

    def _request(self, record: RawRecord, schema_id: int | str, reader: PayloadReader,
                 payload: memoryview) -> Request | InvalidRecord:
        try:
            body = reader(payload)
        except Exception as exc:  # the reader's library says why in its own exception types
            return refuse(record, ERR_INVALID_PAYLOAD, _why(f"the payload does not match schema {schema_id}", exc),
                          dead_letter=True, schema_id=schema_id)
        if not isinstance(body, dict):
            return refuse(record, ERR_INVALID_PAYLOAD, f"schema {schema_id} gives a {type(body).__name__}, "
                          "a request must be a record (an object)", dead_letter=True, schema_id=schema_id)
        for theirs, ours in self._renames:
            if theirs in body:
                body[ours] = body.pop(theirs)
        return request_from_body(record, {k: v for k, v in body.items() if v is not None}, self._routes)

    def _reader(self, schema_id: int | str, now: float) -> PayloadReader | _Refusal | None:
        """The schema's reader, a refusal, or None: ask again later (an outage, or an id not found yet)."""
        cached = self._resolver.cached(schema_id)
        if cached is not None:
            return cached
        refusal = self._refused.get(schema_id)
        if refusal is not None and now < refusal.until:
            return refusal
        tries, retry_at = self._unknown.get(schema_id, (0, 0.0))
        if now < retry_at or now < self._outage_until:
            return None
        try:
            reader = self._resolver.reader(schema_id)
        except RegistryUnavailable as exc:
            self._outage(exc, now)
            return None
        except SchemaNotFound as exc:
            self._registry_answered()
            if tries >= self._unknown_retries:
                self._unknown.pop(schema_id, None)
                return self._refuse(schema_id, ERR_UNKNOWN_SCHEMA,
                                    f"schema id {schema_id} is not in the registry ({tries + 1} tries): {exc}", now)
            backoff_s = min(UNKNOWN_FIRST_BACKOFF_S * 2 ** tries, MAX_BACKOFF_S)
            self._unknown[schema_id] = (tries + 1, now + backoff_s)
            log.info("schema_not_found", schema_id=schema_id, tries=tries + 1, retry_in_s=backoff_s)
            return None
        except SchemaRefused as exc:
            self._registry_answered()
            return self._refuse(schema_id, ERR_UNUSABLE_SCHEMA, str(exc), now)
        self._registry_answered()
        self._unknown.pop(schema_id, None)
        self._refused.pop(schema_id, None)
        return reader

    def _refuse(self, schema_id: int | str, code: str, message: str, now: float) -> _Refusal:
        refusal = _Refusal(code, message[:MESSAGE_CHARS], now + FORGET_REFUSED_S)
        self._refused[schema_id] = refusal
        log.warning("schema_refused", schema_id=schema_id, code=code, reason=refusal.message)
        return refusal

    def _outage(self, exc: Exception, now: float) -> None:
        self.outage_failures += 1
        self.failed_calls += 1
        self._outage_until = now + self._outage_backoff_s
        log.warning("schema_registry_failed", error=str(exc), retry_in_s=self._outage_backoff_s)
        self._outage_backoff_s = min(self._outage_backoff_s * 2, MAX_BACKOFF_S)

    def _registry_answered(self) -> None:
        if self.outage_failures:
            log.info("schema_registry_recovered", after_failures=self.outage_failures)
        self.outage_failures = 0
        self._outage_backoff_s = OUTAGE_FIRST_BACKOFF_S
        self._outage_until = 0.0


def _schema_header(headers: list[tuple[str, bytes | None]]) -> bytes | None:
    for name, value in headers:
        if name == SCHEMA_ID_HEADER:
            return value
    return None


def _why(what: str, exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{what}: {type(exc).__name__}: {text}"[:MESSAGE_CHARS]
