"""Another group's commits and a topic's ends over confluent-kafka: what worker/kafka/group_lag.py reads."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition

from worker.core.bounds import METADATA_S
from worker.core.offsets import TopicPartition as TP
from worker.core.security import KafkaSecurity
from worker.kafka.confluent.connection import client_config
from worker.kafka.confluent.consumer import partitions_of


class ConfluentGroupOffsets:
    """A GroupOffsets: a consumer in ``group`` that never subscribes. Each request blocks up to METADATA_S."""

    ERRORS: tuple[type[Exception], ...] = (KafkaException,)

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, group: str, topic: str) -> None:
        self._consumer = Consumer({**client_config(bootstrap_servers, security), "group.id": group,
                                   "client.id": f"streamscore-lag-of-{group}", "enable.auto.commit": False})
        self._partitions = [TopicPartition(topic, p) for p in partitions_of(self._consumer, topic, METADATA_S) or ()]

    def committed(self) -> dict[TP, int]:
        found = self._consumer.committed(self._partitions, timeout=METADATA_S) if self._partitions else []
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.error is None and tp.offset >= 0}

    def ends(self, partitions: list[TP]) -> dict[TP, int]:
        return {tp: self._consumer.get_watermark_offsets(TopicPartition(*tp), timeout=METADATA_S)[1]
                for tp in partitions}

    def close(self) -> None:
        self._consumer.close()
