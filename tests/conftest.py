"""Where the integration tests find Kafka and Redis, in this order:
1. KAFKA_BOOTSTRAP_SERVERS / REDIS_URL when set (what `.ci/run` and `make test` do);
2. testcontainers, when a Docker engine answers;
3. deploy/local/services.sh (a real broker and Redis on loopback), started and stopped here.
"""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def services() -> Iterator[tuple[str, str]]:
    """(kafka bootstrap servers, redis url) of real servers for this test session."""
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if bootstrap and redis_url:
        yield bootstrap, redis_url
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer
        from testcontainers.redis import RedisContainer

        with KafkaContainer().with_kraft() as kafka, RedisContainer() as redis:
            host, port = redis.get_container_host_ip(), redis.get_exposed_port(6379)
            yield kafka.get_bootstrap_server(), f"redis://{host}:{port}/0"
        return
    script = REPO / "deploy" / "local" / "services.sh"
    status = subprocess.run([str(script), "status"], capture_output=True, text=True).stdout
    already_running = status.count("running (pid") == 2
    started = subprocess.run([str(script), "up"], check=True, capture_output=True, text=True).stdout
    env = dict(line.removeprefix("export ").split("=", 1) for line in started.splitlines() if "=" in line)
    try:
        yield env["KAFKA_BOOTSTRAP_SERVERS"], env["REDIS_URL"]
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
def topics(bootstrap):
    """Requests, replies and dead-letter topics with fresh names (4, 4 and 1 partitions)."""
    return Topics.create(bootstrap)


@pytest.fixture
def producer(bootstrap):
    producer = Producer(bootstrap)
    yield producer
    producer.close()
