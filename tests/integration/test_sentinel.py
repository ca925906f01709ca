"""Redis behind Sentinel, on real Kafka, on both clients: the worker finds its primary through three Sentinels,
and when the primary is SIGKILLed under load it pauses, follows the failover to the promoted replica and goes on;
no request is lost. What the failover costs (the longest gap in replies, the ids answered twice because their
done marks died with the primary) is printed (``-s``) and bounded, not asserted to be zero."""

from __future__ import annotations

import signal

import pytest
import redis

from tests.integration.kit import TopicReader, start_worker, wait_until
from tests.integration.sentinels import SentinelSet
from tests.integration.store_failover import check, through_a_failover

VALUES = [0.25] * 16


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_the_worker_follows_a_sentinel_failover_and_loses_nothing(
        bootstrap, topics, producer, tmp_path, kafka_client, delivery):
    sentinels = SentinelSet(tmp_path).start()
    old: list[int] = []
    new: list[int] = []

    def fail_over() -> None:
        old.append(sentinels.kill_primary())
        new.append(sentinels.wait_failover(old[0]))

    try:
        worker = start_worker(bootstrap, sentinels.url, topics, tmp_path, "--kafka-client", kafka_client,
                              "--delivery", delivery)
        failover = through_a_failover(bootstrap, topics.requests, topics.replies, producer, worker, fail_over,
                                      read_committed=delivery == "exactly-once")
        marks = sum(1 for _ in redis.Redis(port=new[0]).scan_iter(match=f"{topics.requests}:done:*", count=1000))
    finally:
        sentinels.stop()
    print(failover.said(f"sentinel failover ({kafka_client}, {delivery}) :{old[0]} -> :{new[0]}", marks))
    check(failover, delivery == "exactly-once", marks)
    assert "dedup_recovered" in worker.log()  # it saw the primary go, paused, and found the new one


def test_with_dedup_min_replicas_offsets_wait_for_the_done_marks_on_a_replica(
        bootstrap, topics, producer, tmp_path, kafka_client):
    sentinels = SentinelSet(tmp_path).start()
    try:
        worker = start_worker(bootstrap, sentinels.url, topics, tmp_path, "--kafka-client", kafka_client,
                              "--dedup-min-replicas", "1")
        producer.send_requests(topics.requests, "ok", [VALUES] * 100)
        replies = TopicReader(bootstrap, topics.replies)
        replies.read_until(lambda got: len(got.by_id()) >= 100, 120, "a reply to every request", watch=worker)
        assert worker.stop() == 0
        replica = redis.Redis(port=sentinels.data_ports[1])
        on_replica = sum(1 for _ in replica.scan_iter(match=f"{topics.requests}:done:*", count=1000))

        more = start_worker(bootstrap, sentinels.url, topics, tmp_path, "--kafka-client", kafka_client,
                            "--dedup-min-replicas", "2", "--shutdown-timeout-s", "5", name="two-replicas")
        producer.send_requests(topics.requests, "more", [VALUES] * 20)
        wait_until(lambda: "of dedup_min_replicas=2 Redis replicas" in more.log(), 30,
                   "the done marks refused for want of replicas")
        more.process.send_signal(signal.SIGTERM)
        assert more.process.wait(60) == 4, more.log()  # stopped with records unfinished (uncommitted)
    finally:
        sentinels.stop()
    assert on_replica == 100  # every done mark was on the replica before its offset was committed
    stopped = [e for e in more.events() if e.get("event") == "worker_stopped"][0]
    # Answered, or not even fetched once the store counted as away (consumption pauses): none committed, so the
    # next owner gets them again (and their claims and marks, on the primary, dedup them).
    assert stopped["consumed"] >= 1 and stopped["unfinished"] == stopped["consumed"], stopped


def test_sentinels_that_want_a_password_are_asked_with_the_one_in_its_own_file(bootstrap, topics, producer, tmp_path):
    sentinels = SentinelSet(tmp_path, sentinel_password="for-the-sentinels").start()
    try:
        refused = start_worker(bootstrap, sentinels.url, topics, tmp_path, name="no-sentinel-password")
        assert refused.process.wait(timeout=60) == 2
        assert "want a password: put it in REDIS_SENTINEL_PASSWORD_FILE" in refused.log(), refused.log()
        secret = tmp_path / "sentinel-password"
        secret.write_text("for-the-sentinels\n")
        worker = start_worker(bootstrap, sentinels.url, topics, tmp_path,
                              env={"REDIS_SENTINEL_PASSWORD_FILE": str(secret)})
        producer.send_requests(topics.requests, "w", [VALUES] * 30)
        replies = TopicReader(bootstrap, topics.replies)
        landed = replies.read_until(lambda got: len(got.by_id()) >= 30, 120, "a reply to every request", watch=worker)
        assert worker.stop() == 0
        primary = sentinels.client(sentinels.primary_port())  # the primary itself wants no password here
        assert primary.get(f"{topics.requests}:done:w0")
    finally:
        sentinels.stop()
    assert sorted(landed.by_id()) == sorted(f"w{i}" for i in range(30))
