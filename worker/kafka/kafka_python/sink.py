"""Publishing replies and dead letters: a thin adapter over kafka-python's KafkaProducer.

``send`` never raises for a failed delivery; ``settle`` waits for every send
since the last settle and says which succeeded. Replies count as delivered
only once the broker acknowledged them (acks=all, idempotent producer).
"""

from __future__ import annotations

import contextlib
from typing import Any, Generic, TypeVar

import structlog
from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import FutureRecordMetadata

from worker.core.bounds import SEND_BLOCK_S
from worker.core.messages import Headers
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config
from worker.kafka.sends import SendLedger
from worker.ports import Delivery

log = structlog.get_logger(__name__)
T = TypeVar("T")


class KafkaSink(Generic[T]):
    PRODUCER: type[KafkaProducer] = KafkaProducer  # what the sink builds (a subclass may bound more calls)

    def __init__(self, bootstrap_servers: str, client_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, **producer_config: Any) -> None:
        self._config = dict(**client_config(bootstrap_servers, security), client_id=client_id, acks="all",
                            enable_idempotence=True, linger_ms=linger_ms,
                            **{"max_block_ms": int(SEND_BLOCK_S * 1000), **producer_config})  # may be overridden
        self._producer = self.PRODUCER(**self._config)
        self._pending: SendLedger[T, FutureRecordMetadata] = SendLedger(_outcome)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        """Queue a record for ``topic``; its outcome is reported by the next ``settle``."""
        try:
            future = self._producer.send(topic, key=key, value=value, headers=headers)
        except KafkaError as exc:  # e.g. no metadata for the topic within max_block_ms
            self._pending.failed(tag, exc)
            return
        self._pending.sent(tag, future)

    def settle(self, timeout_s: float = 30.0) -> list[Delivery[T]]:
        """Flush, then report every finished send in the order it was made. Blocks up to ``timeout_s``.

        Sends still unanswered then (the broker is away) stay queued for the next settle.
        """
        # A timeout leaves some sends out: report the finished ones, keep the rest.
        with contextlib.suppress(KafkaTimeoutError):
            self._producer.flush(timeout=timeout_s)
        deliveries = self._pending.settle()
        self._replace_if_fatal()
        return deliveries

    def _replace_if_fatal(self) -> None:
        """kafka-python's idempotent (not transactional) producer turns fatal on any send the broker
        refuses for good (a record too large for its topic, a topic it may not write to) and fails every
        send after it with that refusal: replace it, so that the sends the Responder makes again, each
        alone, can find which record was refused (worker/core/refusals.py)."""
        manager = self._producer._transaction_manager  # kafka-python 3.x has no public accessor for it
        if manager is None or manager.is_transactional() or not manager.has_fatal_error():
            return
        log.warning("producer_replaced", error=f"{type(manager.last_error).__name__}: {manager.last_error}")
        with contextlib.suppress(KafkaTimeoutError):
            self._producer.close(timeout=1)
        self._producer = self.PRODUCER(**self._config)

    def close(self, timeout_s: float = 10.0) -> None:
        """Close, waiting up to ``timeout_s`` for what is still out (its offsets were never committed)."""
        try:
            self._producer.close(timeout=timeout_s)
        except KafkaTimeoutError:  # kafka-python raises when the flush inside close times out
            log.warning("sink_closed_with_sends_out", timeout_s=timeout_s,
                        consequence="those records were not committed: they are consumed again")


def _outcome(future: FutureRecordMetadata) -> tuple[bool, Exception | None]:
    return future.is_done, future.exception if future.failed() else None
