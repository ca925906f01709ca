"""``ScoringClient``: send requests, get their replies back.

One client owns one producer and one reply consumer, on kafka-python or on
confluent-kafka (``kafka_client``; producer/transport.py). The consumer reads
every partition of the reply topic from its end (no consumer group) on a
background thread and hands each reply to the future waiting for its id;
replies for ids this client is not waiting for are skipped unread, so many
clients may share a reply topic. Requests name the client's reply topic
(``reply_to``), so a client may have one of its own (say
``requests.replies.billing``), which saves it the skipping.

The same thread resends requests that got no reply in time (same id: the
worker's dedup makes that safe) and fails the ones out of retries with
ReplyTimeout, so every future resolves: with the reply, ReplyTimeout, the
send's error (kafka-python's KafkaError, confluent-kafka's KafkaException), or
cancellation at ``close()``.

Every wait is bounded by the request's timeout, the broker away or not: a
send that cannot be queued in that time (kafka-python without the topic's
metadata, librdkafka's queue full) fails the request with ReplyTimeout, and
resends never wait. A request given up on (cancelled, timed out, abandoned,
failed) leaves the in-flight table at once (producer/inflight.py): its id
can be sent again, and a reply that comes for it later is dropped and
counted (``late_replies``).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from producer.inflight import InFlight, Pending
from producer.ports import Headers
from producer.tracing import ClientTracing
from producer.transport import CLOSE_TIMEOUT_S, PublishTimeout, open_publisher, open_reply_reader
from worker.core.errors import ServiceUnavailable, WorkerError
from worker.core.formats import JSON as JSON_REQUESTS
from worker.core.formats import Formats
from worker.core.kafka_properties import KafkaProperties
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.core.settings import check_kafka_client
from worker.core.wire import new_request_id
from worker.formats.reply_reader import ReplyReader
from worker.formats.requests import request_encoder
from worker.kafka.preflight import check_kafka

log = structlog.get_logger(__name__)

Reply = dict[str, Any]

CONNECT_TIMEOUT_S = 10.0
POLL_S = 0.1  # the reply reader's wait for replies, between checks for resends and timeouts
RESULT_MARGIN_S = 1.0  # score() waits this much past the timeout for the reader to fail the request


class ReplyTimeout(TimeoutError):
    """No reply arrived in time, or the request could not be sent in time.

    The request may still be scored; retrying with the same id is safe (the worker scores an id once). A
    ``TimeoutError``, so ``except TimeoutError`` catches it too.
    """


@dataclass(frozen=True)
class ClientRequest:
    """An item of ``score_many`` with more than inputs: its own id, a deadline, or the model to answer it.

    Plain inputs given to ``score_many`` are the same as ``ClientRequest(inputs)``.

    Attributes:
        inputs: The request's ``inputs``: whatever JSON value the served model takes.
        id: The request id (None: a fresh one). Give your own to retry safely: the worker scores an id once.
        deadline_ms: Wall-clock time in epoch milliseconds after which the worker answers ``expired`` instead of
            scoring (None: no deadline).
        model: The served model to answer it (None: the worker's default, or its requests topic's).
        model_version: One version of ``model`` (None: the model's canary split, if it has one, picks by the id).
    """

    inputs: Any
    id: str | None = None
    deadline_ms: int | None = None
    model: str | None = None
    model_version: str | None = None


@dataclass(frozen=True)
class ScoreResult:
    """One outcome of ``score_many``: a reply, or the error that ended the request.

    Attributes:
        index: The item's position in the input of ``score_many``, from 0.
        request_id: The id the request was sent with.
        reply: The reply as a dict (the wire contract's reply: ``id``, ``status``, ``outputs`` or ``error``,
            ...); None when ``error`` is set. An error reply (``status`` ``error`` or ``expired``) is a reply,
            not an ``error``.
        error: Why no reply came: ReplyTimeout, the send's error, or ``concurrent.futures.CancelledError``
            when the request was abandoned or the client closed; None when ``reply`` is set.
    """

    index: int
    request_id: str
    reply: Reply | None  # None when ``error`` is set
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """True when a reply came and its ``status`` is ``ok``."""
        return self.reply is not None and self.reply.get("status") == "ok"


class ScoringClient:
    """Sends scoring requests to a requests topic and hands back their replies. Thread-safe.

    Use as a context manager, or call ``close()``. One client owns one producer and one reply consumer; the
    consumer reads every partition of the reply topic from its end on a background thread, without a consumer
    group, and skips the replies to ids this client did not send, so several clients may share a reply topic.
    A request with no reply after a share of ``timeout_s`` is sent again with the same id.

    The constructor blocks: it first checks that one broker takes the connection and the credentials, then
    fetches the requests topic's metadata for the producer, then waits until the reply consumer is positioned
    at the end of the reply topic, so that no reply to a request sent afterwards is missed.

    Args:
        bootstrap_servers: Kafka brokers, ``host:port[,host:port...]``.
        requests_topic: The topic the worker consumes requests from. It must exist.
        reply_topic: The topic replies are read from, named in each request (``reply_to``); None: the worker's
            default, ``<requests_topic>.replies``. It must exist.
        timeout_s: How long a request waits for its reply in all, its resends included.
        retries: How many times a request is sent again, with the same id, within ``timeout_s`` when no reply
            came.
        security: How to reach a secured cluster (TLS, SASL); ``KafkaSecurity.from_sources()`` reads the
            conventional ``KAFKA_SECURITY_*``, ``KAFKA_SASL_*`` and ``KAFKA_SSL_*`` variables.
        read_committed: Read only replies of committed transactions. Set it when the workers run
            ``--delivery exactly-once``, so that a reply of an aborted transaction (which the worker sends
            again) is never taken for the answer.
        kafka_client: The client library: ``kafka-python``, or ``confluent`` (confluent-kafka, the
            ``confluent`` extra: far less CPU per request). The connection check is kafka-python's on either.
        connect_timeout_s: How long the constructor waits for a broker that takes the connection but does not
            answer, or for the requests topic's metadata.
        formats: How requests are written: the wire contract's JSON by default; ``Formats.from_sources()``
            reads ``STREAMSCORE_REQUEST_FORMAT`` and the ``SCHEMA_REGISTRY_*`` variables for registry-framed
            Avro, Protobuf or JSON Schema requests. Replies are read as they come: JSON, or registry-framed
            when ``formats`` names a registry (a worker run with ``--reply-format``).
        request_schema: With a registry format, the request schema's text, registered under
            ``<requests_topic>-value`` at construction (None: worker/formats/requests.py's default schema).
        properties: Kafka client properties by Java name for the producer of requests and the reader of
            replies (``KafkaProperties`` of worker/core/kafka_properties.py).

    Raises:
        ValueError: ``timeout_s`` or ``connect_timeout_s`` is not above 0, or ``retries`` is below 0.
        ConfigError: ``kafka_client`` is unknown or not installed, a property is refused, or the broker
            refused the connection's security settings or credentials (the message says what was refused).
        LookupError: The requests topic or the reply topic does not exist.
        ServiceUnavailable: No broker answered: at once when the connection is refused, after
            ``connect_timeout_s`` when a broker takes it but does not answer or the producer gets no metadata
            for the requests topic.
        WorkerError: With a registry format, what registering the request schema raises (SchemaRefused,
            RegistryUnavailable, ...).

    Attributes:
        requests_topic: The topic requests are sent to.
        reply_topic: The topic replies are read from.
        timeout_s: The default whole wait of a request, resends included.
        retries: The default number of resends of a request.
    """

    def __init__(self, bootstrap_servers: str, requests_topic: str, reply_topic: str | None = None, *,
                 timeout_s: float = 30.0, retries: int = 2, security: KafkaSecurity = PLAINTEXT,
                 read_committed: bool = False, kafka_client: str = "kafka-python",
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, formats: Formats = JSON_REQUESTS,
                 request_schema: str | None = None, properties: KafkaProperties = KafkaProperties()) -> None:
        if timeout_s <= 0 or retries < 0 or connect_timeout_s <= 0:
            raise ValueError(f"need timeout_s > 0, retries >= 0 and connect_timeout_s > 0, got {timeout_s}, "
                             f"{retries} and {connect_timeout_s}")
        check_kafka_client(kafka_client)
        check_kafka(bootstrap_servers, security, timeout_s=connect_timeout_s)
        self._encode = request_encoder(formats, requests_topic, request_schema)
        self._read_reply = ReplyReader.from_formats(formats)
        self.requests_topic = requests_topic
        self.reply_topic = reply_topic or f"{requests_topic}.replies"
        self._tracing = ClientTracing(self.requests_topic, self.reply_topic)
        self.timeout_s = timeout_s
        self.retries = retries
        self._inflight: InFlight[Future[Reply]] = InFlight()
        self._lock = threading.Lock()
        self._closing = threading.Event()  # tells the reader to stop
        self._closed = False
        self._reader_error: BaseException | None = None
        properties.check(kafka_client)
        self._replies = open_reply_reader(kafka_client, bootstrap_servers, security, read_committed=read_committed,
                                          properties=properties)
        try:
            self._publisher = open_publisher(kafka_client, bootstrap_servers, security, linger_ms=5,
                                             properties=properties)
        except BaseException:
            self._replies.close()
            raise
        try:
            if not self._replies.partitions(requests_topic):
                raise LookupError(f"requests topic {requests_topic!r} does not exist; create it first")
            self._prepare_publisher(connect_timeout_s)
            self._follow_reply_topic()
        except BaseException:
            self._shut_down()
            raise
        self._reader = threading.Thread(target=self._read_replies, name="reply-reader", daemon=True)
        self._reader.start()

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered, timed out, cancelled or failed."""
        with self._lock:
            return len(self._inflight)

    @property
    def late_replies(self) -> int:
        """Replies that came for requests given up on (timed out, cancelled, abandoned), dropped."""
        with self._lock:
            return self._inflight.late_replies

    def submit(self, inputs: Any, request_id: str | None = None, deadline_ms: int | None = None,
               timeout_s: float | None = None, *, model: str | None = None,
               model_version: str | None = None) -> Future[Reply]:
        """Send a request without waiting for its reply (and without a flush).

        Submitting an id that is in flight sends it again and returns the same
        future; one given up on (its future cancelled, say) is a new request.
        Blocks, at most for the timeout, only while the producer's buffer is
        full or kafka-python has no metadata for the requests topic (fetched at
        construction). Cancelling the future forgets the request: a reply that
        comes for it later is dropped and counted in ``late_replies``.

        Args:
            inputs: The request's ``inputs``: whatever JSON value the served model takes.
            request_id: The request id (None: a fresh one). Reuse an id to retry safely.
            deadline_ms: Epoch milliseconds after which the worker answers ``expired`` instead of scoring
                (None: no deadline).
            timeout_s: The whole wait for the reply, resends included (None: the client's ``timeout_s``).
            model: The served model to answer it (None: the worker's default, or its requests topic's). A model
                the worker does not serve is answered with an error reply, code ``unknown_model``, listing
                those it serves.
            model_version: One version of ``model`` (None: the model's canary split, if it has one, picks by the
                id). The reply's ``model`` and ``model_version`` say which answered.

        Returns:
            A ``concurrent.futures.Future`` of the reply (a dict). It raises ReplyTimeout when no reply came
                within the timeout or the request could not be sent in that time, or the error of a failed send
                (kafka-python's ``KafkaError``, confluent-kafka's ``KafkaException``).

        Raises:
            RuntimeError: The client is closed, or its reply reader failed.
            Exception: A send refused at once (a record too large), as the Kafka client raised it.
        """
        if self._closing.is_set():
            raise RuntimeError(f"the client is closed{self._why_closed()}")
        request_id = request_id or new_request_id()
        timeout_s = timeout_s or self.timeout_s
        value = self._encode(inputs, request_id, self.reply_topic, deadline_ms, model, model_version)
        with self._lock:
            now = time.monotonic()
            pending = self._inflight.get(request_id)
            if pending is not None and pending.waiter.done():  # cancelled on another thread, not yet forgotten
                self._inflight.forget(request_id, pending.waiter, now)
                pending = None
            if pending is None:
                future: Future[Reply] = Future()
                end_send, headers = self._tracing.send(request_id)
                self._inflight.add(request_id, future, value, now, timeout_s, self.retries, headers)
                gives_up_at = now + timeout_s
            else:
                future, gives_up_at, end_send, headers = pending.waiter, pending.gives_up_at, _sent, pending.headers
        if pending is None:
            future.add_done_callback(partial(self._forget_if_cancelled, request_id))
        self._send_first(request_id, value, future, gives_up_at - now, is_new=pending is None, headers=headers,
                         sent=end_send)
        return future

    def score(self, inputs: Any, request_id: str | None = None, timeout_s: float | None = None,
              deadline_ms: int | None = None, *, model: str | None = None,
              model_version: str | None = None) -> Reply:
        """Send a request and block for its reply, at most ``timeout_s`` and a fraction of a second.

        Args:
            inputs: The request's ``inputs``: whatever JSON value the served model takes.
            request_id: The request id (None: a fresh one). Reuse an id to retry safely.
            timeout_s: The whole wait for the reply, resends included (None: the client's ``timeout_s``).
            deadline_ms: Epoch milliseconds after which the worker answers ``expired`` instead of scoring
                (None: no deadline).
            model: The served model to answer it (see ``submit``).
            model_version: One version of ``model`` (see ``submit``).

        Returns:
            The reply as a dict: ``status`` ``ok`` with ``outputs``, or an error reply (``error``, ``expired``)
                with ``error.code``; the wire contract's reply.

        Raises:
            ReplyTimeout: No reply came, or the request could not be sent, within the timeout.
            RuntimeError: The client is closed, or its reply reader failed.
            Exception: The send's error (kafka-python's ``KafkaError``, confluent-kafka's ``KafkaException``).
        """
        timeout_s = timeout_s or self.timeout_s
        request_id = request_id or new_request_id()
        started = time.monotonic()
        future = self.submit(inputs, request_id, deadline_ms, timeout_s, model=model, model_version=model_version)
        try:  # the reader gives up at the timeout; this is a backstop
            return future.result(timeout=max(started + timeout_s + RESULT_MARGIN_S - time.monotonic(), 0.0))
        except ReplyTimeout:  # a TimeoutError, as FutureTimeout is since Python 3.11
            raise
        except FutureTimeout:
            future.cancel()
            raise ReplyTimeout(f"no reply for request {request_id} within {timeout_s:g} s") from None

    def score_many(self, items: Iterable[Any], *, max_in_flight: int = 1000,
                   timeout_s: float | None = None) -> Iterator[ScoreResult]:
        """Score every item, yielding results in the order replies come.

        ``items`` is read lazily, only as fast as replies come. A timeout or
        failure is a result with ``error`` set, never an exception, so one bad
        request does not end the stream. Stopping the iteration early abandons
        the requests still waiting (no more resends).

        Args:
            items: Each request's ``inputs``, or a ClientRequest for one with its own id, deadline or model.
            max_in_flight: How many requests may wait for their replies at once.
            timeout_s: Each request's whole wait (None: the client's ``timeout_s``).

        Yields:
            One ScoreResult per item; its ``index`` is the item's position in ``items``.

        Raises:
            ValueError: ``max_in_flight`` is below 1.
            RuntimeError: The client is closed, or its reply reader failed.
        """
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        done: queue.SimpleQueue[ScoreResult] = queue.SimpleQueue()
        waiting = Outstanding()
        try:
            for index, item in enumerate(items):
                if waiting.count >= max_in_flight:
                    yield waiting.taken(done.get())
                waiting.add(self._start_item(index, item, done.put, timeout_s))
            while waiting.count:
                yield waiting.taken(done.get())
        finally:
            self.abandon(waiting.ids)  # the caller stopped early: no resends for what it no longer wants

    def _start_item(self, index: int, item: Any, on_done: Callable[[ScoreResult], None],
                    timeout_s: float | None = None) -> str:
        """Submit one ``score_many`` item; ``on_done`` gets its result (on a client thread). Returns its id."""
        request = item if isinstance(item, ClientRequest) else ClientRequest(item)
        request_id = request.id or new_request_id()
        future = self.submit(request.inputs, request_id, request.deadline_ms, timeout_s, model=request.model,
                             model_version=request.model_version)
        future.add_done_callback(lambda f: on_done(_result(index, request_id, f)))
        return request_id

    def abandon(self, request_ids: Iterable[str]) -> None:
        """Stop waiting for these requests (no more resends) and cancel their futures, which forgets them.

        Ids not in flight are ignored. A reply that comes later for one of them is dropped and counted in
        ``late_replies``.

        Args:
            request_ids: The ids of requests sent by ``submit``, ``score`` or ``score_many``.
        """
        with self._lock:
            abandoned = [p.waiter for p in (self._inflight.get(i) for i in request_ids) if p is not None]
        for waiter in abandoned:
            waiter.cancel()

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Stop reading replies, cancel the futures still waiting, close the Kafka clients. Idempotent.

        Returns within about ``timeout_s`` even when no broker answers.

        Args:
            timeout_s: How long to wait in all: the reply reader's stop, then the producer's delivery of the
                requests sent (what is left of it); the rest is dropped.

        Returns:
            How many requests were not sent: 0 when the broker took all (logged as ``requests_not_sent``
                otherwise), and 0 on a client already closed.
        """
        if self._closed:
            return 0
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self._closing.set()
        self._reader.join(timeout=timeout_s)
        with self._lock:
            abandoned = self._inflight.drain()
        for _, pending in abandoned:
            pending.waiter.cancel()
        unsent = self._shut_down(max(deadline - time.monotonic(), 0.0))
        if unsent:
            log.warning("requests_not_sent", count=unsent, topic=self.requests_topic, waited_s=timeout_s)
        return unsent

    def __enter__(self) -> ScoringClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _prepare_publisher(self, timeout_s: float) -> None:
        try:
            self._publisher.prepare(self.requests_topic, timeout_s)
        except PublishTimeout as exc:
            raise ServiceUnavailable(f"cannot send to the requests topic: {exc}") from None

    def _send_first(self, request_id: str, value: bytes, future: Future[Reply], timeout_s: float,
                    is_new: bool, headers: Headers = (), sent: Callable[[], None] | None = None) -> None:
        """The caller's send: waits at most ``timeout_s``, then fails the request (ReplyTimeout). ``sent`` runs
        once the broker has the record, or it is lost (it ends the send span)."""
        try:
            self._publish(request_id, value, future, max(timeout_s, 0.0), headers, sent)
        except PublishTimeout as exc:
            total = self._forget(request_id, future)
            waited = f"{total:g} s" if total is not None else "its timeout"
            _resolve(future, error=ReplyTimeout(f"request {request_id} could not be sent within {waited}: {exc}"))
            return
        except BaseException:
            if is_new:  # nobody gets this future: the request is gone with the error
                self._forget(request_id, future)
            raise

    def _resend(self, request_id: str, value: bytes, future: Future[Reply], headers: Headers) -> None:
        """On the reader's thread: never waits; a resend that cannot be queued at once is skipped (the request
        still ends at its timeout)."""
        with contextlib.suppress(PublishTimeout):
            self._publish(request_id, value, future, 0.0, headers)

    def _publish(self, request_id: str, value: bytes, future: Future[Reply], timeout_s: float,
                 headers: Headers = (), sent: Callable[[], None] | None = None) -> None:
        """One send of the request, counted in its ``queued`` once the producer took it."""
        def on_done(_partition: int | None, error: BaseException | None) -> None:
            if sent is not None:
                sent()
            if error is not None and self._forget(request_id, future) is not None:
                _resolve(future, error=error)

        self._publisher.publish(self.requests_topic, request_id.encode(), value, on_done, timeout_s, headers)
        with self._lock:
            pending = self._inflight.get(request_id)
            if pending is not None and pending.waiter is future:
                pending.queued += 1

    def _forget(self, request_id: str, future: Future[Reply]) -> float | None:
        """Stop tracking this request (not a newer one with its id); its timeout if it was tracked."""
        with self._lock:
            pending = self._inflight.forget(request_id, future, time.monotonic())
        return None if pending is None else pending.interval_s * pending.sends_allowed

    def _forget_if_cancelled(self, request_id: str, future: Future[Reply]) -> None:
        if future.cancelled():
            self._forget(request_id, future)

    def _follow_reply_topic(self) -> None:
        partitions = self._replies.partitions(self.reply_topic)
        if not partitions:
            raise LookupError(f"reply topic {self.reply_topic!r} does not exist; create it first")
        self._replies.follow_from_end(self.reply_topic, partitions)  # before any request is sent

    def _read_replies(self) -> None:
        try:
            while not self._closing.is_set():
                for record in self._replies.poll(POLL_S):
                    self._deliver(record.key, record.value, record.headers)
                self._resend_or_expire()
                self._publisher.serve()  # confluent-kafka reports failed sends only from inside a call
        except Exception as exc:  # the reader is gone: nobody would resolve what is in flight
            self._reader_error = exc
            with self._lock:
                abandoned = self._inflight.drain()
            for _, pending in abandoned:
                _resolve(pending.waiter, error=exc)
            self._closing.set()

    def _deliver(self, key: bytes | None, value: bytes | None, headers: Headers = ()) -> None:
        if key is None or value is None:
            return
        request_id = key.decode("utf-8", "replace")
        with self._lock:
            pending = self._inflight.answer(request_id, time.monotonic())
        if pending is not None:
            self._tracing.received(request_id, headers)
            try:
                _resolve(pending.waiter, reply=self._read_reply(value))
            except (ValueError, WorkerError) as exc:  # unreadable: the reply topic is written by something else
                # too, or the reply's schema cannot be had
                _resolve(pending.waiter, error=exc)

    def _resend_or_expire(self) -> None:
        with self._lock:
            due = self._inflight.take_due(time.monotonic())
            resend = [(i, v, p.waiter, p.headers) for i, v in due.resend if (p := self._inflight.get(i)) is not None]
        for request_id, value, future, headers in resend:
            self._resend(request_id, value, future, headers)
        for request_id, pending in due.expired:
            _resolve(pending.waiter, error=self._timeout(request_id, pending))

    def _timeout(self, request_id: str, pending: Pending[Future[Reply]]) -> ReplyTimeout:
        waited = pending.interval_s * pending.sends_allowed
        if not pending.queued:  # the caller's send is still waiting (kafka-python without metadata)
            return ReplyTimeout(f"request {request_id} could not be sent within {waited:g} s: the producer took "
                                f"none of its {pending.sends} sends; is a broker reachable?")
        return ReplyTimeout(f"no reply for request {request_id} on {self.reply_topic} within {waited:g} s "
                            f"({pending.sends} sends); is a worker consuming {self.requests_topic}?")

    def _why_closed(self) -> str:
        error = self._reader_error
        return "" if error is None else f" (its reply reader failed: {type(error).__name__}: {error})"

    def _shut_down(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        try:
            return self._publisher.close(timeout_s)
        finally:
            self._replies.close()


def _sent() -> None:
    """A send of a request already in flight: its span is the first send's."""


class Outstanding:
    """What a ``score_many`` stream still waits for (an id given twice counts twice)."""

    def __init__(self) -> None:
        self.count = 0
        self.ids: set[str] = set()

    def add(self, request_id: str) -> None:
        self.count += 1
        self.ids.add(request_id)

    def taken(self, result: ScoreResult) -> ScoreResult:
        self.count -= 1
        self.ids.discard(result.request_id)
        return result


def _resolve(future: Future[Reply], reply: Reply | None = None, error: BaseException | None = None) -> None:
    if future.done():
        return
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(reply or {})
    except InvalidStateError:  # cancelled on another thread since
        pass


def _result(index: int, request_id: str, future: Future[Reply]) -> ScoreResult:
    if future.cancelled():
        return ScoreResult(index, request_id, None, CancelledError())
    error = future.exception()
    if error is not None:
        return ScoreResult(index, request_id, None, error)
    return ScoreResult(index, request_id, future.result())

