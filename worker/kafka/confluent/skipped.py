"""Requests a librdkafka consumer skips without reading them: its OFFSET line, and the first record after it.

librdkafka says at WARNING when a fetch offset is out of range ("<topic> [<partition>]: offset reset (at offset
10 ...) to offset BEGINNING ..."), but not the offset it went on from: BEGINNING and END are resolved later.
``OffsetResets`` reads that line on the logger the worker gives librdkafka (the line itself passes on), and the
stream source hands it the first record it then polls of that partition (``first_records``): its offset is where
the consumer went on, and worker/kafka/skipped.py says and counts the requests between.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence

from confluent_kafka import Message

from worker.kafka.confluent.connection import LIBRDKAFKA_LOG
from worker.kafka.skipped import SKIPPED

# librdkafka 2.x's line, as confluent-kafka's logger renders it: "OFFSET [<client>] [thrd:...]: <topic> [<p>]: ..."
RESET = re.compile(r"^OFFSET \[[^\]]*\] \[thrd:[^\]]*\]: (?P<topic>\S+) \[(?P<partition>\d+)\]: "
                   r"offset reset \(at offset (?P<at>\d+)")
PAIRED_WITHIN_S = 60.0  # a record this long after the reset is not where it went on (the partition moved meanwhile)


class OffsetResets(logging.Filter):
    """Resets said and not yet paired with a record, by partition. Thread-safe: the line may come on any thread
    that serves the client's queue."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, int], tuple[int, float]] = {}  # partition -> (at offset, when said)

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    def filter(self, record: logging.LogRecord) -> bool:
        said = RESET.match(record.getMessage()) if record.levelno >= logging.WARNING else None
        if said is not None:
            with self._lock:
                self._waiting[said["topic"], int(said["partition"])] = (int(said["at"]), time.monotonic())
        return True

    def first_records(self, messages: Sequence[Message]) -> None:
        """Pair each waiting reset with the first of ``messages`` of its partition (a poll's, in offset order
        per partition)."""
        now = time.monotonic()
        for message in messages:
            tp = (message.topic() or "", message.partition() or 0)
            if tp not in self._waiting:
                continue
            with self._lock:
                at_offset, said_at = self._waiting.pop(tp, (0, now))
            if now - said_at <= PAIRED_WITHIN_S:
                SKIPPED.went_on(tp[0], tp[1], at_offset, message.offset() or 0)
            if not self._waiting:
                return


RESETS = OffsetResets()


def watch_for_offset_resets() -> None:
    """Install RESETS on the librdkafka logger, once a process."""
    if RESETS not in LIBRDKAFKA_LOG.filters:
        LIBRDKAFKA_LOG.addFilter(RESETS)
