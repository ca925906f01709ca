"""What a backfill job reads: a time range, the span of offsets it maps to in
each partition, and the plan stored with the job's commits. Pure.

Per partition the job scores the offsets ``start <= o < stop``:

- ``start``: the first offset whose timestamp is at or after the from time
  (Kafka's offsets-for-times lookup); the partition's end offset if none is;
- ``stop``: the first offset whose timestamp is at or after the until time;
  the end offset when there is no until time or no such record. Records
  appended after the job first started are never part of it.

So the from time is inclusive and the until time exclusive. Where timestamps
grow along each partition (log-append time, or one producer stamping records
in order) that is exactly the records with ``from <= timestamp < until``; with
create times out of order it is the span between the first records at or after
each bound, the rule `kafka-consumer-groups --reset-offsets --to-datetime`
follows too.

The span is fixed at the job's first start and stored in the metadata of the
offsets it commits, so that a restarted job goes on from its committed offsets
and stops at the same offsets, even if records were appended since.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from worker.core.errors import ConfigError
from worker.core.offsets import TopicPartition as TP

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_PLAN_TAG = "streamscore-backfill/1"
# Digit strings below this (3 March 1973, in ms) are more likely seconds or a compact date.
_PLAUSIBLE_EPOCH_MS = 100_000_000_000


@dataclass(frozen=True)
class TimeRange:
    """Record timestamps ``from_ms <= t < until_ms`` (``until_ms`` None: up to the end at start)."""

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
    """
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        value = int(text)
        if 0 < value < _PLAUSIBLE_EPOCH_MS:
            raise ConfigError(f"{flag} {text!r} looks like seconds or a compact date; give Unix time in "
                              f"milliseconds (13 digits) or ISO 8601, e.g. 2026-11-29T00:00:00Z")
        return value
    try:
        # Python before 3.11 does not read a trailing Z.
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is neither ISO 8601 (e.g. 2026-11-29T00:00:00Z) nor Unix time "
                          "in milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def format_ms(ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. ``2026-11-29T00:00:00.000Z``."""
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
    after each time (None: no such record), ``end`` the partition's end offset."""
    stop = end if until_offset is None else min(until_offset, end)
    start = stop if from_offset is None else min(from_offset, stop)
    return Span(start, stop)


def encode_plan(time_range: TimeRange, span: Span) -> str:
    """The commit metadata that records a job's plan for one partition."""
    return orjson.dumps({"plan": _PLAN_TAG, "from_ms": time_range.from_ms, "until_ms": time_range.until_ms,
                         "start": span.start, "stop": span.stop}).decode()


def decode_plan(metadata: str | None) -> tuple[TimeRange, Span] | None:
    """The plan stored by ``encode_plan``, or None if the metadata is not one."""
    try:
        body: Any = orjson.loads(metadata or "")
        if body.get("plan") != _PLAN_TAG:
            return None
        return TimeRange(body["from_ms"], body["until_ms"]), Span(body["start"], body["stop"])
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ConfigError):
        return None


@dataclass(frozen=True)
class Resume:
    span: Span
    position: int  # the next offset to read
    resumed: bool  # False: a fresh plan, to be committed before reading
    replaced: TimeRange | None = None  # the range of another job's plan found in the group, now replaced


def resume_point(tp: TP, group: str, committed: int | None, metadata: str | None, wanted: TimeRange,
                 fresh: Span) -> Resume:
    """Where to read ``tp`` from: the group's stored plan and offset for the same range, else a fresh plan.

    Raises ConfigError when the group has an offset that no backfill committed
    (a live worker's group): a backfill must never move it.
    """
    if committed is None:
        return Resume(fresh, fresh.start, resumed=False)
    stored = decode_plan(metadata)
    if stored is None:
        raise ConfigError(f"consumer group {group!r} has an offset for {tp[0]}/{tp[1]} that no backfill "
                          "committed (is it a live worker's group?); pass another --group or --job")
    stored_range, span = stored
    if stored_range != wanted:
        return Resume(fresh, fresh.start, resumed=False, replaced=stored_range)
    return Resume(span, min(max(committed, span.start), span.stop), resumed=True)


def without_deadline(value: bytes | None) -> bytes | None:
    """The request value without its ``deadline_ms`` (a backfill scores old requests too)."""
    if value is None or b'"deadline_ms"' not in value:
        return value
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
    if not isinstance(body, dict) or "deadline_ms" not in body:
        return value
    del body["deadline_ms"]
    return orjson.dumps(body)
