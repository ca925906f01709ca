"""Exactly-once mode on a real broker: a read_committed reader sees each request's reply once,
also when the worker is SIGKILLed mid-stream and restarted with the same transactional id."""

from tests.integration.kit import TopicReader, start_worker
from tests.integration.test_pipeline import churn_inputs

EXACTLY_ONCE = ("--delivery", "exactly-once", "--max-batch-size", "16", "--max-wait-ms", "5")


def send(producer, topics, first, count):
    producer.send_requests(topics.requests, "r", churn_inputs(count, seed=first), first)


def test_a_killed_worker_leaves_no_duplicate_for_a_read_committed_reader(bootstrap, redis_url, topics, producer,
                                                                         tmp_path):
    committed = TopicReader(bootstrap, topics.replies, read_committed=True)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *EXACTLY_ONCE, name="first")
    send(producer, topics, 0, 2000)
    committed.read_until(lambda got: len(got.records) >= 200, 90, "200 committed replies", watch=worker)
    worker.kill()  # mid-stream: its open transaction is aborted by the next instance
    replacement = start_worker(bootstrap, redis_url, topics, tmp_path, *EXACTLY_ONCE, name="second")
    send(producer, topics, 2000, 500)
    landed = committed.read_until(lambda got: len(got.by_id()) >= 2500, 120, "2,500 committed replies",
                                  watch=replacement)
    assert replacement.stop() == 0
    landed = committed.read(1.0)

    by_id = landed.by_id()
    assert sorted(by_id) == sorted(f"r{i}" for i in range(2500))
    assert [i for i, replies in by_id.items() if len(replies) > 1] == []
    assert {"exactly_once"} <= {e["event"] for e in replacement.events()}
