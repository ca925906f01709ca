"""REDIS_URL through Sentinels (``redis+sentinel://``): what the client is pointed at, and the mistakes refused."""

from __future__ import annotations

import pytest
import redis
from redis.connection import SSLConnection
from redis.sentinel import MasterNotFoundError, SentinelConnectionPool

from worker.core.errors import ConfigError, ServiceUnavailable, StoreUnavailable
from worker.core.sections import DedupSettings, redact_url
from worker.dedup.redis_store import RedisAccess, classified, connect_redis, start_failure


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


def test_the_sentinels_own_credentials_go_to_them_and_the_urls_to_the_primary(tmp_path):
    secret = tmp_path / "sentinel-password"
    secret.write_text("watchers\n")
    client = connect_redis("redis+sentinel://scorer:s3cret@10.0.0.1:26379/streamscore",
                           RedisAccess(sentinel_user="sentry", sentinel_password_file=str(secret)))
    pool = client.connection_pool
    asked = pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs
    assert (asked["username"], asked["password"]) == ("sentry", "watchers")
    assert (pool.connection_kwargs["username"], pool.connection_kwargs["password"]) == ("scorer", "s3cret")


def test_rediss_sentinel_speaks_tls_to_the_sentinels_and_to_the_primary(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    pool = connect_redis("rediss+sentinel://10.0.0.1:26379/streamscore", RedisAccess(ca_file=str(ca))).connection_pool
    sentinel = pool.sentinel_manager.sentinels[0].connection_pool
    for connection_class, kwargs in ((pool.connection_class, pool.connection_kwargs),
                                     (sentinel.connection_class, sentinel.connection_kwargs)):
        assert issubclass(connection_class, SSLConnection)
        assert (kwargs["ssl_ca_certs"], kwargs["ssl_cert_reqs"], kwargs["ssl_check_hostname"]) == (
            str(ca), "required", True)
    plain = connect_redis("redis+sentinel://10.0.0.1:26379/streamscore").connection_pool
    assert not issubclass(plain.connection_class, SSLConnection)
    assert not issubclass(plain.sentinel_manager.sentinels[0].connection_pool.connection_class, SSLConnection)


@pytest.mark.parametrize(("changes", "named"), [
    ({"redis_sentinel_user": "sentry"}, "redis_sentinel_user"),
    ({"redis_sentinel_password_file": __file__}, "REDIS_SENTINEL_PASSWORD_FILE"),
])
def test_sentinel_credentials_without_sentinels_are_refused_naming_the_setting(changes, named):
    with pytest.raises(ConfigError, match=f"{named}.*names no Sentinels"):
        DedupSettings(redis_url="redis://r:6379/0", **changes)


def test_a_ca_file_is_taken_with_rediss_sentinel_and_refused_with_redis_sentinel():
    DedupSettings(redis_url="rediss+sentinel://a:1/streamscore", redis_ca_file=__file__)
    with pytest.raises(ConfigError, match="REDIS_CA_FILE is set.*rediss\\+sentinel://"):
        DedupSettings(redis_url="redis+sentinel://a:1/streamscore", redis_ca_file=__file__)


@pytest.mark.parametrize(("said", "kind", "hint"), [
    ("AuthenticationError: HELLO must be called with the client already authenticated", ConfigError,
     "want a password: put it in REDIS_SENTINEL_PASSWORD_FILE"),
    ("AuthenticationError: invalid username-password pair or user is disabled.", ConfigError,
     "refused the credentials: check REDIS_SENTINEL_USER and REDIS_SENTINEL_PASSWORD_FILE"),
    ("ConnectionError: Error 1 connecting to 10.0.0.1:26379. [SSL: CERTIFICATE_VERIFY_FAILED]", ConfigError,
     "signed by REDIS_CA_FILE's CA"),
    ("ConnectionError: Error while reading from 10.0.0.1:26379 : (104, 'Connection reset by peer')", ConfigError,
     "write rediss+sentinel://"),
    ("ConnectionError: Error 111 connecting to 10.0.0.1:26379. Connection refused.", ServiceUnavailable,
     "check that they run"),
])
def test_a_start_without_a_primary_says_what_the_sentinels_said_and_what_to_set(said, kind, hint):
    url = "redis+sentinel://u:pw@10.0.0.1:26379,10.0.0.2:26379/streamscore"
    gathered = ", ".join(f"<redis.client.Redis(<ConnectionPool(host={host})>)> - auth:{said}"
                         for host in ("10.0.0.1", "10.0.0.2"))
    explained = start_failure(MasterNotFoundError(f"No master found for 'streamscore' : {gathered}"), url, "")
    assert type(explained) is kind and hint in str(explained)
    assert str(explained).count(said) == 1 and "pw" not in str(explained).replace("PASSWORD", "")


def test_what_the_sentinels_said_is_told_without_their_clients_settings():
    """Upstream redis-py writes each Sentinel's client before what it said; some releases leave the client's
    password (and a key's passphrase) unredacted in it, and an SSLConnection there is no TLS failure."""
    client = ("<redis.client.Redis(<redis.connection.ConnectionPool(<redis.connection.SSLConnection(host=10.0.0.1,"
              "port=26379,password=WATCHERS-SECRET,ssl_password=KEY-PASSPHRASE,options=<object object at 0x7f>)>)>)>")
    down = MasterNotFoundError(f"No master found for 'streamscore' : {client} - TimeoutError('Timeout connecting to "
                               f"server'), {client} - TimeoutError('Timeout connecting to server')")
    url = "rediss+sentinel://10.0.0.1:26379,10.0.0.2:26379/streamscore"
    explained = start_failure(down, url, "")
    assert type(explained) is ServiceUnavailable, explained
    assert "SECRET" not in str(explained) and "PASSPHRASE" not in str(explained)
    assert str(explained).endswith("they said: TimeoutError('Timeout connecting to server')")
    refused = MasterNotFoundError(f"No master found for 'streamscore' : {client} - AuthenticationError('invalid "
                                  "username-password pair'): invalid username-password pair")
    assert "refused the credentials" in str(start_failure(refused, url, ""))
    with pytest.raises(StoreUnavailable) as raised:
        classified(lambda: (_ for _ in ()).throw(down), "ns")
    assert "SECRET" not in str(raised.value) and "Timeout connecting" in str(raised.value)


def test_a_sentinel_user_without_its_password_is_refused():
    with pytest.raises(ConfigError, match="redis_sentinel_user .* is set without REDIS_SENTINEL_PASSWORD_FILE"):
        DedupSettings(redis_url="redis+sentinel://a:1/streamscore", redis_sentinel_user="sentry")


def test_a_command_the_acl_refuses_at_start_is_an_acl_refusal_not_an_outage():
    refused = redis.exceptions.NoPermissionError("this user has no permissions to run the 'ping' command")
    explained = start_failure(refused, "redis://worker@cache:6379/0", "", "scores")
    assert isinstance(explained, ConfigError)
    assert str(explained).startswith("Redis at REDIS_URL=redis://worker@cache:6379/0 refused a command to user "
                                     "'worker': this user has no permissions to run the 'ping' command. The ACL")
    assert "on ~scores:*" in str(explained)
