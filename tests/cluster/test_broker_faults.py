"""The busiest partition leader of a three-broker cluster SIGKILLed under load, then started again: every request
sent gets exactly one ``ok`` reply and the worker never exits (deploy/local/cluster.sh; `make test-cluster`)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections import Counter

import orjson
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.integration.kit import REPO, TopicReader, Topics, start_worker, wait_until
from tests.integration.test_pipeline import churn_inputs

CLUSTER = REPO / "deploy" / "local" / "cluster.sh"
PARTITIONS = 4


def cluster(*args: str) -> None:
    subprocess.run([str(CLUSTER), *args], check=True, capture_output=True, text=True, timeout=180)


def create_replicated_topics(admin: KafkaAdminClient) -> Topics:
    base = f"cl-{uuid.uuid4().hex[:10]}"
    topics = Topics(f"{base}.requests", f"{base}.replies", f"{base}.dlq")
    admin.create_topics([NewTopic(topics.requests, PARTITIONS, 3), NewTopic(topics.replies, PARTITIONS, 3),
                         NewTopic(topics.dlq, 1, 3)])
    wait_until(lambda: all(len(p["isr_nodes"]) == 3 for p in partitions(admin, topics.requests, topics.replies)),
               30, "the new topics fully replicated")
    return topics


def partitions(admin: KafkaAdminClient, *names: str) -> list[dict]:
    return [p for t in admin.describe_topics(list(names)) for p in t["partitions"]]


class Load:
    """Sends requests at a steady pace from a thread; ``acked``: the ids the cluster acknowledged (acks=all)."""

    def __init__(self, bootstrap: str, topic: str, per_second: int) -> None:
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                       delivery_timeout_ms=120_000)
        self._topic, self._per_second = topic, per_second
        self._inputs = churn_inputs(500, seed=11)
        self._stop = threading.Event()
        self.sent = 0
        self.acked: set[str] = set()
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _ack(self, request_id: str, _metadata: object) -> None:
        with self._lock:
            self.acked.add(request_id)

    def _fail(self, request_id: str, error: Exception) -> None:
        with self._lock:
            self.failed.append(f"{request_id}: {error!r}")

    def _run(self) -> None:
        tick = 0.05
        per_tick = max(1, int(self._per_second * tick))
        next_at = time.monotonic()
        while not self._stop.is_set():
            for _ in range(per_tick):
                request_id = f"r{self.sent}"
                value = orjson.dumps({"id": request_id, "inputs": self._inputs[self.sent % len(self._inputs)]})
                future = self._producer.send(self._topic, key=request_id.encode(), value=value)
                future.add_callback(self._ack, request_id).add_errback(self._fail, request_id)
                self.sent += 1
            next_at += tick
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._producer.flush(timeout=150)
        self._producer.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_busiest_leader_killed_under_load_loses_nothing_and_the_worker_keeps_going(
        cluster_bootstrap, cluster_redis_url, tmp_path, client):
    if client == "confluent":
        pytest.importorskip("confluent_kafka")
    admin = KafkaAdminClient(bootstrap_servers=cluster_bootstrap)
    topics = create_replicated_topics(admin)
    worker = start_worker(cluster_bootstrap, cluster_redis_url, topics, tmp_path, "--kafka-client", client,
                          "--max-batch-size", "32", "--max-wait-ms", "10")
    reader = TopicReader(cluster_bootstrap, topics.replies)
    load = Load(cluster_bootstrap, topics.requests, per_second=200)
    killed = None
    try:
        reader.read_until(lambda got: len(got.records) >= 300, 90, "the worker answering", watch=worker)
        leaders = Counter(p["leader_id"] for p in partitions(admin, topics.requests, topics.replies))
        killed = leaders.most_common(1)[0][0]
        cluster("kill", str(killed))
        killed_at = len(reader.read().records)
        time.sleep(15)  # under load with one broker of three gone: leaders move, min ISR 2 still holds
        assert worker.process.poll() is None, f"the worker exited while node {killed} was down:\n{worker.log()}"
        cluster("start", str(killed))
        time.sleep(10)
    finally:
        load.stop()
        if killed is not None:
            cluster("up")  # whatever happened, leave all three running
    assert not load.failed, f"{len(load.failed)} sends failed, e.g. {load.failed[:3]}"
    sent = load.acked
    assert len(sent) == load.sent
    reader.read_until(lambda got: set(got.by_id()) >= sent, 180, f"replies to all {len(sent)} requests",
                      watch=worker)
    assert worker.process.poll() is None
    assert worker.stop() == 0
    by_id = reader.read(1.0).by_id()
    assert set(by_id) == sent
    assert all(reply["status"] == "ok" for replies in by_id.values() for reply in replies)
    duplicates = {i: len(r) for i, r in by_id.items() if len(r) > 1}
    print(f"\n{client}: sent {len(sent)}, answered {len(by_id)}, node {killed} killed after {killed_at} replies, "
          f"duplicate replies {sum(duplicates.values()) - len(duplicates)}")
    stamps = sorted(r.timestamp for r in reader.landed.records)
    gap_s = max(b - a for a, b in zip(stamps, stamps[1:], strict=False)) / 1000
    print(f"longest gap between replies: {gap_s:.1f} s")
    stopped = [e for e in worker.events() if e.get("event") == "worker_stopped"]
    print(f"worker_stopped: {stopped}")
    assert not duplicates, f"{len(duplicates)} ids answered more than once: {sorted(duplicates)[:10]}"
    admin.delete_topics([topics.requests, topics.replies, topics.dlq])
    admin.close()
    reader.close()
    assert os.environ.get("RUN_CLUSTER_TESTS") == "1"
