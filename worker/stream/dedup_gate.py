"""Talking to the dedup store without ever blocking the loop on it.

Requests wait here until their ids are claimed, and answered ids until their
done marks are written. When the store fails, the gate keeps what it holds,
says so (``blocked``, so that the loop pauses its partitions and keeps polling
to stay in the group) and tries again after a backoff, until it recovers.
Nothing is scored without a claim, and no offset is acknowledged before its
done mark is written. A request whose id another record holds in flight
(BUSY: the same id twice in a poll, a corrected retry right behind the refused
first try) is held and claimed again with the next claim: once that record
is answered it is a duplicate, once an error reply released its claim it is
scored (counting it a duplicate at once lost a corrected retry). Only TRANSIENT errors mean "try later": any other error
of the store (a ConfigError: an ACL refusal, a wrong-type key) propagates and
stops the worker with its cause, rather than pausing it silently for ever. Time is passed in; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import structlog

from worker.core.errors import StoreUnavailable
from worker.core.messages import Position, Request
from worker.core.offsets import TopicPartition as TP
from worker.core.routes import Route
from worker.ports import BUSY, FRESH, ClaimsAhead, DedupStore, DoneMarks

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
        self._held: list[Request] = []  # BUSY: another record of their id holds the claim
        self._to_complete = DoneMarks()
        self._retry_at = 0.0
        self._backoff_s = FIRST_BACKOFF_S
        self.failures = 0  # failed calls in a row
        self.failed_calls = 0  # every failed call so far
        self._out: tuple[list[Request], Callable[[], list[int]]] | None = None  # a claim started, not finished
        self._left: set[TP] = set()  # partitions dropped while it was out
        self._helper: ThreadPoolExecutor | None = None  # waits for a store that cannot claim ahead itself

    @property
    def blocked(self) -> bool:
        """True while something waits for a store that failed: stop taking in more work."""
        return bool(self._to_claim or self._to_complete) and self.failures > 0

    @property
    def waiting(self) -> int:
        """Requests waiting for their claim, and answered ids for their done marks: work in hand whose lack of
        progress is a stall. Not the held ones: they wait for another record of their id, perhaps another
        worker's, redelivered after a rebalance."""
        return self.claiming + len(self._to_complete)

    @property
    def holding(self) -> bool:
        """Requests are held for another record of their id, in flight (BUSY), to be claimed again."""
        return bool(self._held)

    def held_routes(self) -> set[Route]:
        """The routes of the held requests: the entries and models they name must stay, as for those claiming,
        but no other (a held request may wait for a record that waits for another model's load)."""
        return {r.route for r in self._held if r.route is not None}

    @property
    def claiming(self) -> int:
        """Requests waiting for their claim, held ones aside (routed already: the models they name must stay)."""
        return len(self._to_claim) + (len(self._out[0]) if self._out is not None else 0)

    def start_claim(self, requests: Sequence[Request], now: float) -> None:
        """Queue requests, and start claiming everything queued when the store is due and no claim is out: sent
        now by a store that claims ahead (ClaimsAhead), else on a helper thread. The loop's thread goes on
        (scoring what it holds) until ``claim`` takes the answer."""
        self._release_held()
        self._to_claim.extend(requests)
        if self._out is not None or not self._to_claim or now < self._retry_at:
            return
        waiting, self._to_claim = self._to_claim, []
        self._out = (waiting, self._started(waiting))

    def _started(self, waiting: list[Request]) -> Callable[[], list[int]]:
        if isinstance(self._store, ClaimsAhead):
            return self._store.claim_ahead(waiting)
        if self._helper is None:
            self._helper = ThreadPoolExecutor(1, thread_name_prefix="dedup-claim")
        return self._helper.submit(self._store.claim, waiting).result

    def claim(self, requests: Sequence[Request], now: float) -> list[tuple[Request, bool]]:
        """Queue requests for claiming, then claim everything queued if the store is due.

        Returns (request, fresh) for each request claimed now: fresh means score it,
        not fresh means it is a duplicate. Requests not yet claimed stay queued, BUSY ones held. A claim
        started before (``start_claim``) is waited for first.
        """
        finished_ahead = self._out is not None
        claimed = self._finish_claim(now)
        if not finished_ahead:  # else they were just asked: they go with the next claim, not a call more now
            self._release_held()
        self._to_claim.extend(requests)
        if not self._to_claim or self._out is not None:
            return claimed
        waiting = self._to_claim
        ok, verdicts = self._call("dedup_claim", lambda: self._store.claim(waiting), now)
        if not ok or verdicts is None:
            return claimed
        self._to_claim = []
        return claimed + self._settled(waiting, verdicts)

    def _settled(self, requests: Sequence[Request], verdicts: Sequence[int],
                 left: Collection[TP] = ()) -> list[tuple[Request, bool]]:
        """(request, fresh) for each request the store decided, those of ``left`` partitions left out; BUSY ones
        held for the next claim."""
        if not left and BUSY not in verdicts:  # the common case, in C: no request is held
            return list(zip(requests, map(FRESH.__eq__, verdicts), strict=True))
        settled = []
        for request, verdict in zip(requests, verdicts, strict=True):
            if left and (request.position.topic, request.position.partition) in left:
                continue
            if verdict == BUSY:
                self._held.append(request)
            else:
                settled.append((request, verdict == FRESH))
        return settled

    def _release_held(self) -> None:
        """Queue the held requests for claiming again, ahead of newer ones: each step's claim asks for them too
        (a call of its own only when nothing new came), until their holder is answered or released."""
        if self._held:
            self._to_claim[:0], self._held = self._held, []

    def _finish_claim(self, now: float) -> list[tuple[Request, bool]]:
        """The answer of the claim out, if any: the requests of partitions dropped meanwhile left out, and on a
        failure every request back at the head of the queue."""
        if self._out is None:
            return []
        (waiting, answer), self._out = self._out, None
        left, self._left = self._left, set()
        ok, verdicts = self._call("dedup_claim", answer, now, started=True)
        if not ok or verdicts is None:
            self._to_claim[:0] = [r for r in waiting if (r.position.topic, r.position.partition) not in left]
            return []
        return self._settled(waiting, verdicts, left)

    def complete(self, done: DoneMarks, now: float) -> list[Position]:
        """Queue done marks and claim releases, write everything queued if due; returns the positions written."""
        self._to_complete.extend(done)
        if not self._to_complete:
            return []
        waiting = self._to_complete
        ok, _ = self._call("dedup_complete", lambda: self._store.complete(waiting.ids, waiting.replies), now)
        if not ok:
            return []
        self._to_complete = DoneMarks()
        return waiting.positions

    def drop(self, partitions: set[TP]) -> int:
        """Forget unclaimed requests of partitions we no longer own; returns how many."""
        kept = [r for r in self._to_claim if (r.position.topic, r.position.partition) not in partitions]
        held = [r for r in self._held if (r.position.topic, r.position.partition) not in partitions]
        dropped = len(self._to_claim) - len(kept) + len(self._held) - len(held)
        self._to_claim, self._held = kept, held
        if self._out is not None:  # their answers are left out when it comes
            self._left |= partitions
            dropped += sum((r.position.topic, r.position.partition) in partitions for r in self._out[0])
        return dropped

    def _call(self, what: str, call: Callable[[], T], now: float, started: bool = False) -> tuple[bool, T | None]:
        """(True, result), or (False, None) when the store failed or is not due for a retry yet. ``started``: the
        answer of a call started before, taken whatever the backoff (a connection waits with it)."""
        if now < self._retry_at and not started:
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
