import pytest

from tests.integration.kit import Producer, Topics, kill_leftovers


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    kill_leftovers()


@pytest.fixture
def bootstrap(services):
    return services[0]


@pytest.fixture
def redis_url(services):
    return services[1]


@pytest.fixture
def topics(bootstrap):
    return Topics.create(bootstrap)


@pytest.fixture
def producer(bootstrap):
    producer = Producer(bootstrap)
    yield producer
    producer.close()
