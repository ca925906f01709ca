"""The health probes' verdicts, from the loop's stats and the time now (pure: time is passed in).

Liveness (``/healthz``) asks: did the loop poll within
``liveness_timeout_s``, has no rebalance been under way for longer than
that (a rebalance that never completes keeps the loop polling but doing
nothing: a restart cures it), and does work in hand move on (records held
with none finished and no dedup store retry for that long is a stall that
polling hides: a hung model call, a loop waiting on something that never
comes)? Until its first poll (the model loading and warming
up, the group being joined) the worker counts as alive and starting: a long
model load is not a hang to restart. Readiness (``/readyz``) asks whether the
worker is doing its job now: its models are loaded and warmed, the worker is a
member of its consumer group, the loop is alive, consumption is not paused by
a dedup store or schema registry outage, the Kafka brokers answered within
``liveness_timeout_s`` (worker/kafka/broker_watch.py), and no stop was asked
for. A failed probe says why, in ``reasons``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worker.core.stats import WorkerStats


@dataclass(frozen=True)
class Verdict:
    """A probe's answer: ``ok`` (HTTP 200, else 503) and a JSON-ready body."""

    ok: bool
    status: str
    reasons: list[str] = field(default_factory=list)
    last_poll_s_ago: float | None = None

    def body(self) -> dict[str, object]:
        shown: dict[str, object] = {"status": self.status}
        if self.reasons:
            shown["reasons"] = self.reasons
        if self.last_poll_s_ago is not None:
            shown["last_poll_s_ago"] = round(self.last_poll_s_ago, 3)
        return shown


def liveness(stats: WorkerStats, now: float, timeout_s: float) -> Verdict:
    """Alive while starting (no poll yet) and while the last poll is at most ``timeout_s`` old."""
    last = stats.last_iteration
    if last is None:
        return Verdict(True, "starting")
    ago = now - last
    if ago > timeout_s:
        return Verdict(False, "stuck", [f"the loop last polled {ago:.1f} s ago, more than "
                                        f"liveness_timeout_s={timeout_s:g}"], ago)
    since = stats.rebalancing_since
    if since is not None and now - since > timeout_s:
        return Verdict(False, "stuck", [f"a rebalance has not completed for {now - since:.1f} s, more than "
                                        f"liveness_timeout_s={timeout_s:g}"], ago)
    progress = stats.progress_at
    if stats.holding and progress is not None and now - progress > timeout_s:
        return Verdict(False, "stuck", [f"{stats.holding} records in hand and none finished for "
                                        f"{now - progress:.1f} s, more than liveness_timeout_s={timeout_s:g}"], ago)
    return Verdict(True, "ok", last_poll_s_ago=ago)


def readiness(stats: WorkerStats, now: float, timeout_s: float, stopping: bool = False) -> Verdict:
    """Ready when every condition of the module's docstring holds; else not_ready with each one that fails."""
    reasons = []
    if stopping:
        reasons.append("stopping: finishing the work in hand")
    if not stats.models:
        reasons.append("the models are not loaded and warmed up yet")
    if stats.generation < 0:
        reasons.append("not a member of the consumer group (joining)")
    alive = liveness(stats, now, timeout_s)
    reasons += alive.reasons
    if stats.paused["dedup_outage"]:
        reasons.append("consumption paused: the dedup store (Redis) is away or full")
    if stats.paused["registry_outage"]:
        reasons.append("consumption paused: the schema registry does not answer")
    answered = stats.brokers_answered_at
    if answered is not None and now - answered > timeout_s:
        reasons.append(f"the Kafka brokers have not answered for {now - answered:.1f} s, more than "
                       f"liveness_timeout_s={timeout_s:g} (the client retries by itself)")
    return Verdict(not reasons, "not_ready" if reasons else "ready", reasons, alive.last_poll_s_ago)
