"""Publishing replies and dead letters: kafka-python's KafkaProducer under the shared sink (worker/kafka/sends.py)."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, TypeVar

import structlog
from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import FutureRecordMetadata

from worker.core.bounds import SEND_BLOCK_S
from worker.core.messages import Headers
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config
from worker.kafka.sends import LedgerSink, SendLedger

log = structlog.get_logger(__name__)
T = TypeVar("T")


class KafkaSink(LedgerSink[T, FutureRecordMetadata]):
    SEND_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaError,)  # e.g. no metadata within max_block_ms
    PRODUCER: type[KafkaProducer] = KafkaProducer  # what the sink builds (a subclass may bound more calls)

    def __init__(self, bootstrap_servers: str, client_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 **producer_config: Any) -> None:
        """``producer_config``: more kafka-python options, which win over these (max_block_ms over
        ``max_block_s``)."""
        self._config = {**client_config(bootstrap_servers, security), "client_id": client_id, "acks": "all",
                        "enable_idempotence": True, "linger_ms": linger_ms, "max_block_ms": int(max_block_s * 1000),
                        **producer_config}
        self._producer = self.PRODUCER(**self._config)
        self._pending: SendLedger[T, FutureRecordMetadata] = SendLedger(_outcome)

    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> FutureRecordMetadata:
        return self._producer.send(topic, key=key, value=value, headers=headers)

    def _flush(self, timeout_s: float) -> None:
        # A timeout leaves some sends out: the settle reports the finished ones and keeps the rest.
        with contextlib.suppress(KafkaTimeoutError):
            self._producer.flush(timeout=timeout_s)

    def _settled(self) -> None:
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

    def _close(self, timeout_s: float) -> bool:
        try:
            self._producer.close(timeout=timeout_s)
        except KafkaTimeoutError:  # kafka-python raises when the flush inside close times out
            return False
        return True


def _outcome(future: FutureRecordMetadata) -> tuple[bool, Exception | None]:
    return future.is_done, future.exception if future.failed() else None
