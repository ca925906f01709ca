"""Which offsets may be committed. Pure bookkeeping, no Kafka calls.

Records are tracked in the order they are consumed and acknowledged in any
order (a reply the broker accepted, a dead letter, a counted duplicate). The
committable offset of a partition is one past the highest offset below which
everything is acknowledged: it never decreases and never passes an
unacknowledged record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class _PartitionOffsets:
    __slots__ = ("outstanding", "acked", "next_offset", "committed")

    def __init__(self) -> None:
        self.outstanding: deque[int] = deque()
        self.acked: set[int] = set()
        self.next_offset: int | None = None  # one past the highest tracked offset
        self.committed: int | None = None

    def watermark(self) -> int | None:
        while self.outstanding and self.outstanding[0] in self.acked:
            self.acked.discard(self.outstanding.popleft())
        if self.outstanding:
            return self.outstanding[0]
        return self.next_offset


class OffsetTracker:
    """Per-partition watermarks of acknowledged offsets. Not thread-safe."""

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _PartitionOffsets] = {}

    def track(self, tp: TopicPartition, offset: int) -> None:
        """Record that ``offset`` was consumed; offsets of a partition must increase."""
        state = self._partitions.get(tp)
        if state is None:
            # The first record read is where the group's committed position already is.
            state = self._partitions[tp] = _PartitionOffsets()
            state.committed = offset
        if state.next_offset is not None and offset < state.next_offset:
            raise ValueError(f"offset {offset} of {tp} tracked after {state.next_offset - 1}")
        state.outstanding.append(offset)
        state.next_offset = offset + 1

    def ack(self, tp: TopicPartition, offset: int) -> None:
        """Mark a tracked offset as done. Acks for forgotten partitions are ignored."""
        state = self._partitions.get(tp)
        if state is not None:
            state.acked.add(offset)

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
