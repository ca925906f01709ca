"""Time ranges of record timestamps and the span of offsets each maps to. Pure, torch-free, kafka-free.

Shared by the backfill job (worker/jobs/backfill_plan.py) and the producer
side (``python -m producer collect``), so that both read exactly the same
records for the same range.

A range is ``from_ms <= timestamp < until_ms``: the from time inclusive, the
until time exclusive, no until time meaning "up to the end offsets seen at
start". Per partition it maps to the offsets ``start <= o < stop`` (see
``span_of``):

- ``start``: the first offset whose timestamp is at or after the from time
  (Kafka's offsets-for-times lookup); the partition's end offset if none is;
- ``stop``: the first offset whose timestamp is at or after the until time;
  the end offset when there is no until time or no such record.

Where timestamps grow along each partition that is exactly the records in the
range; with create times out of order it is the span between the first records
at or after each bound, the rule ``kafka-consumer-groups --reset-offsets
--to-datetime`` follows too.

Times are read from ISO 8601 (UTC unless an offset is given) or Unix epoch
milliseconds (``parse_time``) and written as ISO 8601 UTC (``format_ms``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from worker.core.errors import ConfigError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Digit strings below this (3 March 1973, in ms) are more likely seconds or a compact date.
_PLAUSIBLE_EPOCH_MS = 100_000_000_000
# The last millisecond ISO 8601 can write (9999-12-31T23:59:59.999Z). Nothing before 1970: Kafka's
# offsets-for-times lookup reads the negative timestamps -1 and -2 as "latest" and "earliest".
MAX_MS = 253_402_300_799_999


@dataclass(frozen=True)
class TimeRange:
    """Record timestamps ``from_ms <= t < until_ms`` (``until_ms`` None: up to the end at start).

    Raises ConfigError at construction when the range is empty or reversed.
    """

    from_ms: int
    until_ms: int | None = None

    def __post_init__(self) -> None:
        if self.until_ms is not None and self.until_ms <= self.from_ms:
            raise ConfigError(f"the until time ({format_ms(self.until_ms)}) must be after the from time "
                              f"({format_ms(self.from_ms)})")

    def label(self) -> str:
        """A short, stable name for the range, e.g. ``1764374400000-1764460800000``."""
        return f"{self.from_ms}-{'end' if self.until_ms is None else self.until_ms}"


def parse_time(text: str, flag: str = "time") -> int:
    """Milliseconds since the Unix epoch from ISO 8601 or epoch milliseconds. Raises ConfigError.

    ISO 8601 without an offset is taken as UTC; a bare date is its midnight UTC.
    ``0`` means the beginning of time; other digit strings must be plausible
    epoch milliseconds (13 digits), since seconds would silently mean 1970.
    Times before 1970 and after the year 9999 (``MAX_MS``) are out of range.
    ``flag`` names the option the text came from, in the error message.
    """
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        value = int(text)
        if 0 < value < _PLAUSIBLE_EPOCH_MS:
            raise ConfigError(f"{flag} {text!r} looks like seconds or a compact date; give Unix time in "
                              f"milliseconds (13 digits) or ISO 8601, e.g. 2026-11-29T00:00:00Z")
        return _in_range(value, text, flag)
    try:
        # Python before 3.11 does not read a trailing Z.
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is neither ISO 8601 (e.g. 2026-11-29T00:00:00Z) nor Unix time "
                          "in milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _in_range((moment - _EPOCH) // timedelta(milliseconds=1), text, flag)


def _in_range(ms: int, text: str, flag: str) -> int:
    if not 0 <= ms <= MAX_MS:
        raise ConfigError(f"{flag} {text!r} is out of range: give a time from 1970-01-01T00:00:00Z to "
                          f"{format_ms(MAX_MS)} (Unix time in milliseconds 0 to {MAX_MS})")
    return ms


def format_ms(ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. ``2026-11-29T00:00:00.000Z``; ``parse_time`` reads it back."""
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Span:
    """Offsets ``start <= o < stop`` of one partition."""

    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


def span_of(from_offset: int | None, until_offset: int | None, end: int) -> Span:
    """The span from offset lookups: ``from_offset``/``until_offset`` are the first offsets at or
    after each time (None: no such record), ``end`` the partition's end offset. Never past ``end``."""
    stop = end if until_offset is None else min(until_offset, end)
    start = stop if from_offset is None else min(from_offset, stop)
    return Span(start, stop)
