"""kafka-python's transactional calls, bounded: a coordinator that never answers costs at most the bound."""

from __future__ import annotations

import pytest
from kafka.errors import KafkaTimeoutError

from worker.kafka.kafka_python.transactions import BoundedProducer


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
                                  lambda p: p.send_offsets_to_transaction({}, "group", 2.5)],
                         ids=["commit", "abort", "offsets"])
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
