"""Dedup in one process's memory, with the Redis store's semantics: for tests and a single local worker."""

from __future__ import annotations

from collections.abc import Sequence

from worker.core.clock import Clock
from worker.core.messages import Request
from worker.ports import BUSY, DUPLICATE, FRESH


class InMemoryDedupStore:
    """The same semantics in one process's memory: for tests and a single local worker."""

    def __init__(self, clock: Clock, ttl_s: int = 86_400, lease_ms: int = 300_000) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._lease_s = lease_ms / 1000
        self._claims: dict[str, tuple[str, float]] = {}
        self._done: dict[str, tuple[bytes, float]] = {}

    def claim(self, requests: Sequence[Request]) -> list[int]:
        now = self._clock.monotonic()
        verdicts = []
        for request in requests:
            token = request.position.token()
            done = self._done.get(request.id)
            if done is not None and done[1] > now:
                verdicts.append(DUPLICATE)
                continue
            holder = self._claims.get(request.id)
            if holder is None or holder[1] <= now:
                self._claims[request.id] = holder = (token, now + self._lease_s)
            verdicts.append(FRESH if holder[0] == token else BUSY)
        return verdicts

    def complete(self, ids: Sequence[str], replies: Sequence[bytes | None]) -> None:
        expires = self._clock.monotonic() + self._ttl_s
        for request_id, reply in zip(ids, replies, strict=True):
            if reply is not None:
                self._done[request_id] = (reply, expires)
            self._claims.pop(request_id, None)

    def reply_for(self, request_id: str) -> bytes | None:
        entry = self._done.get(request_id)
        return entry[0] if entry else None

    def close(self) -> None:
        pass
