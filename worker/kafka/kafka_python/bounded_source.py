"""The backfill's partition reader over kafka-python: what worker/jobs/bounded_source.py needs of a client.

A KafkaConsumer in the job's group that assigns itself the topic's partitions
(it never subscribes, so it never joins the group), looks spans up with
``end_offsets`` and ``offsets_for_times``, and commits offsets with the plan as
their metadata.
"""

from __future__ import annotations

from typing import Any

from kafka import OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError

from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.kafka_python.consumer import fetch, group_consumer, raw_records
from worker.kafka.metadata import wait_for_partitions


class KafkaPartitionReader:
    """A PartitionReader (worker/jobs/bounded_source.py) over kafka-python. Not thread-safe."""

    def __init__(self, kafka: KafkaSettings, clock: Clock, consumer: Any = None, group: str | None = None) -> None:
        """In ``group`` (default: ``kafka.group``): another group's reader reads its commits, never its own."""
        self._topic = kafka.requests_topic
        self._clock = clock
        # A resumed offset that retention deleted: go on from the oldest.
        self._consumer = consumer if consumer is not None else group_consumer(
            kafka, auto_offset_reset="earliest", group_id=group or kafka.group,
            # read_committed: the end offsets looked up are the last stable ones (confluent's reader_config).
            isolation_level="read_committed" if kafka.read_committed else "read_uncommitted")

    def partitions(self, wait_s: float) -> list[int]:
        return wait_for_partitions(self._consumer.partitions_for_topic, {self._topic: 1}, wait_s)[self._topic]

    def lookups(self, partitions: list[TP], from_ms: int, until_ms: int | None) -> dict[TP, tuple[
            int | None, int | None, int]]:
        tps = [TopicPartition(*tp) for tp in partitions]
        ends = self._consumer.end_offsets(tps)
        froms = self._consumer.offsets_for_times(dict.fromkeys(tps, from_ms))
        untils = {} if until_ms is None else self._consumer.offsets_for_times(dict.fromkeys(tps, until_ms))
        return {(tp.topic, tp.partition): (_offset(froms.get(tp)), _offset(untils.get(tp)), int(ends[tp]))
                for tp in tps}

    def log_starts(self, partitions: list[TP]) -> dict[TP, int]:
        starts = self._consumer.beginning_offsets([TopicPartition(*tp) for tp in partitions])
        return {(tp.topic, tp.partition): int(offset) for tp, offset in starts.items()}

    def committed(self, partitions: list[TP]) -> dict[TP, tuple[int, str | None]]:
        found = {tp: self._consumer.committed(TopicPartition(*tp), metadata=True) for tp in partitions}
        return {tp: (int(stored.offset), stored.metadata) for tp, stored in found.items() if stored is not None}

    def commit(self, offsets: dict[TP, tuple[int, str]]) -> None:
        """Each metadata is committed with a NUL byte after it, as confluent-kafka commits it: that client
        reads metadata up to a NUL byte, so this lets a job go on over either client."""
        try:
            self._consumer.commit({TopicPartition(*tp): OffsetAndMetadata(offset, f"{metadata}\x00", -1)
                                   for tp, (offset, metadata) in offsets.items()})
        except KafkaError as exc:
            raise CommitDeferred(f"{type(exc).__name__}: {exc}") from exc

    def assign(self, positions: dict[TP, int]) -> None:
        self._consumer.assign([TopicPartition(*tp) for tp in positions])
        for tp, offset in positions.items():
            self._consumer.seek(TopicPartition(*tp), offset)

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        return raw_records(fetch(self._consumer, timeout_s, max_records), self._clock.monotonic())

    def positions(self, partitions: list[TP]) -> dict[TP, int]:
        return {tp: int(self._consumer.position(TopicPartition(*tp))) for tp in partitions}

    def pause(self, partitions: list[TP]) -> None:
        self._consumer.pause(*(TopicPartition(*tp) for tp in partitions))

    def resume(self, partitions: list[TP]) -> None:
        self._consumer.resume(*(TopicPartition(*tp) for tp in partitions))

    def topics(self) -> set[str]:
        return set(self._consumer.topics())

    def close(self, timeout_s: float) -> None:
        self._consumer.close(autocommit=False, timeout_ms=int(timeout_s * 1000))


def _offset(found: Any) -> int | None:
    """The offset of an offsets_for_times answer (None when no record is at or after the time)."""
    return None if found is None else int(found.offset)
