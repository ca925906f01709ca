"""A dedup store's primary killed under load, the same way behind Sentinel and on a Redis Cluster: requests sent at
a steady rate, the primary SIGKILLed a few seconds in, every reply read back. What it cost (how long the failover
took, the longest gap in replies, the ids answered twice, the done marks that died with the primary) is printed
(``-s``) for docs/scaling.md, and bounded by the tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.integration.kit import TopicReader, WorkerProcess

REQUESTS = 1200
RATE = 150  # requests per second: the stream lasts 8 s
KILL_AFTER_S = 3.0
VALUES = [0.25] * 16


@dataclass(frozen=True)
class Failover:
    by_id: dict[str, list[dict[str, Any]]]  # each id's replies, as a read_committed reader sees them in exactly-once
    failed_over_s: float
    gap_s: float  # the longest time between two replies landing, from a second before the kill

    @property
    def lost(self) -> list[str]:
        return sorted({"first", *(f"r{i}" for i in range(REQUESTS))} - set(self.by_id))

    @property
    def twice(self) -> list[str]:
        return sorted(request_id for request_id, answers in self.by_id.items() if len(answers) > 1)

    def said(self, what: str, marks_left: int) -> str:
        return (f"\n{what}: failed over in {self.failed_over_s:.1f} s; longest gap in replies {self.gap_s:.1f} s; "
                f"answered twice: {len(self.twice)}; done marks lost with the primary: "
                f"{len(self.by_id) - marks_left} of {len(self.by_id)}")


def through_a_failover(bootstrap: str, requests: str, replies_topic: str, producer: Any, worker: WorkerProcess,
                       fail_over: Callable[[], None], read_committed: bool = False) -> Failover:
    """Sends REQUESTS at RATE while ``fail_over`` kills the primary KILL_AFTER_S in (and returns once the store
    has a primary again); returns once every id is answered and the worker has stopped cleanly."""
    replies = TopicReader(bootstrap, replies_topic, read_committed=read_committed)
    producer.send(requests, {"id": "first", "inputs": VALUES}, key=b"first")
    producer.flush()
    replies.read_until(lambda got: len(got.records) >= 1, 120, "the first reply", watch=worker)

    def send() -> None:
        began = time.monotonic()
        for i in range(REQUESTS):
            time.sleep(max(0.0, began + i / RATE - time.monotonic()))
            producer.send(requests, {"id": f"r{i}", "inputs": VALUES}, key=f"r{i}".encode())
        producer.flush()

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(KILL_AFTER_S)
    killed_at = time.time()
    fail_over()
    failed_over_s = time.time() - killed_at
    sender.join()
    landed = replies.read_until(lambda got: len(got.by_id()) >= REQUESTS + 1, 120, "a reply to every request",
                                watch=worker)
    replies.read(2.0)
    assert worker.stop() == 0
    by_id = replies.read(0.5).by_id()
    stamps = sorted(record.timestamp / 1000 for record in landed.records if record.timestamp / 1000 >= killed_at - 1)
    gap_s = max((b - a for a, b in zip(stamps, stamps[1:], strict=False)), default=0.0)
    return Failover(by_id, failed_over_s, gap_s)


def check(failover: Failover, exactly_once: bool, marks_left: int) -> None:
    """Nothing lost, every answer ok; answered twice: none in exactly-once, bounded by what was in flight in
    at-least-once (a duplicate, never a loss), as are the done marks lost (those not yet replicated)."""
    assert failover.lost == []
    assert all(answers[0]["status"] == "ok" for answers in failover.by_id.values())
    assert len(failover.twice) <= (0 if exactly_once else REQUESTS // 10), failover.twice
    assert len(failover.by_id) - marks_left <= REQUESTS // 10
