"""How far another consumer group (the live workers) lags on a topic: what a backfill that yields to live
traffic reads, through a PartitionReader in that group (on the backfill's own Kafka client): it never
subscribes, so it reads the group's commits without joining it, and it never commits."""

from __future__ import annotations

import structlog

from worker.core.bounds import METADATA_S
from worker.core.offsets import TopicPartition as TP
from worker.ports import PartitionReader

log = structlog.get_logger(__name__)


class GroupLag:
    """Records between ``group``'s committed offsets and the ends of ``topic``, summed over its partitions: a
    LagReader. Partitions the group has never committed are left out. Not thread-safe.

    Built, it has read the topic's partitions (up to METADATA_S; raises LookupError when the topic does not
    exist). ``errors``: what the reader's client raises for a request refused or unanswered.
    """

    def __init__(self, reader: PartitionReader, topic: str, group: str, errors: tuple[type[Exception], ...]) -> None:
        self._reader = reader
        self._group = group
        self._errors = errors
        self._partitions: list[TP] = [(topic, p) for p in reader.partitions(METADATA_S)]

    def __call__(self) -> int | None:
        """The lag now, or None when the group has committed nothing on the topic (or the broker did not answer)."""
        try:
            known = {tp: offset for tp, (offset, _plan) in self._reader.committed(self._partitions).items()}
            if not known:
                return None
            ends = self._reader.lookups(list(known), 0, None)  # (first, until, end) per partition
        except self._errors as exc:
            log.warning("live_lag_unknown", group=self._group, error=f"{type(exc).__name__}: {exc}")
            return None
        return sum(max(0, ends[tp][2] - offset) for tp, offset in known.items())

    def close(self) -> None:
        self._reader.close(METADATA_S)
