"""Which topics exist, cached: a request's ``reply_to`` must name one before it is scored.

Sending to a missing topic blocks the producer for its whole metadata timeout
and then fails, which would stop the worker on every redelivery of that one
record. So a ``reply_to`` the cache does not know is looked up, off the loop's
thread: a lookup runs on a thread of its own, and ``exists`` waits at most
``wait_s`` for it (a broker that is away, or slow to answer, costs the loop no
more). A name still unknown then is answered as unknown. Lookups go at most
once per ``refresh_s``, so a stream of bad names costs one metadata request per
interval, and a topic created meanwhile is known within about ``refresh_s``. A
lookup that fails keeps what was known.

A topic can be deleted after it was looked up. So a known name is looked up
again, in the background, once what is known is older than ``recheck_s``: a
deleted ``reply_to`` topic is answered as unknown within about that long. And
a send to a ``reply_to`` topic that failed asks ``gone``: whether a lookup made
now finds no such topic, so that the reply can go elsewhere instead of being
sent again and again (worker/core/refusals.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from worker.core.bounds import METADATA_S
from worker.core.clock import Clock

log = structlog.get_logger(__name__)

REFRESH_S = 1.0
RECHECK_S = 10.0


class TopicDirectory:
    """``list_topics`` must be safe to call from another thread than the loop's. Thread-safe."""

    def __init__(self, list_topics: Callable[[], set[str]], clock: Clock, refresh_s: float = REFRESH_S,
                 wait_s: float = METADATA_S, recheck_s: float = RECHECK_S) -> None:
        self._list_topics = list_topics
        self._clock = clock
        self._refresh_s = refresh_s
        self._recheck_s = recheck_s
        self._wait_s = wait_s
        self._changed = threading.Condition()
        self._known: frozenset[str] = frozenset()
        self._looked_up_at: float | None = None  # when the last finished lookup started
        self._answered = False  # whether the last finished lookup got the broker's answer
        self._asked_at: float | None = None  # time.monotonic() the lookup waited for was asked; None when none is
        self._thread: threading.Thread | None = None

    def exists(self, topic: str) -> bool:
        """Whether the broker has the topic, as far as known within ``wait_s``. Blocks at most that long."""
        if topic in self._known:
            if self._looked_up_at is not None and self._clock.monotonic() - self._looked_up_at > self._recheck_s:
                with self._changed:
                    self._ask()  # not waited for: known until a lookup says otherwise
            return True
        with self._changed:
            now = self._clock.monotonic()
            if self._looked_up_at is not None and now - self._looked_up_at < self._refresh_s:
                return topic in self._known  # looked up a moment ago: not there
            self._wait_for_lookup()
            return topic in self._known

    def gone(self, topic: str) -> bool:
        """Whether a lookup made now, answered within ``wait_s``, finds no such topic. A lookup the broker does
        not answer (it is away) says nothing: False. Blocks at most ``wait_s``."""
        with self._changed:
            answered = self._wait_for_lookup() and self._answered
            return answered and topic not in self._known

    def _ask(self) -> float:
        """Have a lookup made, unless one is under way; when the lookup under way was asked for. Called holding
        ``_changed``."""
        if self._asked_at is None:
            self._asked_at = time.monotonic()  # the wait is real time, whatever clock the cache runs on
            self._start_thread()
            self._changed.notify_all()
        return self._asked_at

    def _wait_for_lookup(self) -> bool:
        """Ask for a lookup and wait for it; False if it did not finish in time. Called holding ``_changed``."""
        asked_at = self._ask()
        # A lookup that has already been waited on its full wait_s (the broker away) is not waited on again.
        return self._changed.wait_for(lambda: self._asked_at is None,
                                      max(0.0, self._wait_s - (time.monotonic() - asked_at)))

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._look_up_when_asked, name="topic-lookups", daemon=True)
            self._thread.start()

    def _look_up_when_asked(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._asked_at is not None)
                started = self._clock.monotonic()
            known: frozenset[str] | None = None
            try:
                known = frozenset(self._list_topics())
            except Exception as exc:  # each client raises its own kinds; all mean "not known now"
                log.warning("topic_lookup_failed", error=f"{type(exc).__name__}: {exc}")
            with self._changed:
                if known is not None:
                    self._known = known
                self._answered = known is not None
                self._looked_up_at = started
                self._asked_at = None
                self._changed.notify_all()
