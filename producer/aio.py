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
    """The ScoringClient for asyncio code: ``async with AsyncScoringClient(...) as client:``.

    Or call ``await open()`` and ``await close()``. Use it from one event loop. It wraps a ScoringClient, whose
    reply-reader thread resolves the requests; opening and closing, which block on the broker, run in a worker
    thread. Constructing it does not connect: ``open()`` does.

    Args:
        bootstrap_servers: Kafka brokers, ``host:port[,host:port...]``.
        requests_topic: The topic the worker consumes requests from. It must exist.
        reply_topic: The topic replies are read from (None: ``<requests_topic>.replies``). It must exist.
        timeout_s: How long a request waits for its reply in all, its resends included.
        retries: How many times a request is sent again, with the same id, when no reply came.
        security: How to reach a secured cluster (TLS, SASL).
        read_committed: Read only replies of committed transactions (workers in ``--delivery exactly-once``).
        kafka_client: The client library: ``kafka-python`` or ``confluent``.
        connect_timeout_s: How long ``open()`` waits for a broker that takes the connection but does not answer.
        formats: How requests are written, and replies read (see ScoringClient).
        request_schema: With a registry format, the request schema's text (see ScoringClient).
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
        """Connect and position the reply reader, as ScoringClient's constructor does. Does nothing when open.

        Returns:
            This client.

        Raises:
            LookupError: The requests topic or the reply topic does not exist.
            ServiceUnavailable: No broker answered (within ``connect_timeout_s``).
            ConfigError: The client library or the security settings were refused (see ScoringClient).
        """
        if self._client is None:
            self._client = await asyncio.to_thread(ScoringClient, *self._args, **self._options)
        return self

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Cancel what is still waiting and close the Kafka clients, within about ``timeout_s``.

        The client may be opened again afterwards.

        Args:
            timeout_s: How long to wait in all (see ``ScoringClient.close``).

        Returns:
            How many requests were not sent; 0 when the client was not open.
        """
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
        """The underlying thread-based client (``in_flight``, ``late_replies``, ``abandon``).

        Raises:
            RuntimeError: The client is not open.
        """
        if self._client is None:
            raise RuntimeError("the client is not open: use `async with` or `await client.open()`")
        return self._client

    def submit(self, inputs: Any, request_id: str | None = None, deadline_ms: int | None = None,
               timeout_s: float | None = None, *, model: str | None = None,
               model_version: str | None = None) -> asyncio.Future[Reply]:
        """Send a request without waiting for its reply; returns at once (see ``ScoringClient.submit``).

        Cancelling the future (``task.cancel()``, ``asyncio.wait_for``) forgets the request: the same id can be
        sent again, and a late reply to it is dropped.

        Args:
            inputs: The request's ``inputs``: whatever JSON value the served model takes.
            request_id: The request id (None: a fresh one). Reuse an id to retry safely.
            deadline_ms: Epoch milliseconds after which the worker answers ``expired`` instead of scoring.
            timeout_s: The whole wait for the reply, resends included (None: the client's ``timeout_s``).
            model: The served model to answer it (None: the worker's default, or its requests topic's).
            model_version: One version of ``model`` (None: the model's canary split picks by the id).

        Returns:
            An asyncio future of the reply (a dict); it raises ReplyTimeout or the send's error.

        Raises:
            RuntimeError: The client is not open, or its reply reader failed.
        """
        return asyncio.wrap_future(self.sync.submit(inputs, request_id, deadline_ms, timeout_s, model=model,
                                                    model_version=model_version))

    async def score(self, inputs: Any, request_id: str | None = None, timeout_s: float | None = None,
                    deadline_ms: int | None = None, *, model: str | None = None,
                    model_version: str | None = None) -> Reply:
        """Send a request and await its reply.

        Args:
            inputs: The request's ``inputs``: whatever JSON value the served model takes.
            request_id: The request id (None: a fresh one). Reuse an id to retry safely.
            timeout_s: The whole wait for the reply, resends included (None: the client's ``timeout_s``).
            deadline_ms: Epoch milliseconds after which the worker answers ``expired`` instead of scoring.
            model: The served model to answer it (see ``submit``).
            model_version: One version of ``model`` (see ``submit``).

        Returns:
            The reply as a dict (the wire contract's reply).

        Raises:
            ReplyTimeout: No reply came, or the request could not be sent, within the timeout.
            RuntimeError: The client is not open, or its reply reader failed.
            Exception: The send's error (kafka-python's ``KafkaError``, confluent-kafka's ``KafkaException``).
        """
        return await self.submit(inputs, request_id or new_request_id(), deadline_ms, timeout_s, model=model,
                                 model_version=model_version)

    async def score_many(self, items: Iterable[Any] | AsyncIterable[Any], *, max_in_flight: int = 1000,
                         timeout_s: float | None = None) -> AsyncIterator[ScoreResult]:
        """Score every item, yielding results in the order replies come (see ``ScoringClient.score_many``).

        A timeout or failure is a result with ``error`` set, never an exception. Stopping the iteration early
        abandons the requests still waiting.

        Args:
            items: Each request's ``inputs``, or a ClientRequest; a plain or an async iterable, read lazily.
            max_in_flight: How many requests may wait for their replies at once.
            timeout_s: Each request's whole wait (None: the client's ``timeout_s``).

        Yields:
            One ScoreResult per item; its ``index`` is the item's position in ``items``.

        Raises:
            ValueError: ``max_in_flight`` is below 1.
            RuntimeError: The client is not open, or its reply reader failed.
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
