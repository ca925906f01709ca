"""The memory client's Source (worker/ports.py): one member of a consumer group of the memory broker.

Rebalances happen inside poll() and finish_rebalance() only, as with the real clients: there the member rejoins a
rebalance the group announced (giving up every partition until it completes), rejoins the group if the group
dropped it (its partitions lost), and takes the partitions of a new generation, each from the position it had if it
kept it, else from the group's committed offset (else the earliest or the latest, as auto_offset_reset says).
Asynchronous commits are answered inside the next poll. Not thread-safe; the broker is.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from tests.doubles.memory_client.broker import GroupMetadata, MemoryBroker
from tests.doubles.memory_client.errors import IllegalGeneration, RebalanceInProgress
from tests.doubles.memory_client.group import ConsumerGroup
from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import Position, RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.metadata import missing_requests_topic


class MemorySource:
    """A Source, and a RewindableSource for the worker's ExactlyOnce: a member of ``kafka.group`` consuming the
    requests topic and ``model_topics``."""

    def __init__(self, broker: MemoryBroker, kafka: KafkaSettings, clock: Clock, *, read_committed: bool,
                 model_topics: tuple[str, ...] = ()) -> None:
        self._broker, self._clock = broker, clock
        self._group, self._topics = kafka.group, (kafka.requests_topic, *model_topics)
        self._member_id = f"{kafka.client_id}-{uuid.uuid4().hex[:12]}"
        self._interval_s = kafka.max_poll_interval_ms / 1000
        self._earliest = kafka.auto_offset_reset == "earliest"
        self._read_committed = read_committed
        self._joined = False
        self._generation = -1
        self._assigned: frozenset[TP] = frozenset()
        self._positions: dict[TP, int] = {}
        self._revoked: set[TP] = set()
        self._paused = False
        self._answers: list[Callable[[], None]] = []
        self._turn = 0  # which assigned partition a fetch starts with: each gets its turn first

    def start(self, wait_s: float = 10.0) -> None:
        """Join the group, once every topic exists. Raises LookupError for one that does not within ``wait_s``."""
        for topic in self._topics:
            if not self._broker.wait(self._exists(topic), wait_s):
                raise missing_requests_topic(topic)
        self._broker.in_group(self._group, lambda group: group.join(self._member_id, self._topics, self._interval_s,
                                                                    self._broker.clock.monotonic()))
        self._joined = True

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        self._answer_commits()
        deadline = self._clock.monotonic() + timeout_s
        while True:
            records = self._fetch(max_records) if self._settled() and not self._paused else []
            left = deadline - self._clock.monotonic()
            if records or left <= 0:
                return records
            self._broker.wait(self._news, left)

    def finish_rebalance(self, timeout_s: float) -> None:
        self._answer_commits()
        deadline = self._clock.monotonic() + timeout_s
        while not self._settled() and deadline > self._clock.monotonic():
            self._broker.wait(self._news, deadline - self._clock.monotonic())

    def take_revoked(self) -> set[TP]:
        revoked, self._revoked = self._revoked - self._assigned, set()
        return revoked

    def assigned(self) -> set[TP]:
        return set(self._assigned)

    def generation(self) -> int:
        dropped = self._broker.in_group(self._group, lambda group: not group.member(self._member_id))
        return -1 if dropped else self._generation

    def rebalancing(self) -> bool:
        return self._broker.in_group(self._group, lambda group: group.rebalancing and group.member(self._member_id))

    def commit(self, offsets: dict[TP, int]) -> None:
        commits = {tp: (offset, "") for tp, offset in offsets.items()}
        try:
            self._broker.in_group(self._group, lambda group: group.commit(self._member_id, self._generation, commits))
        except (RebalanceInProgress, IllegalGeneration) as exc:
            raise CommitDeferred(str(exc)) from exc

    def commit_async(self, offsets: dict[TP, int], on_done: Callable[[Exception | None], None]) -> None:
        def answer() -> None:
            try:
                self.commit(offsets)
            except CommitDeferred as exc:
                on_done(exc)
                return
            on_done(None)
        self._answers.append(answer)

    def pause(self, paused: bool) -> None:
        self._paused = paused

    def finished(self) -> bool:
        return False

    def list_topics(self) -> set[str]:
        return self._broker.topics()

    def lag(self) -> dict[TP, int]:
        return {tp: max(0, self._broker.end_offset(tp, self._read_committed) - self._positions[tp])
                for tp in self._assigned}

    def undecodable(self) -> dict[TP, str]:
        return {}  # the memory broker keeps records, not compressed batches

    def skipped(self) -> int:
        return 0  # the memory broker deletes nothing

    def close(self, timeout_s: float = 30.0) -> None:
        if self._joined:
            self._broker.in_group(self._group, lambda group: group.leave(self._member_id))
            self._joined = False

    def group_metadata(self) -> GroupMetadata:
        """This member's identity, which a transaction's offsets carry (worker/kafka/exactly_once.py)."""
        return GroupMetadata(self._group, self._member_id, self._generation)

    def rewind(self, known: Mapping[TP, int] | None = None) -> None:
        """Consume every assigned partition again from its committed offset (after an aborted transaction):
        ``known``'s where it has one, the group's otherwise."""
        known = known or {}
        self._positions = {**self._starts(self._assigned.difference(known)),
                           **{tp: offset for tp, offset in known.items() if tp in self._assigned}}

    def _exists(self, topic: str) -> Callable[[], bool]:
        return lambda: self._broker.partitions_of(topic) > 0

    def _answer_commits(self) -> None:
        answers, self._answers = self._answers, []
        for answer in answers:
            answer()

    def _settled(self) -> bool:
        """Rejoin the group or the rebalance it announced, take a new generation's partitions; True once this
        member has its partitions of the group's current generation."""
        def sync(group: ConsumerGroup) -> bool:
            now = self._broker.clock.monotonic()
            if not group.member(self._member_id):
                if not self._joined:
                    return False  # closed
                self._lose()
                group.join(self._member_id, self._topics, self._interval_s, now)
            else:
                group.rejoin(self._member_id, now)
            if group.rebalancing:
                return False
            if group.generation != self._generation:
                self._take(group)
            return True
        return self._broker.in_group(self._group, sync)

    def _news(self) -> bool:
        """Whether a poll waiting for records should look again: its group changed, or a partition has more."""
        def changed(group: ConsumerGroup) -> bool | None:  # None: only new records would be news
            if not group.member(self._member_id) or group.waits_for(self._member_id):
                return True
            if group.rebalancing:
                return False  # rejoined: what is new comes when the others have
            return True if group.generation != self._generation else None
        news = self._broker.in_group(self._group, changed)
        if news is not None:
            return news
        return not self._paused and any(self._broker.end_offset(tp, self._read_committed) > self._positions[tp]
                                        for tp in self._assigned)

    def _take(self, group: ConsumerGroup) -> None:
        assigned = group.assignment(self._member_id)
        self._revoked |= self._assigned - assigned
        kept = {tp: position for tp, position in self._positions.items() if tp in assigned}
        self._positions = {**self._starts(assigned - self._assigned, group.committed), **kept}
        self._assigned, self._generation = assigned, group.generation

    def _lose(self) -> None:
        """The group dropped this member: every partition it had is lost."""
        self._revoked |= self._assigned
        self._assigned, self._positions, self._generation = frozenset(), {}, -1

    def _starts(self, partitions: frozenset[TP], committed: dict[TP, tuple[int, str]] | None = None) -> dict[TP, int]:
        stored = committed if committed is not None else self._broker.in_group(
            self._group, lambda group: dict(group.committed))
        return {tp: stored[tp][0] if tp in stored else self._reset(tp) for tp in partitions}

    def _reset(self, tp: TP) -> int:
        return 0 if self._earliest else self._broker.end_offset(tp, self._read_committed)

    def _fetch(self, max_records: int) -> list[RawRecord]:
        partitions = sorted(self._assigned)
        if not partitions:
            return []
        self._turn = (self._turn + 1) % len(partitions)
        records: list[RawRecord] = []
        for tp in partitions[self._turn:] + partitions[:self._turn]:
            entries, self._positions[tp] = self._broker.fetch(tp, self._positions[tp], max_records - len(records),
                                                              self._read_committed)
            received_at = self._clock.monotonic()
            records += [RawRecord(Position(tp[0], tp[1], e.offset), e.key, e.value, list(e.headers), e.timestamp_ms,
                                  received_at) for e in entries]
            if len(records) >= max_records:
                break
        return records
