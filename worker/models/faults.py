"""Failures of a user's own model code, told once per kind.

A bug in ``prepare``, ``collate``, ``forward`` or ``split`` fails the request
that triggers it, not the worker: the request is answered ``model_error``
with the exception's type and a short message. The traceback is worth
logging, but once per kind (stage and exception type), not once per record: a
stream of bad requests would otherwise bury every other log line. Thread-safe
(the model may run on a thread of its own).
"""

from __future__ import annotations

import threading
from collections import Counter

import structlog

from worker.core.errors import describe

log = structlog.get_logger(__name__)

class ModelCodeFailure(Exception):
    """The user's code raised ``cause`` in ``stage`` (collate, forward or split) of a batch."""

    def __init__(self, stage: str, cause: Exception) -> None:
        super().__init__(describe(stage, cause))
        self.stage = stage
        self.cause = cause


class FaultLog:
    """Counts the user-code failures per (stage, exception type) and logs the first of each kind in full."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()

    def record(self, stage: str, exc: BaseException) -> None:
        kind = (stage, type(exc).__name__)
        with self._lock:
            self.counts[kind] += 1
            first = self.counts[kind] == 1
        if first:
            log.error("model_code_failed", stage=stage, error_type=kind[1], error=describe(stage, exc),
                      note="the request was answered model_error; later failures of this kind are counted, "
                           "not logged", exc_info=exc)

