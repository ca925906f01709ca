"""Consuming requests: confluent-kafka's Consumer (librdkafka) behind the Source port (worker/kafka/group_source.py).

Rebalance callbacks run inside poll()/consume(), on the caller's thread; they
record the event, and the loop acts on it after the poll.

Where librdkafka differs from kafka-python, and what this adapter does:
- A revoked partition assigned back gets the position it had, so that its work
  in hand stays valid, as with kafka-python (worker/kafka/rebalance.py).
- A poll may return records of a partition that leaves during that same poll:
  they are dropped (and a lost partition that is ours again goes back to its
  committed offset, where librdkafka restarted it).
- ``consume(n, timeout)`` waits for all ``n`` records or the timeout, so poll
  blocks for the first record only and then takes what is already fetched.
- A partition paused when it was revoked is still paused when it is assigned
  again: each assignment resumes what it assigns (the loop pauses again what
  it wants paused, every step, as with kafka-python).
- librdkafka joins and leaves the group on its own thread and shows the
  generation only in the group metadata it serializes for transactions
  (worker/kafka/rebalance.py says what shows when).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

import structlog
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.confluent.consumer import (
    at_end,
    fetch,
    group_config,
    join_refused,
    partitions_of,
    positions,
    raw_record,
    undecodable,
)
from worker.kafka.confluent.skipped import OffsetResets
from worker.kafka.connection import close_within
from worker.kafka.group_source import GroupSource
from worker.kafka.rebalance import RebalanceRecorder, group_generation, tp_of

log = structlog.get_logger(__name__)

SETTLE_SLICE_S = 0.1  # finish_rebalance polls in slices this long, so that it returns once settled
EAGER_ASSIGNORS = ("range", "roundrobin")
# Errors of a commit that say "not now": the group is rebalancing, or the coordinator is away or moving.
COMMIT_LATER = frozenset({
    KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.STALE_MEMBER_EPOCH, KafkaError.FENCED_MEMBER_EPOCH, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._WAIT_COORD, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._ASSIGNMENT_LOST, KafkaError._STATE,
})


def consumer_config(kafka: KafkaSettings, read_committed: bool) -> dict[str, Any]:
    """librdkafka properties of the stream's consumer: manual commits, no topic creation, the group protocol;
    ``read_committed`` skips aborted transactions' records."""
    config = group_config(kafka, **{
        "auto.offset.reset": kafka.auto_offset_reset,
        "max.poll.interval.ms": kafka.max_poll_interval_ms,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "group.protocol": kafka.kafka_group_protocol,
    })
    if kafka.kafka_group_protocol == "classic":  # with the consumer protocol, the broker sets both
        config.update({"session.timeout.ms": kafka.session_timeout_ms,
                       "partition.assignment.strategy": kafka.assignor})
    if kafka.group_instance_id:
        config["group.instance.id"] = kafka.group_instance_id
    return config


class ConfluentSource(GroupSource):
    CLIENT = "confluent"
    COMMITTED_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaException,)

    def __init__(self, kafka: KafkaSettings, clock: Clock, *, read_committed: bool, metadata_s: float,
                 model_topics: tuple[str, ...] = ()) -> None:
        """``read_committed``: skip aborted transactions' records (isolation.level; always with exactly-once)."""
        super().__init__(kafka, clock, metadata_s, model_topics)
        self._resets = OffsetResets()  # librdkafka's lines, read for offset resets on their way to its logger
        self._consumer = Consumer({**consumer_config(kafka, read_committed), "on_commit": self._on_commit,
                                   "logger": self._resets})
        self._commits_out: deque[Callable[[Exception | None], None]] = deque()  # answered in this order
        self._eager = kafka.kafka_group_protocol == "classic" and kafka.assignor in EAGER_ASSIGNORS
        self._recorder = RebalanceRecorder(kafka.client_id, self._eager, kafka.max_poll_interval_ms / 1000,
                                           clock.monotonic())
        self._paused = False

    def _partitions(self, topic: str) -> list[int] | None:
        return partitions_of(self._consumer, topic, self._metadata_s)

    def _subscribe(self) -> None:
        """librdkafka joins the group in the background, and assigns inside a later poll."""
        self._consumer.subscribe(self._topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_lost)

    def _assigned(self) -> set[TP]:
        return {tp_of(tp) for tp in self._consumer.assignment()}

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:  # a new start: a batch that stopped it before stops it again if still undecodable
            self._undecodable.pop(tp_of(tp), None)
        back = self._recorder.assigned(partitions)
        starts = [TopicPartition(tp.topic, tp.partition, back[tp_of(tp)]) if tp_of(tp) in back else tp
                  for tp in partitions]
        if self._eager:
            consumer.assign(starts)
        else:
            consumer.incremental_assign(starts)
        if partitions:
            consumer.resume(partitions)  # paused when they were revoked: librdkafka keeps that

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._recorder.revoked(consumer.position(partitions) if partitions else [])
        self._resets.forget([tp_of(tp) for tp in partitions])

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._recorder.lost(partitions)
        self._resets.forget([tp_of(tp) for tp in partitions])

    def skipped(self) -> int:
        """Requests skipped unread since this source began (worker/kafka/confluent/skipped.py)."""
        return self._resets.tally.total

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        """Blocks up to ``timeout_s`` for the first record, then takes those already fetched. Records of a
        partition revoked meanwhile are not returned."""
        if not self._rewound(timeout_s):
            return []
        messages = self._poll(timeout_s, max_records)
        if self._resets.waiting:  # an offset reset said: its partition's next record tells where it went on
            self._resets.first_records(messages)
        now = self._clock.monotonic()
        return [raw_record(m, now) for m in messages]

    def _poll(self, timeout_s: float, max_records: int) -> list[Message]:
        self._recorder.begin_poll()
        messages = self._fetch(timeout_s, max_records)
        self._recorder.polled(self._clock.monotonic(), self._live_generation())
        return self._without_gone(messages) if messages else messages

    def _fetch(self, timeout_s: float, max_records: int) -> list[Message]:
        records, stopped = [], self._undecodable
        for m in fetch(self._consumer, timeout_s, max_records):
            if stopped and (m.topic(), m.partition()) in stopped:
                continue  # fetched before its partition stopped: nothing past the batch may be answered
            if m.error() is None:
                records.append(m)
            elif undecodable(m):
                self._stop_undecodable(m)
            elif join_refused(m):  # librdkafka would try to join for ever
                raise self.refused_by_group()
            else:
                at_end(m)  # raises a fatal error, logs any other but the end of a partition
        return records

    def _stop_undecodable(self, message: Message) -> None:
        """Pause the partition at the batch librdkafka could not decode (it would go on past it)."""
        offset = message.offset()
        tp = TopicPartition(str(message.topic()), int(message.partition() or 0), -1 if offset is None else offset)
        error = str(message.error())
        self._consumer.pause([tp])
        if offset is not None and offset >= 0:
            self._consumer.seek(tp)
        self._stopped(tp_of(tp), tp.offset, error)

    def _without_gone(self, messages: list[Message]) -> list[Message]:
        """Drop the records of partitions that left for good during the poll; a partition of theirs that is
        ours again goes back to its committed offset, where librdkafka restarted it (the records in hand
        before it left are dropped too: take_revoked reports it)."""
        gone = self._recorder.gone_in_poll()
        if not gone:
            return messages
        kept = [m for m in messages if (m.topic(), m.partition()) not in gone]
        if len(kept) < len(messages):
            dropped = {(m.topic(), m.partition()) for m in messages} - {(m.topic(), m.partition()) for m in kept}
            ours_again = [tp for tp in self._consumer.assignment() if tp_of(tp) in dropped]
            if ours_again:
                self._seek_committed_of(ours_again)
        return kept

    def take_revoked(self) -> set[TP]:
        """A lost partition is reported even if assigned back (it restarts from the committed offset); a
        revoked one only once the assignment that follows has come (RebalanceRecorder)."""
        return self._recorder.take_gone()

    def rebalancing(self) -> bool:
        return self._recorder.pending

    def generation(self) -> int:
        return self._recorder.generation(self._clock.monotonic())

    def _live_generation(self) -> int:
        if not self._consumer.memberid():
            return -1
        generation = group_generation(self._consumer.consumer_group_metadata())
        return self._recorder.assignments if generation is None else generation

    def commit(self, offsets: dict[TP, int]) -> None:
        """Raises KafkaException for a refusal that is not a CommitDeferred."""
        if not offsets:
            return
        if self._recorder.pending:
            raise CommitDeferred("a rebalance is under way")
        try:
            results = self._consumer.commit(offsets=positions(offsets), asynchronous=False)
        except KafkaException as exc:
            raise _deferred_or(exc.args[0] if exc.args else None, exc) from exc
        for result in results:
            if result.error is not None:
                raise _deferred_or(result.error, KafkaException(result.error))

    def commit_async(self, offsets: dict[TP, int], on_done: Callable[[Exception | None], None]) -> None:
        """librdkafka answers inside a later poll, in sending order."""
        if self._recorder.pending:
            on_done(CommitDeferred("a rebalance is under way"))
            return
        try:
            self._consumer.commit(offsets=positions(offsets), asynchronous=True)
        except KafkaException as exc:
            on_done(_deferred_or(exc.args[0] if exc.args else None, exc))
            return
        self._commits_out.append(on_done)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's answer to the oldest asynchronous commit (synchronous ones do not come here)."""
        if not self._commits_out:
            return
        failed = error or next((tp.error for tp in partitions if tp.error is not None), None)
        self._commits_out.popleft()(None if failed is None else _deferred_or(failed, KafkaException(failed)))

    def finish_rebalance(self, timeout_s: float) -> None:
        """Polls with every partition paused until the rebalance completes. Partitions assigned during it are
        not paused and may return records: each is put back to its first returned offset, for the next poll."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.pause(True)
            self._seek_first(self._poll(min(SETTLE_SLICE_S, max(0.0, deadline - time.monotonic())), 500))
            if (not self._recorder.pending and self._recorder.generation(self._clock.monotonic()) >= 0) or \
                    time.monotonic() >= deadline:
                return

    def _seek_first(self, messages: list[Message]) -> None:
        first: dict[TP, int] = {}
        for m in messages:
            first.setdefault((m.topic(), m.partition()), m.offset())  # type: ignore[arg-type]
        for (topic, partition), offset in first.items():
            self._seek_position(TopicPartition(topic, partition, offset))

    def _seek_committed_of(self, partitions: list[TopicPartition]) -> None:
        for tp in self._consumer.committed(partitions, timeout=self._metadata_s):
            if tp.offset >= 0:
                self._seek_position(tp)
            else:
                self._seek_position(TopicPartition(tp.topic, tp.partition,
                                                   OFFSET_BEGINNING if self._reset_to_earliest else OFFSET_END))

    def _seek(self, tp: TP, offset: int) -> None:
        self._seek_position(TopicPartition(*tp, offset))

    def _seek_position(self, position: TopicPartition) -> None:
        try:
            self._consumer.seek(position)
        except KafkaException as exc:  # not ours any more: its next owner starts from the committed offset
            log.warning("seek_failed", partition=tp_of(position), offset=position.offset, error=str(exc))

    def pause(self, paused: bool) -> None:
        if paused:
            self._consumer.pause(self._consumer.assignment())  # newly assigned ones too, every call
            self._paused = True
        elif self._paused:  # never one stopped at an undecodable batch
            stopped = self.undecodable()
            self._consumer.resume([tp for tp in self._consumer.assignment() if tp_of(tp) not in stopped])
            self._paused = False

    def group_metadata(self) -> Any:
        return self._consumer.consumer_group_metadata()

    def _seek_committed(self, partitions: set[TP]) -> None:
        if partitions:
            self._seek_committed_of([TopicPartition(topic, partition) for topic, partition in partitions])

    def list_topics(self) -> set[str]:
        """Up to the metadata bound; safe from another thread (librdkafka's handles are). Raises KafkaException."""
        return set(self._consumer.list_topics(timeout=self._metadata_s).topics)

    def lag(self) -> dict[TP, int]:
        """High watermark minus position, both as librdkafka last learned them (no request is waited for)."""
        assigned = self._consumer.assignment()
        lag: dict[TP, int] = {}
        if not assigned:
            return lag
        for tp in self._consumer.position(assigned):
            if tp.offset < 0:
                continue
            try:
                _low, high = self._consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            if high >= 0:
                lag[tp_of(tp)] = max(0, high - tp.offset)
        return lag

    def close(self, timeout_s: float = 30.0) -> None:
        """librdkafka's close takes no timeout: it runs on a thread of its own, given up on (and left to finish
        in the background) when ``timeout_s`` has passed."""
        if not close_within(self._close, timeout_s, "confluent-source-close"):
            log.warning("source_close_timed_out", timeout_s=timeout_s,
                        consequence="the group takes the partitions over after the session timeout")

    def _close(self) -> None:
        with contextlib.suppress(RuntimeError):  # closed already: a second close does nothing, as with kafka-python
            self._consumer.close()


def _deferred_or(error: KafkaError | None, exc: Exception) -> Exception:
    if error is not None and (error.code() in COMMIT_LATER or error.retriable()):
        return CommitDeferred(f"{error.name()}: {error.str()}")
    return exc
