"""Chaos tests: real Kafka and Redis (the session's ``services``), which scenarios c and d stop and start."""

import pytest

from tests.integration.kit import kill_leftovers


def pytest_configure(config):
    config.addinivalue_line("markers", "chaos: kills workers, stops and starts Kafka and Redis (tests/chaos)")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/chaos" in str(item.fspath):
            item.add_marker(pytest.mark.chaos)
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    kill_leftovers()
