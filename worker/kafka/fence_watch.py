"""Whether the cluster fenced a broker while the worker waited on it: the partitions and coordinators a killed
or paused broker held move only once the active controller fences it, and a transactional call or a settle
still waiting then is waiting on a broker that no longer leads anything.

Neither client stops waiting by itself when that happens: kafka-python's sender waits out its request
timeout on the old coordinator before it looks again, and a replacement's ``init_transactions`` given 5 s
ran out 4 s after the coordinator had moved; librdkafka's ``send_offsets_to_transaction`` hangs past its
timeout (librdkafka #5511); and a send held by a paused leader waits for the client's own timeouts
(docs/chaos/cluster-eos-fences-2026-12-05.md). ``FenceWatch.wait`` lets a wait end at the fence instead: it
asks the cluster which brokers it has, but only once the wait has gone on ``LOOK_AFTER_S`` (healthy calls
answer in milliseconds) and then once a ``LOOK_EVERY_S``, so a worker whose brokers are well sends no request
for it. A broker of the last look missing from the next means it was fenced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)

LOOK_AFTER_S = 0.5  # a wait this long is not a healthy call's: from here on, look at the cluster's brokers
LOOK_EVERY_S = 0.5
LOOK_TIMEOUT_S = 1.0  # one look's admin request; a look that gets no answer is no news


class Brokers(Protocol):
    """An admin client that lists the cluster's brokers."""

    ERRORS: tuple[type[Exception], ...]  # what it raises for a request unanswered

    def brokers(self) -> dict[int, str]:
        """The brokers the cluster has now, a fenced one not among them: each id's host:port."""

    def close(self) -> None: ...


class FenceWatch:
    """The brokers the cluster had at the last look, and whether one has gone since. Not thread-safe."""

    def __init__(self, brokers: Callable[[], dict[int, str]], errors: tuple[type[Exception], ...],
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``brokers``: the cluster's brokers now (an admin request bounded by LOOK_TIMEOUT_S), raising one of
        ``errors`` when it gets no answer."""
        self._brokers, self._errors, self._clock = brokers, errors, clock
        self._known: dict[int, str] | None = None

    def look(self) -> bool:
        """Ask the cluster for its brokers; True when one of the last look's is gone (fenced)."""
        try:
            now = dict(self._brokers())
        except self._errors as exc:  # no news: a paused broker may have been asked
            log.debug("fence_watch_unanswered", error=f"{type(exc).__name__}: {exc}")
            return False
        gone = self._known.keys() - now.keys() if self._known is not None else set()
        self._known = now
        if gone:
            log.info("broker_fenced", brokers=sorted(gone))
        return bool(gone)

    def alive(self) -> list[str]:
        """The host:port of each broker the last look found (none before the first): where a new client can
        start without meeting a broker the cluster fenced since."""
        return sorted((self._known or {}).values())

    def wait(self, done: Callable[[float], bool], timeout_s: float) -> bool | None:
        """Wait up to ``timeout_s`` for ``done(seconds)`` (which waits up to ``seconds``) to say True: True when it
        did, False when the time ran out, None when the cluster fenced a broker first. A look takes up to
        LOOK_TIMEOUT_S (its admin client bounds each request and each connection's set-up by it), so the wait
        may end that much past ``timeout_s``."""
        deadline = self._clock() + timeout_s
        if done(min(LOOK_AFTER_S, timeout_s)):
            return True
        while deadline - self._clock() > 0:
            if self.look():
                return None
            if done(min(LOOK_EVERY_S, max(0.0, deadline - self._clock()))):
                return True
        return False
