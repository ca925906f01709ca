"""What a source knows of its group membership between polls: what the rebalance callbacks said.

Client-free: a source feeds its callbacks' partitions in (anything with
``topic`` and ``partition``, and ``offset`` for a position) and asks, after a
poll, which partitions are gone. The clients differ in what a revoked partition
assigned back keeps, so each has its recorder:

- kafka-python (``RevocationRecorder``) runs the callbacks on its IO thread and
  keeps the fetch position of a partition revoked and assigned back; whether a
  revoked partition is gone is decided once the group is stable.
- librdkafka (``RebalanceRecorder``) runs them inside poll()/consume() (and
  close()), then unassigns what was revoked or lost: a partition assigned again
  starts from the committed offset, so the source gives it back the position
  noted at the revocation. Measured on librdkafka 2.16 with Kafka 4.1 (classic
  protocol, eager and cooperative; consumer protocol, KIP-848):
  - an incremental revocation is followed, in the same poll, by an assignment
    (empty when nothing comes), so a revocation is never left pending;
  - the serialized group metadata carries the generation (the member epoch
    with the consumer protocol), -1 before the first join (``group_generation``);
  - a member that outlives max.poll.interval.ms leaves the group on
    librdkafka's thread: with the classic protocol the member id is cleared at
    once, with the consumer protocol nothing shows until the next poll (which
    reports the partitions lost); the generation stays as it was in both.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterable
from typing import Any, Protocol

import structlog

from worker.core.offsets import TopicPartition as TP

log = structlog.get_logger(__name__)

# librdkafka's serialized consumer group metadata starts with this, then the generation (int32, host order).
GROUP_METADATA_MAGIC = b"CGMDv2:"


class Assigned(Protocol):
    """A partition as a client's callback gives it (both clients' TopicPartition)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


class Positioned(Assigned, Protocol):
    """A partition with an offset (librdkafka's TopicPartition; negative: none)."""

    @property
    def offset(self) -> int: ...


def tp_of(partition: Assigned) -> TP:
    return partition.topic, partition.partition


def group_generation(metadata: Any) -> int | None:
    """The generation inside librdkafka's serialized group metadata (``consumer_group_metadata()``): -1
    while not a member. None if the format is not the one known; then the caller counts assignments."""
    if isinstance(metadata, bytes) and metadata.startswith(GROUP_METADATA_MAGIC):
        start = len(GROUP_METADATA_MAGIC)
        if len(metadata) >= start + 4:
            return int.from_bytes(metadata[start:start + 4], sys.byteorder, signed=True)
    return None


class RevocationRecorder:
    """Collects revoked/lost partitions for KafkaSource's poll loop, from kafka-python's rebalance listener
    (which calls it on its IO thread). Thread-safe."""

    def __init__(self, client_id: str) -> None:
        self._client_id = client_id
        self._lock = threading.Lock()
        self._revoked: set[TP] = set()
        self._lost: set[TP] = set()

    def on_partitions_revoked(self, revoked: Iterable[Assigned]) -> None:
        with self._lock:
            self._revoked.update((tp.topic, tp.partition) for tp in revoked)

    def on_partitions_assigned(self, assigned: Iterable[Assigned]) -> None:
        # Positions come from the committed offsets; there is nothing to prepare.
        log.info("partitions_assigned", client_id=self._client_id,
                 partitions=sorted((tp.topic, tp.partition) for tp in assigned))

    def on_partitions_lost(self, lost: Iterable[Assigned]) -> None:
        with self._lock:
            self._lost.update((tp.topic, tp.partition) for tp in lost)

    @property
    def pending(self) -> bool:
        """A revocation was announced and not yet resolved."""
        with self._lock:
            return bool(self._revoked)

    def take_revoked(self, still_ours: set[TP], settled: bool) -> set[TP]:
        """Lost partitions, and revoked partitions that are not ``still_ours``.

        A lost partition is reported even when it is assigned again: its state
        (fetch position) was reset to the committed offset. A revoked one
        assigned back keeps its position, so it is not reported; until the
        rebalance has ``settled``, revoked ones still assigned stay pending (an
        eager rebalance announces the revocation before the join and replaces
        the assignment when the join completes).
        """
        with self._lock:
            gone = (self._revoked - still_ours) | self._lost
            self._lost = set()
            self._revoked = set() if settled else self._revoked - gone
        return gone


class RebalanceRecorder:
    """Collects what librdkafka's rebalance callbacks said, for ConfluentSource's poll loop. Thread-safe
    (close() runs them on a thread of its own).

    A revoked partition is pending until the assignment that follows: one assigned back in it gets the
    position it had (what kafka-python does: its work in hand stays valid), one not assigned back is gone.
    A lost partition is gone at once, even if assigned back: it restarts from the committed offset.
    """

    def __init__(self, client_id: str, eager: bool, max_poll_interval_s: float = math.inf, now: float = 0.0) -> None:
        """``max_poll_interval_s``: the consumer's max.poll.interval.ms; ``now``: the monotonic time at start."""
        self._client_id = client_id
        self._eager = eager
        self._lock = threading.Lock()
        self._revoked: dict[TP, int] = {}  # pending: revoked, the next assignment not in yet; their positions
        self._announced = False  # a revocation whose assignment has not come yet
        self._gone: set[TP] = set()  # gone for good, not taken yet
        self._gone_in_poll: set[TP] = set()  # gone for good during the poll under way
        self.assignments = 0  # assignments so far
        self._max_poll_interval_s = max_poll_interval_s
        self._generation = -1  # as of the last poll (only the polling thread reads and writes it)
        self._polled_at = now

    def begin_poll(self) -> None:
        with self._lock:
            self._gone_in_poll = set()

    def revoked(self, positions: Iterable[Positioned]) -> None:
        """``positions``: the revoked partitions, each with its next offset to consume (negative: none)."""
        with self._lock:
            self._revoked.update({tp_of(tp): tp.offset for tp in positions})
            # An eager protocol revokes everything, then joins; an incremental one revokes what leaves,
            # then assigns what comes (possibly nothing): either way an assignment follows.
            self._announced = self._announced or self._eager or bool(positions)

    def assigned(self, partitions: Iterable[Assigned]) -> dict[TP, int]:
        """Note an assignment; returns the positions to restore, of the partitions revoked and back."""
        assigned = set(map(tp_of, partitions))
        with self._lock:
            back = {tp: offset for tp, offset in self._revoked.items() if tp in assigned and offset >= 0}
            self._forget(set(self._revoked) - assigned)
            self._revoked = {}
            self._announced = False
            self.assignments += 1
        log.info("partitions_assigned", client_id=self._client_id, partitions=sorted(assigned))
        return back

    def lost(self, partitions: Iterable[Assigned]) -> None:
        with self._lock:
            lost = set(map(tp_of, partitions))
            self._forget(lost)
            for tp in lost:
                self._revoked.pop(tp, None)

    def _forget(self, partitions: set[TP]) -> None:
        self._gone |= partitions
        self._gone_in_poll |= partitions

    @property
    def pending(self) -> bool:
        """A revocation was announced and its assignment has not come yet."""
        with self._lock:
            return self._announced

    def gone_in_poll(self) -> set[TP]:
        """Partitions gone for good since ``begin_poll``."""
        with self._lock:
            return set(self._gone_in_poll)

    def polled(self, now: float, generation: int) -> None:
        """A poll ended at ``now`` (monotonic) with the group at ``generation`` (-1: not a member)."""
        self._polled_at, self._generation = now, generation

    def generation(self, now: float) -> int:
        """The group generation as of the last poll; -1 while not a member, and once the time since the last
        poll passed max.poll.interval.ms (librdkafka leaves the group then, without a sign of it with KIP-848).

        Between polls librdkafka is not asked: its member id and group metadata wait on the lock of its main
        thread, about half a millisecond a call under load (the loop asks after every batch). A group that
        dropped this member otherwise (missed heartbeats) shows at the next poll, as a loss.
        """
        if now - self._polled_at > self._max_poll_interval_s:
            return -1
        return self._generation

    def take_gone(self) -> set[TP]:
        with self._lock:
            gone, self._gone = self._gone, set()
        return gone
