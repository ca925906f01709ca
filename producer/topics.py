"""Creating topics (the worker never creates its requests topic by itself)."""

from __future__ import annotations

import contextlib

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import InvalidReplicationFactorError, InvalidTopicError, KafkaError, TopicAlreadyExistsError

from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config
from worker.kafka.metadata import wait_for_partitions


def create_topics(bootstrap_servers: str, partitions: dict[str, int], wait_s: float = 30.0, *,
                  security: KafkaSecurity = PLAINTEXT, replication: int = 1) -> list[str]:
    """Create each topic with its partition count and ``replication`` copies.

    Topics that exist already are left as they are (their partition count is
    not checked). Returns once clients see every created topic with all its
    partitions in their metadata: a topic just created may not be there yet.

    Args:
        bootstrap_servers: Kafka brokers, ``host:port[,host:port...]``.
        partitions: Topic name to its number of partitions.
        wait_s: How long to wait for the created topics to be visible.
        security: How to reach a secured cluster (TLS, SASL).
        replication: The replication factor of each created topic.

    Returns:
        The names of the topics created, in the order of ``partitions``.

    Raises:
        TimeoutError: The created topics are not all visible after ``wait_s``.
        ValueError: The broker refused to create a topic (a name it does not take, a replication factor above
            the number of brokers, a policy or an ACL): the message says which and why.
    """
    admin = KafkaAdminClient(**client_config(bootstrap_servers, security), client_id="streamscore-admin")
    try:
        existing = set(admin.list_topics())
        wanted = [NewTopic(name, count, replication) for name, count in partitions.items() if name not in existing]
        if wanted:
            with contextlib.suppress(TopicAlreadyExistsError):  # created concurrently by someone else: fine
                admin.create_topics(wanted)
    except KafkaError as exc:
        names = ", ".join(repr(t.name) for t in wanted)
        raise ValueError(f"the broker refused to create {names}: {type(exc).__name__}: {exc}{_hint(exc)}") from exc
    finally:
        admin.close()
    _wait_until_visible(bootstrap_servers, security, {t.name: t.num_partitions for t in wanted}, wait_s)
    return [t.name for t in wanted]


def partition_count(bootstrap_servers: str, topic: str, security: KafkaSecurity = PLAINTEXT) -> int:
    """How many partitions ``topic`` has (0: none seen, it does not exist)."""
    consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=None)
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


def _hint(exc: KafkaError) -> str:
    if isinstance(exc, InvalidTopicError):
        return (" (a topic name is 1 to 249 characters of letters, digits, '.', '_' and '-', and not '.' or "
                "'..')")
    if isinstance(exc, InvalidReplicationFactorError):
        return " (--replication-factor can be at most the number of brokers in the cluster)"
    return ""


def _wait_until_visible(bootstrap_servers: str, security: KafkaSecurity, partitions: dict[str, int],
                        wait_s: float) -> None:
    if not partitions:
        return
    consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=None)
    try:
        wait_for_partitions(consumer.partitions_for_topic, partitions, wait_s)
    except LookupError as exc:
        raise TimeoutError(f"topics {exc} were created but are not visible after {wait_s} s") from None
    finally:
        consumer.close()
