"""Which topics exist, cached: a request's ``reply_to`` must name one before it is scored.

Sending to a missing topic blocks the producer for its whole metadata timeout
and then fails, which would stop the worker on every redelivery of that one
record. The cache is refreshed when an unknown name shows up, at most once per
``refresh_s``, so a stream of bad names costs one metadata request per interval
(and a topic created meanwhile is known within about ``refresh_s``). A lookup
that fails (the broker away) keeps what was known: the name counts as unknown
until a later lookup finds it.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from worker.core.clock import Clock

log = structlog.get_logger(__name__)


class TopicDirectory:
    def __init__(self, list_topics: Callable[[], set[str]], clock: Clock, refresh_s: float = 1.0) -> None:
        self._list_topics = list_topics
        self._clock = clock
        self._refresh_s = refresh_s
        self._known: set[str] = set()
        self._refreshed_at: float | None = None

    def exists(self, topic: str) -> bool:
        """Whether the broker has the topic. Blocks for a metadata request now and then."""
        if topic in self._known:
            return True
        now = self._clock.monotonic()
        if self._refreshed_at is None or now - self._refreshed_at >= self._refresh_s:
            self._refreshed_at = now
            try:
                self._known = self._list_topics()
            except Exception as exc:  # each client raises its own kinds; all mean "not known now"
                log.warning("topic_lookup_failed", topic=topic, error=f"{type(exc).__name__}: {exc}")
        return topic in self._known
