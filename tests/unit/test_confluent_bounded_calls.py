"""librdkafka's transactional calls given up once blocked past their own timeout (worker/kafka/confluent/
transactions.py ``BoundedProducer``): a stuck call must not stop the worker, it becomes a fatal error that
replaces the producer."""

from __future__ import annotations

import threading
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from worker.kafka.confluent import transactions  # noqa: E402


@pytest.fixture
def producer(monkeypatch):
    monkeypatch.setattr(transactions, "OVERRUN_S", 0.2)
    made = transactions.BoundedProducer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})  # no call connects
    yield made
    made.flush(0)


def test_a_call_that_returns_in_time_returns(producer):
    done = []
    producer._bounded(lambda timeout: done.append(timeout), (0.1,), 0.1, "commit_transaction")
    assert done == [0.1]


def test_a_call_blocked_past_its_timeout_raises_a_fatal_error_and_the_next_call_gets_a_fresh_thread(producer):
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer._bounded(lambda timeout: release.wait(10), (0.1,), 0.1, "send_offsets_to_transaction")
    assert time.monotonic() - started < 2
    error = raised.value.args[0]
    assert error.fatal() and "send_offsets_to_transaction still blocked" in error.str()
    done = []
    producer._bounded(lambda timeout: done.append(timeout), (0.1,), 0.1, "commit_transaction")  # not queued behind it
    assert done == [0.1]
    release.set()


def test_no_timeout_means_no_bound(producer):
    done = []
    producer._bounded(lambda timeout: done.append(timeout), (-1,), -1, "init_transactions")
    assert done == [-1]
