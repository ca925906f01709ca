"""The fence watch (worker/kafka/fence_watch.py): a wait on the brokers ends when the cluster fences one, and a
worker whose calls answer at once never asks the cluster anything."""

from __future__ import annotations

from structlog.testing import capture_logs

from worker.kafka.fence_watch import LOOK_AFTER_S, LOOK_EVERY_S, FenceWatch


class Unanswered(Exception):
    pass


class Cluster:
    """The brokers each look finds, in turn (an exception: that look gets no answer); and a clock the calls
    being waited on move."""

    def __init__(self, *looks: frozenset[int] | Exception) -> None:
        self.looks = list(looks)
        self.asked = 0
        self.now = 0.0

    def brokers(self) -> dict[int, str]:
        self.asked += 1
        found = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        if isinstance(found, Exception):
            raise found
        return {node: f"127.0.0.1:2909{node + 1}" for node in found}

    def clock(self) -> float:
        return self.now


def watch(cluster: Cluster) -> FenceWatch:
    return FenceWatch(cluster.brokers, (Unanswered,), clock=cluster.clock)


def test_a_broker_missing_from_the_next_look_was_fenced_and_one_coming_back_was_not():
    cluster = Cluster(frozenset({1, 2, 3}), frozenset({1, 2, 3}), frozenset({1, 3}), frozenset({1, 2, 3}))
    fences = watch(cluster)
    assert not fences.look()  # the first look: nothing to compare with
    assert not fences.look()
    with capture_logs() as logs:
        assert fences.look()
    assert logs == [{"event": "broker_fenced", "brokers": [2], "log_level": "info"}]
    assert fences.alive() == ["127.0.0.1:29092", "127.0.0.1:29094"]
    assert not fences.look()  # back again
    assert fences.alive() == ["127.0.0.1:29092", "127.0.0.1:29093", "127.0.0.1:29094"]


def test_a_look_that_gets_no_answer_is_no_news_and_keeps_what_the_last_one_saw():
    cluster = Cluster(frozenset({1, 2, 3}), Unanswered("paused node asked"), frozenset({1, 3}))
    fences = watch(cluster)
    assert fences.alive() == []
    fences.look()
    assert not fences.look()
    assert fences.look()


def test_a_call_answered_within_its_first_half_second_costs_no_look():
    cluster = Cluster(frozenset({1, 2, 3}))
    waited: list[float] = []

    def done(wait_s: float) -> bool:
        waited.append(wait_s)
        return True

    assert watch(cluster).wait(done, 5.0) is True
    assert waited == [LOOK_AFTER_S] and cluster.asked == 0


def test_a_wait_ends_at_a_fence_and_otherwise_at_its_bound_or_its_answer():
    def waiting(cluster: Cluster, answer_at: float | None = None):
        def done(wait_s: float) -> bool:
            if answer_at is not None and cluster.now + wait_s >= answer_at:
                cluster.now = answer_at
                return True
            cluster.now += wait_s
            return False
        return done

    fenced = Cluster(frozenset({1, 2, 3}), frozenset({1, 2, 3}), frozenset({1, 3}))
    fences = watch(fenced)
    fences.look()
    assert fences.wait(waiting(fenced), 5.0) is None
    assert fenced.now == LOOK_AFTER_S + LOOK_EVERY_S  # the second look found broker 2 gone

    quiet = Cluster(frozenset({1, 2, 3}))
    fences = watch(quiet)
    fences.look()
    assert fences.wait(waiting(quiet), 2.0) is False and quiet.now == 2.0

    late = Cluster(frozenset({1, 2, 3}))
    fences = watch(late)
    fences.look()
    assert fences.wait(waiting(late, answer_at=1.2), 5.0) is True and late.now == 1.2
