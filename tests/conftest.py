"""Where the integration tests find Kafka and Redis (and the schema registry), in this order:
1. KAFKA_BOOTSTRAP_SERVERS / REDIS_URL when set (what `.ci/run` and `make test` do), with SCHEMA_REGISTRY_URL;
2. testcontainers, when a Docker engine answers (no registry: the tests that need one fail, saying so);
3. deploy/local/services.sh (a real broker, Redis and registry on loopback), started and stopped here.
"""

from __future__ import annotations

import gc
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.kit import Producer, Topics

REPO = Path(__file__).resolve().parent.parent


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # no client library, no socket, no engine: all mean "no Docker"
        return False


class Services(tuple[str, str]):
    """(kafka bootstrap servers, redis url), unpacked as before; ``registry_url``: the schema registry's
    Confluent-compatible API (SCHEMA_REGISTRY_URL), or None where none was given."""

    registry_url: str | None

    def __new__(cls, bootstrap: str, redis_url: str, registry_url: str | None) -> Services:
        made = super().__new__(cls, (bootstrap, redis_url))
        made.registry_url = registry_url
        return made


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """(kafka bootstrap servers, redis url) of real servers for this test session, and the registry's URL."""
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if bootstrap and redis_url:
        yield Services(bootstrap, redis_url, os.environ.get("SCHEMA_REGISTRY_URL"))
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer
        from testcontainers.redis import RedisContainer

        with KafkaContainer().with_kraft() as kafka, RedisContainer() as redis:
            host, port = redis.get_container_host_ip(), redis.get_exposed_port(6379)
            yield Services(kafka.get_bootstrap_server(), f"redis://{host}:{port}/0", None)
        return
    script = REPO / "deploy" / "local" / "services.sh"
    status = subprocess.run([str(script), "status"], capture_output=True, text=True).stdout
    already_running = status.count("running (pid") == 3
    started = subprocess.run([str(script), "up"], check=True, capture_output=True, text=True).stdout
    env = dict(line.removeprefix("export ").split("=", 1) for line in started.splitlines() if "=" in line)
    try:
        yield Services(env["KAFKA_BOOTSTRAP_SERVERS"], env["REDIS_URL"], env.get("SCHEMA_REGISTRY_URL"))
    finally:
        if not already_running:  # services someone else started (another test run, a demo) stay up
            subprocess.run([str(script), "down"], check=False)


# The real services' fixtures, for tests/integration and the real-adapter half of tests/contracts.


@pytest.fixture
def bootstrap(services):
    return services[0]


@pytest.fixture
def redis_url(services):
    return services[1]


@pytest.fixture
def schema_registry(services):
    """The schema registry's URL (its Confluent-compatible API). Fails, never skips, where there is none."""
    if not services.registry_url:
        pytest.fail("no schema registry: SCHEMA_REGISTRY_URL is not set, and the services were given from outside "
                    "(KAFKA_BOOTSTRAP_SERVERS, REDIS_URL) or by testcontainers. Start one with "
                    "`deploy/local/services.sh up` (it adds the registry to running Kafka and Redis) and export "
                    "the SCHEMA_REGISTRY_URL line it prints", pytrace=False)
    return services.registry_url


@pytest.fixture
def topics(bootstrap):
    """Requests, replies and dead-letter topics with fresh names (4, 4 and 1 partitions)."""
    return Topics.create(bootstrap)


@pytest.fixture
def producer(bootstrap):
    producer = Producer(bootstrap)
    yield producer
    producer.close()


@pytest.fixture(autouse=True)
def _collector_thresholds() -> Iterator[None]:
    """A test that builds a worker (worker/app.py ``tune_collector``) leaves the collector's thresholds as the
    session had them."""
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
