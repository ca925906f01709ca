"""Which offsets may be committed. Pure bookkeeping, no Kafka calls.

Records are tracked in the order they are consumed and acknowledged in any
order (a reply the broker accepted, a dead letter, a counted duplicate). The
committable offset of a partition is one past the highest offset below which
everything is acknowledged: it never decreases and never passes an
unacknowledged record.

A poll's records are tracked, and a batch's acknowledged, a partition at a
time (``track_all``, ``ack_all``), and the acknowledged prefix is found and
dropped by passes in C, not a Python step a record: tracking a poll of 500,
acknowledging it in batches of 64 and asking what to commit after each took
0.35 µs a record a record at a time, 0.19 so (``python -m bench.hot_path``;
docs/benchmarks.md, "Offsets and decoding a poll at a time").
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import filterfalse, islice
from operator import lt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.core.messages import Position

TopicPartition = tuple[str, int]


def _by_partition(positions: Iterable[Position]) -> dict[TopicPartition, list[int]]:
    """The offsets of ``positions`` by partition, each partition's in the order given. A partition is looked up
    once a run of its records (as the Kafka clients hand a poll over), not once a record; grouping with
    itertools.groupby and an attrgetter key took three times as long."""
    runs: dict[TopicPartition, list[int]] = {}
    topic, partition = "", -1
    offsets: list[int] = []
    for position in positions:
        if position.partition != partition or position.topic != topic:
            topic, partition = position.topic, position.partition
            offsets = runs.setdefault((topic, partition), [])
        offsets.append(position.offset)
    return runs


class _PartitionOffsets:
    __slots__ = ("outstanding", "acked", "next_offset", "committed")

    def __init__(self, committed: int) -> None:
        self.outstanding: list[int] = []  # tracked and not yet below the watermark, increasing
        self.acked: set[int] = set()
        self.next_offset: int | None = None  # one past the highest tracked offset
        self.committed: int | None = committed

    def extend(self, offsets: list[int]) -> None:
        """Track ``offsets`` (increasing, past the last tracked: OffsetTracker._track checked them)."""
        self.outstanding += offsets
        self.next_offset = offsets[-1] + 1

    def watermark(self) -> int | None:
        outstanding, acked = self.outstanding, self.acked
        if acked and outstanding:
            first_out = next(filterfalse(acked.__contains__, outstanding), None)
            done = len(outstanding) if first_out is None else outstanding.index(first_out)
            if done:
                acked.difference_update(islice(outstanding, done))
                del outstanding[:done]
        return outstanding[0] if outstanding else self.next_offset


class OffsetTracker:
    """Per-partition watermarks of acknowledged offsets. Not thread-safe."""

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _PartitionOffsets] = {}

    def track(self, tp: TopicPartition, offset: int) -> None:
        """Record that ``offset`` was consumed; offsets of a partition must increase (else ValueError)."""
        self._track({tp: [offset]})

    def track_all(self, positions: Iterable[Position]) -> None:
        """Record that the records at ``positions`` were consumed, in the order consumed (see ``track``; a
        ValueError tracks none of them)."""
        self._track(_by_partition(positions))

    def _track(self, runs: dict[TopicPartition, list[int]]) -> None:
        partitions = self._partitions
        for tp, offsets in runs.items():  # every partition checked before any is tracked
            state = partitions.get(tp)
            last = None if state is None or state.next_offset is None else state.next_offset - 1
            if (last is not None and offsets[0] <= last) or not all(map(lt, offsets, islice(offsets, 1, None))):
                raise ValueError(f"offsets of {tp} must increase: {offsets[:5]} tracked after {last}")
        for tp, offsets in runs.items():
            state = partitions.get(tp)
            if state is None:
                # The first record read is where the group's committed position already is.
                state = partitions[tp] = _PartitionOffsets(committed=offsets[0])
            state.extend(offsets)

    def ack(self, tp: TopicPartition, offset: int) -> None:
        """Mark a tracked offset as done. Acks for forgotten partitions are ignored."""
        state = self._partitions.get(tp)
        if state is not None:
            state.acked.add(offset)

    def ack_all(self, positions: Iterable[Position]) -> None:
        """Mark the tracked records at ``positions`` as done (see ``ack``)."""
        partitions = self._partitions
        for tp, offsets in _by_partition(positions).items():
            state = partitions.get(tp)
            if state is not None:
                state.acked.update(offsets)

    def committable(self) -> dict[TopicPartition, int]:
        """Offsets to commit (next offset to read) that advanced since the last commit."""
        result: dict[TopicPartition, int] = {}
        for tp, state in self._partitions.items():
            mark = state.watermark()
            if mark is not None and (state.committed is None or mark > state.committed):
                result[tp] = mark
        return result

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        """Record a successful commit of the given offsets."""
        for tp, offset in offsets.items():
            state = self._partitions.get(tp)
            if state is not None and (state.committed is None or offset > state.committed):
                state.committed = offset

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop all state of partitions this worker no longer owns."""
        for tp in partitions:
            self._partitions.pop(tp, None)

    def partitions(self) -> list[TopicPartition]:
        return list(self._partitions)

    def unacknowledged(self) -> int:
        """Tracked records not acknowledged yet, all partitions together: what a stop now leaves unfinished."""
        total = 0
        for state in self._partitions.values():
            state.watermark()  # drops the acknowledged prefix
            total += sum(1 for offset in state.outstanding if offset not in state.acked)
        return total
