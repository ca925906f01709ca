"""Fresh topics for each run, filled before the consumer under test starts, deleted afterwards."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from importlib.util import find_spec

import redis
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

    def create(self, bootstrap: str, partitions: int, replication: int = 1) -> None:
        create_topics(bootstrap, {self.requests: partitions, self.replies: partitions, self.dlq: 1},
                      security=env_security(), replication=replication)

    def delete(self, bootstrap: str, redis_url: str = "") -> None:
        """Delete the run's topics (best effort: a topic left behind only costs disk on the local broker) and,
        given the dedup store its contender used, the keys left under the run's namespace (``forget``)."""
        admin = KafkaAdminClient(**connection(bootstrap), client_id="bench-admin")
        try:
            admin.delete_topics([self.requests, self.replies, self.dlq], timeout_ms=10_000)
        except Exception:  # noqa: BLE001 - already gone, or the broker is slow: not worth failing a run
            pass
        finally:
            admin.close()
        if redis_url:
            self.forget(redis_url)

    def forget(self, redis_url: str) -> int:
        """Delete the run's dedup keys (its contender's claims and done marks, ``<group>:*``), so that the next
        run meets a Redis as small as the first did: a morning of runs left 8.2 million keys, 2.8 GB. Returns
        how many."""
        client = redis.Redis.from_url(redis_url)
        deleted, keys = 0, []
        try:
            for key in client.scan_iter(match=f"{self.group}:*", count=10_000):
                keys.append(key)
                if len(keys) == 10_000:
                    deleted, keys = deleted + client.unlink(*keys), []
            return deleted + (client.unlink(*keys) if keys else 0)
        finally:
            client.close()


def default_load_client() -> str:
    """The Kafka client the bench sends its load with: confluent-kafka when it is installed, else kafka-python.

    The sender shares this machine's cores with the broker and the contender
    under test: on kafka-python it costs several times the CPU per request
    that librdkafka does, CPU the worker loses during the open-loop runs
    (which send while it scores) and a cap on the rate the open loop can
    offer. The pre-fill runs before the contender starts, where a faster
    sender only shortens the run. Which client sent is recorded with the
    results; ``--load-client kafka-python`` gives the conditions of runs
    made before it could be chosen.
    """
    return "confluent" if find_spec("confluent_kafka") is not None else "kafka-python"


def prefill(bootstrap: str, topic: str, requests: list[RequestBody], progress: bool,
            kafka_client: str = "kafka-python") -> None:
    """Send every request (keyed by id) on ``kafka_client`` and wait for the broker's acks. Blocks."""
    send_requests(bootstrap, topic, requests, total=len(requests), progress=progress, security=env_security(),
                  kafka_client=kafka_client)
