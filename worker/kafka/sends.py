"""Both clients' sinks, less their library's calls: the sends made and not yet reported, in the order made.

A client's sink (``LedgerSink``) queues each send with its library and records it with its handle on the
outcome (kafka-python's future, librdkafka's ``DeliveryReport``), or with the error that failed it before it
was queued. A group of sends (a batch's replies, ``send_group``) is one record of the ledger, its handle a
SendGroup: reported as one delivery when the broker has every send of it, as one a send when any failed.
Replies count as delivered only once the broker acknowledged them (acks=all, idempotent).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import structlog

from worker.core.messages import Headers
from worker.ports import Delivery, Record

log = structlog.get_logger(__name__)
T = TypeVar("T")
H = TypeVar("H")

QUEUE_FULL_WAIT_S = 0.01  # serve delivery reports this long before trying a refused send again


class SendGroup(ABC, Generic[H]):
    """A group's handle on its sends' outcomes (``Sink.send_group``): ``size`` sends, of which ``failed`` says
    which the client refused before it queued them."""

    __slots__ = ("_refused", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._refused: dict[int, Exception] = {}

    def failed(self, index: int, error: Exception) -> None:
        """Send ``index`` failed: refused before it was queued (or, by a client that answers at once, when)."""
        self._refused[index] = error

    @abstractmethod
    def outcome(self) -> tuple[bool, dict[int, Exception]]:
        """Whether every send of the group is finished, and the error of each one lost, by its index."""

    def handles(self) -> list[H]:
        """The handles of its sends still out, where the client has one a send (none by default)."""
        return []


class FailedGroup(SendGroup[H]):
    """A group whose every send failed with one ``error`` before any was queued (a transaction not begun)."""

    def __init__(self, size: int, error: Exception) -> None:
        super().__init__(size)
        self._refused = dict.fromkeys(range(size), error)

    def outcome(self) -> tuple[bool, dict[int, Exception]]:
        return True, self._refused


class SendLedger(Generic[T, H]):
    """Sends in the order made, each a tag (whatever the caller attached) and a handle or an error; ``outcome``
    reads a handle: whether its send is finished, and the error that lost it (None: the broker has it). A
    group of sends is one entry, its handle a SendGroup, reported as one delivery with its tag when every
    send of it was delivered, else as one a send with the tag ``member(i)`` (``Sink.send_group``).
    Not thread-safe."""

    __slots__ = ("_count", "_outcome", "_sends")

    def __init__(self, outcome: Callable[[H], tuple[bool, Exception | None]]) -> None:
        self._outcome = outcome
        self._sends: list[tuple[T, Any, Exception | None, Callable[[int], T] | None]] = []
        self._count = 0  # sends, a group's each counted

    def __len__(self) -> int:
        """The sends not reported yet."""
        return self._count

    def sent(self, tag: T, handle: H) -> None:
        self._sends.append((tag, handle, None, None))
        self._count += 1

    def failed(self, tag: T, error: Exception) -> None:
        """A send that failed before it was queued."""
        self._sends.append((tag, None, error, None))
        self._count += 1

    def sent_group(self, tag: T, member: Callable[[int], T], group: SendGroup[H]) -> None:
        self._sends.append((tag, group, None, member))
        self._count += group.size

    def handles_out(self) -> list[H]:
        """The handles of the sends not reported yet (those that failed before they were queued have none)."""
        handles: list[H] = []
        for _, handle, _, member in self._sends:
            if member is not None:
                handles += handle.handles()
            elif handle is not None:
                handles.append(handle)
        return handles

    def clear(self) -> None:
        """Forget every send (an aborted transaction's: none of them counts)."""
        self._sends = []
        self._count = 0

    def give_up(self, error: Exception) -> list[Delivery[T]]:
        """Every send still out, reported failed with ``error`` and forgotten (whatever its client does with it)."""
        given_up = []
        for tag, handle, _, member in self._sends:
            if member is None:
                given_up.append(Delivery(tag, error))
            else:
                given_up += [Delivery(member(i), error) for i in range(handle.size)]
        self._sends = []
        self._count = 0
        return given_up

    def settle(self) -> list[Delivery[T]]:
        """Every finished send in the order made; the unfinished ones stay for the next call."""
        deliveries: list[Delivery[T]] = []
        still_out = []
        for send in self._sends:
            tag, handle, error, member = send
            if member is not None:
                done, errors = handle.outcome()
                if not done:
                    still_out.append(send)
                    continue
                self._count -= handle.size
                if not errors:
                    deliveries.append(Delivery(tag, None))
                else:
                    deliveries += [Delivery(member(i), errors.get(i)) for i in range(handle.size)]
                continue
            if handle is not None:
                done, error = self._outcome(handle)
                if not done:
                    still_out.append(send)
                    continue
            self._count -= 1
            deliveries.append(Delivery(tag, error))
        self._sends = still_out
        return deliveries


class LedgerSink(ABC, Generic[T, H]):
    """A Sink over a client's producer; the client's sink supplies the abstract methods. Not thread-safe."""

    SEND_ERRORS: ClassVar[tuple[type[Exception], ...]]  # what the client raises for a record it does not queue
    _pending: SendLedger[T, H]

    @property
    def pending(self) -> int:
        return len(self._pending)

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        """Blocks while the client waits for the topic's metadata or for room in its queue, up to the bound
        the sink was built with; a record it refuses is reported failed by the next ``settle``."""
        try:
            handle = self._queue(topic, key, value, headers)
        except self.SEND_ERRORS as exc:  # e.g. no metadata for the topic in time, larger than the broker takes
            self._pending.failed(tag, exc)
            return
        self._pending.sent(tag, handle)

    def send_group(self, records: Sequence[Record], tag: T, member: Callable[[int], T]) -> None:
        """As ``send`` for each record; a record the client refuses fails in the group (Sink.send_group)."""
        self._pending.sent_group(tag, member, self._queue_group(records))

    def settle(self, timeout_s: float = 30.0) -> list[Delivery[T]]:
        """Flush for up to ``timeout_s``, then report every finished send in the order made; those still
        unanswered (the broker is away) stay queued for the next settle."""
        self._flush(timeout_s)
        deliveries = self._pending.settle()
        self._settled()
        return deliveries

    def close(self, timeout_s: float = 10.0) -> None:
        """Close, waiting up to ``timeout_s`` for what is still out (its offsets were never committed)."""
        if not self._close(timeout_s):
            log.warning("sink_closed_with_sends_out", timeout_s=timeout_s,
                        consequence="those records were not committed: they are consumed again")

    def _settled(self) -> None:
        """After each settle's report (by default, nothing)."""

    @abstractmethod
    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> H:
        """Hand the record to the client; its handle on the outcome. Raises SEND_ERRORS."""

    @abstractmethod
    def _queue_group(self, records: Sequence[Record]) -> SendGroup[H]:
        """Hand every record to the client, in order; the group's handle, which holds the refusals
        (SEND_ERRORS) by index."""

    @abstractmethod
    def _flush(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the sends out to be answered; a timeout is not an error."""

    @abstractmethod
    def _close(self, timeout_s: float) -> bool:
        """Flush for up to ``timeout_s`` and close; False when sends were still out then."""


class DeliveryReport:
    """One send's delivery report, once it comes: librdkafka calls ``delivered`` from poll() or flush(), with
    its error (None: the broker has the record)."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: Any = None

    def delivered(self, error: Any, _message: Any) -> None:
        self.done = True
        self.error = error


def retry_while_full(attempt: Callable[[], None], serve: Callable[[float], object], max_block_s: float) -> None:
    """``attempt()`` again while it raises BufferError (the client's send queue is full), serving delivery
    reports with ``serve(seconds)`` in between (which frees room), for up to ``max_block_s``; then the
    BufferError is raised. Any other error of ``attempt`` is raised at once."""
    deadline: float | None = None
    while True:
        try:
            attempt()
            return
        except BufferError:  # the queue is full: let acknowledgements free room
            deadline = deadline if deadline is not None else time.monotonic() + max_block_s
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            serve(min(QUEUE_FULL_WAIT_S, left))
