"""librdkafka's log lines and errors for the producer side's clients, with the repeats left out.

With no broker answering, librdkafka retries its connections every 0.1 to 1 s
and reports each failure twice (a log line and an ``error_cb`` call): a
client left alone for 15 s wrote 827 lines. ``QuietClientLog`` keeps the
first line of each kind, then one a window (a minute) saying how many like it
were left out, and says at close how many it left out in all. Lines of one
kind differ only in timings and librdkafka's own repeat counts;
``RepeatFilter`` is the pure part, time passed in.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)

LIBRDKAFKA_LOG = logging.getLogger("librdkafka")
WINDOW_S = 60.0
KINDS_AT_MOST = 1000

_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")  # in log lines, not in error_cb's reasons
_TIMINGS = re.compile(r"\d+(\.\d+)? ?ms\b")
_REPEATS = re.compile(r",? ?\d+ identical error\(s\) suppressed|\s*\(repeated \d+ times?\)")


def line_kind(line: str) -> str:
    """What repeats of one line have in common: the text without its thread, timings and repeat counts."""
    return _REPEATS.sub("", _TIMINGS.sub("#ms", _THREAD.sub("", line)))


class RepeatFilter:
    """Which lines to keep: the first of each kind, then one a window. Not thread-safe."""

    def __init__(self, window_s: float = WINDOW_S, kinds_at_most: int = KINDS_AT_MOST) -> None:
        self._window_s = window_s
        self._kinds_at_most = kinds_at_most
        self._kinds: OrderedDict[str, tuple[float, int]] = OrderedDict()  # kind -> (last kept, left out since)
        self.left_out = 0  # in all

    def admit(self, kind: str, now: float) -> int | None:
        """None: leave this line out. Otherwise keep it: the number says how many of its kind were left out
        since the last one kept. The least recently seen kinds are forgotten beyond ``kinds_at_most``."""
        seen = self._kinds.get(kind)
        if seen is not None and now < seen[0] + self._window_s:
            self._kinds[kind] = (seen[0], seen[1] + 1)
            self._kinds.move_to_end(kind)
            self.left_out += 1
            return None
        self._kinds[kind] = (now, 0)
        self._kinds.move_to_end(kind)
        while len(self._kinds) > self._kinds_at_most:
            self._kinds.popitem(last=False)
        return 0 if seen is None else seen[1]


class ClientError(Protocol):
    """What ``error_cb`` reads of confluent_kafka.KafkaError."""

    def name(self) -> str: ...
    def str(self) -> str: ...
    def fatal(self) -> bool: ...


class QuietClientLog:
    """librdkafka's ``logger`` (its ``log`` method) and ``error_cb`` (``error``) for one client. Thread-safe.

    Kept lines go to the ``librdkafka`` logger and to the ``kafka_client_error`` event with ``left_out``
    (how many like it were not written); one error and its log line are of one kind, so one of the two is
    written. ``close`` writes ``kafka_client_log_quietened`` with the number left out, if any.
    """

    def __init__(self, client: str, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._client = client
        self._clock = clock
        self._lines = RepeatFilter(window_s)
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args: object) -> None:
        line = msg % args if args else msg
        left_out = self._admit(str(args[-1]) if args else line)
        if left_out is not None:
            LIBRDKAFKA_LOG.log(level, f"{line} ({left_out} more like it left out)" if left_out else line)

    def error(self, error: ClientError) -> None:
        reason = error.str()
        left_out = self._admit(reason) if not error.fatal() else 0
        if left_out is not None:
            log.warning("kafka_client_error", client=self._client, code=error.name(), reason=reason,
                        fatal=error.fatal(), left_out=left_out)

    def close(self) -> None:
        with self._lock:
            left_out, self._lines.left_out = self._lines.left_out, 0
        if left_out:
            log.info("kafka_client_log_quietened", client=self._client, left_out=left_out)

    def _admit(self, line: str) -> int | None:
        with self._lock:
            return self._lines.admit(line_kind(line), self._clock())
