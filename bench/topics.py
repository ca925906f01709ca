"""Fresh topics for each run, filled before the consumer under test starts, deleted afterwards."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafka import KafkaAdminClient

from bench.security import connection, env_security
from producer.send import RequestBody, send_requests
from producer.topics import create_topics


@dataclass(frozen=True)
class RunTopics:
    """A run's requests, replies and dead-letter topics; the name says what ran."""

    requests: str
    replies: str
    dlq: str

    @classmethod
    def fresh(cls, label: str) -> RunTopics:
        base = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        return cls(f"{base}.requests", f"{base}.replies", f"{base}.dlq")

    @property
    def group(self) -> str:
        """A consumer group (and dedup namespace) used by this run only."""
        return self.requests.removesuffix(".requests")

    def create(self, bootstrap: str, partitions: int) -> None:
        create_topics(bootstrap, {self.requests: partitions, self.replies: partitions, self.dlq: 1},
                      security=env_security())

    def delete(self, bootstrap: str) -> None:
        """Best effort: a topic left behind only costs disk on the local broker."""
        admin = KafkaAdminClient(**connection(bootstrap), client_id="bench-admin")
        try:
            admin.delete_topics([self.requests, self.replies, self.dlq], timeout_ms=10_000)
        except Exception:  # noqa: BLE001 - already gone, or the broker is slow: not worth failing a run
            pass
        finally:
            admin.close()


def prefill(bootstrap: str, topic: str, requests: list[RequestBody], progress: bool) -> None:
    """Send every request (keyed by id) and wait for the broker's acks. Blocks."""
    send_requests(bootstrap, topic, requests, total=len(requests), progress=progress, security=env_security())
