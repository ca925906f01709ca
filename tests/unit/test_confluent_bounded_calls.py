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


def test_send_offsets_to_transaction_gets_at_most_its_own_short_timeout(producer, monkeypatch):
    """It answers in milliseconds, or hangs past any timeout (librdkafka #5456, #5511): a long wait buys nothing."""
    calls = []
    monkeypatch.setattr(transactions.BoundedProducer, "_bounded",
                        lambda self, call, args, timeout, what: calls.append((args[-1], timeout)))
    producer.send_offsets_to_transaction([], None, 5.0)
    producer.send_offsets_to_transaction([], None, 1.0)
    producer.send_offsets_to_transaction([], None)
    assert calls == [(transactions.OFFSETS_S, transactions.OFFSETS_S), (1.0, 1.0),
                     (transactions.OFFSETS_S, transactions.OFFSETS_S)]
    assert transactions.OFFSETS_S < transactions.TRANSACTION_CALL_S


def test_only_librdkafkas_own_timeout_of_init_transactions_is_resumed():
    """Asked again, librdkafka resumes the call; a new producer would race it for the producer epoch. Our
    own give-up (fatal: the call is stuck) and any other error get a new producer."""
    sink = transactions.TransactionalSink.__new__(transactions.TransactionalSink)
    error = confluent_kafka.KafkaError
    assert sink._init_timed_out(confluent_kafka.KafkaException(error(error._TIMED_OUT, "retry call to resume")))
    assert not sink._init_timed_out(confluent_kafka.KafkaException(error(error._TIMED_OUT, "stuck", fatal=True)))
    assert not sink._init_timed_out(confluent_kafka.KafkaException(error(error.CONCURRENT_TRANSACTIONS)))


def test_a_transactional_producers_request_waits_no_longer_than_a_call_unless_the_user_says(monkeypatch):
    """One in flight to a paused leader is retried only once it times out (librdkafka's default: 60 s)."""
    made = []

    class Recorded:
        def __init__(self, config):
            made.append(config)

        def init_transactions(self, timeout):
            pass

    monkeypatch.setattr(transactions, "BoundedProducer", Recorded)
    transactions.TransactionalSink("127.0.0.1:1", "w", "w.tx", call_s=5.0)
    transactions.TransactionalSink("127.0.0.1:1", "w", "w.tx", call_s=5.0, **{"socket.timeout.ms": 20_000})
    assert [config["socket.timeout.ms"] for config in made] == [5_000, 20_000]


class Fencing:
    """A FenceWatch whose first look finds a broker fenced."""

    def wait(self, done, timeout_s: float):
        return True if done(0.05) else None


def test_a_call_still_blocked_when_the_cluster_fences_a_broker_is_given_up_then(producer):
    """librdkafka's send_offsets_to_transaction waits on for a coordinator that has moved (#5511)."""
    producer.fences = Fencing()
    release = threading.Event()
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer._bounded(lambda timeout: release.wait(10), (5.0,), 5.0, "send_offsets_to_transaction")
    error = raised.value.args[0]
    assert error.fatal() and "send_offsets_to_transaction a broker was fenced while it waited" in error.str()
    release.set()
    done = []
    producer._bounded(lambda timeout: done.append(timeout), (0.1,), 0.1, "commit_transaction")
    assert done == [0.1]
