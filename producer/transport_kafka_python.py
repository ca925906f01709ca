"""The producer side's Publisher and ReplyReader on kafka-python (the default client), over the worker's
connection settings and fetch (worker/kafka/kafka_python/)."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from producer.ports import CLOSE_TIMEOUT_S, Headers, OnDone, PublishTimeout, Record
from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config
from worker.kafka.kafka_python.consumer import fetch

MAX_RECORDS = 5000  # per poll
DEFAULT_MAX_BLOCK_S = 60.0  # kafka-python's own max_block_ms: a publish without a timeout waits as long
# kafka-python has no timeout per send, only max_block_ms for all of them: it is kept this short, and a send
# is tried again until the caller's time is up. Its send raises KafkaTimeoutError only from that wait, before
# the record is queued, so trying again never sends a record twice.
METADATA_WAIT_MS = 100
FORCED_CLOSE_S = 0.5  # for the IO thread to fail the records dropped and stop


class KafkaPythonPublisher:
    """kafka-python's KafkaProducer: idempotent and acks=all by default; murmur2 is its default partitioner.

    Its constructor asks a broker for its version: it blocks up to 30 s (``bootstrap_timeout_ms``) and raises
    KafkaTimeoutError when none answers.
    """

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, linger_ms: int,
                 batch_bytes: int | None, extra: dict[str, Any] | None = None) -> None:
        """``extra``: more kafka-python options, which win over these."""
        sizing = {} if batch_bytes is None else {"batch_size": batch_bytes}
        self._servers = bootstrap_servers
        self._producer = KafkaProducer(**{**client_config(bootstrap_servers, security), "acks": "all",
                                          "linger_ms": linger_ms, "allow_auto_create_topics": False,
                                          "max_block_ms": METADATA_WAIT_MS, **sizing, **(extra or {})})
        self._unanswered = _Counter()

    def prepare(self, topic: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._producer.partitions_for(topic)
                return
            except KafkaTimeoutError:
                if time.monotonic() >= deadline:
                    raise self._no_metadata(topic, timeout_s) from None

    def publish(self, topic: str, key: bytes | None, value: bytes, on_done: OnDone,
                timeout_s: float | None = None, headers: Headers = ()) -> None:
        """Waits for the topic's metadata at most ``timeout_s`` plus 0.1 s."""
        limit = DEFAULT_MAX_BLOCK_S if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        self._unanswered.add(1)
        try:
            while True:
                try:
                    sent = self._producer.send(topic, key=key, value=value, headers=list(headers))
                    break
                except KafkaTimeoutError:
                    if time.monotonic() >= deadline:
                        raise self._no_metadata(topic, limit) from None
        except BaseException:
            self._unanswered.add(-1)
            raise
        sent.add_callback(self._taken, on_done)
        sent.add_errback(self._lost, on_done)

    def serve(self) -> None:
        """Nothing to do: kafka-python runs the callbacks on its IO thread."""

    def flush(self, timeout_s: float | None = None) -> int:
        try:
            self._producer.flush(timeout_s)
        except KafkaTimeoutError:
            return max(self._unanswered.value, 1)
        return 0

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """kafka-python's own close(timeout) flushes again and, when records are stuck, raises KafkaTimeoutError
        before stopping its IO thread (which would go on trying to connect): the thread is stopped by force."""
        unanswered = self.flush(timeout_s)
        try:
            self._producer.close(timeout=0 if unanswered else timeout_s)
        except KafkaTimeoutError:
            self._producer._sender.force_close()  # no public way to drop stuck records
            self._producer.close(timeout=FORCED_CLOSE_S)
        return unanswered

    def _taken(self, on_done: OnDone, metadata: Any) -> None:
        self._unanswered.add(-1)
        on_done(metadata.partition, None)

    def _lost(self, on_done: OnDone, error: BaseException) -> None:
        self._unanswered.add(-1)
        on_done(None, error)

    def _no_metadata(self, topic: str, waited_s: float) -> PublishTimeout:
        return PublishTimeout(f"no metadata for topic {topic!r} within {waited_s:g} s from the brokers at "
                              f"{self._servers} (is one up and reachable?)")


class _Counter:
    """Records published and not yet answered; published from any thread, answered on the IO thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, delta: int) -> None:
        with self._lock:
            self.value += delta


class KafkaPythonReplyReader:
    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, read_committed: bool,
                 extra: dict[str, Any] | None = None) -> None:
        self._consumer = KafkaConsumer(**{
            **client_config(bootstrap_servers, security), "enable_auto_commit": False, "group_id": None,
            "isolation_level": "read_committed" if read_committed else "read_uncommitted", **(extra or {})})

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._consumer.partitions_for_topic(topic) or ())

    def follow_from_end(self, topic: str, partitions: list[int]) -> None:
        assigned = [TopicPartition(topic, p) for p in partitions]
        self._consumer.assign(assigned)
        self._consumer.seek_to_end(*assigned)
        for tp in assigned:
            self._consumer.position(tp)  # resolve "end" now, before any request is sent

    def poll(self, timeout_s: float) -> list[Record]:
        return [Record(r.key, r.value, list(r.headers or ()), r.timestamp)
                for r in fetch(self._consumer, timeout_s, MAX_RECORDS)]

    def close(self) -> None:
        self._consumer.close()
