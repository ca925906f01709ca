"""The memory client's PartitionReader (worker/ports.py): what a backfill reads a topic's spans with.

It assigns itself partitions and never joins its group, so it commits only while the group has no members, as
the broker takes commits from outside a group. It reads read_uncommitted, as the real readers do (a backfill
ends at each partition's end offset). Not thread-safe; the broker is.
"""

from __future__ import annotations

from tests.doubles.memory_client.broker import MemoryBroker
from tests.doubles.memory_client.errors import MemoryKafkaError
from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import Position, RawRecord
from worker.core.offsets import TopicPartition as TP


class MemoryPartitionReader:
    def __init__(self, broker: MemoryBroker, topic: str, group: str, clock: Clock) -> None:
        self._broker, self._topic, self._group, self._clock = broker, topic, group, clock
        self._positions: dict[TP, int] = {}
        self._paused: set[TP] = set()

    def partitions(self, wait_s: float) -> list[int]:
        if not self._broker.wait(lambda: self._broker.partitions_of(self._topic) > 0, wait_s):
            raise LookupError(self._topic)
        return list(range(self._broker.partitions_of(self._topic)))

    def lookups(self, partitions: list[TP], from_ms: int, until_ms: int | None) -> dict[TP, tuple[
            int | None, int | None, int]]:
        return {tp: (self._broker.offset_for_time(tp, from_ms),
                     None if until_ms is None else self._broker.offset_for_time(tp, until_ms),
                     self._broker.end_offset(tp, read_committed=False)) for tp in partitions}

    def log_starts(self, partitions: list[TP]) -> dict[TP, int]:
        return dict.fromkeys(partitions, 0)  # the memory broker deletes nothing

    def committed(self, partitions: list[TP]) -> dict[TP, tuple[int, str | None]]:
        return self._broker.in_group(self._group, lambda group: {tp: group.committed[tp] for tp in partitions
                                                                 if tp in group.committed})

    def commit(self, offsets: dict[TP, tuple[int, str]]) -> None:
        try:
            self._broker.in_group(self._group, lambda group: group.commit(None, -1, offsets))
        except MemoryKafkaError as exc:
            raise CommitDeferred(f"{type(exc).__name__}: {exc}") from exc

    def assign(self, positions: dict[TP, int]) -> None:
        self._positions = dict(positions)
        self._paused &= set(positions)

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        if not self._broker.wait(self._readable, timeout_s):
            return []
        records: list[RawRecord] = []
        for tp in sorted(set(self._positions) - self._paused):
            entries, self._positions[tp] = self._broker.fetch(tp, self._positions[tp], max_records - len(records),
                                                              read_committed=False)
            now = self._clock.monotonic()
            records += [RawRecord(Position(tp[0], tp[1], e.offset), e.key, e.value, list(e.headers), e.timestamp_ms,
                                  now) for e in entries]
        return records

    def positions(self, partitions: list[TP]) -> dict[TP, int]:
        return {tp: self._positions[tp] for tp in partitions}

    def pause(self, partitions: list[TP]) -> None:
        self._paused |= set(partitions)

    def resume(self, partitions: list[TP]) -> None:
        self._paused -= set(partitions)

    def topics(self) -> set[str]:
        return self._broker.topics()

    def close(self, timeout_s: float) -> None:
        pass

    def _readable(self) -> bool:
        return any(self._broker.end_offset(tp, read_committed=False) > position
                   for tp, position in self._positions.items() if tp not in self._paused)
