"""Building kafka-python consumers the worker's way, and waiting for a topic's metadata.

Every consumer of the worker's (the stream's source, the backfill's bounded
source) commits by hand, never creates topics by consuming, and reads at most
``max_poll_records`` per poll; the adapters add what is theirs.
"""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer

from worker.core.settings import Settings
from worker.kafka.kafka_python.connection import client_config

METADATA_RETRY_S = 0.2


def group_consumer(settings: Settings, **config: Any) -> KafkaConsumer:
    """A consumer in ``settings.group`` with manual commits; ``config`` adds or overrides keys.

    Blocks up to kafka-python's bootstrap timeout; raises KafkaError when no broker answers.
    """
    return KafkaConsumer(**{
        **client_config(settings.kafka_bootstrap_servers, settings.kafka_security),
        "group_id": settings.group,
        "client_id": settings.client_id,
        "enable_auto_commit": False,
        "allow_auto_create_topics": False,
        "max_poll_records": settings.max_poll_records,
        **config,
    })


def wait_for_partitions(consumer: KafkaConsumer, topics: dict[str, int], wait_s: float) -> dict[str, list[int]]:
    """Each topic's partitions, once the client's metadata shows at least the wanted count of each.

    A topic created a moment ago may not be in the broker's metadata yet, so ask
    again until ``wait_s`` has passed. Raises LookupError naming the topics still missing then.
    """
    deadline = time.monotonic() + wait_s
    while True:
        found = {name: sorted(consumer.partitions_for_topic(name) or ()) for name in topics}
        missing = sorted(name for name, count in topics.items() if len(found[name]) < count)
        if not missing:
            return found
        if time.monotonic() >= deadline:
            raise LookupError(", ".join(missing))
        time.sleep(METADATA_RETRY_S)
