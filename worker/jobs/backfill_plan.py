"""What a backfill job reads and the plan stored with its commits. Pure.

A job scores a time range of a topic: per partition, the span of offsets the
range maps to (worker/core/timerange.py defines both, and the bounds: from
inclusive, until exclusive, up to the end offsets seen at the job's start).

The span is fixed at the job's first start and stored in the metadata of the
offsets it commits, so that a restarted job goes on from its committed offsets
and stops at the same offsets, even if records were appended since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from worker.core.errors import ConfigError
from worker.core.offsets import TopicPartition as TP
from worker.core.timerange import Span, TimeRange

_PLAN_TAG = "streamscore-backfill/1"
_JSON = json.JSONDecoder()


def encode_plan(time_range: TimeRange, span: Span, deleted: int = 0) -> str:
    """The commit metadata that records a job's plan for one partition, and how many offsets of its span were
    deleted before the job read them (retention), so that every later run still says so."""
    plan = {"plan": _PLAN_TAG, "from_ms": time_range.from_ms, "until_ms": time_range.until_ms,
            "start": span.start, "stop": span.stop}
    return orjson.dumps({**plan, "deleted": deleted} if deleted else plan).decode()


def decode_plan(metadata: str | None) -> tuple[TimeRange, Span, int] | None:
    """The plan stored by ``encode_plan``, or None if the metadata is not one.

    Whatever follows the plan's JSON object is not part of it: confluent-kafka
    commits the metadata with a NUL byte after it, which kafka-python reads
    back; and confluent-kafka 2.16 reads metadata up to a NUL byte, so one
    committed without (by kafka-python before it committed one) comes back
    with whatever bytes followed it in memory.
    """
    try:
        body: Any = _JSON.raw_decode(metadata or "")[0]
        if body.get("plan") != _PLAN_TAG:
            return None
        deleted = body.get("deleted", 0)  # plans of jobs before 2026-12-07 have none
        if type(deleted) is not int or deleted < 0:
            return None
        return TimeRange(body["from_ms"], body["until_ms"]), Span(body["start"], body["stop"]), deleted
    except (ValueError, AttributeError, KeyError, TypeError, ConfigError):
        return None


@dataclass(frozen=True)
class Resume:
    span: Span
    position: int  # the next offset to read
    resumed: bool  # False: a fresh plan, to be committed before reading
    replaced: TimeRange | None = None  # the range of another job's plan found in the group, now replaced
    deleted: int = 0  # offsets of the span earlier runs found deleted before they were read


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
    stored_range, span, deleted = stored
    if stored_range != wanted:
        return Resume(fresh, fresh.start, resumed=False, replaced=stored_range)
    return Resume(span, min(max(committed, span.start), span.stop), resumed=True, deleted=deleted)
