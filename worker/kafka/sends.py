"""The sends a sink has made and not yet reported, in the order made: what both clients' sinks settle.

Client-free: a client's sink records each send with its handle on the outcome
(kafka-python's future, librdkafka's delivery report), or with the error that
failed it before it was queued, and says how to read a handle: whether its
send is finished, and the error that lost it (None: the broker has it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from worker.ports import Delivery

T = TypeVar("T")
H = TypeVar("H")


class SendLedger(Generic[T, H]):
    """Sends in the order made, each a tag (whatever the caller attached) and a handle or an error.
    Not thread-safe."""

    __slots__ = ("_outcome", "_sends")

    def __init__(self, outcome: Callable[[H], tuple[bool, Exception | None]]) -> None:
        self._outcome = outcome
        self._sends: list[tuple[T, H | None, Exception | None]] = []

    def __len__(self) -> int:
        return len(self._sends)

    def sent(self, tag: T, handle: H) -> None:
        self._sends.append((tag, handle, None))

    def failed(self, tag: T, error: Exception) -> None:
        """A send that failed before it was queued."""
        self._sends.append((tag, None, error))

    def clear(self) -> None:
        """Forget every send (an aborted transaction's: none of them counts)."""
        self._sends = []

    def settle(self) -> list[Delivery[T]]:
        """Every finished send in the order made; the unfinished ones stay for the next call."""
        deliveries = []
        still_out = []
        for send in self._sends:
            tag, handle, error = send
            if handle is not None:
                done, error = self._outcome(handle)
                if not done:
                    still_out.append(send)
                    continue
            deliveries.append(Delivery(tag, error))
        self._sends = still_out
        return deliveries
