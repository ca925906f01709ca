"""Requests waiting for their replies: when to send one again, when to give up. Pure.

Each request gets ``retries + 1`` sends spread evenly over its timeout: with
a 30 s timeout and 2 retries it is sent at 0 s, again at 10 s and 20 s if no
reply came, and given up at 30 s. A resend reuses the request's id and bytes,
so the worker's dedup makes it harmless: an id already answered is not scored
again, and the first reply answers every send. Time is passed in; not
thread-safe (the client holds a lock around it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Generic, TypeVar

F = TypeVar("F")  # whatever stands for the caller waiting on the reply (a Future)


@dataclass
class Pending(Generic[F]):
    waiter: F
    value: bytes  # the request record's value, for resends
    interval_s: float  # between sends
    sends: int = 1
    sends_allowed: int = 1
    due_at: float = 0.0  # next resend, or the give-up time after the last send
    started_at: float = 0.0


@dataclass
class Due(Generic[F]):
    """What ``take_due`` found: ids to send again, and requests to give up on."""

    resend: list[tuple[str, bytes]] = field(default_factory=list)
    expired: list[tuple[str, Pending[F]]] = field(default_factory=list)


class InFlight(Generic[F]):
    def __init__(self) -> None:
        self._pending: dict[str, Pending[F]] = {}
        self._schedule: list[tuple[float, int, str]] = []  # (due_at, tie-break, id); stale entries skipped
        self._seq = 0

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._pending

    def get(self, request_id: str) -> Pending[F] | None:
        return self._pending.get(request_id)

    def add(self, request_id: str, waiter: F, value: bytes, now: float, timeout_s: float, retries: int) -> None:
        """Track a request just sent. Raises ValueError if ``request_id`` is in flight already."""
        if request_id in self._pending:
            raise ValueError(f"request {request_id} is already in flight")
        if timeout_s <= 0 or retries < 0:
            raise ValueError(f"need timeout_s > 0 and retries >= 0, got {timeout_s} and {retries}")
        interval = timeout_s / (retries + 1)
        self._pending[request_id] = Pending(waiter, value, interval, 1, retries + 1, now + interval, now)
        self._push(now + interval, request_id)

    def pop(self, request_id: str) -> Pending[F] | None:
        """The request answered (or abandoned): stop tracking it. None if it was not in flight."""
        return self._pending.pop(request_id, None)

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
                due.expired.append((request_id, pending))
        return due

    def drain(self) -> list[tuple[str, Pending[F]]]:
        """Stop tracking everything; returns what was in flight."""
        pending = list(self._pending.items())
        self._pending.clear()
        self._schedule.clear()
        return pending

    def _push(self, due_at: float, request_id: str) -> None:
        self._seq += 1
        heapq.heappush(self._schedule, (due_at, self._seq, request_id))
