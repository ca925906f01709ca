"""Reading a fixed span of a topic: the source of a backfill job, over either Kafka client.

The spans (which offsets of each partition a job reads, and why) are defined
in worker/core/timerange.py, the plan stored with the job's commits in
worker/jobs/backfill_plan.py. This source plans or resumes them at start, hands
the worker only records inside them, pauses each partition that reached its
stop, and says ``finished()`` once all did. Partitions are assigned, not
subscribed, in the job's own consumer group: no rebalances, nothing is ever
revoked, and commits carry the plan.

What it needs of a client is a ``PartitionReader`` (worker/ports.py; one per client library:
worker/kafka/kafka_python/bounded_source.py over kafka-python,
worker/kafka/confluent/bounded_source.py over confluent-kafka); the
bookkeeping here is the same for both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from worker.core.errors import CommitDeferred
from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.timerange import Span, TimeRange, span_of
from worker.jobs.backfill_plan import Resume, encode_plan, resume_point
from worker.ports import PartitionReader

log = structlog.get_logger(__name__)


@dataclass
class _Partition:
    span: Span
    position: int  # the consumer's position, capped at stop
    committed: int
    deleted: int = 0  # offsets of the span deleted before the job read them (retention), this run's and before
    handed_out: int | None = None  # one past the last record given to the worker in this run

    @property
    def fetched_all(self) -> bool:
        return self.position >= self.span.stop


class BoundedSource:
    """Polls the records of one topic's span in its own consumer group, then says ``finished()``.

    Not thread-safe. ``start()`` must be called first. ``on_progress`` is
    called from ``poll`` with the number of offsets read since the last call.
    """

    def __init__(self, reader: PartitionReader, topic: str, group: str, time_range: TimeRange, *,
                 on_progress: Callable[[int], None] | None = None) -> None:
        self._reader = reader
        self._topic = topic
        self._group = group
        self._range = time_range
        self._on_progress = on_progress
        self._partitions: dict[TP, _Partition] = {}
        self._paused_by_worker = False
        self.done_before = 0  # offsets of the span consumed in earlier runs of the job
        self._found_deleted = 0  # offsets of the span this run found deleted before the job read them

    @property
    def partitions(self) -> dict[TP, Span]:
        return {tp: state.span for tp, state in self._partitions.items()}

    @property
    def deleted(self) -> int:
        """Offsets of the job's span deleted before it read them (retention), found by this run or an earlier."""
        return sum(state.deleted for state in self._partitions.values())

    @property
    def total(self) -> int:
        """Offsets in the job's span, all partitions together."""
        return sum(state.span.size for state in self._partitions.values())

    def start(self, wait_s: float = 10.0) -> None:
        """Plan or resume every partition, commit fresh plans, and assign. Blocks on the broker.

        Raises LookupError if the topic does not exist, ConfigError if the group is not a backfill's.
        """
        try:
            tps = [(self._topic, p) for p in self._reader.partitions(wait_s)]
        except LookupError:
            raise LookupError(f"topic {self._topic!r} does not exist on the broker: nothing to backfill") from None
        lookups = self._reader.lookups(tps, self._range.from_ms, self._range.until_ms)
        stored = self._reader.committed(tps)
        log_starts = self._reader.log_starts(tps)
        fresh_plans: dict[TP, tuple[int, str]] = {}
        for tp in tps:
            resume = self._resume(tp, stored.get(tp), span_of(*lookups[tp]))
            deleted = self._deleted_unread(tp, resume, log_starts.get(tp, 0))
            self._found_deleted += deleted
            self._partitions[tp] = _Partition(resume.span, resume.position, resume.position, resume.deleted + deleted)
            self.done_before += resume.position - resume.span.start
            if not resume.resumed:
                fresh_plans[tp] = (resume.position, encode_plan(self._range, resume.span))
        if fresh_plans:
            self._reader.commit(fresh_plans)  # so that a restart finds the plan, even of an empty span
        self._reader.assign({tp: state.position for tp, state in self._partitions.items()})
        done = [tp for tp, state in self._partitions.items() if state.fetched_all]
        if done:
            self._reader.pause(done)
        log.info("backfill_planned", topic=self._topic, group=self._group, offsets=self.total,
                 done_before=self.done_before,
                 spans={p: [s.start, s.stop] for (_, p), s in sorted(self.partitions.items())})

    def _resume(self, tp: TP, stored: tuple[int, str | None] | None, fresh: Span) -> Resume:
        committed, metadata = (None, None) if stored is None else stored
        resume = resume_point(tp, self._group, committed, metadata, self._range, fresh)
        if resume.replaced is not None:
            log.info("backfill_replanned", partition=tp[1], group=self._group,
                     stored_range=resume.replaced.label(), wanted_range=self._range.label())
        return resume

    def _deleted_unread(self, tp: TP, resume: Resume, log_start: int) -> int:
        """How many offsets of the span this run would read next are below the log's start, gone (retention, or a
        delete-records request): said, and returned to be counted with the partition's plan (a job resumed after
        its next offset was deleted; the reader goes on from the log's start). A fresh span that begins at the
        log's start may have lost records of the range that came before it: said too, as a possibility (their
        timestamps went with them), as is a fresh span that is empty because its partition's log is."""
        span, position = resume.span, resume.position
        gone_to = min(log_start, span.stop)
        if position < gone_to:
            log.warning("backfill_records_deleted", topic=tp[0], partition=tp[1], next_offset=position,
                        log_start=log_start, deleted=gone_to - position,
                        reason=f"the partition's log no longer holds offsets {position} to {gone_to - 1} of the "
                               f"job's span (retention deleted them, or a delete-records request) before the job "
                               f"read them: what those {gone_to - position} offsets held is not scored",
                        advice="keep the requests topic's retention.ms above the time a backfill takes, "
                               "interruptions included (docs/batch-jobs.md)")
            return gone_to - position
        if not resume.resumed and 0 < log_start == span.start:
            log.warning("backfill_range_before_log_start", topic=tp[0], partition=tp[1], log_start=log_start,
                        reason=(f"the partition's oldest record, at offset {log_start}, is the first of the range"
                                if span.size else f"the partition holds no record any more (its log starts at its "
                                                  f"end, offset {log_start})")
                               + f": the {log_start} offsets before were deleted, and those of them stamped in the "
                                 "range are not scored",
                        advice="a range that starts before the topic's retention holds records no more: start it "
                               "later, or expect fewer records than were produced in it")
        return 0

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        """Records of the span only (never one at or past a partition's stop). Blocks up to ``timeout_s``."""
        records = []
        for r in self._reader.poll(timeout_s, max_records):
            tp = (r.position.topic, r.position.partition)
            state = self._partitions[tp]
            if r.position.offset >= state.span.stop:
                continue
            records.append(r)
            state.handed_out = r.position.offset + 1
        self._advance()
        return records

    def _advance(self) -> None:
        """Update positions from the reader, pause partitions that reached their stop, report progress."""
        reading = [tp for tp, state in self._partitions.items() if not state.fetched_all]
        if not reading:
            return
        progressed = 0
        newly_done: list[TP] = []
        for tp, position in self._reader.positions(reading).items():
            state = self._partitions[tp]
            position = min(position, state.span.stop)
            progressed += max(0, position - state.position)
            state.position = max(state.position, position)
            if state.fetched_all:
                newly_done.append(tp)
        if newly_done:
            self._reader.pause(newly_done)
        self._commit_exhausted()
        if progressed and self._on_progress is not None:
            self._on_progress(progressed)

    def take_revoked(self) -> set[TP]:
        return set()  # assigned, never subscribed: nothing is revoked

    def generation(self) -> int:
        return 0  # no group membership to lose

    def assigned(self) -> set[TP]:
        return set(self._partitions)

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
        self._reader.commit({tp: (offset, encode_plan(self._range, self._partitions[tp].span,
                                                      self._partitions[tp].deleted)) for tp, offset in offsets.items()})
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
            self._reader.pause(list(self._partitions))
        else:
            self._reader.resume([tp for tp, s in self._partitions.items() if not s.fetched_all])

    def list_topics(self) -> set[str]:
        return self._reader.topics()

    def lag(self) -> dict[TP, int]:
        """Offsets of each partition's span not read yet (from the positions of the last poll)."""
        return {tp: state.span.stop - state.position for tp, state in self._partitions.items()}

    def skipped(self) -> int:
        """The offsets of the span this run found deleted before it read them (those of earlier runs were
        counted by them)."""
        return self._found_deleted

    def undecodable(self) -> dict[TP, str]:
        """None are reported: a backfill's reader fails on a batch it cannot decode (docs/interop.md)."""
        return {}

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
        self._reader.close(timeout_s)

    def missing_topics(self, topics: list[str]) -> list[str]:
        """Those of ``topics`` the broker does not have (asks the broker)."""
        existing = self._reader.topics()
        return [topic for topic in topics if topic not in existing]
