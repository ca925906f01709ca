"""One consumer group of the memory broker: its committed offsets and its members' partitions.

The classic protocol's eager rebalance, simplified: a member joining or leaving announces a rebalance; every
other member rejoins at its next poll (giving up all its partitions until the rebalance completes); once the last
one has, the generation goes up and the partitions are assigned again, range-wise per topic (Kafka's range
assignor), to the members sorted by id. A member not seen for longer than its max poll interval is dropped, as the
coordinator drops a member that stopped polling. Not thread-safe: the broker's lock guards it. Time is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tests.doubles.memory_client.errors import IllegalGeneration, RebalanceInProgress
from worker.core.offsets import TopicPartition as TP


@dataclass
class Member:
    topics: tuple[str, ...]
    interval_s: float  # its max.poll.interval.ms: dropped when not seen for longer
    seen_at: float


class ConsumerGroup:
    def __init__(self, name: str, partitions_of: Callable[[str], int]) -> None:
        """``partitions_of(topic)``: how many partitions the topic has now (0: none)."""
        self.name = name
        self._partitions_of = partitions_of
        self.generation = 0
        self.committed: dict[TP, tuple[int, str]] = {}  # next offset to read and its metadata, per partition
        self._members: dict[str, Member] = {}
        self._assignment: dict[str, frozenset[TP]] = {}
        self._waiting: set[str] | None = None  # members yet to rejoin the rebalance announced; None: stable

    def state(self) -> tuple[object, ...]:
        """What changes when the membership does: the generation, the members, those a rebalance waits for."""
        waiting = None if self._waiting is None else tuple(sorted(self._waiting))
        return self.generation, tuple(sorted(self._members)), waiting

    @property
    def rebalancing(self) -> bool:
        return self._waiting is not None

    def member(self, member_id: str) -> bool:
        return member_id in self._members

    def assignment(self, member_id: str) -> frozenset[TP]:
        """The member's partitions in the current generation (none while it is not a member)."""
        return self._assignment.get(member_id, frozenset())

    def join(self, member_id: str, topics: Iterable[str], interval_s: float, now: float) -> None:
        """Add a member: the others rejoin before the rebalance completes (at once when there are none)."""
        if self._waiting is None:
            self._waiting = set(self._members)
        self._members[member_id] = Member(tuple(topics), interval_s, now)
        self._complete_if_ready()

    def rejoin(self, member_id: str, now: float) -> None:
        """The member polled: it is seen now, and it has rejoined the rebalance announced, if any."""
        self._members[member_id].seen_at = now
        if self._waiting is not None:
            self._waiting.discard(member_id)
            self._complete_if_ready()

    def waits_for(self, member_id: str) -> bool:
        """Whether a rebalance is announced that the member has not rejoined yet."""
        return self._waiting is not None and member_id in self._waiting

    def leave(self, member_id: str) -> None:
        """Remove a member; those left rejoin before the rebalance completes."""
        if self._members.pop(member_id, None) is None:
            return
        self._assignment.pop(member_id, None)
        if not self._members:
            self._waiting, self._assignment = None, {}
            return
        self._waiting = set(self._members) if self._waiting is None else self._waiting - {member_id}
        self._complete_if_ready()

    def expire(self, now: float) -> None:
        """Drop every member not seen within its max poll interval."""
        for member_id, member in list(self._members.items()):
            if now - member.seen_at > member.interval_s:
                self.leave(member_id)

    def commit(self, member_id: str | None, generation: int, offsets: dict[TP, tuple[int, str]]) -> None:
        """Commit for a member of ``generation``, or (``member_id`` None) for a client outside the group, which
        the coordinator takes only while the group has no members. Raises RebalanceInProgress,
        IllegalGeneration."""
        self.check_member(member_id, generation)
        self.committed.update(offsets)

    def check_member(self, member_id: str | None, generation: int) -> None:
        """Raises what a commit of this member (None: not a member) at ``generation`` would be refused for."""
        if member_id is None:
            if self._members:
                raise IllegalGeneration(f"group {self.name} has members: a client outside it cannot commit")
            return
        if member_id not in self._members:
            raise IllegalGeneration(f"member {member_id} is not in group {self.name} (dropped, or left)")
        if self._waiting is not None:
            raise RebalanceInProgress(f"group {self.name} is rebalancing")
        if generation != self.generation:
            raise IllegalGeneration(f"generation {generation} of group {self.name} is over (now {self.generation})")

    def _complete_if_ready(self) -> None:
        if self._waiting:
            return
        self._waiting = None
        self.generation += 1
        self._assignment = _range_assignment(self._members, self._partitions_of)


def _range_assignment(members: dict[str, Member], partitions_of: Callable[[str], int]) -> dict[str, frozenset[TP]]:
    """Per topic, its partitions in consecutive ranges over the members subscribed to it, sorted by id; the first
    ones get one more when they do not divide evenly."""
    taken: dict[str, set[TP]] = {member_id: set() for member_id in members}
    for topic in sorted({topic for member in members.values() for topic in member.topics}):
        subscribed = sorted(member_id for member_id, member in members.items() if topic in member.topics)
        count = partitions_of(topic)
        each, extra = divmod(count, len(subscribed))
        start = 0
        for index, member_id in enumerate(subscribed):
            size = each + (1 if index < extra else 0)
            taken[member_id] |= {(topic, partition) for partition in range(start, start + size)}
            start += size
    return {member_id: frozenset(partitions) for member_id, partitions in taken.items()}
