"""The backfill's partition reader over confluent-kafka (librdkafka): the twin of
worker/kafka/kafka_python/bounded_source.py.

A Consumer in the job's group that assigns itself the topic's partitions at
their start offsets (it never subscribes, so it never joins the group), looks
spans up with ``get_watermark_offsets`` and ``offsets_for_times``, and commits
offsets with the plan as their metadata (``TopicPartition(..., metadata=...)``;
``committed()`` gives it back, None where none was stored).

Where librdkafka differs, and what this reader does:
- Its position is unknown (OFFSET_INVALID) until a record of the partition is
  consumed, and offsets without records (transaction markers) at the end of a
  partition show only once it reaches the end. So the reader keeps each
  partition's position itself: one past the last record it returned, and the
  end offset of the partition-EOF events it asks for (``enable.partition.eof``).
- ``consume(n, timeout)`` waits for all ``n`` records or the timeout, so poll
  blocks for the first record only and then takes what is already fetched.
- librdkafka stores a commit's metadata with a NUL byte at its end, which
  kafka-python returns as part of it: worker/jobs/backfill_plan.py reads the
  plan either way, so a job may be resumed on either client.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, TopicPartition

from worker.core.bounds import METADATA_S
from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.confluent.consumer import at_end, fetch, group_config, partitions_of, raw_record
from worker.kafka.metadata import wait_for


def reader_config(kafka: KafkaSettings) -> dict[str, Any]:
    """librdkafka properties of the backfill's consumer: manual commits, no topic creation, EOF events, and the
    live worker's isolation level (read_committed: the end offsets it looks up are the last stable ones, so a
    span never waits on an open transaction, and aborted requests are skipped)."""
    return group_config(kafka, **{
        "auto.offset.reset": "earliest",  # a resumed offset that retention deleted: go on from the oldest
        "enable.partition.eof": True,
        "isolation.level": "read_committed" if kafka.read_committed else "read_uncommitted",
    })


class ConfluentPartitionReader:
    """A PartitionReader (worker/jobs/bounded_source.py) over confluent-kafka. Not thread-safe."""

    def __init__(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> None:
        """In ``group`` (default: ``kafka.group``): another group's reader reads its commits, never its own."""
        self._topic = kafka.requests_topic
        self._clock = clock
        self._consumer = Consumer({**reader_config(kafka), "group.id": group or kafka.group})
        self._positions: dict[TP, int] = {}
        self._log_starts: dict[TP, int] = {}  # the low watermarks ``lookups`` read

    def partitions(self, wait_s: float) -> list[int]:
        return wait_for(lambda: partitions_of(self._consumer, self._topic, METADATA_S), wait_s,
                        lambda: LookupError(self._topic))

    def lookups(self, partitions: list[TP], from_ms: int, until_ms: int | None) -> dict[TP, tuple[
            int | None, int | None, int]]:
        marks = {tp: self._consumer.get_watermark_offsets(TopicPartition(*tp), timeout=METADATA_S)
                 for tp in partitions}
        self._log_starts.update({tp: int(low) for tp, (low, _end) in marks.items()})
        ends = {tp: end for tp, (_low, end) in marks.items()}
        froms = self._offsets_for_times(partitions, from_ms)
        untils = {} if until_ms is None else self._offsets_for_times(partitions, until_ms)
        return {tp: (froms[tp], untils.get(tp), int(ends[tp])) for tp in partitions}

    def _offsets_for_times(self, partitions: list[TP], ms: int) -> dict[TP, int | None]:
        """The first offset at or after ``ms`` per partition; None when no record is (librdkafka says -1)."""
        found = self._consumer.offsets_for_times([TopicPartition(t, p, ms) for t, p in partitions],
                                                 timeout=METADATA_S)
        _raise_errors(found)
        return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}

    def log_starts(self, partitions: list[TP]) -> dict[TP, int]:
        """As ``lookups`` last read them, in the same requests (one a partition); asked anew for any other."""
        unknown = [tp for tp in partitions if tp not in self._log_starts]
        for tp in unknown:
            self._log_starts[tp] = int(self._consumer.get_watermark_offsets(TopicPartition(*tp),
                                                                            timeout=METADATA_S)[0])
        return {tp: self._log_starts[tp] for tp in partitions}

    def committed(self, partitions: list[TP]) -> dict[TP, tuple[int, str | None]]:
        found = self._consumer.committed([TopicPartition(*tp) for tp in partitions], timeout=METADATA_S)
        _raise_errors(found)
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in found if tp.offset != OFFSET_INVALID}

    def commit(self, offsets: dict[TP, tuple[int, str]]) -> None:
        try:
            results = self._consumer.commit(
                offsets=[TopicPartition(t, p, offset, metadata=metadata) for (t, p), (offset, metadata) in
                         offsets.items()], asynchronous=False)
            _raise_errors(results)
        except KafkaException as exc:
            raise CommitDeferred(f"confluent-kafka: {exc}") from exc

    def assign(self, positions: dict[TP, int]) -> None:
        self._consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in positions.items()])
        self._positions = dict(positions)

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        fetched = fetch(self._consumer, timeout_s, max_records)
        now = self._clock.monotonic()
        records = []
        for m in fetched:
            if m.error() is None:
                record = raw_record(m, now)
                records.append(record)
                self._positions[record.position.topic, record.position.partition] = record.position.offset + 1
            elif at_end(m):  # the partition's end offset, past any transaction markers
                tp = cast(TP, (m.topic(), m.partition()))
                self._positions[tp] = max(self._positions.get(tp, 0), m.offset() or 0)
        return records

    def positions(self, partitions: list[TP]) -> dict[TP, int]:
        return {tp: self._positions[tp] for tp in partitions}

    def pause(self, partitions: list[TP]) -> None:
        self._consumer.pause([TopicPartition(*tp) for tp in partitions])

    def resume(self, partitions: list[TP]) -> None:
        self._consumer.resume([TopicPartition(*tp) for tp in partitions])

    def topics(self) -> set[str]:
        return set(self._consumer.list_topics(timeout=METADATA_S).topics)

    def close(self, timeout_s: float) -> None:
        """No group to leave (never subscribed): librdkafka's close returns as soon as its fetchers stop."""
        with contextlib.suppress(RuntimeError):  # closed already
            self._consumer.close()


def _raise_errors(partitions: list[TopicPartition]) -> None:
    for tp in partitions:
        if tp.error is not None:
            raise KafkaException(tp.error)
