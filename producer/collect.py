"""Reading replies from a reply topic: into a JSONL file, and joined with the requests by id.

Both read ``read_committed``, as the docs ask every reader to: an exactly-once worker's aborted replies (a killed
worker's open transaction) are no replies, and would count as duplicates.

``ReplyCollector`` follows a reply topic for replies to known ids (the demo).
``collect_replies`` copies a reply topic, or the span of it a time range
gives (the same bounds as a backfill: from inclusive, until exclusive, else
up to the end at start), to JSONL, first reply per id. ``join_report`` says
which requests were answered, with which status, and which are missing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
from kafka import KafkaConsumer, TopicPartition
from tqdm import tqdm

from worker.core.errors import WorkerError
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.core.timerange import TimeRange, span_of
from worker.core.wire import H_BATCH_SIZE, answered_under, decode_reply, header_text
from worker.kafka.kafka_python.connection import client_config


@dataclass
class CollectedReply:
    reply: dict[str, Any]
    received_at_ms: int
    batch_size: int | None


@dataclass
class Collection:
    replies: dict[str, CollectedReply] = field(default_factory=dict)  # first reply per id
    duplicates: int = 0


class ReplyCollector:
    """Reads a reply topic from its beginning (or end), keeping the first reply per id. Not thread-safe."""

    def __init__(self, bootstrap_servers: str, topic: str, from_beginning: bool = True, *,
                 security: KafkaSecurity = PLAINTEXT) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=None,
                                       enable_auto_commit=False, isolation_level="read_committed")
        partitions = self._consumer.partitions_for_topic(topic) or set()
        if not partitions:
            raise LookupError(f"reply topic {topic!r} does not exist")
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        self._consumer.assign(assigned)
        if from_beginning:
            self._consumer.seek_to_beginning(*assigned)
        else:
            self._consumer.seek_to_end(*assigned)
        self.collection = Collection()

    def poll(self, timeout_s: float = 0.2) -> int:
        """Read what is there; returns how many new ids were answered."""
        new = 0
        fetched = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=5000)
        now_ms = time.time_ns() // 1_000_000  # after the poll: it may have waited up to timeout_s
        for records in fetched.values():
            for record in records:
                reply = decode_reply(record.value)
                request_id = str(reply.get("id"))
                if request_id in self.collection.replies:
                    self.collection.duplicates += 1
                    continue
                size = header_text(record.headers, H_BATCH_SIZE)
                self.collection.replies[request_id] = CollectedReply(reply, now_ms, int(size) if size else None)
                new += 1
        return new

    def wait_for(self, ids: set[str], idle_timeout_s: float, progress: bool = True) -> set[str]:
        """Poll until every id is answered or nothing new came for ``idle_timeout_s``; returns the missing ids."""
        bar = tqdm(total=len(ids), unit="reply", desc="collecting replies", disable=not progress)
        bar.update(len(ids & self.collection.replies.keys()))
        last_progress = time.monotonic()
        while not ids <= self.collection.replies.keys():
            before = len(ids & self.collection.replies.keys())
            self.poll()
            gained = len(ids & self.collection.replies.keys()) - before
            if gained:
                bar.update(gained)
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > idle_timeout_s:
                break
        bar.close()
        return ids - self.collection.replies.keys()

    def close(self) -> None:
        self._consumer.close()


class TopicSpanReader:
    """Reads every partition of a topic over the span a time range gives, then stops. Not thread-safe.

    Without a range it reads from the beginning. The stop offsets are the
    until time's, or the ends when the reader was made; ``follow_idle_s``
    then keeps reading newer records until none came for that long.
    """

    def __init__(self, bootstrap_servers: str, topic: str, time_range: TimeRange | None = None, *,
                 security: KafkaSecurity = PLAINTEXT) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=None,
                                       enable_auto_commit=False, isolation_level="read_committed")
        partitions = self._consumer.partitions_for_topic(topic)
        if not partitions:
            self._consumer.close()
            raise LookupError(f"topic {topic!r} does not exist")
        self.topic = topic
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        ends = self._consumer.end_offsets(tps)
        if time_range is None:
            froms = self._consumer.beginning_offsets(tps)
            untils: dict[TopicPartition, int | None] = {}
        else:
            froms = _offsets(self._consumer.offsets_for_times(dict.fromkeys(tps, time_range.from_ms)))
            untils = {} if time_range.until_ms is None else _offsets(
                self._consumer.offsets_for_times(dict.fromkeys(tps, time_range.until_ms)))
        self._stops: dict[TopicPartition, int] = {}
        self._consumer.assign(tps)
        for tp in tps:
            span = span_of(froms.get(tp), untils.get(tp), ends[tp])
            self._stops[tp] = span.stop
            self._consumer.seek(tp, span.start)
        self.total = sum(self._stops[tp] - self._consumer.position(tp) for tp in tps)
        self._follow = time_range is None or time_range.until_ms is None

    def records(self, follow_idle_s: float = 0.0, progress: bool = False, what: str = "reading") -> Iterator[Any]:
        """Every record of the span in partition order (then newer ones, if following)."""
        bar = tqdm(total=self.total, unit="rec", desc=f"{what} {self.topic}", disable=not progress)
        try:
            remaining = {tp for tp, stop in self._stops.items() if self._consumer.position(tp) < stop}
            self._consumer.pause(*(set(self._stops) - remaining))
            while remaining:
                for tp, batch in self._consumer.poll(timeout_ms=500, max_records=5000).items():
                    for record in batch:
                        if record.offset >= self._stops[tp]:
                            break
                        bar.update(1)
                        yield record
                for tp in list(remaining):
                    if self._consumer.position(tp) >= self._stops[tp]:
                        remaining.discard(tp)
                        self._consumer.pause(tp)
        finally:
            bar.close()
        if follow_idle_s > 0 and self._follow:
            yield from self._follow_until_idle(follow_idle_s)

    def _follow_until_idle(self, idle_s: float) -> Iterator[Any]:
        self._consumer.resume(*self._stops)
        last_record = time.monotonic()
        while time.monotonic() - last_record < idle_s:
            for batch in self._consumer.poll(timeout_ms=200, max_records=5000).values():
                last_record = time.monotonic()
                yield from batch

    def close(self) -> None:
        self._consumer.close()


@dataclass
class ReplyTally:
    """What a reply topic says about each id: the first reply's status (and error code), and which served model
    (and version: a canary arm has its own) gave the ok ones."""

    status: dict[str, str] = field(default_factory=dict)
    error_codes: dict[str, str] = field(default_factory=dict)
    duplicates: int = 0  # replies after the first for an id
    unreadable: int = 0  # records that are not a reply
    first_unreadable: str = ""  # why the first of them could not be read
    ok_by_model: Counter[tuple[str, str]] = field(default_factory=Counter)  # (model, model_version) -> ok replies

    def render_models(self) -> str:
        """``churn 1: 900, churn 2: 100``, or ``none`` (no ok reply named its model: an older worker's)."""
        counts = [f"{model} {version}: {n:,}" for (model, version), n in sorted(self.ok_by_model.items())]
        return ", ".join(counts) or "none"


def collect_replies(reader: TopicSpanReader, out: IO[bytes], follow_idle_s: float = 0.0,
                    progress: bool = False, read: Callable[[bytes], dict[str, Any]] = decode_reply) -> ReplyTally:
    """Write the first reply per id to ``out`` as JSONL; keeps only each id's status in memory. ``read``: a
    reply value as a dict (worker/formats/reply_reader.py reads registry-framed ones too)."""
    tally = ReplyTally()
    for record in reader.records(follow_idle_s, progress, "collecting"):
        try:
            reply = read(record.value)
            request_id = str(reply["id"])
        except (ValueError, TypeError, KeyError, WorkerError) as exc:
            tally.unreadable += 1
            tally.first_unreadable = tally.first_unreadable or f"{type(exc).__name__}: {exc}"
            continue
        if request_id in tally.status:
            tally.duplicates += 1
            continue
        tally.status[request_id] = str(reply.get("status"))
        error = reply.get("error")
        if isinstance(error, dict) and error.get("code"):
            tally.error_codes[request_id] = str(error["code"])
        if reply.get("status") == "ok" and reply.get("model") is not None:
            tally.ok_by_model[(str(reply["model"]), str(reply.get("model_version")))] += 1
        out.write(orjson.dumps(reply) + b"\n")
    return tally


def request_ids_from_records(records: Iterable[Any], max_record_bytes: int) -> Iterator[str | None]:
    """The id each request record is answered under, as a worker with ``max_record_bytes`` reads it (its value's
    ``id``, else its key: ``wire.answered_under``); None for one it dead-letters."""
    for record in records:
        yield answered_under(record.key, record.value, max_record_bytes)


@dataclass
class JoinReport:
    requests: int = 0  # distinct request ids
    requests_without_id: int = 0
    repeated_request_ids: int = 0  # request records whose id came before
    answered: int = 0
    ok: int = 0
    error: int = 0
    expired: int = 0
    missing: int = 0
    duplicate_replies: int = 0
    replies_to_other_requests: int = 0
    error_codes: dict[str, int] = field(default_factory=dict)
    missing_ids: list[str] = field(default_factory=list)

    def render(self) -> str:
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.error_codes.items())) or "none"
        return "\n".join([
            f"requests {self.requests:,} ({self.requests_without_id:,} without an id, "
            f"{self.repeated_request_ids:,} repeated ids)",
            f"answered {self.answered:,}: ok {self.ok:,}, error {self.error:,}, expired {self.expired:,}",
            f"missing  {self.missing:,}",
            f"error codes: {codes}",
            f"duplicate replies {self.duplicate_replies:,}; replies to other requests "
            f"{self.replies_to_other_requests:,}",
        ])


def join_report(request_ids: Iterable[str | None], tally: ReplyTally) -> JoinReport:
    """Join requests and replies by id."""
    report = JoinReport(duplicate_replies=tally.duplicates)
    seen: set[str] = set()
    codes: Counter[str] = Counter()
    for request_id in request_ids:
        if request_id is None:
            report.requests_without_id += 1
            continue
        if request_id in seen:
            report.repeated_request_ids += 1
            continue
        seen.add(request_id)
        status = tally.status.get(request_id)
        if status is None:
            report.missing_ids.append(request_id)
            continue
        report.answered += 1
        if status == "ok":
            report.ok += 1
        elif status == "expired":
            report.expired += 1
        else:
            report.error += 1
        if request_id in tally.error_codes:
            codes[tally.error_codes[request_id]] += 1
    report.requests = len(seen)
    report.missing = len(report.missing_ids)
    report.replies_to_other_requests = sum(1 for i in tally.status if i not in seen)
    report.error_codes = dict(codes)
    return report


def _offsets(found: dict[TopicPartition, Any]) -> dict[TopicPartition, int | None]:
    return {tp: None if hit is None else int(hit.offset) for tp, hit in found.items()}
