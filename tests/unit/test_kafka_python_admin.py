"""kafka-python's admin client as the worker builds it (worker/kafka/kafka_python/broker_facts.py): each request and
each connection's set-up bounded by one timeout, and the fenced brokers left out of the cluster's list."""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient

from worker.core.security import PLAINTEXT
from worker.kafka.kafka_python import broker_facts
from worker.kafka.kafka_python.broker_facts import BoundedAdminClient, KafkaPythonAdmin


class Recorded:
    made: list[dict[str, Any]] = []

    def __init__(self, **config: Any) -> None:
        Recorded.made.append(config)

    def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": 29092, "is_fenced": False},
                            {"broker_id": 2, "host": "127.0.0.1", "port": 29093, "is_fenced": True},
                            {"broker_id": 3, "host": "127.0.0.1", "port": 29094}]}


def test_a_request_and_a_connections_set_up_wait_no_longer_than_the_timeout(monkeypatch):
    """A paused broker accepts a connection and never answers: kafka-python's own set-up timeout, 10 s doubling
    up to 30 s, would hold a fence watch's look that long."""
    monkeypatch.setattr(broker_facts, "BoundedAdminClient", Recorded)
    KafkaPythonAdmin("127.0.0.1:29092", PLAINTEXT, timeout_s=1.0)
    (config,) = Recorded.made[-1:]
    assert (config["request_timeout_ms"], config["socket_connection_setup_timeout_ms"],
            config["socket_connection_setup_timeout_max_ms"]) == (1000, 1000, 1000)
    assert config["bootstrap_timeout_ms"] == 10_000  # reaching a broker at all may take the start check's time
    assert set(BoundedAdminClient.DEFAULT_CONFIG) - set(KafkaAdminClient.DEFAULT_CONFIG) == {
        "socket_connection_setup_timeout_ms", "socket_connection_setup_timeout_max_ms"}


def test_the_clusters_brokers_leave_out_the_fenced_ones(monkeypatch):
    """kafka-python's DescribeCluster asks for the fenced brokers too, and marks them."""
    monkeypatch.setattr(broker_facts, "BoundedAdminClient", Recorded)
    admin = KafkaPythonAdmin("127.0.0.1:29092", PLAINTEXT, timeout_s=1.0)
    assert admin.brokers() == {1: "127.0.0.1:29092", 3: "127.0.0.1:29094"}
