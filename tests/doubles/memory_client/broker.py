"""The memory broker: topics of partitions of records, consumer groups and transactions, in this process.

A broker listens at an address (``MemoryBroker.start``), as a real one at its host:port: the memory client's parts
find it by their ``kafka_bootstrap_servers`` (``connect``), and none answers at any other. Every offset is a
record's or a transaction marker's; nothing is ever deleted. A transaction's records are open until it ends, then
committed or aborted, each partition it wrote to getting a marker: a read_committed reader stops at the first
open record (the last stable offset) and skips aborted records and markers; a read_uncommitted one skips markers
only. Thread-safe: one lock guards everything, and every change wakes the callers waiting for one. Time is the
broker's clock's (a SystemClock unless given: the waits are real).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import Condition
from typing import TypeVar

from tests.doubles.memory_client.errors import (
    MessageTooLarge,
    NoBrokerAnswers,
    ProducerFenced,
    UnknownTopicOrPartition,
)
from tests.doubles.memory_client.group import ConsumerGroup
from worker.core.clock import Clock, SystemClock
from worker.core.messages import Headers, Position
from worker.core.offsets import TopicPartition as TP
from worker.core.wire import send_size

X = TypeVar("X")

MAX_MESSAGE_BYTES = 1_048_588  # Kafka's default message.max.bytes: a larger record is refused
COMMITTED, OPEN, ABORTED, MARKER = "committed", "open", "aborted", "marker"
# What the start check reads (worker/kafka/broker_facts.py): Kafka's defaults.
BROKER_CONFIGS = {"group.min.session.timeout.ms": "6000", "group.max.session.timeout.ms": "1800000",
                  "group.coordinator.rebalance.protocols": "classic"}


@dataclass
class Entry:
    """One offset of a partition: a record, or a transaction's marker (``state`` MARKER)."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    state: str = COMMITTED


@dataclass
class Transaction:
    epoch: int
    entries: list[Entry] = field(default_factory=list)
    written: set[TP] = field(default_factory=set)
    offsets: dict[str, dict[TP, tuple[int, str]]] = field(default_factory=dict)  # per group


@dataclass(frozen=True)
class GroupMetadata:
    """A member's identity in its group, which a transaction's offsets carry (a dropped member is fenced)."""

    group: str
    member_id: str
    generation: int


_LISTENING: dict[str, MemoryBroker] = {}


def connect(address: str) -> MemoryBroker:
    """The broker listening at ``address``. Raises NoBrokerAnswers."""
    broker = _LISTENING.get(address)
    if broker is None:
        raise NoBrokerAnswers(f"no memory broker listens at {address}")
    return broker


class MemoryBroker:
    def __init__(self, address: str, clock: Clock | None = None) -> None:
        self.address = address
        self.clock = clock or SystemClock()
        self.configs = dict(BROKER_CONFIGS)
        self._changed = Condition()
        self._topics: dict[str, list[list[Entry]]] = {}
        self._max_bytes: dict[str, int] = {}
        self._groups: dict[str, ConsumerGroup] = {}
        self._transactions: dict[str, Transaction] = {}  # by transactional id: the latest epoch's, open or not
        self._open: set[str] = set()  # transactional ids with a transaction open
        self._round_robin = itertools.count()
        self.transactions_committed = 0  # those with records or offsets in them

    @classmethod
    def start(cls, address: str, clock: Clock | None = None) -> MemoryBroker:
        """A new broker listening at ``address`` (replacing one there)."""
        broker = _LISTENING[address] = cls(address, clock)
        return broker

    def stop(self) -> None:
        """Stop listening: the clients' next calls find no broker."""
        if _LISTENING.get(self.address) is self:
            del _LISTENING[self.address]

    # Topics and records.

    def create_topic(self, name: str, partitions: int, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        with self._changed:
            self._topics[name] = [[] for _ in range(partitions)]
            self._max_bytes[name] = max_message_bytes
            self._changed.notify_all()

    def topics(self) -> set[str]:
        with self._changed:
            return set(self._topics)

    def partitions_of(self, topic: str) -> int:
        """How many partitions ``topic`` has; 0 when it does not exist."""
        with self._changed:
            return len(self._topics.get(topic, ()))

    def append(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None, headers: Headers,
               producer: tuple[str, int] | None = None) -> Position:
        """Write one record (into the open transaction of ``producer``, its transactional id and epoch, when
        given); ``partition`` None: by the key's hash, or round-robin without a key. Returns where it landed.
        Raises UnknownTopicOrPartition, MessageTooLarge, ProducerFenced."""
        with self._changed:
            partitions = self._topics.get(topic)
            if partitions is None or (partition is not None and not 0 <= partition < len(partitions)):
                raise UnknownTopicOrPartition(f"topic {topic!r} partition {partition} does not exist")
            size = send_size(key, value, headers)
            if size > self._max_bytes[topic]:
                raise MessageTooLarge(f"a {size}-byte record is over {topic}'s max.message.bytes "
                                      f"({self._max_bytes[topic]})")
            if partition is None:
                partition = (zlib.crc32(key) if key is not None else next(self._round_robin)) % len(partitions)
            log = partitions[partition]
            entry = Entry(len(log), key, value, list(headers), self.clock.wall_ms())
            if producer is not None:
                transaction = self._transaction(*producer, opening=True)
                entry.state = OPEN
                transaction.entries.append(entry)
                transaction.written.add((topic, partition))
            log.append(entry)
            self._changed.notify_all()
            return Position(topic, partition, entry.offset)

    def fetch(self, tp: TP, position: int, max_records: int, read_committed: bool) -> tuple[list[Entry], int]:
        """Up to ``max_records`` records of ``tp`` from ``position`` on, and the position after them (past the
        markers and, read_committed, the aborted records skipped)."""
        with self._changed:
            log = self._partition(tp)
            taken: list[Entry] = []
            while position < len(log) and len(taken) < max_records:
                entry = log[position]
                if read_committed and entry.state == OPEN:
                    break  # the last stable offset
                if entry.state == COMMITTED or (entry.state in (OPEN, ABORTED) and not read_committed):
                    taken.append(entry)
                position += 1
            return taken, position

    def end_offset(self, tp: TP, read_committed: bool) -> int:
        """The high watermark, or read_committed the last stable offset (the first open record's)."""
        with self._changed:
            log = self._partition(tp)
            if read_committed:
                return next((entry.offset for entry in log if entry.state == OPEN), len(log))
            return len(log)

    def offset_for_time(self, tp: TP, timestamp_ms: int) -> int | None:
        """The first record's offset at or after ``timestamp_ms``; None when there is none."""
        with self._changed:
            return next((e.offset for e in self._partition(tp) if e.state != MARKER and e.timestamp_ms >= timestamp_ms),
                        None)

    def records(self, topic: str, read_committed: bool = True) -> list[tuple[int, Entry]]:
        """Every record of ``topic`` a reader sees, (partition, record), partition by partition."""
        with self._changed:
            count = len(self._topics.get(topic, ()))
        landed = []
        for partition in range(count):
            entries, _ = self.fetch((topic, partition), 0, 1 << 62, read_committed)
            landed += [(partition, entry) for entry in entries]
        return landed

    def _partition(self, tp: TP) -> list[Entry]:
        partitions = self._topics.get(tp[0])
        if partitions is None or not 0 <= tp[1] < len(partitions):
            raise UnknownTopicOrPartition(f"topic {tp[0]!r} partition {tp[1]} does not exist")
        return partitions[tp[1]]

    # Consumer groups.

    def in_group(self, name: str, act: Callable[[ConsumerGroup], X]) -> X:
        """``act(group)`` under the broker's lock, the group's lapsed members dropped first; wakes the waiters
        when that changed the group's membership (never for a read: two waiters would wake each other)."""
        with self._changed:
            group = self._group(name)
            before = group.state()
            try:
                group.expire(self.clock.monotonic())
                return act(group)
            finally:
                if group.state() != before:
                    self._changed.notify_all()

    def _group(self, name: str) -> ConsumerGroup:
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = ConsumerGroup(name, lambda topic: len(self._topics.get(topic, ())))
        return group

    def wait(self, until: Callable[[], bool], timeout_s: float) -> bool:
        """Block until ``until()`` (asked again at each change of the broker), at most ``timeout_s``; its last
        answer. ``until`` runs under the broker's lock: it may call the broker."""
        deadline = self.clock.monotonic() + timeout_s
        with self._changed:
            while not until():
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    # Transactions.

    def init_transactions(self, transactional_id: str) -> int:
        """A new epoch of ``transactional_id``, fencing the producers of the ones before; what one of them left
        open is aborted."""
        with self._changed:
            before = self._transactions.get(transactional_id)
            if before is not None and transactional_id in self._open:
                self._end(transactional_id, before, commit=False)
            epoch = before.epoch + 1 if before is not None else 0
            self._transactions[transactional_id] = Transaction(epoch)
            return epoch

    def begin(self, transactional_id: str, epoch: int) -> None:
        with self._changed:
            self._transaction(transactional_id, epoch, opening=True)

    def add_offsets(self, transactional_id: str, epoch: int, offsets: dict[TP, tuple[int, str]],
                    member: GroupMetadata) -> None:
        """Offsets to commit with the transaction. Raises ProducerFenced, and IllegalGeneration or
        RebalanceInProgress for a member the group no longer counts (a zombie)."""
        with self._changed:
            transaction = self._transaction(transactional_id, epoch)
            self.in_group(member.group, lambda g: g.check_member(member.member_id, member.generation))
            transaction.offsets.setdefault(member.group, {}).update(offsets)

    def end(self, transactional_id: str, epoch: int, commit: bool) -> None:
        """Commit (or abort) the open transaction: its records and offsets at once. Raises ProducerFenced."""
        with self._changed:
            self._end(transactional_id, self._transaction(transactional_id, epoch), commit)
            self._changed.notify_all()

    def _end(self, transactional_id: str, transaction: Transaction, commit: bool) -> None:
        for entry in transaction.entries:
            entry.state = COMMITTED if commit else ABORTED
        for topic, partition in transaction.written:
            log = self._topics[topic][partition]
            log.append(Entry(len(log), None, None, [], self.clock.wall_ms(), MARKER))
        if commit:
            self.transactions_committed += bool(transaction.entries or transaction.offsets)
            for group, offsets in transaction.offsets.items():
                self._group(group).committed.update(offsets)
        self._transactions[transactional_id] = Transaction(transaction.epoch)
        self._open.discard(transactional_id)

    def _transaction(self, transactional_id: str, epoch: int, opening: bool = False) -> Transaction:
        transaction = self._transactions.get(transactional_id)
        if transaction is None or transaction.epoch != epoch:
            raise ProducerFenced(f"transactional id {transactional_id!r} epoch {epoch} was fenced by a newer "
                                 "producer")
        if opening:
            self._open.add(transactional_id)
        return transaction
