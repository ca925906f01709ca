"""Talking to the dedup store without ever blocking the loop on it.

Requests wait here until their ids are claimed, and answered ids until their
done marks are written. When the store fails, the gate keeps what it holds,
says so (``blocked``, so that the loop pauses its partitions and keeps polling
to stay in the group) and tries again after a backoff, until it recovers.
Nothing is scored without a claim, and no offset is acknowledged before its
done mark is written. Only TRANSIENT errors mean "try later": any other error
of the store (a ConfigError: an ACL refusal, a wrong-type key) propagates and
stops the worker with its cause, rather than pausing it silently for ever. Time is passed in; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import structlog

from worker.core.errors import StoreUnavailable
from worker.core.messages import Position, Request
from worker.core.offsets import TopicPartition as TP
from worker.ports import Completed, DedupStore

log = structlog.get_logger(__name__)
T = TypeVar("T")

# What a store raises when it is away for now; the Redis store turns its client's errors into these.
TRANSIENT = (StoreUnavailable, ConnectionError, TimeoutError)
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 5.0


class DedupGate:
    def __init__(self, store: DedupStore) -> None:
        self._store = store
        self._to_claim: list[Request] = []
        self._to_complete: list[tuple[Position, Completed]] = []
        self._retry_at = 0.0
        self._backoff_s = FIRST_BACKOFF_S
        self.failures = 0  # failed calls in a row
        self.failed_calls = 0  # every failed call so far

    @property
    def blocked(self) -> bool:
        """True while something waits for a store that failed: stop taking in more work."""
        return bool(self._to_claim or self._to_complete) and self.failures > 0

    @property
    def waiting(self) -> int:
        """Requests waiting for their claim, and answered ids for their done marks."""
        return len(self._to_claim) + len(self._to_complete)

    @property
    def claiming(self) -> int:
        """Requests waiting for their claim (routed already: the models they name must stay)."""
        return len(self._to_claim)

    def claim(self, requests: Sequence[Request], now: float) -> list[tuple[Request, bool]]:
        """Queue requests for claiming, then claim everything queued if the store is due.

        Returns (request, fresh) for each request claimed now: fresh means score it,
        not fresh means it is a duplicate. Requests not yet claimed stay queued.
        """
        self._to_claim.extend(requests)
        if not self._to_claim:
            return []
        waiting = self._to_claim
        ok, verdicts = self._call("dedup_claim", lambda: self._store.claim(waiting), now)
        if not ok or verdicts is None:
            return []
        self._to_claim = []
        return list(zip(waiting, verdicts, strict=True))

    def complete(self, done: Sequence[tuple[Position, Completed]], now: float) -> list[Position]:
        """Queue done marks and claim releases, write everything queued if due; returns the positions written."""
        self._to_complete.extend(done)
        if not self._to_complete:
            return []
        waiting = self._to_complete
        ok, _ = self._call("dedup_complete", lambda: self._store.complete([entry for _, entry in waiting]), now)
        if not ok:
            return []
        self._to_complete = []
        return [position for position, _ in waiting]

    def drop(self, partitions: set[TP]) -> int:
        """Forget unclaimed requests of partitions we no longer own; returns how many."""
        kept = [r for r in self._to_claim if (r.position.topic, r.position.partition) not in partitions]
        dropped = len(self._to_claim) - len(kept)
        self._to_claim = kept
        return dropped

    def _call(self, what: str, call: Callable[[], T], now: float) -> tuple[bool, T | None]:
        """(True, result), or (False, None) when the store failed or is not due for a retry yet."""
        if now < self._retry_at:
            return False, None
        try:
            result = call()
        except TRANSIENT as exc:  # anything else (a ConfigError: an ACL, a wrong-type key) stops the worker
            self.failures += 1
            self.failed_calls += 1
            self._retry_at = now + self._backoff_s
            log.warning(f"{what}_failed", error=str(exc), retry_in_s=self._backoff_s,
                        waiting_claims=len(self._to_claim), waiting_done=len(self._to_complete))
            self._backoff_s = min(self._backoff_s * 2, MAX_BACKOFF_S)
            return False, None
        if self.failures:
            log.info("dedup_recovered", after_failures=self.failures)
        self.failures = 0
        self._backoff_s = FIRST_BACKOFF_S
        self._retry_at = 0.0
        return True, result
