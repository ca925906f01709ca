"""How far another consumer group (the live workers) lags on a topic: what a backfill that yields to live
traffic reads, through a consumer in that group that never subscribes (so it reads the group's commits without
joining it), on the backfill's own Kafka client (worker/kafka/kafka_python/group_lag.py,
worker/kafka/confluent/group_lag.py)."""

from __future__ import annotations

from typing import Protocol

import structlog

from worker.core.offsets import TopicPartition as TP

log = structlog.get_logger(__name__)


class GroupOffsets(Protocol):
    """A group's committed offsets on one topic and the topic's end offsets, read by a client. Not thread-safe."""

    ERRORS: tuple[type[Exception], ...]  # what the client raises for a request refused or unanswered

    def committed(self) -> dict[TP, int]:
        """The group's committed offset per partition of the topic; partitions without one are left out."""
    def ends(self, partitions: list[TP]) -> dict[TP, int]: ...
    def close(self) -> None: ...


class GroupLag:
    """Records between ``group``'s committed offsets and the ends of the topic, summed over its partitions: a
    LagReader. Partitions the group has never committed are left out. Not thread-safe."""

    def __init__(self, offsets: GroupOffsets, group: str) -> None:
        self._offsets = offsets
        self._group = group

    def __call__(self) -> int | None:
        """The lag now, or None when the group has committed nothing on the topic (or the broker did not answer)."""
        try:
            known = self._offsets.committed()
            if not known:
                return None
            ends = self._offsets.ends(list(known))
        except self._offsets.ERRORS as exc:
            log.warning("live_lag_unknown", group=self._group, error=f"{type(exc).__name__}: {exc}")
            return None
        return sum(max(0, ends[tp] - offset) for tp, offset in known.items())

    def close(self) -> None:
        self._offsets.close()
