"""A backfill's source that reads no faster than ``--max-rate`` and steps aside while live traffic lags.

It wraps the backfill's BoundedKafkaSource and is the Source the worker loop
sees. Holding for live traffic pauses every partition (as a Redis outage
does), so polls go on and the job stays in its group; the loop's own pauses
and the hold combine. Blocking stays within each poll's timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.pacing import LiveFirst, RatePacer
from worker.ports import LagReader, Source

log = structlog.get_logger(__name__)


class PacedSource:
    """Not thread-safe, like the source it wraps."""

    def __init__(self, inner: Source, pacer: RatePacer, live: LiveFirst | None = None,
                 live_lag: LagReader | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if (live is None) != (live_lag is None):
            raise ValueError("live and live_lag go together")
        self._inner = inner
        self._pacer = pacer
        self._live = live
        self._live_lag = live_lag
        self._sleep = sleep
        self._paused_by_loop = False

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        self._check_live()
        if self._live is not None and self._live.holding:
            return self._inner.poll(timeout_s, max_records)  # every partition paused: membership only
        allowed = self._pacer.allowance()
        if allowed == 0:
            self._sleep(min(timeout_s, self._pacer.wait_s()))
            allowed = self._pacer.allowance()
            if allowed == 0:
                return []
        records = self._inner.poll(timeout_s, max_records if allowed is None else min(max_records, allowed))
        self._pacer.took(len(records))
        return records

    def _check_live(self) -> None:
        if self._live is None or self._live_lag is None or not self._live.due():
            return
        if self._live.observe(self._live_lag()):
            event = "backfill_yielding_to_live" if self._live.holding else "backfill_resuming"
            log.info(event, live_lag=self._live.last_lag)
            self._apply_pause()

    def pause(self, paused: bool) -> None:
        self._paused_by_loop = paused
        self._apply_pause()

    def _apply_pause(self) -> None:
        self._inner.pause(self._paused_by_loop or (self._live is not None and self._live.holding))

    def take_revoked(self) -> set[TP]:
        return self._inner.take_revoked()

    def generation(self) -> int:
        return self._inner.generation()

    def assigned(self) -> set[TP]:
        return self._inner.assigned()

    def rebalancing(self) -> bool:
        return self._inner.rebalancing()

    def commit(self, offsets: dict[TP, int]) -> None:
        self._inner.commit(offsets)

    def commit_async(self, offsets: dict[TP, int], on_done: Callable[[Exception | None], None]) -> None:
        self._inner.commit_async(offsets, on_done)

    def finish_rebalance(self, timeout_s: float) -> None:
        self._inner.finish_rebalance(timeout_s)

    def finished(self) -> bool:
        return self._inner.finished()

    def list_topics(self) -> set[str]:
        return self._inner.list_topics()

    def lag(self) -> dict[TP, int]:
        return self._inner.lag()

    def undecodable(self) -> dict[TP, str]:
        return self._inner.undecodable()

    def skipped(self) -> int:
        return self._inner.skipped()

    def close(self, timeout_s: float = 30.0) -> None:
        if self._live_lag is not None:
            self._live_lag.close()
        self._inner.close(timeout_s)
