import pytest

from tests.integration.kit import kill_leftovers


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    kill_leftovers()
