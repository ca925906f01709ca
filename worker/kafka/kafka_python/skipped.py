"""Requests a kafka-python consumer skips without reading them, said as a warning of the worker's own.

A group's committed offset (or a consumer's position) that its partition's log no longer holds, because
retention or a delete-records request removed the records there, is out of range: the consumer starts again at
the offset ``auto_offset_reset`` names and never reads the requests between. kafka-python says so only at INFO,
on its fetcher's logger, which the worker keeps at WARNING (worker/logs.py: kafka-python is chatty at INFO).
``SkippedRequests`` reads those two lines (the fetch offset out of range, then the offset reset to) and hands
them to worker/kafka/skipped.py, which logs ``requests_skipped`` with the partition, both offsets and how many
requests were skipped, and counts them.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from worker.kafka.skipped import SKIPPED

FETCHER_LOGGER = "kafka.consumer.fetcher"
# kafka-python 3.0's lines, as format strings with their arguments (fetch offset, partition) and (partition, offset)
OUT_OF_RANGE = "Fetch offset %s is out of range for topic-partition %s"
RESET_TO = "Resetting offset for partition %s to offset %s."
PAIRED_WITHIN_S = 60.0  # a reset this long after the fetch out of range is not its own (that one was skipped)


class SkippedRequests(logging.Filter):
    """On kafka-python's fetcher logger: its own lines pass as the level set for kafka-python's loggers lets them
    (the logger itself is opened to INFO for these two), and an offset reset after a fetch out of range is
    logged as ``requests_skipped``."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._out_of_range: dict[Any, tuple[int, float]] = {}  # partition -> (the fetch offset, when said)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) and len(record.args) == 2 else None
        if args is not None and record.msg == OUT_OF_RANGE and isinstance(args[0], int):
            with self._lock:
                self._out_of_range[args[1]] = (args[0], time.monotonic())
        elif args is not None and record.msg == RESET_TO and isinstance(args[1], int):
            with self._lock:
                out_of_range = self._out_of_range.pop(args[0], None)
            if out_of_range is not None and time.monotonic() - out_of_range[1] <= PAIRED_WITHIN_S:
                SKIPPED.went_on(getattr(args[0], "topic", str(args[0])), getattr(args[0], "partition", None),
                                out_of_range[0], args[1])
        return record.levelno >= logging.getLogger("kafka").getEffectiveLevel()


def watch_for_skipped_requests() -> None:
    """Install SkippedRequests on kafka-python's fetcher logger, once a process."""
    fetcher = logging.getLogger(FETCHER_LOGGER)
    if not any(isinstance(f, SkippedRequests) for f in fetcher.filters):
        fetcher.addFilter(SkippedRequests())
    fetcher.setLevel(min(logging.INFO, logging.getLogger("kafka").getEffectiveLevel()))
