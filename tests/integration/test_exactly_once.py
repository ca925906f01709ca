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


@pytest.mark.parametrize("interval_ms", ["0", "200"])
def test_a_killed_worker_leaves_no_duplicate_for_a_read_committed_reader(bootstrap, redis_url, topics, producer,
                                                                         tmp_path, interval_ms):
    committed = TopicReader(bootstrap, topics.replies, read_committed=True)
    options = (*EXACTLY_ONCE, "--commit-interval-ms", interval_ms)
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
