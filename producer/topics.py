"""Creating topics (the worker never creates its requests topic by itself)."""

from __future__ import annotations

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError


def create_topics(bootstrap_servers: str, partitions: dict[str, int]) -> list[str]:
    """Create each topic with its partition count (replication 1); returns those created.

    Topics that exist already are left as they are.
    """
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers.split(","), client_id="streamscore-admin")
    try:
        existing = set(admin.list_topics())
        wanted = [NewTopic(name, count, 1) for name, count in partitions.items() if name not in existing]
        if wanted:
            try:
                admin.create_topics(wanted)
            except TopicAlreadyExistsError:
                pass  # created concurrently by someone else: fine
        return [t.name for t in wanted]
    finally:
        admin.close()
