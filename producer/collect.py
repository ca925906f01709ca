"""Reading replies from a reply topic, e.g. into a JSONL file."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, IO

import orjson
from kafka import KafkaConsumer, TopicPartition
from tqdm import tqdm

from producer.wire import decode_reply, header


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

    def __init__(self, bootstrap_servers: str, topic: str, from_beginning: bool = True) -> None:
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers.split(","), group_id=None,
                                       enable_auto_commit=False)
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
        now_ms = time.time_ns() // 1_000_000
        for records in self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=5000).values():
            for record in records:
                reply = decode_reply(record.value)
                request_id = str(reply.get("id"))
                if request_id in self.collection.replies:
                    self.collection.duplicates += 1
                    continue
                size = header(record.headers, "batch-size")
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

    def write_jsonl(self, out: IO[bytes]) -> int:
        for entry in self.collection.replies.values():
            out.write(orjson.dumps(entry.reply) + b"\n")
        return len(self.collection.replies)

    def close(self) -> None:
        self._consumer.close()
