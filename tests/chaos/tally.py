"""Counting what landed on the reply topic against what the producer sent.

Definitions (per scenario, over request IDs the broker acknowledged to the producer):
- answered: IDs with at least one reply;
- duplicate replies: replies beyond the first for an ID;
- IDs scored twice: IDs with more than one ``ok`` reply, i.e. the model ran
  for them more than once and both results were published. Every request in
  these scenarios is valid and sent once, so any duplicate reply is one.
  (A re-scoring whose reply never got out cannot be seen on the topic.)
- from two records: IDs whose replies name different source records
  (partition, offset). Each ID is sent as one record, so this is 0 unless the
  producer wrote a record twice; a non-zero value would mean dedup let a
  second record of an answered ID through;
- lost: IDs sent without any reply;
- in crash window: duplicate replies whose earlier copy (by CreateTime, the
  order the workers sent them in, not the order they landed) was written at most
  ``window_ms`` before a disruption, or during it, and whose later copy after
  the disruption began. Disruptions: a worker death (SIGKILL, or exit on its
  own), an instant; a broker outage, from its stop until one session timeout
  after it is back (the group settles who owns what only then). These are
  the documented windows: a reply acknowledged by the broker, its done mark
  not yet written, when the worker died; a reply whose acknowledgement was
  outstanding while the broker was away, or that a member sent for a
  partition the group had moved while the broker was away, before its next
  poll told it so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

import orjson
from kafka import KafkaConsumer, TopicPartition

from tests.integration.kit import wait_until
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config

SAMPLE = 10  # ids listed per problem in results


@dataclass(frozen=True)
class SeenReply:
    id: str
    status: str
    source: tuple[int, int]  # (partition, offset) of the request record
    timestamp_ms: int  # when the worker sent it (the record's CreateTime)


class ReplyReader:
    """Reads a reply topic from its beginning, incrementally. Not thread-safe."""

    def __init__(self, bootstrap: str, topic: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap, security), group_id=None,
                                       enable_auto_commit=False, isolation_level="read_committed")
        self._partitions = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic))]
        self._consumer.assign(self._partitions)
        self._consumer.seek_to_beginning(*self._partitions)
        self.replies: list[SeenReply] = []
        self.answered: set[str] = set()

    def read(self, timeout_s: float = 0.5) -> None:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=20_000)
        for records in batches.values():
            for record in records:
                body = orjson.loads(record.value)
                headers = dict(record.headers)
                source = (int(headers["source-partition"]), int(headers["source-offset"]))
                self.replies.append(SeenReply(body["id"], body["status"], source, record.timestamp))
                self.answered.add(body["id"])

    def read_to_end(self, timeout_s: float = 60) -> None:
        """Read until every partition's position reaches its end offset as of now."""
        ends = self._consumer.end_offsets(self._partitions)

        def caught_up() -> bool:
            self.read(0.2)
            return all(self._consumer.position(tp) >= end for tp, end in ends.items())

        wait_until(caught_up, timeout_s, "the reply topic to be read to its end", interval_s=0)

    def close(self) -> None:
        self._consumer.close()


@dataclass
class Tally:
    sent: int = 0
    send_failed: int = 0
    answered: int = 0
    duplicate_replies: int = 0
    scored_twice: int = 0
    from_two_records: int = 0
    lost: int = 0
    in_crash_window: int = 0
    crash_gap_ms_max: int = 0  # the longest time from an earlier copy to the disruption that explains it
    not_ok: int = 0
    strangers: int = 0  # replies to IDs nobody sent (or whose send failed)
    lost_ids: list[str] = field(default_factory=list)
    duplicate_ids: list[str] = field(default_factory=list)
    unexplained_duplicate_ids: list[str] = field(default_factory=list)

    @property
    def outside_window(self) -> int:
        return self.duplicate_replies - self.in_crash_window


def count(sent: set[str], failed: Iterable[str], replies: list[SeenReply],
          disruptions_ms: list[tuple[int, int]], window_ms: int) -> Tally:
    """``disruptions_ms``: (start, end) of each worker death (start == end) and broker outage."""
    by_id: dict[str, list[SeenReply]] = {}
    for reply in replies:
        by_id.setdefault(reply.id, []).append(reply)
    failed = set(failed)
    tally = Tally(sent=len(sent), send_failed=len(failed))
    tally.answered = len(sent & by_id.keys())
    lost = sorted(sent - by_id.keys())
    tally.lost, tally.lost_ids = len(lost), lost[:SAMPLE]
    tally.strangers = len(by_id.keys() - sent - failed)
    for request_id, seen in sorted(by_id.items()):
        tally.not_ok += sum(1 for r in seen if r.status != "ok")
        if len(seen) < 2:
            continue
        tally.duplicate_replies += len(seen) - 1
        tally.scored_twice += sum(1 for r in seen if r.status == "ok") > 1
        tally.from_two_records += len({r.source for r in seen}) > 1
        # In the order the copies were sent, not the order they landed: a copy whose acknowledgement
        # was outstanding while the broker was away can land after the new owner's copy of it.
        in_sent_order = sorted(seen, key=lambda reply: reply.timestamp_ms)
        gaps = [_disruption_gap(earlier.timestamp_ms, later.timestamp_ms, disruptions_ms, window_ms)
                for earlier, later in pairwise(in_sent_order)]
        explained = sum(1 for gap in gaps if gap is not None)
        tally.in_crash_window += explained
        tally.crash_gap_ms_max = max([tally.crash_gap_ms_max, *(gap for gap in gaps if gap is not None)])
        _sample(tally.duplicate_ids, request_id)
        if explained < len(seen) - 1:
            _sample(tally.unexplained_duplicate_ids, request_id)
    return tally


def _disruption_gap(earlier_ms: int, later_ms: int, disruptions_ms: list[tuple[int, int]],
                    window_ms: int) -> int | None:
    """Milliseconds from the earlier copy to the first disruption that explains the pair (0: during one)."""
    gaps = [max(0, start - earlier_ms) for start, end in disruptions_ms
            if start <= min(earlier_ms + window_ms, later_ms) and earlier_ms <= end]
    return min(gaps) if gaps else None


def _sample(ids: list[str], request_id: str) -> None:
    if len(ids) < SAMPLE:
        ids.append(request_id)
