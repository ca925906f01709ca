"""SIGTERM and SIGINT: once the worker runs, a clean stop; while it starts, an exit at once.

Running, a stop finishes the work in hand, commits and exits. While starting
(the services checked, the model loaded and warmed up) nothing has been
consumed, so there is nothing to finish: ``exit_if_signalled_while_starting``
ends the process within moments. It cannot leave that to a Python signal
handler, which runs only when the main thread is back in Python bytecode: a
model's load or warmup can stay in C code (torch) for minutes. So the signal
also wakes a thread of its own (``signal.set_wakeup_fd``), which exits.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import structlog

from worker.core.shutdown import StopRequest

log = structlog.get_logger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_WAKE_UP = b"\0"  # no signal has the number 0: it tells the watcher that the start is over


def exit_code_of(signum: int) -> int:
    """128 + the signal's number (143 for SIGTERM, 130 for SIGINT): what a shell reports for a process it ended."""
    return 128 + signum


def stop_on_signals(stop_requested: StopRequest) -> None:
    """Set ``stop_requested`` on SIGTERM or SIGINT; a second Ctrl-C aborts at once.

    Install it before the slow start (model load, group join), and run the
    start inside ``exit_if_signalled_while_starting``. Main thread only.
    """

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # Nothing logged here: a handler that logs while its thread writes a log line waits for ever on the
        # logger's lock. The loop says stop_requested once it sees it (worker/stream/loop.py).
        stop_requested.set(signal.Signals(signum).name)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)


@contextmanager
def exit_if_signalled_while_starting(exit_code: Callable[[int], int] = exit_code_of) -> Iterator[None]:
    """While the body runs, SIGTERM or SIGINT ends the process within moments, whatever the main thread
    is doing, with exit code ``exit_code(signum)`` and one log line, ``stopped_while_starting``.

    Use it only where nothing was consumed yet: the exit flushes stdout and stderr, and nothing else.
    On leaving, the handlers from before are back, and a signal that came as the body ended is
    delivered to them. Main thread only (signal handlers can be set there alone).
    """
    pending: list[int] = []
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous_handlers = {signum: signal.signal(signum, lambda signum, _frame: pending.append(signum))
                         for signum in STOP_SIGNALS}
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    watcher = threading.Thread(target=_exit_on_signal, args=(reader, exit_code), name="start-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        # In this order: a signal whose number reached the watcher before the wake-up ends the process; one
        # that came after is still pending here, and goes to the handlers from before.
        signal.set_wakeup_fd(previous_fd)
        writer.send(_WAKE_UP)
        watcher.join()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        reader.close()
        writer.close()
        for late in pending[:1]:
            signal.raise_signal(late)


def _exit_on_signal(reader: socket.socket, exit_code: Callable[[int], int]) -> None:
    """The watcher: each byte is the number of a signal that came (any with a Python handler), or the wake-up."""
    while True:
        for number in reader.recv(64):
            if number == _WAKE_UP[0]:
                return
            if number in STOP_SIGNALS:
                code = exit_code(number)
                log.warning("stopped_while_starting", signal=signal.Signals(number).name, exit_code=code,
                            detail="nothing was consumed yet; the model's load or warmup was cut short")
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
