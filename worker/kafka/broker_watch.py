"""Whether the Kafka brokers answer, for readiness (``/readyz``).

While its brokers are away a worker keeps its partitions and its loop keeps polling (both clients retry by
themselves), so neither the loop nor the group says that nothing can be consumed or answered. ``BrokerWatch``
asks the cluster for its brokers once every ``every_s`` on a thread of its own, through an admin client of
its own (the loop's clients are never touched from another thread; kafka-python's on either client, which
asks another broker when one is paused: worker/kafka/confluent/transport.py), and notes in the stats when
they last answered: the readiness probe says not ready once they have not answered for longer than its
timeout. Started only with the HTTP surface: a worker with no probes sends no such request. A silence of
``away_after_s`` is logged (``brokers_not_answering``), and its end (``brokers_answering``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from worker.core.clock import Clock
from worker.core.errors import ConfigError, ServiceUnavailable
from worker.core.stats import WorkerStats
from worker.kafka.fence_watch import Brokers

log = structlog.get_logger(__name__)

ASK_EVERY_S = 5.0  # one metadata request a worker this often: nothing a broker notices
ASK_TIMEOUT_S = 2.5  # one request's: a healthy broker answers in milliseconds, and a look never outlasts a silence


class BrokerWatch:
    def __init__(self, admin: Callable[[], Brokers], stats: WorkerStats, clock: Clock, away_after_s: float,
                 every_s: float = ASK_EVERY_S) -> None:
        """``admin``: builds the watch's admin client (its requests bounded by its own timeout; it may raise
        ServiceUnavailable when no broker answers yet); ``away_after_s``: a silence this long is logged (the
        readiness probe's own timeout)."""
        self._make_admin, self._stats, self._clock = admin, stats, clock
        self._away_after_s, self._every_s = away_after_s, every_s
        self._admin: Brokers | None = None
        self._away = False
        self._since = clock.monotonic()  # the last answer, or the start
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamscore-broker-watch", daemon=True)

    def start(self) -> None:
        """Start looking; until the first answer, the brokers count as having answered now."""
        self._stats.brokers_answered_at = self._since = self._clock.monotonic()
        self._thread.start()

    def close(self, wait_s: float = 2 * ASK_TIMEOUT_S) -> None:
        """Stop asking, and wait up to ``wait_s`` for a request under way (bounded by its own timeout) and the
        admin client's close."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(wait_s)

    def look(self) -> bool:
        """Ask once; True when the brokers answered."""
        try:
            admin = self._admin = self._admin or self._make_admin()
        except (ServiceUnavailable, ConfigError) as exc:
            return self._unanswered(exc)
        try:
            admin.brokers()
        except admin.ERRORS as exc:
            return self._unanswered(exc)
        self._since = self._stats.brokers_answered_at = self._clock.monotonic()
        if self._away:
            self._away = False
            log.info("brokers_answering")
        return True

    def _unanswered(self, error: Exception) -> bool:
        silent_s = self._clock.monotonic() - self._since
        if not self._away and silent_s >= self._away_after_s:
            self._away = True
            log.warning("brokers_not_answering", silent_s=round(silent_s, 1), error=f"{type(error).__name__}: {error}",
                        detail="the Kafka client retries by itself; /readyz answers 503 meanwhile")
        return False

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                self.look()
            except Exception:  # a bug here must not end the watch, nor the worker: say so, and look again
                log.exception("broker_watch_failed")
            self._closed.wait(self._every_s)
        if self._admin is not None:
            self._admin.close()
