"""librdkafka's offset reset line read for requests skipped (worker/kafka/confluent/skipped.py): the line names the
offset left, the first record polled after it at or past that offset where the consumer went on; the pair is said
as ``requests_skipped`` and counted. No broker: lines as confluent-kafka hands librdkafka's on to its logger."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from structlog.testing import capture_logs

from worker.kafka.confluent.skipped import OffsetResets

LINE = ("[thrd:main]: requests [3]: offset reset (at offset 120 (leader epoch -1), broker 1) to offset BEGINNING "
        "(leader epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out "
        "of range")


@dataclass
class Message:
    _topic: str
    _partition: int
    _offset: int

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class Forwarded(logging.Logger):
    def __init__(self) -> None:
        super().__init__("librdkafka-test", logging.ERROR)  # as with --log-level error: warnings not shown
        self.lines: list[str] = []

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:
        self.lines.append(str(msg) % args)


def said(resets: OffsetResets, text: str = LINE, level: int = logging.WARNING, facility: str = "OFFSET") -> None:
    resets.log(level, "%s [%s] %s", facility, "streamscore-worker#consumer-2", text)  # as confluent-kafka calls it


def test_the_first_record_past_a_reset_says_how_many_requests_were_skipped_and_counts_them():
    forwarded = Forwarded()
    resets = OffsetResets(forwarded)
    said(resets)  # read even where the logger's level would drop the line
    assert forwarded.lines == [f"OFFSET [streamscore-worker#consumer-2] {LINE}"] and resets.waiting
    with capture_logs() as logged:  # records 100..119 were fetched before the reset: not where it went on
        resets.first_records([Message("requests", 3, 118), Message("requests", 1, 7), Message("requests", 3, 119)])
        assert logged == [] and resets.waiting
        resets.first_records([Message("requests", 3, 5120), Message("requests", 3, 5121)])
    [skipped] = logged
    assert (skipped["event"], skipped["topic"], skipped["partition"], skipped["at_offset"], skipped["reset_to"],
            skipped["skipped"]) == ("requests_skipped", "requests", 3, 120, 5120, 5000)
    assert resets.tally.total == 5000 and not resets.waiting


def test_a_second_reset_before_any_record_keeps_the_offset_first_left():
    resets = OffsetResets(Forwarded())
    said(resets)
    said(resets, LINE.replace("at offset 120", "at offset 4000"))
    with capture_logs():
        resets.first_records([Message("requests", 3, 5120)])
    assert resets.tally.total == 5000


def test_other_lines_and_other_partitions_records_pair_with_nothing():
    resets = OffsetResets(Forwarded())
    said(resets, "[thrd:main]: requests [3]: fetch backoff", facility="FETCH")
    said(resets, level=logging.DEBUG)
    assert not resets.waiting
    said(resets, LINE.removeprefix("[thrd:main]: "))  # log.thread.name=false: no thread's name
    assert resets.waiting
    with capture_logs() as logged:
        resets.first_records([Message("requests", 2, 5120), Message("other", 3, 5120)])
    assert logged == [] and resets.waiting


def test_a_partition_revoked_before_its_record_or_a_record_long_after_pairs_with_nothing(monkeypatch):
    resets, now = OffsetResets(Forwarded()), [100.0]
    monkeypatch.setattr("worker.kafka.confluent.skipped.time.monotonic", lambda: now[0])
    said(resets)
    resets.forget([("requests", 3)])  # its next owner tells
    assert not resets.waiting
    said(resets)
    now[0] += 3600  # the partition went to another member meanwhile, and came back
    with capture_logs() as logged:
        resets.first_records([Message("requests", 3, 9000)])
    assert logged == [] and not resets.waiting and resets.tally.total == 0
