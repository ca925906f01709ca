"""Reading a fixed span of a topic: the source of a backfill job.

The spans (which offsets of each partition a job reads, and why) are defined
in worker/core/timerange.py, the plan stored with the job's commits in
worker/jobs/backfill_plan.py. This adapter plans or resumes them at start, hands
the worker only records inside them, pauses each partition that reached its
stop, and says ``finished()`` once all did. Partitions are assigned, not
subscribed, in the job's own consumer group: no rebalances, nothing is ever
revoked, and commits carry the plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from kafka import OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError

from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import Position, RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.settings import Settings
from worker.core.timerange import Span, TimeRange, span_of
from worker.jobs.backfill_plan import Resume, encode_plan, resume_point, without_deadline
from worker.kafka.consumer import group_consumer, wait_for_partitions

log = structlog.get_logger(__name__)


@dataclass
class _Partition:
    span: Span
    position: int  # the consumer's position, capped at stop
    committed: int
    handed_out: int | None = None  # one past the last record given to the worker in this run

    @property
    def fetched_all(self) -> bool:
        return self.position >= self.span.stop


class BoundedKafkaSource:
    """Polls the records of one topic's span in its own consumer group, then says ``finished()``.

    Not thread-safe. ``start()`` must be called first. ``on_progress`` is
    called from ``poll`` with the number of offsets read since the last call.
    """

    def __init__(self, settings: Settings, clock: Clock, time_range: TimeRange, *, keep_deadlines: bool = False,
                 on_progress: Callable[[int], None] | None = None, consumer: Any = None) -> None:
        self._clock = clock
        self._topic = settings.requests_topic
        self._group = settings.group
        self._range = time_range
        self._keep_deadlines = keep_deadlines
        self._on_progress = on_progress
        # A resumed offset that retention deleted: go on from the oldest.
        self._consumer = consumer if consumer is not None else group_consumer(settings, auto_offset_reset="earliest")
        self._partitions: dict[TP, _Partition] = {}
        self._paused_by_worker = False
        self.done_before = 0  # offsets of the span consumed in earlier runs of the job

    @property
    def partitions(self) -> dict[TP, Span]:
        return {tp: state.span for tp, state in self._partitions.items()}

    @property
    def total(self) -> int:
        """Offsets in the job's span, all partitions together."""
        return sum(state.span.size for state in self._partitions.values())

    def start(self, wait_s: float = 10.0) -> None:
        """Plan or resume every partition, commit fresh plans, and seek. Blocks on the broker.

        Raises LookupError if the topic does not exist, ConfigError if the group is not a backfill's.
        """
        partitions = self._wait_for_partitions(wait_s)
        tps = [TopicPartition(self._topic, p) for p in partitions]
        self._consumer.assign(tps)
        ends = self._consumer.end_offsets(tps)
        froms = self._consumer.offsets_for_times(dict.fromkeys(tps, self._range.from_ms))
        untils = ({} if self._range.until_ms is None
                  else self._consumer.offsets_for_times(dict.fromkeys(tps, self._range.until_ms)))
        fresh_plans: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in tps:
            resume = self._resume(tp, span_of(_offset(froms.get(tp)), _offset(untils.get(tp)), ends[tp]))
            self._partitions[(tp.topic, tp.partition)] = _Partition(resume.span, resume.position, resume.position)
            self.done_before += resume.position - resume.span.start
            if not resume.resumed:
                fresh_plans[tp] = OffsetAndMetadata(resume.position, encode_plan(self._range, resume.span), -1)
            self._consumer.seek(tp, resume.position)
        if fresh_plans:
            self._consumer.commit(fresh_plans)  # so that a restart finds the plan, even of an empty span
        done = [tp for tp in tps if self._partitions[(tp.topic, tp.partition)].fetched_all]
        if done:
            self._consumer.pause(*done)
        log.info("backfill_planned", topic=self._topic, group=self._group, offsets=self.total,
                 done_before=self.done_before,
                 spans={p: [s.start, s.stop] for (_, p), s in sorted(self.partitions.items())})

    def _resume(self, tp: TopicPartition, fresh: Span) -> Resume:
        stored = self._consumer.committed(tp, metadata=True)
        resume = resume_point((tp.topic, tp.partition), self._group, None if stored is None else stored.offset,
                              None if stored is None else stored.metadata, self._range, fresh)
        if resume.replaced is not None:
            log.info("backfill_replanned", partition=tp.partition, group=self._group,
                     stored_range=resume.replaced.label(), wanted_range=self._range.label())
        return resume

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        """Records of the span only (never one at or past a partition's stop). Blocks up to ``timeout_s``."""
        fetched = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        now = self._clock.monotonic()
        records = []
        for tp, batch in fetched.items():
            state = self._partitions[(tp.topic, tp.partition)]
            for r in batch:
                if r.offset >= state.span.stop:
                    break
                value = r.value if self._keep_deadlines else without_deadline(r.value)
                records.append(RawRecord(Position(r.topic, r.partition, r.offset), r.key, value,
                                         list(r.headers or ()), r.timestamp, now))
                state.handed_out = r.offset + 1
        self._advance()
        return records

    def _advance(self) -> None:
        """Update positions from the consumer, pause partitions that reached their stop, report progress."""
        progressed = 0
        newly_done: list[TopicPartition] = []
        for key, state in self._partitions.items():
            if state.fetched_all:
                continue
            tp = TopicPartition(*key)
            position = min(self._consumer.position(tp), state.span.stop)
            progressed += position - state.position
            state.position = position
            if state.fetched_all:
                newly_done.append(tp)
        if newly_done:
            self._consumer.pause(*newly_done)
        self._commit_exhausted()
        if progressed and self._on_progress is not None:
            self._on_progress(progressed)

    def take_revoked(self) -> set[TP]:
        return set()  # assigned, never subscribed: nothing is revoked

    def generation(self) -> int:
        return 0  # no group membership to lose

    def rebalancing(self) -> bool:
        return False

    def commit(self, offsets: dict[TP, int]) -> None:
        """Commit next-offsets-to-read, each with its partition's plan. Raises CommitDeferred on failure.

        A partition read to its stop whose records are all acknowledged is
        committed at its stop, even when the last offsets of the span hold no
        record (transaction markers, compacted records).
        """
        self._commit({tp: self._stop_if_exhausted(tp, offset) for tp, offset in offsets.items()})

    def commit_async(self, offsets: dict[TP, int], on_done: Callable[[Exception | None], None]) -> None:
        """Commits at once, synchronously: a job's commits are few, and each carries its plan."""
        try:
            self.commit(offsets)
        except CommitDeferred as exc:
            on_done(exc)
            return
        on_done(None)

    def _stop_if_exhausted(self, tp: TP, offset: int) -> int:
        state = self._partitions[tp]
        if state.fetched_all and offset >= (state.handed_out or state.committed):
            return state.span.stop
        return offset

    def _commit_exhausted(self) -> None:
        """Commit the stop of partitions read to the end whose handed-out records are all committed already."""
        exhausted = {tp: s.span.stop for tp, s in self._partitions.items()
                     if s.fetched_all and s.committed < s.span.stop and s.committed >= (s.handed_out or 0)}
        if exhausted:
            try:
                self._commit(exhausted)
            except CommitDeferred as exc:
                log.warning("commit_deferred", error=str(exc), partitions=len(exhausted))

    def _commit(self, offsets: dict[TP, int]) -> None:
        try:
            self._consumer.commit({
                TopicPartition(*tp): OffsetAndMetadata(offset, encode_plan(self._range, self._partitions[tp].span), -1)
                for tp, offset in offsets.items()})
        except KafkaError as exc:
            raise CommitDeferred(f"{type(exc).__name__}: {exc}") from exc
        for tp, offset in offsets.items():
            state = self._partitions[tp]
            state.committed = max(state.committed, offset)

    def finish_rebalance(self, timeout_s: float) -> None:
        """No rebalances here; wait a little (the loop retries a deferred commit after this)."""
        time.sleep(min(timeout_s, 1.0))
        self._commit_exhausted()

    def pause(self, paused: bool) -> None:
        """Stop (True) or restart (False) fetching; partitions read to their stop stay paused."""
        if paused == self._paused_by_worker:
            return
        self._paused_by_worker = paused
        if paused:
            self._consumer.pause(*(TopicPartition(*tp) for tp in self._partitions))
        else:
            self._consumer.resume(*(TopicPartition(*tp) for tp, s in self._partitions.items() if not s.fetched_all))

    def list_topics(self) -> set[str]:
        return set(self._consumer.topics())

    def lag(self) -> dict[TP, int]:
        """Offsets of each partition's span not read yet (from the positions of the last poll)."""
        return {tp: state.span.stop - state.position for tp, state in self._partitions.items()}

    def finished(self) -> bool:
        """True once every partition was read up to its stop offset."""
        return all(state.fetched_all for state in self._partitions.values())

    def complete(self) -> bool:
        """True once every partition's committed offset reached its stop: the job is done."""
        return all(state.committed >= state.span.stop for state in self._partitions.values())

    def committed_offsets(self) -> int:
        """Offsets of the span below the committed offsets, all partitions together."""
        return sum(state.committed - state.span.start for state in self._partitions.values())

    def close(self, timeout_s: float = 30.0) -> None:
        self._commit_exhausted()
        self._consumer.close(autocommit=False, timeout_ms=int(timeout_s * 1000))

    def missing_topics(self, topics: list[str]) -> list[str]:
        """Those of ``topics`` the broker does not have (asks the broker)."""
        existing = self._consumer.topics()
        return [topic for topic in topics if topic not in existing]

    def _wait_for_partitions(self, wait_s: float) -> list[int]:
        try:
            return wait_for_partitions(self._consumer, {self._topic: 1}, wait_s)[self._topic]
        except LookupError:
            raise LookupError(f"topic {self._topic!r} does not exist on the broker: nothing to backfill") from None


def _offset(found: Any) -> int | None:
    """The offset of an offsets_for_times answer (None when no record is at or after the time)."""
    return None if found is None else int(found.offset)
