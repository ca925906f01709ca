"""Deduplication by request ID: claim before scoring, mark done after replying.

A claim stores the position (topic/partition/offset) of the record that made
it. Seeing the same position again is a retry of that record (a redelivery
after a crash or rebalance) and may be scored; a different record with an ID
that is claimed or done is a duplicate. The done mark keeps the reply for
``ttl_s``. One round trip per call, whatever the batch size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import redis

from worker.clock import Clock
from worker.messages import Request

Completed = tuple[str, bytes | None]  # request id, encoded reply (None: release the claim only)


class DedupStore(Protocol):
    def claim(self, requests: Sequence[Request]) -> list[bool]:
        """For each request, True to score it, False if it is a duplicate. Blocks on I/O.

        Raises redis.RedisError (or the store's equivalent) when unreachable;
        nothing is claimed for sure then, and the call may be repeated.
        """

    def complete(self, done: Sequence[Completed]) -> None:
        """Mark request ids as answered (keeping the reply) and release their claims.

        An entry whose reply is None only releases the claim (an error reply:
        a corrected retry with the same id is scored).
        """

    def close(self) -> None: ...


class RedisDedupStore:
    def __init__(self, url: str, namespace: str, ttl_s: int, lease_ms: int) -> None:
        self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._ns = namespace
        self._ttl_s = ttl_s
        self._lease_ms = lease_ms

    def ping(self) -> None:
        self._redis.ping()

    def claim(self, requests: Sequence[Request]) -> list[bool]:
        pipe = self._redis.pipeline(transaction=False)
        tokens = []
        for request in requests:
            token = request.position.token().encode()
            tokens.append(token)
            claim_key = f"{self._ns}:claim:{request.id}"
            pipe.exists(f"{self._ns}:done:{request.id}")
            pipe.set(claim_key, token, nx=True, px=self._lease_ms)
            # Read back the holder: a retried SET NX is ambiguous, the stored value is not.
            pipe.get(claim_key)
        results = pipe.execute()
        return [not results[3 * i] and results[3 * i + 2] == token for i, token in enumerate(tokens)]

    def complete(self, done: Sequence[Completed]) -> None:
        if not done:
            return
        pipe = self._redis.pipeline(transaction=False)
        for request_id, reply in done:
            if reply is not None:
                pipe.set(f"{self._ns}:done:{request_id}", reply, ex=self._ttl_s)
            pipe.delete(f"{self._ns}:claim:{request_id}")
        pipe.execute()

    def close(self) -> None:
        self._redis.close()


class InMemoryDedupStore:
    """The same semantics in one process's memory: for tests and a single local worker."""

    def __init__(self, clock: Clock, ttl_s: int = 86_400, lease_ms: int = 300_000) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._lease_s = lease_ms / 1000
        self._claims: dict[str, tuple[str, float]] = {}
        self._done: dict[str, tuple[bytes, float]] = {}

    def claim(self, requests: Sequence[Request]) -> list[bool]:
        now = self._clock.monotonic()
        verdicts = []
        for request in requests:
            token = request.position.token()
            done = self._done.get(request.id)
            if done is not None and done[1] > now:
                verdicts.append(False)
                continue
            holder = self._claims.get(request.id)
            if holder is None or holder[1] <= now:
                self._claims[request.id] = holder = (token, now + self._lease_s)
            verdicts.append(holder[0] == token)
        return verdicts

    def complete(self, done: Sequence[Completed]) -> None:
        expires = self._clock.monotonic() + self._ttl_s
        for request_id, reply in done:
            if reply is not None:
                self._done[request_id] = (reply, expires)
            self._claims.pop(request_id, None)

    def reply_for(self, request_id: str) -> bytes | None:
        entry = self._done.get(request_id)
        return entry[0] if entry else None

    def close(self) -> None:
        pass
