"""REDIS_URL through Sentinels (``redis+sentinel://``): what the client is pointed at, and the mistakes refused."""

from __future__ import annotations

import pytest
from redis.sentinel import SentinelConnectionPool

from worker.core.errors import ConfigError
from worker.core.sections import DedupSettings, redact_url
from worker.dedup.redis_store import connect_redis


def test_the_client_asks_every_sentinel_for_the_services_primary_with_the_urls_credentials():
    client = connect_redis("redis+sentinel://scorer:s3cret@10.0.0.1:26379,10.0.0.2:26380/streamscore/2")
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "streamscore"
    assert [(s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"])
            for s in pool.sentinel_manager.sentinels] == [("10.0.0.1", 26379), ("10.0.0.2", 26380)]
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["username"], kwargs["password"]) == (2, "scorer", "s3cret")
    assert pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs.get("password") is None


@pytest.mark.parametrize("url", ["redis+sentinel://10.0.0.1:26379", "redis+sentinel://10.0.0.1/streamscore",
                                 "redis+sentinel://10.0.0.1:26379/streamscore/zero"])
def test_a_sentinel_url_without_its_sentinels_ports_or_service_is_refused(url):
    with pytest.raises(ConfigError, match="redis\\+sentinel://"):
        connect_redis(url)


def test_the_setting_accepts_the_scheme_and_a_log_never_shows_the_password():
    DedupSettings(redis_url="redis+sentinel://a:1,b:2/streamscore")
    assert redact_url("redis+sentinel://u:pw@a:1,b:2/m/0") == "redis+sentinel://u:***@a:1,b:2/m/0"


def test_replicas_asked_of_the_in_process_store_stop_the_worker_naming_the_setting():
    with pytest.raises(ConfigError, match="dedup_min_replicas needs Redis"):
        DedupSettings(redis_url="memory://", dedup_min_replicas=1)
