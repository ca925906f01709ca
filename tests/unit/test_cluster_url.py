"""REDIS_URL of a Redis Cluster (``redis+cluster://``, ``rediss+cluster://`` over TLS): the mistakes refused before
any node is asked, and the TLS options every node gets."""

from __future__ import annotations

import pytest

from worker.core.errors import ConfigError
from worker.core.sections import DedupSettings
from worker.dedup.redis_cluster import RedisClusterDedupStore
from worker.dedup.redis_store import RedisAccess


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


def test_rediss_cluster_takes_the_tls_settings_and_redis_cluster_refuses_them(tmp_path):
    """(The client connects as it is made: tests/secure holds it to a cluster listening with TLS only.)"""
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    DedupSettings(redis_url="rediss+cluster://10.0.0.1:7000", redis_ca_file=str(ca))
    with pytest.raises(ConfigError, match="REDIS_CA_FILE is set.*does not use TLS"):
        DedupSettings(redis_url="redis+cluster://10.0.0.1:7000", redis_ca_file=str(ca))
    assert RedisAccess(ca_file=str(ca)).tls_options("rediss+cluster") == {
        "ssl_cert_reqs": "required", "ssl_check_hostname": True, "ssl_ca_certs": str(ca)}
    assert RedisAccess(ca_file=str(ca)).tls_options("redis+cluster") == {}
