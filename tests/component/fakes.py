"""In-memory stand-ins for Kafka, for testing the worker loop's logic (never a broker's behaviour)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kafka.errors
import orjson

from tests.fakes import FakeClock
from worker.core.errors import CommitDeferred, TransactionAborted
from worker.core.messages import Headers, Position, RawRecord
from worker.core.wire import MAX_SEND_BYTES, send_size
from worker.ports import Delivery, Scored


class FakeSource:
    def __init__(self, clock: FakeClock, topic: str = "requests") -> None:
        self.clock = clock
        self.topic = topic
        self.queued: list[RawRecord] = []
        self.log: list[RawRecord] = []  # everything produced, for rewind()
        self.next_offset: dict[int, int] = {}
        self.committed: dict[tuple[str, int], int] = {}
        self.revoked: set[tuple[str, int]] = set()
        self.group_generation = 1
        self.owned = {(topic, 0)}  # what assigned() says: the tests' records go to partition 0 unless told
        self.commits_refused = False  # a rebalance is under way: commits are deferred
        self.revocation_pending = False  # a revocation is announced, the assignment not final
        self.paused = False
        self.closed = False
        self.commit_answers: list[Callable[[], None]] = []  # asynchronous commits, answered by the next poll

    def produce(self, value: object, key: bytes | None = None, partition: int = 0, headers: Headers = ()) -> Position:
        offset = self.next_offset.get(partition, 0)
        self.next_offset[partition] = offset + 1
        raw = value if isinstance(value, bytes) or value is None else orjson.dumps(value)
        position = Position(self.topic, partition, offset)
        record = RawRecord(position, key, raw, list(headers), self.clock.wall_ms(), 0.0)
        self.queued.append(record)
        self.log.append(record)
        return position

    def rewind(self) -> None:
        """Give every record from the committed offsets on again (after an aborted transaction)."""
        self.queued = [r for r in self.log
                       if r.position.offset >= self.committed.get((r.position.topic, r.position.partition), 0)]

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        answers, self.commit_answers = self.commit_answers, []
        for answer in answers:
            answer()
        if self.paused:
            max_records = 0
        taken, self.queued = self.queued[:max_records], self.queued[max_records:]
        if not taken:
            self.clock.advance(timeout_s)  # an idle poll takes its whole timeout
        now = self.clock.monotonic()
        return [RawRecord(r.position, r.key, r.value, r.headers, r.timestamp_ms, now) for r in taken]

    def take_revoked(self) -> set[tuple[str, int]]:
        revoked, self.revoked = self.revoked, set()
        return revoked

    def generation(self) -> int:
        return self.group_generation

    def assigned(self) -> set[tuple[str, int]]:
        return self.owned

    def rebalancing(self) -> bool:
        return self.revocation_pending

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        if self.commits_refused:
            raise CommitDeferred("rebalance in progress")
        for tp, offset in offsets.items():
            assert offset >= self.committed.get(tp, 0), "a commit went backwards"
            self.committed[tp] = offset

    def commit_async(self, offsets: dict[tuple[str, int], int], on_done: Callable[[Exception | None], None]) -> None:
        """Answered inside the next poll, as the real clients do."""
        def answer() -> None:
            try:
                self.commit(offsets)
            except CommitDeferred as exc:
                on_done(exc)
                return
            on_done(None)
        self.commit_answers.append(answer)

    def finished(self) -> bool:
        return False

    def list_topics(self) -> set[str]:
        return {self.topic, "requests.replies", "requests.dlq", "private"}

    def undecodable(self) -> dict[tuple[str, int], str]:
        return {}

    def skipped(self) -> int:
        return 0

    def lag(self) -> dict[tuple[str, int], int]:
        """Per partition produced to: its records not polled yet (FakeSource knows every end at once)."""
        waiting = {(self.topic, partition): 0 for partition in self.next_offset}
        for record in self.queued:
            waiting[(record.position.topic, record.position.partition)] += 1
        return waiting

    def pause(self, paused: bool) -> None:
        self.paused = paused

    def finish_rebalance(self, timeout_s: float) -> None:
        self.commits_refused = False

    def close(self, timeout_s: float = 30.0) -> None:
        self.closed = True


@dataclass
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers

    def json(self) -> dict:
        return orjson.loads(self.value)


class FakeSink:
    """A send is on its topic (``sent``) at once, as the broker has it; ``settle`` reports its outcome:
    refused for ``fail_topics``, whose sends never land, and refused for good, as a broker does (with
    kafka-python's errors), for a record over a topic's ``max_bytes``, to a topic in ``denied_topics``,
    and without a key to a topic in ``compacted``."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._pending: list[tuple[Sent | int, object, Exception | None]] = []
        self.fail_topics: set[str] = set()
        self.max_bytes: dict[str, int] = {}
        self.denied_topics: set[str] = set()
        self.compacted: set[str] = set()
        self.closed = False

    @property
    def pending(self) -> int:
        """Sends not reported yet, a group's each counted."""
        return sum(sent if isinstance(sent, int) else 1 for sent, _, _ in self._pending)

    def send(self, topic, key, value, headers, tag) -> None:
        # kafka-python's own check (its send raises TypeError for anything else, a null value included)
        assert all(isinstance(name, str) and isinstance(text, bytes) for name, text in headers), headers
        record = Sent(topic, key, value, headers)
        error = self._refusal(record)
        self._pending.append((record, tag, error))
        if error is None:
            self._land(record)

    def send_group(self, records, tag, member) -> None:
        """One pending entry for the group when every record landed, else one a record (Sink.send_group)."""
        sent = [Sent(*record) for record in records]
        errors = [self._refusal(record) for record in sent]
        for record, error in zip(sent, errors, strict=True):
            if error is None:
                self._land(record)
        if any(error is not None for error in errors):
            self._pending += [(record, member(i), error)
                              for i, (record, error) in enumerate(zip(sent, errors, strict=True))]
        else:
            self._pending.append((len(sent), tag, None))  # a group delivered whole: its size

    def _refusal(self, record: Sent) -> Exception | None:
        if record.topic in self.fail_topics:
            return RuntimeError("broker said no")
        if record.topic in self.denied_topics:
            return kafka.errors.TopicAuthorizationFailedError()
        if record.topic in self.compacted and record.key is None:
            return kafka.errors.InvalidRecordError()
        if send_size(record.key, record.value, record.headers) > self.max_bytes.get(record.topic, MAX_SEND_BYTES):
            return kafka.errors.MessageSizeTooLargeError()
        return None

    def _land(self, record: Sent) -> None:
        self.sent.append(record)

    def settle(self, timeout_s: float = 30.0) -> list[Delivery]:
        deliveries = [Delivery(tag, error) for _, tag, error in self._pending]
        self._pending = []
        return deliveries

    def close(self, timeout_s: float = 10.0) -> None:
        self.closed = True

    def to(self, topic: str) -> list[Sent]:
        return [s for s in self.sent if s.topic == topic]


class FakeTransactionalSink(FakeSink):
    """Sends become visible (in ``sent``) only when FakeExactlyOnce commits them."""

    def __init__(self) -> None:
        super().__init__()
        self.uncommitted: list[Sent] = []

    def _land(self, record: Sent) -> None:
        self.uncommitted.append(record)


class FakeExactlyOnce:
    """Commits the sink's sends with the source's offsets, all or nothing; ``fail_commits`` aborts the next ones."""

    def __init__(self, sink: FakeTransactionalSink, source: FakeSource) -> None:
        self.sink = sink
        self.source = source
        self.fail_commits = 0
        self.commits = 0
        self.aborts: list[str] = []

    @property
    def open(self) -> bool:
        return bool(self.sink.uncommitted)

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        if self.fail_commits:
            self.fail_commits -= 1
            self.abort("commit failed")
            raise TransactionAborted("the broker aborted it")
        self.commits += 1
        self.sink.sent += self.sink.uncommitted
        self.sink.uncommitted = []
        self.source.committed.update(offsets)

    def abort(self, reason: str) -> None:
        self.aborts.append(reason)
        self.sink.uncommitted = []
        self.source.rewind()

    def recover(self) -> None:
        pass


class SlowScorer:
    """A scorer on a thread of its own, on the fake clock: each batch takes ``batch_s`` seconds (one value
    per batch, the last one repeated). ``wait`` moves the clock on, by at most its timeout."""

    def __init__(self, runners, clock: FakeClock, batch_s: list[float]) -> None:
        self.runners = runners
        self.clock = clock
        self.batch_s = list(batch_s)
        self.running: list | None = None
        self.started = self.done_at = 0.0
        self.closed_with: float | None = None

    @property
    def busy(self) -> bool:
        return self.running is not None

    takes_more = False  # one batch at a time, as ThreadScorer
    inline = False

    def move_to_thread(self) -> bool:
        return False

    def submit(self, entry, batch) -> None:
        self.running = (entry, batch)
        self.started = self.clock.monotonic()
        self.done_at = self.started + (self.batch_s.pop(0) if len(self.batch_s) > 1 else self.batch_s[0])

    def wait(self, timeout_s: float) -> None:
        if self.running is not None:
            self.clock.advance(max(0.0, min(timeout_s, self.done_at - self.clock.monotonic())))

    def take(self) -> Scored | None:
        if self.running is None or self.clock.monotonic() < self.done_at:
            return None
        (entry, batch), self.running = self.running, None
        return Scored(entry, batch, self.runners[entry].run([r.item for r in batch]), self.started,
                      self.done_at - self.started)

    def close(self, timeout_s: float = 0.0) -> None:
        self.closed_with = timeout_s


class SlowAckSink(FakeSink):
    """The broker acknowledges each send ``ack_s`` seconds (on the fake clock) after it; ``settle`` waits
    for that, by at most its timeout."""

    def __init__(self, clock: FakeClock, ack_s: float) -> None:
        super().__init__()
        self.clock = clock
        self.ack_s = ack_s
        self.sent_at: list[float] = []
        self.closed_with: float | None = None

    def send(self, topic, key, value, headers, tag) -> None:
        super().send(topic, key, value, headers, tag)
        self.sent_at.append(self.clock.monotonic())

    def send_group(self, records, tag, member) -> None:
        before = len(self._pending)
        super().send_group(records, tag, member)
        self.sent_at += [self.clock.monotonic()] * (len(self._pending) - before)

    def settle(self, timeout_s: float = 30.0) -> list[Delivery]:
        if self.sent_at:
            self.clock.advance(max(0.0, min(timeout_s, self.sent_at[-1] + self.ack_s - self.clock.monotonic())))
        acked = sum(1 for at in self.sent_at if at + self.ack_s <= self.clock.monotonic())
        pending, self._pending = self._pending, self._pending[:acked]
        deliveries = super().settle(timeout_s)
        self._pending, self.sent_at = pending[acked:], self.sent_at[acked:]
        return deliveries

    def close(self, timeout_s: float = 10.0) -> None:
        self.closed_with = timeout_s
        super().close(timeout_s)
