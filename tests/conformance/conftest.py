"""The conformance suite: streamscore against Kafka clients it did not write, on a real broker.

``CONFORMANCE_SIZE`` (small, the default in ``make test``; full in ``make conformance``) sets how many
requests each producer writes per codec. ``CONFORMANCE_BOOTSTRAP`` points the suite at another broker (a
version of the matrix that ``deploy/local/broker-version.sh`` starts); Redis is the test session's.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.integration.conftest import no_leftover_workers  # noqa: F401 (kills the workers a test left running)

SIZES = {"small": 20, "full": 500}  # requests per codec and producer


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/conformance" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def per_codec() -> int:
    size = os.environ.get("CONFORMANCE_SIZE", "small")
    if size not in SIZES:
        raise pytest.UsageError(f"CONFORMANCE_SIZE must be one of {', '.join(SIZES)}, got {size!r}")
    return SIZES[size]


@pytest.fixture(scope="session")
def broker(services) -> str:
    """The broker under test: the session's, or CONFORMANCE_BOOTSTRAP's (another version)."""
    if shutil.which("java") is None:
        pytest.fail("the conformance suite runs the Apache Kafka Java client: install a JDK (17+), as "
                    "deploy/local/services.sh up does")
    return os.environ.get("CONFORMANCE_BOOTSTRAP") or services[0]


@pytest.fixture(params=["kafka-python", "confluent"])
def kafka_client(request):
    return request.param
