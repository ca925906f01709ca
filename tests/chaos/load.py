"""The producer a chaos scenario runs under: uniquely-id'd requests at a fixed rate, on a thread.

A request counts as sent only once the broker acknowledged it (acks=all,
idempotent producer, so a retried send never makes a second record). Sends
that fail are counted apart: the record may or may not be on the topic.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import orjson
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config

MAX_LAG_S = 0.1  # after a stall (the broker away), resume the rate instead of sending a burst


@dataclass
class LoadSummary:
    acked: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)  # id -> error
    attempted: int = 0
    seconds: float = 0.0
    sent_at: dict[str, float] = field(default_factory=dict)  # id -> wall time of the send call


class Load:
    """Sends ``{"id", "inputs": 16 numbers}`` records keyed by id to ``topic``.

    ``start`` returns at once; ``stop`` stops sending, waits up to ``flush_s``
    for outstanding sends and returns the summary. Thread-safe.
    """

    def __init__(self, bootstrap: str, topic: str, rate: float, prefix: str, seed: int = 0,
                 security: KafkaSecurity = PLAINTEXT) -> None:
        self._topic = topic
        self._interval_s = 1.0 / rate
        self._prefix = prefix
        self._rng = random.Random(seed)
        self._producer = KafkaProducer(**client_config(bootstrap, security), acks="all",
                                       enable_idempotence=True, linger_ms=5)
        self._lock = threading.Lock()
        self._summary = LoadSummary()
        self._in_flight: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send_loop, name="chaos-load", daemon=True)
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def acked_count(self) -> int:
        with self._lock:
            return len(self._summary.acked)

    def stop(self, flush_s: float = 120.0) -> LoadSummary:
        """Sends the broker has not acknowledged ``flush_s`` after the stop count as failed.

        (kafka-python's producer now and then stays stuck for minutes after a broker restart.)
        """
        self._stop.set()
        self._thread.join()
        self._summary.seconds = time.monotonic() - self._started
        try:
            self._producer.flush(timeout=flush_s)
            self._producer.close(timeout=10)
        except KafkaTimeoutError:
            pass
        with self._lock:
            for request_id in self._in_flight:
                self._summary.failed[request_id] = f"not acknowledged {flush_s:g} s after the load stopped"
            self._in_flight.clear()
            s = self._summary  # a copy: a stuck producer may still call back later
            return LoadSummary(set(s.acked), dict(s.failed), s.attempted, s.seconds, dict(s.sent_at))

    def _send_loop(self) -> None:
        next_at = time.monotonic()
        number = 0
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_at:
                time.sleep(min(next_at - now, 0.05))
                continue
            self._send(f"{self._prefix}-{number:07d}")
            number += 1
            next_at = max(next_at + self._interval_s, now - MAX_LAG_S)

    def _send(self, request_id: str) -> None:
        value = orjson.dumps({"id": request_id, "inputs": [round(self._rng.random(), 4) for _ in range(16)]})
        with self._lock:
            self._summary.attempted += 1
            self._summary.sent_at[request_id] = time.time()
            self._in_flight.add(request_id)
        try:
            future = self._producer.send(self._topic, key=request_id.encode(), value=value)
        except Exception as exc:  # e.g. no metadata within max_block_ms while the broker is away
            self._failed(request_id, exc)
            return
        future.add_callback(lambda _metadata: self._acked(request_id))
        future.add_errback(lambda exc: self._failed(request_id, exc))

    def _acked(self, request_id: str) -> None:
        with self._lock:
            self._in_flight.discard(request_id)
            self._summary.acked.add(request_id)

    def _failed(self, request_id: str, exc: BaseException) -> None:
        with self._lock:
            self._in_flight.discard(request_id)
            self._summary.failed[request_id] = f"{type(exc).__name__}: {exc}"
