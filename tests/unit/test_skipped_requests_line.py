"""kafka-python's fetcher lines read for requests skipped (worker/kafka/kafka_python/skipped.py): an offset reset
after a fetch out of range is said as ``requests_skipped``; its other INFO lines stay hidden unless kafka-python
logs at that level. No broker: log records made as kafka-python 3.0 makes them."""

from __future__ import annotations

import logging

from kafka import TopicPartition
from structlog.testing import capture_logs

from worker.kafka.kafka_python.skipped import OUT_OF_RANGE, RESET_TO, SkippedRequests

PARTITION = TopicPartition("requests", 3)


def fetcher_line(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("kafka.consumer.fetcher", logging.INFO, __file__, 1, msg, args, None)


def test_a_reset_after_a_fetch_out_of_range_says_how_many_requests_were_skipped():
    lines = SkippedRequests()
    with capture_logs() as logged:
        lines.filter(fetcher_line(OUT_OF_RANGE, 120, PARTITION))
        lines.filter(fetcher_line(RESET_TO, PARTITION, 5120))
    [skipped] = logged
    assert skipped["event"] == "requests_skipped" and skipped["log_level"] == "warning"
    assert (skipped["topic"], skipped["partition"], skipped["at_offset"], skipped["reset_to"], skipped["skipped"]) \
        == ("requests", 3, 120, 5120, 5000)


def test_a_reset_of_a_group_without_a_commit_skips_nothing_and_says_nothing():
    with capture_logs() as logged:
        SkippedRequests().filter(fetcher_line(RESET_TO, PARTITION, 0))
    assert logged == []


def test_the_fetchers_other_info_lines_pass_only_as_kafka_pythons_level_lets_them(monkeypatch):
    kafka = logging.getLogger("kafka")
    monkeypatch.setattr(kafka, "level", logging.WARNING)
    assert not SkippedRequests().filter(fetcher_line("Adding fetch request for partition %s", PARTITION))
    monkeypatch.setattr(kafka, "level", logging.DEBUG)
    assert SkippedRequests().filter(fetcher_line("Adding fetch request for partition %s", PARTITION))


def test_a_reset_back_below_an_offset_past_the_logs_end_skips_nothing_and_says_so():
    lines = SkippedRequests()
    with capture_logs() as logged:
        lines.filter(fetcher_line(OUT_OF_RANGE, 900, PARTITION))
        lines.filter(fetcher_line(RESET_TO, PARTITION, 40))
    assert [(e["event"], e["at_offset"], e["reset_to"]) for e in logged] == [("offset_past_log_end", 900, 40)]


def test_a_reset_long_after_a_fetch_out_of_range_is_not_paired_with_it(monkeypatch):
    lines = SkippedRequests()
    now = [100.0]
    monkeypatch.setattr("worker.kafka.kafka_python.skipped.time.monotonic", lambda: now[0])
    with capture_logs() as logged:
        lines.filter(fetcher_line(OUT_OF_RANGE, 120, PARTITION))  # its reset skipped: the partition was revoked
        now[0] += 3600
        lines.filter(fetcher_line(RESET_TO, PARTITION, 5120))  # reassigned an hour later, without a commit
    assert logged == []
