"""``ScoringClient``: send a request, get its reply back.

One client owns one KafkaProducer and one reply consumer. The consumer reads
every partition of the reply topic from the end (no consumer group) on a
background thread and hands each reply to the future waiting for its id.
Replies for ids this client did not send are ignored, so many clients may
share a reply topic; a per-client reply topic saves them the reading.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from producer.wire import decode_reply, encode_request, new_request_id


class ReplyTimeout(TimeoutError):
    """No reply arrived in time. The request may still be scored; retry with the same id."""


class ScoringClient:
    """Thread-safe. Use as a context manager, or call ``close()``."""

    def __init__(self, bootstrap_servers: str, requests_topic: str, reply_topic: str,
                 timeout_s: float = 30.0) -> None:
        servers = bootstrap_servers.split(",")
        self.requests_topic = requests_topic
        self.reply_topic = reply_topic
        self.timeout_s = timeout_s
        self._producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=1)
        self._consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, group_id=None)
        self._waiting: dict[str, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._assign_reply_partitions()
        self._reader = threading.Thread(target=self._read_replies, name="reply-reader", daemon=True)
        self._reader.start()

    def submit(self, inputs: Any, request_id: str | None = None, deadline_ms: int | None = None) -> Future[dict[str, Any]]:
        """Send a request; the future resolves to its reply (a dict). Reusing an id is a retry."""
        request_id = request_id or new_request_id()
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            self._waiting[request_id] = future
        value = encode_request(inputs, request_id, self.reply_topic, deadline_ms)
        self._producer.send(self.requests_topic, key=request_id.encode(), value=value)
        return future

    def score(self, inputs: Any, request_id: str | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        """Send a request and block for its reply. Raises ReplyTimeout."""
        request_id = request_id or new_request_id()
        future = self.submit(inputs, request_id)
        try:
            return future.result(timeout=timeout_s or self.timeout_s)
        except TimeoutError:
            raise ReplyTimeout(f"no reply for request {request_id} on {self.reply_topic} within "
                               f"{timeout_s or self.timeout_s} s; is a worker consuming {self.requests_topic}?") from None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)

    def close(self) -> None:
        self._closing.set()
        self._reader.join(timeout=5)
        self._producer.close()
        self._consumer.close()

    def __enter__(self) -> ScoringClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _assign_reply_partitions(self) -> None:
        partitions = self._consumer.partitions_for_topic(self.reply_topic)
        if not partitions:
            raise LookupError(f"reply topic {self.reply_topic!r} does not exist; create it first")
        assigned = [TopicPartition(self.reply_topic, p) for p in sorted(partitions)]
        self._consumer.assign(assigned)
        self._consumer.seek_to_end(*assigned)
        for tp in assigned:
            self._consumer.position(tp)  # resolve "end" now, before any request is sent

    def _read_replies(self) -> None:
        while not self._closing.is_set():
            for records in self._consumer.poll(timeout_ms=100).values():
                for record in records:
                    with self._lock:
                        future = self._waiting.pop(record.key.decode(), None) if record.key else None
                    if future is not None and not future.done():
                        future.set_result(decode_reply(record.value))
