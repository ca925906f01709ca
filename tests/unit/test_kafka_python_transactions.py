"""kafka-python's transactional calls, bounded: a coordinator that never answers costs at most the bound."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError

from worker.kafka.kafka_python.transactions import BoundedProducer, TransactionalSink


class Result:
    def __init__(self, answered: bool) -> None:
        self.answered = answered
        self.waited_ms: list[float | None] = []

    def wait(self, timeout_ms: float | None = None) -> bool:
        self.waited_ms.append(timeout_ms)
        return self.answered


class Manager:
    def __init__(self, result: Result) -> None:
        self.result = result
        self.calls: list[str] = []

    def initialize_transactions(self) -> Result:
        self.calls.append("init")
        return self.result

    def begin_commit(self) -> Result:
        self.calls.append("commit")
        return self.result

    def begin_abort(self) -> Result:
        self.calls.append("abort")
        return self.result

    def send_offsets_to_transaction(self, offsets: object, group_metadata: object) -> Result:
        self.calls.append("offsets")
        return self.result


class Sender:
    def wakeup(self) -> None:
        pass


def producer(result: Result) -> BoundedProducer:
    bounded = object.__new__(BoundedProducer)  # no broker: only the transactional calls are exercised
    bounded._transaction_manager = Manager(result)
    bounded._sender = Sender()
    return bounded


@pytest.mark.parametrize("call", [lambda p: p.commit_transaction(2.5), lambda p: p.abort_transaction(2.5),
                                  lambda p: p.send_offsets_to_transaction({}, "group", 2.5),
                                  lambda p: p.init_transactions(2.5)],
                         ids=["commit", "abort", "offsets", "init"])
def test_a_call_with_no_answer_raises_after_its_bound(call):
    result = Result(answered=False)
    with pytest.raises(KafkaTimeoutError, match="no answer within 2.5 s"):
        call(producer(result))
    assert result.waited_ms == [2500.0]


def test_an_answered_call_returns():
    result = Result(answered=True)
    bounded = producer(result)
    bounded.commit_transaction(2.5)
    assert bounded._transaction_manager.calls == ["commit"] and result.waited_ms == [2500.0]


class Fencing:
    """A FenceWatch whose wait ends at a fence."""

    def __init__(self) -> None:
        self.bounds: list[float] = []

    def wait(self, done, timeout_s: float):
        self.bounds.append(timeout_s)
        return None if not done(0.5) else True


def test_a_call_waiting_when_the_cluster_fences_a_broker_ends_then():
    """kafka-python's sender waits out its request timeout on a coordinator that has moved before it looks
    again: a replacement's init ran out 4 s after the move."""
    result = Result(answered=False)
    bounded = producer(result)
    bounded.fences = Fencing()
    with pytest.raises(KafkaTimeoutError, match="init_transactions: a broker was fenced while it waited"):
        bounded.init_transactions(5.0)
    assert bounded.fences.bounds == [5.0] and result.waited_ms == [500.0]
    answered = producer(Result(answered=True))
    answered.fences = Fencing()
    answered.commit_transaction(5.0)


@pytest.fixture
def built(monkeypatch) -> list[dict[str, object]]:
    """The config of each producer the sink builds (a stand-in that connects nowhere)."""
    configs: list[dict[str, object]] = []

    class Recorded(BoundedProducer):
        def __init__(self, **config: object) -> None:
            configs.append(config)
            self._metadata = SimpleNamespace(config={})
            self.config = {**config, "api_version": (4, 1)}

        def init_transactions(self, timeout_s: float | None = None) -> None:
            configs[-1]["init_transactions_s"] = timeout_s

    monkeypatch.setattr(TransactionalSink, "PRODUCER", Recorded)
    return configs


def test_a_send_waits_for_its_answer_no_longer_than_transaction_s_and_a_request_no_longer_than_half_a_call(built):
    """kafka-python answers a send stuck behind a dead leader only at its delivery timeout (120 s by default),
    and a transaction commits only once its sends are answered: bounded by transaction_s instead. One request
    (to a paused leader, a dead coordinator) waits no longer than half a transactional call, so that a
    replacement's init looks for a moved coordinator twice; the user's settings win, each on its own."""
    TransactionalSink("127.0.0.1:1", "w", "w.tx", linger_ms=2, transaction_s=15.0, call_s=5.0)
    assert (built[-1]["delivery_timeout_ms"], built[-1]["request_timeout_ms"]) == (15_000, 2_500)
    TransactionalSink("127.0.0.1:1", "w", "w.tx", linger_ms=2, transaction_s=2.0, call_s=5.0)
    assert (built[-1]["delivery_timeout_ms"], built[-1]["request_timeout_ms"]) == (2_000, 1_998)
    TransactionalSink("127.0.0.1:1", "w", "w.tx", linger_ms=2, transaction_s=15.0, request_timeout_ms=20_000)
    assert (built[-1]["delivery_timeout_ms"], built[-1]["request_timeout_ms"]) == (20_002, 20_000)
    TransactionalSink("127.0.0.1:1", "w", "w.tx", linger_ms=2, transaction_s=15.0, delivery_timeout_ms=2_000)
    assert (built[-1]["delivery_timeout_ms"], built[-1]["request_timeout_ms"]) == (2_000, 1_998)
    TransactionalSink("127.0.0.1:1", "w", "w.tx", transaction_s=15.0, request_timeout_ms=40_000,
                      delivery_timeout_ms=60_000)
    assert (built[-1]["delivery_timeout_ms"], built[-1]["request_timeout_ms"]) == (60_000, 40_000)  # the user's


def test_a_transactional_call_that_got_no_answer_replaces_the_producer_without_an_abort():
    sink = TransactionalSink.__new__(TransactionalSink)
    assert sink._fatal(KafkaTimeoutError("commit_transaction got no answer within 15.0 s"))
    assert sink._unanswered(KafkaTimeoutError("Expiring 24 record(s)"))
    assert not sink._fatal(KafkaError("something else")) and not sink._unanswered(KafkaError("something else"))


def test_a_replacement_producer_takes_the_broker_version_its_predecessor_learned(built):
    """Without it kafka-python asks the first bootstrap server before the constructor returns: a paused broker
    there held the replacement."""
    sink = TransactionalSink("127.0.0.1:1", "w", "w.tx")
    sink._new_producer()
    assert "api_version" not in built[0] and built[1]["api_version"] == (4, 1)


def test_a_replacement_producer_gets_a_transactional_call_to_initialise(built):
    """The first producer waits ``max_block_ms`` (the worker's start); a replacement, made while a coordinator
    moves, gets ``call_s``: if it runs out, the step fails and the next one makes another producer at once
    (the rewind no longer waits for the group coordinator), one that looks the coordinator up anew."""
    sink = TransactionalSink("127.0.0.1:1", "w", "w.tx", call_s=2.5)
    sink._renew_producer()
    assert [config["init_transactions_s"] for config in built] == [None, 2.5]


def test_a_connection_to_a_broker_that_does_not_answer_is_given_up_within_half_a_call(built):
    """A paused broker accepts the connection and never answers its first request: kafka-python gives the set-up
    10 s by default, doubled after each failure up to 30 s: all of a replacement's init and more."""
    TransactionalSink("127.0.0.1:1", "w", "w.tx", call_s=5.0)
    assert built[-1]["socket_connection_setup_timeout_ms"] == 2_500
    assert built[-1]["socket_connection_setup_timeout_max_ms"] == 2_500


def test_the_bounded_producer_takes_the_connection_set_up_timeout_that_kafka_python_refuses():
    with pytest.raises(ValueError, match="Unrecognized configs"):
        KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(4, 1), socket_connection_setup_timeout_ms=1)
    bounded = BoundedProducer(bootstrap_servers="127.0.0.1:1", api_version=(4, 1), socket_connection_setup_timeout_ms=1,
                              socket_connection_setup_timeout_max_ms=2)
    try:
        manager = bounded._sender._client._manager.config
        assert manager["socket_connection_setup_timeout_ms"] == 1
        assert manager["socket_connection_setup_timeout_max_ms"] == 2
    finally:
        bounded.close(timeout=0)


def test_a_replacement_starts_from_the_brokers_the_fence_watch_last_found(built):
    """A new kafka-python producer bootstraps from, and looks its coordinator up at, a fenced paused broker as
    often as at any other, waiting out a connection's set-up there each time."""

    class Watch:
        def alive(self) -> list[str]:
            return ["127.0.0.1:29092", "127.0.0.1:29094"]

    sink = TransactionalSink("127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094", "w", "w.tx", fences=Watch())
    sink._renew_producer()
    assert built[0]["bootstrap_servers"] == ["127.0.0.1:29092", "127.0.0.1:29093", "127.0.0.1:29094"]
    assert built[1]["bootstrap_servers"] == ["127.0.0.1:29092", "127.0.0.1:29094"]
