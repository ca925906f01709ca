"""The probes' verdicts: liveness from the last poll, readiness from every condition, each failure named."""

import pytest

from worker.core.stats import ServedModel, WorkerStats
from worker.surface.probes import liveness, readiness

TIMEOUT_S = 60.0


def working_stats(last_poll: float = 100.0) -> WorkerStats:
    stats = WorkerStats(models=(ServedModel("churn", "churn", "v1", "cpu", 0.5),), last_iteration=last_poll)
    stats.record_generation(3)
    return stats


def test_alive_while_starting_before_the_first_poll():
    verdict = liveness(WorkerStats(), now=5000.0, timeout_s=TIMEOUT_S)
    assert verdict.ok and verdict.body() == {"status": "starting"}


def test_alive_up_to_the_timeout_after_the_last_poll_then_stuck():
    stats = working_stats(last_poll=100.0)
    assert liveness(stats, 160.0, TIMEOUT_S).ok
    assert liveness(stats, 160.0, TIMEOUT_S).body() == {"status": "ok", "last_poll_s_ago": 60.0}
    stuck = liveness(stats, 160.5, TIMEOUT_S)
    assert not stuck.ok
    assert stuck.body() == {"status": "stuck", "last_poll_s_ago": 60.5,
                            "reasons": ["the loop last polled 60.5 s ago, more than liveness_timeout_s=60"]}



def test_a_rebalance_that_never_completes_is_stuck_though_the_loop_polls():
    stats = working_stats(last_poll=100.0)
    stats.record_rebalancing(True, now=100.0)
    stats.record_rebalancing(True, now=150.0)  # still the same rebalance: its start is kept
    stats.last_iteration = 159.0
    assert liveness(stats, 159.5, TIMEOUT_S).ok
    stats.last_iteration = 170.0
    stuck = liveness(stats, 170.5, TIMEOUT_S)
    assert not stuck.ok and stuck.reasons == ["a rebalance has not completed for 70.5 s, more than "
                                              "liveness_timeout_s=60"]
    stats.record_rebalancing(False, now=171.0)
    assert liveness(stats, 171.0, TIMEOUT_S).ok

def test_ready_when_warm_in_the_group_alive_and_not_paused_for_dedup():
    verdict = readiness(working_stats(), 101.0, TIMEOUT_S)
    assert verdict.ok and verdict.body() == {"status": "ready", "last_poll_s_ago": 1.0}


def test_brokers_that_answered_within_the_timeout_are_ready():
    stats = working_stats()
    stats.brokers_answered_at = 41.0
    assert readiness(stats, 101.0, TIMEOUT_S).ok


def test_a_backlog_pause_is_still_ready():
    stats = working_stats()
    stats.record_pause(dedup_outage=False, backlog=True)
    assert readiness(stats, 101.0, TIMEOUT_S).ok


@pytest.mark.parametrize("change, reason", [
    (lambda s: setattr(s, "models", ()), "the models are not loaded and warmed up yet"),
    (lambda s: s.record_generation(-1), "not a member of the consumer group (joining)"),
    (lambda s: s.record_pause(dedup_outage=True, backlog=False),
     "consumption paused: the dedup store (Redis) is away or full"),
    (lambda s: s.record_pause(dedup_outage=False, registry_outage=True, backlog=False),
     "consumption paused: the schema registry does not answer"),
    (lambda s: setattr(s, "last_iteration", 0.0), "the loop last polled 101.0 s ago, more than liveness_timeout_s=60"),
    (lambda s: setattr(s, "brokers_answered_at", 40.5), "the Kafka brokers have not answered for 60.5 s, more than "
                                                        "liveness_timeout_s=60 (the client retries by itself)"),
])
def test_each_unmet_condition_is_named(change, reason):
    stats = working_stats()
    change(stats)
    verdict = readiness(stats, 101.0, TIMEOUT_S)
    assert not verdict.ok
    assert verdict.body()["status"] == "not_ready" and verdict.body()["reasons"] == [reason]


def test_a_stop_asked_for_is_not_ready_and_a_fresh_start_names_everything():
    assert readiness(working_stats(), 101.0, TIMEOUT_S, stopping=True).reasons == [
        "stopping: finishing the work in hand"]
    assert readiness(WorkerStats(), 101.0, TIMEOUT_S).reasons == [
        "the models are not loaded and warmed up yet", "not a member of the consumer group (joining)"]


def test_work_in_hand_that_does_not_move_on_is_stuck_though_the_loop_polls():
    stats = working_stats(last_poll=100.0)
    stats.record_progress(holding=5, store_failures=0, now=100.0)
    stats.replied_ok += 1
    stats.record_progress(holding=4, store_failures=0, now=130.0)  # one finished: progress
    stats.last_iteration = 190.0
    stats.record_progress(holding=4, store_failures=0, now=190.0)  # nothing finished since 130
    assert liveness(stats, 190.0, TIMEOUT_S).ok
    stuck = liveness(stats, 190.5, TIMEOUT_S)
    assert not stuck.ok and stuck.reasons == [
        "4 records in hand and none finished for 60.5 s, more than liveness_timeout_s=60"]


def test_a_dedup_store_being_retried_or_nothing_in_hand_is_not_a_stall():
    stats = working_stats(last_poll=100.0)
    for second in range(100, 400, 5):  # Redis away for 5 minutes, retried every 5 s
        stats.last_iteration = float(second)
        stats.record_progress(holding=3, store_failures=second, now=float(second))
    assert liveness(stats, 400.0, TIMEOUT_S).ok
    idle = working_stats(last_poll=1000.0)
    idle.record_progress(holding=0, store_failures=0, now=1000.0)
    assert liveness(idle, 1050.0, TIMEOUT_S).ok
