"""A rewind whose committed offsets cannot be read (the group coordinator moving after a broker died) stops
consuming until they can: seen on the three-broker cluster, where the worker exited instead (an uncaught
NOT_COORDINATOR from librdkafka's ``committed``) after a transaction aborted by a leader kill."""

from __future__ import annotations

from typing import ClassVar

import pytest

from worker.core.clock import SystemClock
from worker.core.offsets import TopicPartition as TP
from worker.core.settings import Settings
from worker.kafka import group_source
from worker.kafka.group_source import GroupSource


class CoordinatorMoving(Exception):
    pass


class Source(GroupSource):
    """Positions in memory; the committed offsets unreadable for the first ``failures`` reads."""

    CLIENT = "test"
    COMMITTED_ERRORS: ClassVar[tuple[type[Exception], ...]] = (CoordinatorMoving,)

    def __init__(self, failures: int) -> None:
        kafka = Settings.from_values(kafka_bootstrap_servers="127.0.0.1:1", redis_url="memory://",
                                     requests_topic="req").with_derived_defaults().kafka
        super().__init__(kafka, SystemClock(), metadata_s=1.0, model_topics=())
        self.failures = failures
        self.reads = 0  # of the committed offsets, from the group coordinator
        self.committed = {("req", 0): 10}
        self.position = {("req", 0): 25}  # read past the commit: the aborted transaction's records

    def poll(self) -> list[int]:
        if not self._rewound(timeout_s=0.0):
            return []
        offset = self.position[("req", 0)]
        self.position[("req", 0)] += 1
        return [offset]

    def _seek(self, tp: TP, offset: int) -> None:
        self.position[tp] = offset

    def _seek_committed(self, partitions: set[TP]) -> None:
        if not partitions:
            return
        self.reads += 1
        if self.failures:
            self.failures -= 1
            raise CoordinatorMoving("NOT_COORDINATOR")
        self.position.update({tp: self.committed[tp] for tp in partitions})

    def _partitions(self, topic: str) -> set[int]:
        return {0}

    def _subscribe(self) -> None:
        pass

    def _assigned(self) -> set[TP]:
        return set(self.position)


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(group_source, "REWIND_RETRY_S", 0.0)


def test_a_rewind_that_can_read_the_committed_offsets_takes_effect_at_once():
    source = Source(failures=0)
    source.rewind()
    assert source.poll() == [10]


def test_a_rewind_that_cannot_read_them_consumes_nothing_until_a_later_poll_can():
    source = Source(failures=3)
    source.rewind()  # does not raise
    assert [source.poll(), source.poll()] == [[], []]  # still unreadable: nothing past the commit is consumed
    assert source.poll() == [10]  # the third failure was the second poll's; this one rewinds, then reads
    assert source.poll() == [11]


def test_a_rewind_given_the_offsets_it_committed_itself_does_not_ask_the_coordinator():
    """After an abort the worker goes back to the offsets of its own last commit: in the paused-leader runs on
    the three-broker cluster the coordinator it would ask was the paused broker."""
    source = Source(failures=3)
    source.rewind({("req", 0): 12, ("other", 0): 3})  # a partition no longer assigned is left alone
    assert source.poll() == [12] and source.reads == 0 and source.position.keys() == {("req", 0)}


def test_a_rewind_asks_the_coordinator_only_for_the_partitions_it_was_not_given():
    source = Source(failures=1)
    source.position[("req", 1)] = 40
    source.committed[("req", 1)] = 30
    source.rewind({("req", 0): 12})
    assert source.position[("req", 0)] == 12 and source.reads == 1  # unreadable: consumes nothing
    assert source.poll() == [12] and source.position[("req", 1)] == 30  # the owed rewind keeps what it was given


def test_kafka_pythons_committed_offsets_are_read_within_the_metadata_bound_for_all_partitions_together():
    """kafka-python asks again, without a bound, while the offsets read as unstable (a transaction holding them
    still open): a rewind then held the worker until the broker's transaction timeout (60 s). Bounded, the read
    raises, the rewind stays owed, and the next step can replace the producer that holds the transaction."""
    from kafka.errors import KafkaTimeoutError

    from worker.kafka.kafka_python.source import KafkaSource

    class Consumer:
        def __init__(self) -> None:
            self.timeouts_ms: list[int] = []

        def committed(self, tp: tuple[str, int], timeout_ms: int) -> int:
            self.timeouts_ms.append(timeout_ms)
            raise KafkaTimeoutError("UNSTABLE_OFFSET_COMMIT until the timeout")

    source = object.__new__(KafkaSource)  # no broker: only the committed-offset read is exercised
    source._consumer, source._metadata_s = Consumer(), 1.0
    with pytest.raises(KafkaTimeoutError):
        source._seek_committed({("req", 0), ("req", 1)})
    assert len(source._consumer.timeouts_ms) == 1 and 0 < source._consumer.timeouts_ms[0] <= 1000
