"""Tests on the local three-broker cluster (deploy/local/cluster.sh). Not part of `make test`: they run with
`make test-cluster`, which starts the cluster, sets RUN_CLUSTER_TESTS=1 and the cluster's
KAFKA_BOOTSTRAP_SERVERS, and stops what it started. Redis: REDIS_URL (default: the local single Redis)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.integration.kit import kill_leftovers


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("RUN_CLUSTER_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="cluster tests run with `make test-cluster` (RUN_CLUSTER_TESTS=1)")
    for item in items:
        if "tests/cluster/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cluster_bootstrap() -> str:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
    if bootstrap.count(",") < 2:
        pytest.fail(f"KAFKA_BOOTSTRAP_SERVERS={bootstrap!r} is not a three-broker cluster: run `make test-cluster`")
    return bootstrap


@pytest.fixture(scope="session")
def cluster_redis_url() -> str:
    return os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")


@pytest.fixture(autouse=True)
def _no_leftover_workers() -> Iterator[None]:
    yield
    kill_leftovers()
