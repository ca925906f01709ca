"""REDIS_URL of a Redis Cluster (``redis+cluster://``): the mistakes refused before any node is asked."""

from __future__ import annotations

import pytest

from worker.core.errors import ConfigError
from worker.core.sections import DedupSettings
from worker.dedup.redis_cluster import RedisClusterDedupStore


@pytest.mark.parametrize("url", ["redis+cluster://", "redis+cluster://10.0.0.1", "redis+cluster://10.0.0.1:x"])
def test_a_cluster_url_without_a_node_and_its_port_is_refused(url):
    with pytest.raises(ConfigError, match="redis\\+cluster://host:port"):
        RedisClusterDedupStore(url, "ns", 60, 60_000)


def test_a_namespace_with_braces_would_put_every_key_in_one_slot_and_is_refused():
    with pytest.raises(ConfigError, match="hash tag of every key"):
        RedisClusterDedupStore("redis+cluster://10.0.0.1:7000", "team{a}", 60, 60_000)


def test_replicas_waited_for_are_not_offered_on_a_cluster():
    with pytest.raises(ConfigError, match="dedup_min_replicas is not supported on a Redis Cluster"):
        DedupSettings(redis_url="redis+cluster://10.0.0.1:7000", dedup_min_replicas=1)
