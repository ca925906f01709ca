"""Requests in the wire contract's JSON: each record decided as it comes, none ever held."""

from __future__ import annotations

from collections.abc import Sequence

from worker.core.messages import RawRecord, Request
from worker.core.offsets import TopicPartition as TP
from worker.core.routes import PlainReader, Route, Routes
from worker.core.wire import decode_request
from worker.ports import Decoded


class JsonRequests:
    """Decodes JSON request records against the served models' ``routes``: a plain one (no headers; a value of
    its id and inputs only) by its model's reader in one pass where the model has one, any other, and any the
    reader refuses, by the full path (``decode_request``, which answers each as it always has); values over
    ``max_record_bytes`` are refused unread."""

    blocked = False  # nothing to wait for: every record is decided at once
    waiting = 0

    def __init__(self, routes: Routes, max_record_bytes: int) -> None:
        self._routes = routes
        self._max_record_bytes = max_record_bytes

    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        """A poll's records in one loop, the reader of a run of records from one topic looked up once and called
        in place (a call and a lookup around each record's read took a fifth of a plain request's decoding)."""
        routes, limit = self._routes, self._max_record_bytes
        decoded: list[Decoded] = []
        topic: str | None = None
        reader: PlainReader | None = None
        route: Route | None = None
        for record in records:
            value = record.value
            if not record.headers and value is not None and len(value) <= limit:
                position = record.position
                if position.topic != topic:
                    topic = position.topic
                    plain = routes.plain(topic)
                    reader, route = plain if plain is not None else (None, None)
                if reader is not None:
                    try:
                        body = reader.decode(value)
                    except reader.refused:
                        pass
                    else:
                        request_id = body.id
                        decoded.append((record, Request(
                            request_id, body.inputs if reader.item is None else reader.item(body.inputs), position,
                            None, None, None, record.timestamp_ms, record.received_at,
                            route or routes.pick(topic, None, None, request_id))))
                        continue
            decoded.append((record, decode_request(record, routes, limit)))
        return decoded

    def drop(self, partitions: set[TP]) -> int:
        return 0
