import pytest

from tests.integration.kit import kill_leftovers


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    kill_leftovers()


@pytest.fixture(params=["kafka-python", "confluent"])
def kafka_client(request):
    """Each Kafka client a test of this parameter runs its worker (or job) on; confluent needs the extra."""
    if request.param == "confluent":
        pytest.importorskip("confluent_kafka")
    return request.param
