"""librdkafka's offset reset line read for requests skipped (worker/kafka/confluent/skipped.py): the line names the
offset out of range, the first record polled after it where the consumer went on; the pair is said as
``requests_skipped`` and counted. No broker: log records made as confluent-kafka hands librdkafka's lines on."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from structlog.testing import capture_logs

from worker.kafka.confluent.skipped import OffsetResets
from worker.kafka.skipped import SKIPPED

LINE = ("OFFSET [streamscore-worker#consumer-2] [thrd:main]: requests [3]: offset reset (at offset 120 (leader epoch "
        "-1), broker 1) to offset BEGINNING (leader epoch -1): fetch failed due to requested offset not available on "
        "the broker: Broker: Offset out of range")


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


def librdkafka_line(text: str, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("librdkafka", level, __file__, 1, "%s", (text,), None)


def test_the_first_record_after_a_reset_says_how_many_requests_were_skipped_and_counts_them():
    resets, before = OffsetResets(), SKIPPED.total
    assert resets.filter(librdkafka_line(LINE))  # librdkafka's own line passes on
    assert resets.waiting
    with capture_logs() as logged:
        resets.first_records([Message("requests", 1, 7), Message("requests", 3, 5120), Message("requests", 3, 5121)])
    [skipped] = logged
    assert (skipped["event"], skipped["topic"], skipped["partition"], skipped["at_offset"], skipped["reset_to"],
            skipped["skipped"]) == ("requests_skipped", "requests", 3, 120, 5120, 5000)
    assert SKIPPED.total - before == 5000 and not resets.waiting


def test_other_lines_and_other_partitions_records_pair_with_nothing():
    resets = OffsetResets()
    resets.filter(librdkafka_line("FETCH [c#consumer-2] [thrd:main]: requests [3]: fetch backoff"))
    resets.filter(librdkafka_line(LINE, level=logging.DEBUG))
    assert not resets.waiting
    resets.filter(librdkafka_line(LINE))
    with capture_logs() as logged:
        resets.first_records([Message("requests", 2, 5120), Message("other", 3, 5120)])
    assert logged == [] and resets.waiting


def test_a_record_long_after_the_reset_is_not_paired_with_it(monkeypatch):
    resets, now = OffsetResets(), [100.0]
    monkeypatch.setattr("worker.kafka.confluent.skipped.time.monotonic", lambda: now[0])
    resets.filter(librdkafka_line(LINE))
    now[0] += 3600  # the partition went to another member meanwhile, and came back
    with capture_logs() as logged:
        resets.first_records([Message("requests", 3, 9000)])
    assert logged == [] and not resets.waiting
