"""KafkaSink's own logic, with stand-ins for kafka-python's producer and futures, and the ledger's groups."""

from kafka.errors import KafkaTimeoutError

from worker.kafka.kafka_python.sink import Futures, KafkaSink
from worker.kafka.sends import SendLedger


class ProducerWithSendsStuck:
    def close(self, timeout):
        raise KafkaTimeoutError("Timeout waiting for future")  # what kafka-python 3.0.12 does


def test_closing_with_sends_still_out_does_not_raise():
    sink = KafkaSink.__new__(KafkaSink)
    sink._producer = ProducerWithSendsStuck()
    sink.close(timeout_s=0.1)  # the records behind those sends were not committed: consumed again


class Future:
    """kafka-python's future as the ledger reads it: finished or not, failed or not."""

    def __init__(self, done: bool = False, exception: Exception | None = None) -> None:
        self.is_done = done
        self.exception = exception

    def failed(self) -> bool:
        return self.exception is not None


def grouped(*futures: Future, refused: int = 0) -> Futures:
    """A group of the sends ``futures`` stands for, and ``refused`` more not queued."""
    group = Futures(len(futures) + refused)
    group.handles_by_index = list(enumerate(futures))
    return group


def test_a_group_is_reported_once_its_last_send_is_finished_and_whole_when_all_were_delivered():
    ledger: SendLedger[object, Future] = SendLedger(lambda future: (future.is_done, future.exception))
    first, second = Future(), Future()
    ledger.sent_group("group", lambda i: ("member", i), grouped(first, second))
    ledger.sent("alone", Future(done=True))
    assert len(ledger) == 3
    first.is_done = True
    assert [(d.tag, d.error) for d in ledger.settle()] == [("alone", None)]
    assert ledger.handles_out() == [second]  # what a stuck send's topic is asked of (KafkaSink._stuck_on_gone_topics)
    second.is_done = True
    assert [(d.tag, d.error) for d in ledger.settle()] == [("group", None)] and len(ledger) == 0


def test_a_group_with_a_failed_send_is_reported_send_by_send_and_given_up_send_by_send():
    lost = KafkaTimeoutError("expired")
    ledger: SendLedger[object, Future] = SendLedger(lambda future: (future.is_done, future.exception))
    group = grouped(Future(done=True), Future(done=True, exception=lost), Future(done=True), refused=1)
    group.failed(3, KafkaTimeoutError("no metadata"))  # refused before it was queued
    ledger.sent_group("group", lambda i: ("member", i), group)
    deliveries = ledger.settle()
    assert [d.tag for d in deliveries] == [("member", i) for i in range(4)]
    assert [d.error for d in deliveries][:3] == [None, lost, None]
    assert isinstance(deliveries[3].error, KafkaTimeoutError)
    ledger.sent_group("out", lambda i: ("out", i), grouped(Future(), Future()))
    assert [(d.tag, d.error) for d in ledger.give_up(lost)] == [(("out", 0), lost), (("out", 1), lost)]
    assert len(ledger) == 0
