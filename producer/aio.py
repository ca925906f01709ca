"""``AsyncScoringClient``: the ScoringClient for asyncio code.

It wraps a thread-based ScoringClient (one producer, one reply-reader thread):
replies resolve concurrent futures on that thread, and asyncio awaits them
through ``asyncio.wrap_future``. Opening and closing, which block on the
broker, run in a worker thread; ``submit`` returns at once: it blocks the
event loop only while the producer's send buffer is full (or kafka-python
lost the requests topic's metadata), and never past the request's timeout.
Cancelling an awaited request (``task.cancel()``, ``asyncio.wait_for``)
cancels its concurrent future, which forgets the request: the same id can be
sent again, and a late reply for it is dropped and counted
(``sync.late_replies``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

from producer.client import (
    CONNECT_TIMEOUT_S,
    ClientRequest,
    Outstanding,
    Reply,
    ReplyTimeout,
    ScoreResult,
    ScoringClient,
)
from producer.transport import CLOSE_TIMEOUT_S
from worker.core.formats import JSON as JSON_REQUESTS
from worker.core.formats import Formats
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.core.wire import new_request_id

__all__ = ["AsyncScoringClient", "ClientRequest", "ReplyTimeout", "ScoreResult"]


class AsyncScoringClient:
    """Use as ``async with AsyncScoringClient(...) as client:``, or ``await open()`` / ``await close()``.

    Takes the same arguments as ScoringClient (``kafka_client``, ``connect_timeout_s``, ``formats`` and
    ``request_schema`` too). Use from one event loop.
    """

    def __init__(self, bootstrap_servers: str, requests_topic: str, reply_topic: str | None = None, *,
                 timeout_s: float = 30.0, retries: int = 2, security: KafkaSecurity = PLAINTEXT,
                 read_committed: bool = False, kafka_client: str = "kafka-python",
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, formats: Formats = JSON_REQUESTS,
                 request_schema: str | None = None) -> None:
        self._args = (bootstrap_servers, requests_topic, reply_topic)
        self._options: dict[str, Any] = {"timeout_s": timeout_s, "retries": retries, "security": security,
                                         "read_committed": read_committed, "kafka_client": kafka_client,
                                         "connect_timeout_s": connect_timeout_s, "formats": formats,
                                         "request_schema": request_schema}
        self._client: ScoringClient | None = None

    async def open(self) -> AsyncScoringClient:
        """Connect and position the reply reader, as ScoringClient's constructor does: raises LookupError if a
        topic does not exist, ServiceUnavailable when no broker answers (within ``connect_timeout_s``)."""
        if self._client is None:
            self._client = await asyncio.to_thread(ScoringClient, *self._args, **self._options)
        return self

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Cancel what is still waiting and close the Kafka clients, within about ``timeout_s``; returns how
        many requests were not sent (see ScoringClient.close)."""
        if self._client is None:
            return 0
        client, self._client = self._client, None
        return await asyncio.to_thread(client.close, timeout_s)

    async def __aenter__(self) -> AsyncScoringClient:
        return await self.open()

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    @property
    def sync(self) -> ScoringClient:
        """The underlying thread-based client. Raises RuntimeError before ``open()``."""
        if self._client is None:
            raise RuntimeError("the client is not open: use `async with` or `await client.open()`")
        return self._client

    def submit(self, inputs: Any, request_id: str | None = None, deadline_ms: int | None = None,
               timeout_s: float | None = None, *, model: str | None = None,
               model_version: str | None = None) -> asyncio.Future[Reply]:
        """Send a request; the asyncio future resolves to its reply or raises ReplyTimeout or the send's error.
        ``model`` and ``model_version`` say which served model answers (see ScoringClient.submit)."""
        return asyncio.wrap_future(self.sync.submit(inputs, request_id, deadline_ms, timeout_s, model=model,
                                                    model_version=model_version))

    async def score(self, inputs: Any, request_id: str | None = None, timeout_s: float | None = None,
                    deadline_ms: int | None = None, *, model: str | None = None,
                    model_version: str | None = None) -> Reply:
        """Send a request and await its reply. Raises ReplyTimeout (at the timeout, with no reply or when the
        request could not be sent), or the send's error."""
        return await self.submit(inputs, request_id or new_request_id(), deadline_ms, timeout_s, model=model,
                                 model_version=model_version)

    async def score_many(self, items: Iterable[Any] | AsyncIterable[Any], *, max_in_flight: int = 1000,
                         timeout_s: float | None = None) -> AsyncIterator[ScoreResult]:
        """Score every item (inputs, or a ClientRequest), yielding results as replies come.

        Like ScoringClient.score_many: at most ``max_in_flight`` wait at once,
        and a timeout or failure is a result with ``error`` set.
        """
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        loop = asyncio.get_running_loop()
        done: asyncio.Queue[ScoreResult] = asyncio.Queue()

        def on_done(result: ScoreResult) -> None:  # runs on the client's threads
            loop.call_soon_threadsafe(done.put_nowait, result)

        waiting = Outstanding()
        index = 0
        try:
            async for item in _aiter(items):
                if waiting.count >= max_in_flight:
                    yield waiting.taken(await done.get())
                waiting.add(self.sync._start_item(index, item, on_done, timeout_s))
                index += 1
            while waiting.count:
                yield waiting.taken(await done.get())
        finally:
            if self._client is not None:
                self._client.abandon(waiting.ids)  # the caller stopped early


async def _aiter(items: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item
