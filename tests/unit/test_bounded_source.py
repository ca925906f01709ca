"""BoundedSource's bookkeeping through the kafka-python reader, over a stand-in for KafkaConsumer (never a
broker's behaviour: tests/integration/test_backfill.py runs it on a real one, over either client)."""

from dataclasses import dataclass

import orjson
import pytest
from kafka import OffsetAndMetadata, TopicPartition
from structlog.testing import capture_logs

from tests.fakes import FakeClock
from worker.core.errors import ConfigError
from worker.core.sections import KafkaSettings
from worker.core.timerange import Span, TimeRange
from worker.jobs.backfill_plan import decode_plan, encode_plan
from worker.jobs.bounded_source import BoundedSource
from worker.kafka.kafka_python.bounded_source import KafkaPartitionReader

TOPIC = "req"
KAFKA = KafkaSettings(kafka_bootstrap_servers="k:9092", requests_topic=TOPIC, group="bf")


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = None
    headers: list | None = None


@dataclass
class Offset:
    offset: int


class FakeConsumer:
    """Partitions as lists of records; offsets missing from a list are gaps (markers, compaction)."""

    def __init__(self, logs: dict[int, list[Record]], ends: dict[int, int] | None = None,
                 starts: dict[int, int] | None = None) -> None:
        self.logs = logs
        self.ends = ends or {p: (records[-1].offset + 1 if records else 0) for p, records in logs.items()}
        self.starts = starts or {}  # the offset each partition's log starts at (what retention left): 0 if not given
        self.committed_offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.commits: list[dict] = []
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.closed = False

    def partitions_for_topic(self, topic):
        return set(self.logs) if topic == TOPIC else None

    def topics(self):
        return {TOPIC}

    def assign(self, tps):
        self.positions = dict.fromkeys(tps, 0)

    def end_offsets(self, tps):
        return {tp: self.ends[tp.partition] for tp in tps}

    def beginning_offsets(self, tps):
        return {tp: self.starts.get(tp.partition, 0) for tp in tps}

    def offsets_for_times(self, times):
        found = {}
        for tp, ms in times.items():
            hit = next((r for r in self.logs[tp.partition] if r.timestamp >= ms), None)
            found[tp] = None if hit is None else Offset(hit.offset)
        return found

    def committed(self, tp, metadata=False):
        return self.committed_offsets.get(tp)

    def commit(self, offsets):
        self.commits.append({(tp.topic, tp.partition): o.offset for tp, o in offsets.items()})
        self.committed_offsets.update(offsets)

    def seek(self, tp, offset):
        self.positions[tp] = offset

    def pause(self, *tps):
        self.paused.update(tps)

    def resume(self, *tps):
        self.paused.difference_update(tps)

    def position(self, tp):
        return self.positions[tp]

    def poll(self, timeout_ms, max_records):
        fetched = {}
        for tp, position in self.positions.items():
            if tp in self.paused:
                continue
            batch = [r for r in self.logs[tp.partition] if r.offset >= position][:max_records]
            if batch:
                fetched[tp] = batch
                self.positions[tp] = batch[-1].offset + 1
            else:
                self.positions[tp] = max(position, self.ends[tp.partition])  # skip trailing markers
        return fetched

    def close(self, autocommit=True, timeout_ms=None):
        self.closed = True


def log_of(partition, timestamps, offsets=None):
    offsets = offsets or range(len(timestamps))
    return [Record(TOPIC, partition, o, ts, f"k{partition}-{o}".encode(),
                   orjson.dumps({"id": f"r{partition}-{o}", "inputs": [1], "deadline_ms": 5}))
            for o, ts in zip(offsets, timestamps, strict=True)]


def source_over(consumer, time_range, **options):
    progress = []
    source = BoundedSource(KafkaPartitionReader(KAFKA, FakeClock(), consumer), TOPIC, KAFKA.group, time_range,
                           on_progress=progress.append, **options)
    source.start(wait_s=0)
    return source, progress


def drain(source, max_records=3):
    handed = []
    for _ in range(100):
        if source.finished():
            return handed
        handed += source.poll(0, max_records)
    raise AssertionError("the source never finished")


def test_hands_out_exactly_the_span_pauses_at_stop_and_finishes():
    consumer = FakeConsumer({0: log_of(0, [100, 110, 120, 130, 140, 150]), 1: log_of(1, [90, 125, 160])})
    source, progress = source_over(consumer, TimeRange(110, 150))
    assert source.partitions == {(TOPIC, 0): Span(1, 5), (TOPIC, 1): Span(1, 2)}
    assert source.total == 5 and source.done_before == 0
    # The fresh plan is committed before anything is read, so that a restart finds it.
    assert consumer.commits[0] == {(TOPIC, 0): 1, (TOPIC, 1): 1}
    handed = drain(source)
    assert sorted((r.position.partition, r.position.offset) for r in handed) == [
        (0, 1), (0, 2), (0, 3), (0, 4), (1, 1)]
    assert {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)} <= consumer.paused
    assert sum(progress) == 5
    assert not source.complete()  # read, not yet answered


def test_commits_carry_the_plan_and_complete_means_committed_to_every_stop():
    consumer = FakeConsumer({0: log_of(0, [100, 110, 120])})
    source, _ = source_over(consumer, TimeRange(100, 120))
    drain(source)
    source.commit({(TOPIC, 0): 1})
    assert not source.complete()
    source.commit({(TOPIC, 0): 2})
    assert source.complete()
    stored = consumer.committed_offsets[TopicPartition(TOPIC, 0)]
    assert (stored.offset, decode_plan(stored.metadata)) == (2, (TimeRange(100, 120), Span(0, 2), 0))


def test_a_span_ending_in_offsets_without_records_is_committed_at_its_stop():
    # Offsets 3 and 4 hold no record (say transaction markers): the worker can only commit up to 3.
    consumer = FakeConsumer({0: log_of(0, [100, 110, 120], offsets=[0, 1, 2])}, ends={0: 5})
    source, _ = source_over(consumer, TimeRange(0))
    assert source.partitions == {(TOPIC, 0): Span(0, 5)}
    drain(source)
    source.commit({(TOPIC, 0): 3})
    assert consumer.commits[-1] == {(TOPIC, 0): 5}
    assert source.complete()


def test_a_partition_with_nothing_left_to_hand_out_is_committed_by_the_source_itself():
    consumer = FakeConsumer({0: log_of(0, [100]), 1: []}, ends={0: 1, 1: 3})  # partition 1: markers only
    source, _ = source_over(consumer, TimeRange(0))
    drain(source)
    assert consumer.committed_offsets[TopicPartition(TOPIC, 1)].offset == 3
    source.commit({(TOPIC, 0): 1})
    assert source.complete()


def test_a_restart_resumes_from_the_committed_offsets_and_keeps_the_stops():
    consumer = FakeConsumer({0: log_of(0, [100, 110, 120, 130])})
    time_range = TimeRange(100)  # open-ended: the stop is the end when the job first started
    consumer.committed_offsets[TopicPartition(TOPIC, 0)] = OffsetAndMetadata(2, encode_plan(time_range, Span(0, 3)), -1)
    source, progress = source_over(consumer, time_range)
    assert source.partitions == {(TOPIC, 0): Span(0, 3)}
    assert source.done_before == 2 and source.total == 3
    assert consumer.commits == []  # nothing new to record
    assert [r.position.offset for r in drain(source)] == [2]  # not 3: appended after the first start
    assert sum(progress) == 1


def test_a_live_groups_offsets_are_never_touched():
    consumer = FakeConsumer({0: log_of(0, [100])})
    consumer.committed_offsets[TopicPartition(TOPIC, 0)] = OffsetAndMetadata(1, "", -1)
    with pytest.raises(ConfigError, match="no backfill committed"):
        source_over(consumer, TimeRange(0))
    assert consumer.commits == []


def test_a_range_with_nothing_in_it_is_finished_and_complete_at_once():
    consumer = FakeConsumer({0: log_of(0, [100, 110]), 1: []})
    source, _ = source_over(consumer, TimeRange(500))
    assert source.total == 0
    assert source.finished() and source.complete()


def test_the_workers_pause_never_resumes_a_partition_that_reached_its_stop():
    consumer = FakeConsumer({0: log_of(0, [100, 200]), 1: log_of(1, [100, 110, 120, 130])})
    source, _ = source_over(consumer, TimeRange(100, 150))
    source.poll(0, 2)  # all of partition 0's span, half of partition 1's
    assert consumer.paused == {TopicPartition(TOPIC, 0)} and not source.finished()
    source.pause(True)
    assert consumer.paused == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
    source.pause(False)
    assert consumer.paused == {TopicPartition(TOPIC, 0)}


def test_lag_is_what_is_left_of_each_span():
    consumer = FakeConsumer({0: log_of(0, [100, 110, 120, 130, 140]), 1: log_of(1, [90, 125])})
    source, _ = source_over(consumer, TimeRange(110, 150))  # spans: offsets 1..4 of 0, 1..1 of 1
    assert source.lag() == {(TOPIC, 0): 4, (TOPIC, 1): 1}
    source.poll(0, 2)
    assert source.lag() == {(TOPIC, 0): 2, (TOPIC, 1): 0}
    drain(source)
    assert source.lag() == {(TOPIC, 0): 0, (TOPIC, 1): 0}


def test_a_job_resumed_after_retention_deleted_its_next_offsets_counts_and_says_them():
    # The plan spans offsets 0..7; the job committed 2, then retention deleted the log up to offset 5.
    consumer = FakeConsumer({0: log_of(0, [150, 160, 165, 170, 190], offsets=range(5, 10))}, starts={0: 5})
    time_range = TimeRange(100, 175)
    consumer.committed_offsets[TopicPartition(TOPIC, 0)] = OffsetAndMetadata(2, encode_plan(time_range, Span(0, 8)), -1)
    with capture_logs() as logs:
        source, progress = source_over(consumer, time_range)
    assert source.deleted == 3
    [said] = [e for e in logs if e["event"] == "backfill_records_deleted"]
    assert (said["partition"], said["next_offset"], said["log_start"], said["deleted"]) == (0, 2, 5, 3)
    assert [r.position.offset for r in source.poll(0, 2)] == [5, 6]
    assert sum(progress) == 5  # the deleted offsets are passed, not read
    source.commit({(TOPIC, 0): 7})  # then the job stopped: the count goes with the plan
    assert decode_plan(consumer.committed_offsets[TopicPartition(TOPIC, 0)].metadata)[2] == 3
    with capture_logs() as logs:
        again, _ = source_over(consumer, time_range)
    assert again.deleted == 3 and again.done_before == 7  # still said by the next run, not found again
    assert not [e for e in logs if e["event"] == "backfill_records_deleted"]
    assert [r.position.offset for r in drain(again)] == [7]
    again.commit({(TOPIC, 0): 8})
    assert again.complete()


def test_retention_past_the_whole_span_deletes_only_the_span():
    consumer = FakeConsumer({0: log_of(0, [300], offsets=[20])}, starts={0: 20})
    time_range = TimeRange(100, 175)
    consumer.committed_offsets[TopicPartition(TOPIC, 0)] = OffsetAndMetadata(4, encode_plan(time_range, Span(0, 8)), -1)
    source, _ = source_over(consumer, time_range)
    assert source.deleted == 4  # offsets 4..7, not up to 20
    assert drain(source) == []


def test_a_fresh_range_that_starts_at_the_logs_start_says_records_may_be_gone():
    consumer = FakeConsumer({0: log_of(0, [100, 110, 120], offsets=[3, 4, 5]),
                             1: log_of(1, [90, 100, 130], offsets=[7, 8, 9])}, starts={0: 3, 1: 7})
    with capture_logs() as logs:
        source, _ = source_over(consumer, TimeRange(95))
    # Partition 0's oldest record is the range's first: what was deleted before it may have been in the range.
    # Partition 1's oldest record is before the range: nothing of the range was deleted.
    assert [(e["event"], e["partition"], e["log_start"]) for e in logs if e["event"].startswith("backfill_range")] == [
        ("backfill_range_before_log_start", 0, 3)]
    assert source.deleted == 0
    assert len(drain(source)) == 5


def test_a_fresh_range_over_a_partition_whose_whole_log_was_deleted_says_records_may_be_gone():
    consumer = FakeConsumer({0: []}, ends={0: 12}, starts={0: 12})
    with capture_logs() as logs:
        source, _ = source_over(consumer, TimeRange(95))
    [said] = [e for e in logs if e["event"] == "backfill_range_before_log_start"]
    assert said["log_start"] == 12 and "holds no record any more" in said["reason"]
    assert source.total == 0 and source.finished()
