"""SIGTERM and SIGINT as a clean stop: finish the work in hand, commit, exit."""

from __future__ import annotations

import signal
from types import FrameType

import structlog

from worker.core.shutdown import StopRequest

log = structlog.get_logger(__name__)


def stop_on_signals(stop_requested: StopRequest) -> None:
    """Set ``stop_requested`` on SIGTERM or SIGINT; a second Ctrl-C aborts at once.

    Install it before the slow start (model load, group join), so that a stop
    asked for meanwhile is still a clean one. Main thread only.
    """

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stop_requested", signal=signal.Signals(signum).name)
        stop_requested.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
