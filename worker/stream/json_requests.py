"""Requests in the wire contract's JSON: each record decided as it comes, none ever held."""

from __future__ import annotations

from collections.abc import Sequence

from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.routes import Routes
from worker.core.wire import decode_request
from worker.ports import Decoded


class JsonRequests:
    """Decodes JSON request records against the served models' ``routes``; values over ``max_record_bytes``
    are refused unread."""

    blocked = False  # nothing to wait for: every record is decided at once
    waiting = 0

    def __init__(self, routes: Routes, max_record_bytes: int) -> None:
        self._routes = routes
        self._max_record_bytes = max_record_bytes

    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        return [(record, decode_request(record, self._routes, self._max_record_bytes)) for record in records]

    def drop(self, partitions: set[TP]) -> int:
        return 0
