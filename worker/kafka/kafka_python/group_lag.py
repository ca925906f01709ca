"""How far another consumer group (the live workers) lags on a topic: what a backfill that yields to live
traffic reads. A consumer in that group that never subscribes reads its commits without joining it.

Over kafka-python whatever the backfill's --kafka-client: it is always installed, it reads another
group's commits, not the job's own records, and one reading every few seconds costs nothing worth a
second implementation."""

from __future__ import annotations

import structlog
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config

log = structlog.get_logger(__name__)


class GroupLag:
    """Records between ``group``'s committed offsets and the ends of ``topic``, summed over its partitions.

    Partitions the group has never committed are left out. Not thread-safe.
    """

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, group: str, topic: str) -> None:
        self._group = group
        self._consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=group,
                                       client_id=f"streamscore-lag-of-{group}", enable_auto_commit=False)
        self._partitions = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic) or ())]

    def __call__(self) -> int | None:
        """The lag now, or None when the group has committed nothing on the topic (or the broker did not answer)."""
        try:
            committed = {tp: self._consumer.committed(tp) for tp in self._partitions}
            known = {tp: offset for tp, offset in committed.items() if offset is not None}
            if not known:
                return None
            ends = self._consumer.end_offsets(list(known))
        except KafkaError as exc:
            log.warning("live_lag_unknown", group=self._group, error=f"{type(exc).__name__}: {exc}")
            return None
        return sum(max(0, int(ends[tp]) - int(offset)) for tp, offset in known.items())

    def close(self) -> None:
        self._consumer.close(autocommit=False)
