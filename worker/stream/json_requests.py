"""Requests in the wire contract's JSON: each record decided as it comes, none ever held."""

from __future__ import annotations

from collections.abc import Sequence

from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.routes import Routes
from worker.core.wire import decode_request, read_plain
from worker.ports import Decoded


class JsonRequests:
    """Decodes JSON request records against the served models' ``routes``: a plain one by its model's reader
    in one pass where the model has one, any other by the full path; values over ``max_record_bytes`` are
    refused unread."""

    blocked = False  # nothing to wait for: every record is decided at once
    waiting = 0

    def __init__(self, routes: Routes, max_record_bytes: int) -> None:
        self._routes = routes
        self._max_record_bytes = max_record_bytes

    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        routes, limit = self._routes, self._max_record_bytes
        return [(record, read_plain(record, routes, limit) or decode_request(record, routes, limit))
                for record in records]

    def drop(self, partitions: set[TP]) -> int:
        return 0
