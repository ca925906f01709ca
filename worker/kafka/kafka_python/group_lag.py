"""Another group's commits and a topic's ends over kafka-python: what worker/kafka/group_lag.py reads."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from worker.core.offsets import TopicPartition as TP
from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config


class KafkaPythonGroupOffsets:
    """A GroupOffsets: a consumer in ``group`` that never subscribes. Blocks while it reaches a broker."""

    ERRORS: tuple[type[Exception], ...] = (KafkaError,)

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, group: str, topic: str) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=group,
                                       client_id=f"streamscore-lag-of-{group}", enable_auto_commit=False)
        self._partitions = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic) or ())]

    def committed(self) -> dict[TP, int]:
        found = {tp: self._consumer.committed(tp) for tp in self._partitions}
        return {(tp.topic, tp.partition): int(offset) for tp, offset in found.items() if offset is not None}

    def ends(self, partitions: list[TP]) -> dict[TP, int]:
        ends = self._consumer.end_offsets([TopicPartition(*tp) for tp in partitions])
        return {(tp.topic, tp.partition): int(offset) for tp, offset in ends.items()}

    def close(self) -> None:
        self._consumer.close(autocommit=False)
