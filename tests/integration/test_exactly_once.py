"""Exactly-once mode on a real broker: a read_committed reader sees each request's reply once,
also when the worker is SIGKILLed mid-stream and restarted with the same transactional id, with one
transaction per step or one per commit interval."""

import time

import pytest

from tests.chaos.load import Load
from tests.integration.kit import TopicReader, start_worker, wait_until
from tests.integration.test_pipeline import churn_inputs

EXACTLY_ONCE = ("--delivery", "exactly-once", "--max-batch-size", "16", "--max-wait-ms", "5")


def send(producer, topics, first, count):
    producer.send_requests(topics.requests, "r", churn_inputs(count, seed=first), first)


# The killed worker stays in the group until its session times out; the replacement's partitions wait for that.
SHORT_SESSION = ("--session-timeout-ms", "6000")


@pytest.mark.parametrize("interval_ms", ["0", "200"])
def test_a_killed_worker_leaves_no_duplicate_for_a_read_committed_reader(bootstrap, redis_url, topics, producer,
                                                                         tmp_path, interval_ms):
    committed = TopicReader(bootstrap, topics.replies, read_committed=True)
    options = (*EXACTLY_ONCE, *SHORT_SESSION, "--commit-interval-ms", interval_ms)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *options, name="first")
    send(producer, topics, 0, 2000)
    committed.read_until(lambda got: len(got.records) >= 200, 90, "200 committed replies", watch=worker)
    worker.kill()  # mid-stream: its open transaction is aborted by the next instance
    replacement = start_worker(bootstrap, redis_url, topics, tmp_path, *options, name="second")
    send(producer, topics, 2000, 500)
    landed = committed.read_until(lambda got: len(got.by_id()) >= 2500, 120, "2,500 committed replies",
                                  watch=replacement)
    assert replacement.stop() == 0
    landed = committed.read(1.0)

    by_id = landed.by_id()
    assert sorted(by_id) == sorted(f"r{i}" for i in range(2500))
    assert [i for i, replies in by_id.items() if len(replies) > 1] == []
    assert {"exactly_once"} <= {e["event"] for e in replacement.events()}


def test_partitions_moving_while_transactions_span_steps_leave_no_reply_seen_twice(
        bootstrap, redis_url, topics, tmp_path, kafka_client):
    """Whether the first worker's transaction is still open when its partitions go depends on timing: the
    loop sends nothing while a rebalance is announced but not complete, and may commit meanwhile. When it
    is open, it is aborted (tests/component/test_exactly_once.py); either way each reply is seen once."""
    committed = TopicReader(bootstrap, topics.replies, read_committed=True)
    options = (*EXACTLY_ONCE, "--commit-interval-ms", "1000", "--kafka-client", kafka_client)
    first = start_worker(bootstrap, redis_url, topics, tmp_path, *options, "--client-id", "first", name="first")
    load = Load(bootstrap, topics.requests, rate=400, prefix="m")  # steady: the first's transaction stays open
    load.start()
    try:
        committed.read_until(lambda got: len(got.records) >= 200, 90, "200 committed replies", watch=first)
        second = start_worker(bootstrap, redis_url, topics, tmp_path, *options, "--client-id", "second",
                              name="second")
        wait_until(lambda: any(e["event"] == "partitions_assigned" for e in second.events()), 90,
                   "the second worker to get partitions")
        time.sleep(2)
    finally:
        sent = load.stop()
    committed.read_until(lambda got: sent.acked <= got.by_id().keys(), 120, "every request answered", watch=first)
    assert first.stop() == 0 and second.stop() == 0
    landed = committed.read(1.0)

    by_id = landed.by_id()
    assert sorted(by_id) == sorted(sent.acked)
    assert [i for i, replies in by_id.items() if len(replies) > 1] == []


def test_two_workers_started_by_hand_with_the_defaults_get_their_own_transactional_ids(
        bootstrap, redis_url, topics, tmp_path, kafka_client):
    """Under the old default (<group>.<client-id>) two such workers fenced each other's producers again and
    again; now the second on a host takes the next slot of the default id, and neither is fenced."""
    committed = TopicReader(bootstrap, topics.replies, read_committed=True)
    options = (*EXACTLY_ONCE, "--kafka-client", kafka_client)
    workers = [start_worker(bootstrap, redis_url, topics, tmp_path, *options, name=name) for name in ("a", "b")]
    for worker in workers:
        wait_until(lambda w=worker: any(e["event"] == "partitions_assigned" for e in w.events()), 90,
                   "both workers to get partitions")
    load = Load(bootstrap, topics.requests, rate=300, prefix="h")
    load.start()
    try:
        time.sleep(4)
    finally:
        sent = load.stop()
    committed.read_until(lambda got: sent.acked <= got.by_id().keys(), 120, "every request answered",
                         watch=workers[0])
    assert [worker.stop() for worker in workers] == [0, 0]
    by_id = committed.read(1.0).by_id()

    ids = [next(e["transactional_id"] for e in w.events() if e["event"] == "exactly_once") for w in workers]
    base = min(ids, key=len)
    assert sorted(ids) == sorted([base, f"{base}.1"])  # whichever started first took the id, the other slot .1
    assert [e for w in workers for e in w.events() if e["event"] == "producer_replaced"] == []
    assert sorted(by_id) == sorted(sent.acked)
    assert [i for i, replies in by_id.items() if len(replies) > 1] == []


def test_a_killed_worker_takes_its_own_transactional_id_back_even_where_a_clean_stop_freed_a_lower_one(
        bootstrap, redis_url, topics, tmp_path):
    """A rolling change on one host: a stopped cleanly, b (slot .1) killed. Started again, b must take .1 again,
    whose producer's start aborts what b left open; it took a's freed id before, and b's open transaction held
    read_committed readers until the broker's transaction timeout (a newcomer's run on 2026-12-07)."""
    options = (*EXACTLY_ONCE, "--kafka-client", "confluent")

    def transactional_id(worker):
        wait_until(lambda: any(e["event"] == "exactly_once" for e in worker.events()), 90, "the worker's start")
        return next(e["transactional_id"] for e in worker.events() if e["event"] == "exactly_once")

    a = start_worker(bootstrap, redis_url, topics, tmp_path, *options, name="a")
    base = transactional_id(a)
    b = start_worker(bootstrap, redis_url, topics, tmp_path, *options, name="b")
    assert transactional_id(b) == f"{base}.1"
    assert a.stop() == 0
    b.kill()
    again = start_worker(bootstrap, redis_url, topics, tmp_path, *options, name="b-again")
    try:
        assert transactional_id(again) == f"{base}.1"
    finally:
        again.kill()  # still joining, behind the killed member's session timeout: nothing to drain
