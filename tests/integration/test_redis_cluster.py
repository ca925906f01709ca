"""The dedup store on a three-primary Redis Cluster (``redis+cluster://``), on real Kafka, on both clients: every
request answered once, its done mark on the node of its id's slot (the marks spread over all three), an id sent
again on another partition answered by no one, and a batch's keys never refused as crossing slots. With a
replica per primary, a primary SIGKILLed under load: the worker pauses, follows the slots to the promoted replica
and goes on, nothing lost; what the failover cost (the longest gap, the ids answered twice, the done marks that
died with the primary) is printed (``-s``) and bounded."""

from __future__ import annotations

import pytest

from tests.integration.kit import TopicReader, start_worker
from tests.integration.redis_cluster import LocalCluster
from tests.integration.sentinels import free_port
from tests.integration.store_failover import check, through_a_failover
from worker.core.errors import StoreUnavailable
from worker.core.messages import Position, Request
from worker.dedup.redis_cluster import RedisClusterDedupStore
from worker.ports import BUSY

VALUES = [0.25] * 16
REQUESTS = 300


def test_a_worker_on_a_redis_cluster_answers_each_id_once_with_its_marks_spread_over_the_nodes(
        bootstrap, topics, producer, tmp_path, kafka_client):
    cluster = LocalCluster(tmp_path).start()
    try:
        worker = start_worker(bootstrap, cluster.url, topics, tmp_path, "--kafka-client", kafka_client)
        producer.send_requests(topics.requests, "c", [VALUES] * REQUESTS)
        replies = TopicReader(bootstrap, topics.replies)
        replies.read_until(lambda got: len(got.by_id()) >= REQUESTS, 120, "a reply to every request", watch=worker)
        for i in range(30):  # the same ids again, each on another partition than before: answered already
            request_id = f"c{i}"
            producer.send(topics.requests, {"id": request_id, "inputs": VALUES}, key=f"again-{request_id}".encode())
        producer.flush()
        replies.read(3.0)
        assert worker.stop() == 0
        by_id = replies.read(0.5).by_id()
        marks = cluster.keys_per_node(f"{topics.requests}:done:*")
    finally:
        cluster.stop()
    assert sorted(by_id) == sorted(f"c{i}" for i in range(REQUESTS))
    assert all(len(answers) == 1 and answers[0]["status"] == "ok" for answers in by_id.values())
    assert sum(marks) == REQUESTS and all(count > 0 for count in marks), marks  # spread by the ids' slots
    stopped = [e for e in worker.events() if e.get("event") == "worker_stopped"][0]
    assert stopped["duplicates"] == 30


def test_the_cluster_store_keeps_the_dedup_semantics(tmp_path):
    cluster = LocalCluster(tmp_path).start()
    try:
        store = RedisClusterDedupStore(cluster.url, "ns", ttl_s=60, lease_ms=60_000)
        first = [Request(f"id{i}", None, Position("requests", 0, i)) for i in range(50)]
        assert store.claim(first) == [True] * 50
        assert store.claim(first) == [True] * 50  # the same records again (a retry): theirs to score
        other = [Request("id0", None, Position("requests", 1, 7))]
        assert store.claim(other) == [BUSY]  # claimed by another record, in flight: BUSY (held, asked again)
        store.complete(["id0", "id1"], [b"reply", None])
        assert store.claim([Request("id1", None, Position("requests", 1, 8))]) == [True]  # released: a retry
        assert store.claim([Request("id0", None, Position("requests", 0, 0))]) == [False]  # answered
        store.close()
    finally:
        cluster.stop()


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_the_worker_follows_a_cluster_primary_failover_and_loses_nothing(
        bootstrap, topics, producer, tmp_path, kafka_client, delivery):
    cluster = LocalCluster(tmp_path, replicas=1).start()
    dead_and_heir: list[int] = []

    def fail_over() -> None:
        dead_and_heir.extend(cluster.kill_primary())
        cluster.wait_failover(dead_and_heir[1])

    try:
        worker = start_worker(bootstrap, cluster.url, topics, tmp_path, "--kafka-client", kafka_client,
                              "--delivery", delivery)
        failover = through_a_failover(bootstrap, topics.requests, topics.replies, producer, worker, fail_over,
                                      read_committed=delivery == "exactly-once")
        marks = sum(cluster.keys_per_node(f"{topics.requests}:done:*"))
    finally:
        cluster.stop()
    dead, heir = dead_and_heir
    print(failover.said(f"cluster primary failover ({kafka_client}, {delivery}) :{dead} -> :{heir}", marks))
    check(failover, delivery == "exactly-once", marks)
    assert "dedup_recovered" in worker.log()  # it saw the primary go, paused, and found the promoted replica


def test_a_cluster_none_of_whose_nodes_answers_stops_a_start_in_one_line_and_pauses_a_running_store(
        bootstrap, topics, tmp_path):
    """redis-py raises RedisClusterUnreachableError, not a RedisError, when no node answers: at start it is said
    in one line (exit 2), and mid-run it is an outage the gate waits out (StoreUnavailable), not a crash."""
    nowhere = f"redis+cluster://127.0.0.1:{free_port()}"
    refused = start_worker(bootstrap, nowhere, topics, tmp_path, name="no-cluster")
    assert refused.process.wait(timeout=60) == 2
    assert "no Redis answers at REDIS_URL=redis+cluster://" in refused.log() and "Traceback" not in refused.log()

    cluster = LocalCluster(tmp_path).start()
    try:
        store = RedisClusterDedupStore(cluster.url, "outage", ttl_s=60, lease_ms=60_000, connect_s=1, read_s=1)
        assert store.claim([Request("a", None, Position("requests", 0, 0))]) == [True]
    finally:
        cluster.stop()
    for offset in (1, 2):  # the first finds a node gone; the second reads the slot map again, from no node
        with pytest.raises(StoreUnavailable):
            store.claim([Request(f"id{offset}", None, Position("requests", 0, offset))])
    store.close()


def test_a_cluster_that_refuses_the_password_stops_a_start_naming_the_credentials(bootstrap, topics, tmp_path):
    cluster = LocalCluster(tmp_path, password="cluster-secret").start()
    try:
        wrong = cluster.url.replace("redis+cluster://", "redis+cluster://:not-it@")
        refused = start_worker(bootstrap, wrong, topics, tmp_path, name="wrong-password")
        assert refused.process.wait(timeout=60) == 2
        assert "refused the credentials" in refused.log() and "Traceback" not in refused.log(), refused.log()
        assert "not-it" not in refused.log()
        store = RedisClusterDedupStore(cluster.url.replace("redis+cluster://", "redis+cluster://:cluster-secret@"),
                                       "auth", ttl_s=60, lease_ms=60_000)
        assert store.claim([Request("a", None, Position("requests", 0, 0))]) == [True]
        store.close()
    finally:
        cluster.stop()
