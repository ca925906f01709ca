"""What the stream loop does beside its work each step: warn before the group would drop it, say why it waits
when joining the group takes long or it owns no partition, refresh the lag snapshot for the metrics, and log its
counters now and then."""

from __future__ import annotations

import structlog

from worker.core.clock import Clock
from worker.core.sections import KafkaSettings, OperationsSettings
from worker.core.stats import WorkerStats
from worker.ports import Source

log = structlog.get_logger(__name__)

LAG_REFRESH_S = 1.0  # least time between two lag snapshots (stats.lag, for the metrics)
JOIN_WARNING_S = 10.0  # a join of the group that takes this long is said, and again every JOIN_REMINDER_S
JOIN_REMINDER_S = 30.0


class Upkeep:
    def __init__(self, source: Source, stats: WorkerStats, clock: Clock, kafka: KafkaSettings,
                 operations: OperationsSettings) -> None:
        self._source, self._stats, self._clock = source, stats, clock
        self._max_poll_interval_ms, self._stats_interval_s = kafka.max_poll_interval_ms, operations.stats_interval_s
        self._session_timeout_ms = kafka.session_timeout_ms
        self._last_stats = now = clock.monotonic()
        self._lag_at = now - LAG_REFRESH_S
        self._joining = Reminder()  # out of the group
        self._owning_nothing = Reminder()  # a member owning no partition

    def warn_if_slow(self, last_poll: float) -> None:
        """Say so when the time since the last poll nears max.poll.interval.ms (the group would drop us)."""
        since_poll_ms = (self._clock.monotonic() - last_poll) * 1000
        if since_poll_ms > self._max_poll_interval_ms / 2:
            log.warning("slow_step", since_last_poll_ms=round(since_poll_ms),
                        max_poll_interval_ms=self._max_poll_interval_ms,
                        advice="lower max_poll_records or max_batch_size, or raise max_poll_interval_ms")

    def after_step(self) -> None:
        """Replace the lag snapshot, at most once per LAG_REFRESH_S (the source answers from what it knows), and
        log the counters every stats_interval_s."""
        now = self._clock.monotonic()
        self._watch_join(now)
        if now - self._lag_at >= LAG_REFRESH_S:
            self._lag_at = now
            self._stats.lag = self._source.lag()
            self._stats.undecodable = self._source.undecodable()
            self._stats.requests_skipped = self._source.skipped()
            self._watch_ownership(now)
        if self._stats_interval_s and now - self._last_stats >= self._stats_interval_s:
            self._last_stats = now
            log.info("worker_stats", **self._stats.snapshot())

    def _watch_ownership(self, now: float) -> None:
        """Say why nothing is consumed when the worker has been a member owning no partition for JOIN_WARNING_S:
        more members than partitions, or (KIP-848) a member gone without leaving holds its partitions."""
        waited_s = self._owning_nothing.due(self._stats.generation >= 0 and not self._source.assigned(), now)
        if waited_s is not None:
            log.warning("owning_no_partitions", waited_s=waited_s,
                        advice="this worker is a member of its group but owns no partition, so it consumes "
                               "nothing: the group has more members than the requests topic has partitions "
                               "(kafka-consumer-groups.sh --describe --members --group ...; scale down, or "
                               "add partitions), or, with --kafka-group-protocol consumer, a member stopped "
                               "without leaving holds its partitions until its session times out")

    def _watch_join(self, now: float) -> None:
        """Say why no partitions come when the worker has been out of its group for JOIN_WARNING_S (at start, or
        after the group dropped it): a restarted worker waits there for the member it replaces to time out."""
        waited_s = self._joining.due(self._stats.generation < 0, now)
        if waited_s is not None:
            log.warning("still_joining_group", waited_s=waited_s, session_timeout_ms=self._session_timeout_ms,
                        advice="the group coordinator gives out partitions once every member it knows has "
                               "joined again or timed out: a member stopped without leaving (kill -9, an OOM "
                               "kill, a lost host) keeps its place for its session timeout. Check the group's "
                               "other members (kafka-consumer-groups.sh --describe --members --group ...). A "
                               "lower session_timeout_ms shortens the wait; a static member (group_instance_id) "
                               "started again takes its place at once")


class Reminder:
    """When to say that a condition still holds: once it has held JOIN_WARNING_S, then every JOIN_REMINDER_S."""

    def __init__(self) -> None:
        self._since: float | None = None  # when the condition was last seen to start holding
        self._next = 0.0

    def due(self, holding: bool, now: float) -> float | None:
        """How long the condition has held, rounded to 0.1 s, when it is time to say so; else None."""
        if not holding:
            self._since = None
            return None
        if self._since is None:
            self._since, self._next = now, now + JOIN_WARNING_S
        if now < self._next:
            return None
        self._next = now + JOIN_REMINDER_S
        return round(now - self._since, 1)
