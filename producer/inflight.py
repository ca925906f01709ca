"""Requests waiting for their replies: when to send one again, when to give up. Pure.

Each request gets ``retries + 1`` sends spread evenly over its timeout: with
a 30 s timeout and 2 retries it is sent at 0 s, again at 10 s and 20 s if no
reply came, and given up at 30 s. A resend reuses the request's id and bytes,
so the worker's dedup makes it harmless: an id already answered is not scored
again, and the first reply answers every send. Time is passed in; not
thread-safe (the client holds a lock around it).

A request given up on (it expired, its caller cancelled it or stopped
waiting, its send failed) leaves the table at once, so the same id can be
sent again as a new request. Its id is remembered for a while (``late_window_s``,
at most ``remember_at_most`` ids), so that a reply arriving for it after all
is told apart from another client's reply on a shared topic and counted in
``late_replies``.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from producer.ports import Headers

F = TypeVar("F")  # whatever stands for the caller waiting on the reply (a Future)

LATE_WINDOW_S = 600.0  # how long an id given up on is remembered, to count a late reply for it
REMEMBER_AT_MOST = 100_000


@dataclass
class Pending(Generic[F]):
    waiter: F
    value: bytes  # the request record's value, for resends
    interval_s: float  # between sends
    sends: int = 1
    sends_allowed: int = 1
    due_at: float = 0.0  # next resend, or the give-up time after the last send
    started_at: float = 0.0
    queued: int = 0  # sends the client library took (the table counts the sends due in ``sends``)
    headers: Headers = ()  # the request record's headers (its trace context), for resends

    @property
    def gives_up_at(self) -> float:
        return self.started_at + self.interval_s * self.sends_allowed


@dataclass
class Due(Generic[F]):
    """What ``take_due`` found: ids to send again, and requests to give up on."""

    resend: list[tuple[str, bytes]] = field(default_factory=list)
    expired: list[tuple[str, Pending[F]]] = field(default_factory=list)


class InFlight(Generic[F]):
    def __init__(self, late_window_s: float = LATE_WINDOW_S, remember_at_most: int = REMEMBER_AT_MOST) -> None:
        self._pending: dict[str, Pending[F]] = {}
        self._schedule: list[tuple[float, int, str]] = []  # (due_at, tie-break, id); stale entries skipped
        self._seq = 0
        self._given_up: OrderedDict[str, float] = OrderedDict()  # id -> when, oldest first
        self._late_window_s = late_window_s
        self._remember_at_most = remember_at_most
        self.late_replies = 0

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._pending

    def get(self, request_id: str) -> Pending[F] | None:
        return self._pending.get(request_id)

    def add(self, request_id: str, waiter: F, value: bytes, now: float, timeout_s: float, retries: int,
            headers: Headers = ()) -> None:
        """Track a request just sent. Raises ValueError if ``request_id`` is in flight already."""
        if request_id in self._pending:
            raise ValueError(f"request {request_id} is already in flight")
        if timeout_s <= 0 or retries < 0:
            raise ValueError(f"need timeout_s > 0 and retries >= 0, got {timeout_s} and {retries}")
        interval = timeout_s / (retries + 1)
        self._given_up.pop(request_id, None)  # sent again: a reply for it now answers this request
        self._pending[request_id] = Pending(waiter, value, interval, 1, retries + 1, now + interval, now,
                                            headers=headers)
        self._push(now + interval, request_id)

    def answer(self, request_id: str, now: float) -> Pending[F] | None:
        """A reply for ``request_id`` came: stop tracking the request and return it.

        None when it is not in flight: the reply is counted in ``late_replies`` when the id was given up on
        within ``late_window_s``; any other id is another client's (or answered already)."""
        pending = self._pending.pop(request_id, None)
        if pending is None:
            self._prune(now)
            if request_id in self._given_up:
                self.late_replies += 1
        return pending

    def forget(self, request_id: str, waiter: F, now: float) -> Pending[F] | None:
        """Give up on a request (cancelled, abandoned, failed): stop tracking it and remember its id.

        Only if ``waiter`` is the one tracked under ``request_id``: a newer request with the same id stays.
        Returns what was tracked, None if it was not (answered, expired or forgotten already)."""
        pending = self._pending.get(request_id)
        if pending is None or pending.waiter is not waiter:
            return None
        del self._pending[request_id]
        self._remember(request_id, now)
        return pending

    def take_due(self, now: float) -> Due[F]:
        """Requests whose next send is due (counted as sent), and those out of sends (no longer tracked)."""
        due: Due[F] = Due()
        while self._schedule and self._schedule[0][0] <= now:
            due_at, _, request_id = heapq.heappop(self._schedule)
            pending = self._pending.get(request_id)
            if pending is None or pending.due_at != due_at:
                continue  # answered meanwhile, or rescheduled
            if pending.sends < pending.sends_allowed:
                pending.sends += 1
                pending.due_at = due_at + pending.interval_s
                self._push(pending.due_at, request_id)
                due.resend.append((request_id, pending.value))
            else:
                del self._pending[request_id]
                self._remember(request_id, now)
                due.expired.append((request_id, pending))
        return due

    def drain(self) -> list[tuple[str, Pending[F]]]:
        """Stop tracking everything; returns what was in flight."""
        pending = list(self._pending.items())
        self._pending.clear()
        self._schedule.clear()
        return pending

    def _remember(self, request_id: str, now: float) -> None:
        self._given_up[request_id] = now
        self._given_up.move_to_end(request_id)
        self._prune(now)

    def _prune(self, now: float) -> None:
        given_up = self._given_up
        while given_up and (len(given_up) > self._remember_at_most
                            or next(iter(given_up.values())) < now - self._late_window_s):
            given_up.popitem(last=False)

    def _push(self, due_at: float, request_id: str) -> None:
        self._seq += 1
        heapq.heappush(self._schedule, (due_at, self._seq, request_id))
