"""The secured endpoints of the local services: Kafka SASL_SSL (SCRAM-SHA-512) and mutual TLS, Redis over
TLS with an ACL user, as ``deploy/local/services.sh env --secure`` / ``env --mtls`` print them.

``make test`` starts them (the local broker always serves them beside its plaintext listener). Against
servers of your own (KAFKA_BOOTSTRAP_SERVERS and REDIS_URL set to them), set SKIP_SECURE_TESTS=1 to
leave these tests out; otherwise a missing secure endpoint is a failure, not a skip.
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from functools import cached_property

import pytest

from tests.integration.kit import REPO, Producer, Topics, kill_leftovers
from worker.core.security import KafkaSecurity
from worker.dedup.redis_store import RedisAccess, connect_redis

SCRIPT = REPO / "deploy" / "local" / "services.sh"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/secure" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@dataclass(frozen=True)
class SecureAccess:
    """One secured way in: the variables a worker gets, and the clients a test makes from them."""

    env: dict[str, str]

    @property
    def bootstrap(self) -> str:
        return self.env["KAFKA_BOOTSTRAP_SERVERS"]

    @property
    def redis_url(self) -> str:
        return self.env["REDIS_URL"]

    @cached_property
    def security(self) -> KafkaSecurity:
        return KafkaSecurity.from_sources(None, self.env)

    def redis(self):
        return connect_redis(self.redis_url, RedisAccess(self.env["REDIS_PASSWORD_FILE"], self.env["REDIS_CA_FILE"]))

    def with_env(self, **changes: str) -> dict[str, str]:
        return {**self.env, **changes}


def _exported(variant: str) -> SecureAccess:
    if os.environ.get("SKIP_SECURE_TESTS"):
        pytest.skip("SKIP_SECURE_TESTS is set")
    printed = subprocess.run([str(SCRIPT), "env", variant], capture_output=True, text=True, check=True).stdout
    env = dict(line.removeprefix("export ").split("=", 1) for line in printed.splitlines() if line.startswith("export"))
    host, port = env["KAFKA_BOOTSTRAP_SERVERS"].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as exc:
        pytest.fail(f"the secure local services do not answer at {host}:{port} ({exc}): start them with "
                    "`make up-secure`, or set SKIP_SECURE_TESTS=1 when testing against servers of your own")
    return SecureAccess(env)


@pytest.fixture(scope="session")
def sasl_ssl(services) -> SecureAccess:
    """Kafka over SASL_SSL with SCRAM-SHA-512, Redis over TLS as the ACL user (after the plain services are up)."""
    return _exported("--secure")


@pytest.fixture(scope="session")
def mtls(services) -> SecureAccess:
    """Kafka over TLS with this client's certificate (mutual TLS), Redis as for sasl_ssl."""
    return _exported("--mtls")


@pytest.fixture(params=["sasl_ssl", "mtls"])
def secure(request) -> SecureAccess:
    return request.getfixturevalue(request.param)


@pytest.fixture
def secure_topics(secure) -> Topics:
    return Topics.create(secure.bootstrap, security=secure.security)


@pytest.fixture
def secure_producer(secure):
    producer = Producer(secure.bootstrap, secure.security)
    yield producer
    producer.close()


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    kill_leftovers()
