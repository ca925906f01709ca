"""How long each step of a scenario kept requests waiting, as a client reading the reply topic saw it.

A reader follows the reply topic while the load runs (read_committed, so in
exactly-once mode a reply counts when its transaction commits) and notes when
each reply arrived. A scenario marks its steps (``Context.step``); each step
lasts until the next one, the last until the load stops. For each step:

- longest gap: the longest time one request partition went without a first
  reply to one of its requests arriving, counted in the step that holds most
  of the wait (a wait that begins with the last reply before a scale-in
  belongs to the scale-in). The load keeps every
  partition busy, so a gap is a partition nobody was answering: a rebalance,
  a worker starting up on it, a transaction waiting to be fenced. It is the
  figure a KEDA user feels as "the consumers stalled";
- latency: from the load's send call to the first reply's arrival, over the
  requests sent in the step (p50, p99 and the worst).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from dataclasses import dataclass

import orjson
from kafka import KafkaConsumer, TopicPartition

from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config


@dataclass(frozen=True)
class Arrival:
    id: str
    partition: int  # the request's partition (the reply's source-partition header)
    at: float  # wall time the reader got the reply


@dataclass(frozen=True)
class StepFigures:
    step: str
    seconds: float
    sent: int  # acknowledged requests sent during the step
    longest_gap_s: float
    gap_partition: int  # the request partition of the longest gap (-1: no gap measured)
    p50_ms: float
    p99_ms: float
    max_ms: float
    unanswered: int  # requests sent in the step with no reply seen while the reader ran


class LiveReplies:
    """Reads a reply topic from its beginning on a thread, noting each reply's arrival; ``stop`` returns them.

    A context manager: it follows the topic from entering until ``stop`` or leaving.
    """

    def __init__(self, bootstrap: str, topic: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap, security), group_id=None,
                                       enable_auto_commit=False, isolation_level="read_committed",
                                       fetch_max_wait_ms=50)
        partitions = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic))]
        self._consumer.assign(partitions)
        self._consumer.seek_to_beginning(*partitions)
        self._arrivals: list[Arrival] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="chaos-live-replies", daemon=True)

    def __enter__(self) -> LiveReplies:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> list[Arrival]:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=30)
            self._consumer.close()
        return self._arrivals

    def _follow(self) -> None:
        while not self._stop.is_set():
            batches = self._consumer.poll(timeout_ms=100, max_records=20_000)
            at = time.time()
            for records in batches.values():
                for record in records:
                    partition = next(int(v) for k, v in record.headers if k == "source-partition")
                    self._arrivals.append(Arrival(orjson.loads(record.value)["id"], partition, at))


def measure_steps(steps: list[tuple[float, str]], load_stopped: float, arrivals: list[Arrival],
                  sent_at: dict[str, float]) -> list[StepFigures]:
    """``steps``: (wall time, name) of each step's start, in order; ``sent_at``: acknowledged id -> send time."""
    if not steps:
        return []
    starts = [start for start, _ in steps]
    ends = [*starts[1:], load_stopped]
    longest: list[tuple[float, int]] = [(0.0, -1)] * len(steps)
    by_partition: dict[int, list[float]] = {}
    first_seen: dict[str, float] = {}
    for arrival in arrivals:  # first replies only: a duplicate arriving late kept no request waiting
        if arrival.id not in first_seen:
            first_seen[arrival.id] = arrival.at
            by_partition.setdefault(arrival.partition, []).append(arrival.at)
    for partition, times in by_partition.items():
        times.sort()
        for earlier, later in zip(times, times[1:], strict=False):
            index = _most_overlapped(starts, ends, earlier, later)
            if index is not None and later - earlier > longest[index][0]:
                longest[index] = (later - earlier, partition)
    waits: list[list[float]] = [[] for _ in steps]
    unanswered = [0] * len(steps)
    for request_id, sent in sent_at.items():
        index = bisect_right(starts, sent) - 1
        if not 0 <= index < len(steps):
            continue
        if request_id in first_seen:
            waits[index].append((first_seen[request_id] - sent) * 1000)
        else:
            unanswered[index] += 1
    return [StepFigures(name, end - start, len(step_waits) + missing, gap, partition, _quantile(step_waits, 0.5),
                        _quantile(step_waits, 0.99), max(step_waits, default=0.0), missing)
            for (start, name), end, (gap, partition), step_waits, missing
            in zip(steps, ends, longest, waits, unanswered, strict=True)]


def _most_overlapped(starts: list[float], ends: list[float], earlier: float, later: float) -> int | None:
    """The step that holds most of the wait from ``earlier`` to ``later``; None if it began outside every step."""
    first = bisect_right(starts, earlier) - 1
    if first < 0 or earlier >= ends[-1]:
        return None
    overlaps = [(min(later, ends[i]) - max(earlier, starts[i]), i) for i in range(first, len(starts))
                if starts[i] < later]
    return max(overlaps)[1]


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
