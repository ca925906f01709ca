"""Requests a librdkafka consumer skips without reading them: its OFFSET line, and the first record after it.

librdkafka says at WARNING when a fetch offset is out of range ("<topic> [<partition>]: offset reset (at offset
10 ...) to offset BEGINNING ..."), but not the offset it went on from: BEGINNING and END are resolved later.
``OffsetResets`` is the logger a stream source gives its consumer: every line goes on to the librdkafka logger as
before, and a reset line is kept for its partition until the source hands over the first record it then polls
there at or past the offset left (``first_records``; records fetched before the reset come first, below it): that
record's offset is where the consumer went on, and worker/kafka/skipped.py says and counts the requests between.
A reset back, below the offset left (the log was truncated), is said by librdkafka's line only.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

from confluent_kafka import Message

from worker.core.offsets import TopicPartition as TP
from worker.kafka.confluent.connection import LIBRDKAFKA_LOG
from worker.kafka.skipped import SkippedTally

# librdkafka 2.x's line, after its facility and client name: "[thrd:main]: <topic> [<partition>]: offset reset ..."
# (the thread's name only while log.thread.name is on, the default)
RESET = re.compile(r"^OFFSET \[[^\]]*\] (?:\[thrd:[^\]]*\]: )?(?P<topic>\S+) \[(?P<partition>\d+)\]: "
                   r"offset reset \(at offset (?P<at>\d+)")
PAIRED_WITHIN_S = 60.0  # a record this long after the reset is not where it went on (the partition moved meanwhile)


class OffsetResets:
    """One consumer's resets said and not yet paired with a record, by partition, and the requests they skipped
    (``tally``). Thread-safe: librdkafka's lines may come on any thread that serves the client's queue."""

    def __init__(self, forward: logging.Logger = LIBRDKAFKA_LOG) -> None:
        self.tally = SkippedTally()
        self._forward = forward
        self._lock = threading.Lock()
        self._waiting: dict[TP, tuple[int, float]] = {}  # partition -> (the offset left, when said)

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        """What librdkafka says, through confluent-kafka (its ``logger``): read before any level drops it."""
        if level >= logging.WARNING:
            said = RESET.match(msg % args if args else msg)
            if said is not None:
                self._said((said["topic"], int(said["partition"])), int(said["at"]))
        self._forward.log(level, msg, *args, **kwargs)

    def _said(self, tp: TP, at_offset: int) -> None:
        now = time.monotonic()
        with self._lock:
            before = self._waiting.get(tp)
            if before is None or now - before[1] > PAIRED_WITHIN_S:  # a second reset before a record: the first
                self._waiting[tp] = (at_offset, now)                  # offset left is where the skip began

    def first_records(self, messages: Sequence[Message]) -> None:
        """Pair each waiting reset with the first of ``messages`` (a poll's, in offset order per partition) of
        its partition at or past the offset left; forget those waiting longer than PAIRED_WITHIN_S."""
        now = time.monotonic()
        for message in messages:
            tp = (message.topic() or "", message.partition() or 0)
            waiting = self._waiting.get(tp)
            if waiting is None or (message.offset() or 0) < waiting[0]:
                continue  # another partition, or a record fetched before the reset
            with self._lock:
                paired = self._waiting.pop(tp, None)
            if paired is not None and now - paired[1] <= PAIRED_WITHIN_S:
                self.tally.went_on(tp[0], tp[1], paired[0], message.offset() or 0)
        with self._lock:
            self._waiting = {tp: said for tp, said in self._waiting.items() if now - said[1] <= PAIRED_WITHIN_S}

    def forget(self, partitions: Collection[TP]) -> None:
        """Partitions revoked or lost: a reset of theirs is the next owner's to tell."""
        with self._lock:
            for tp in partitions:
                self._waiting.pop(tp, None)
