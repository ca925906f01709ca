"""KafkaSource on a real broker: what its rebalance handling promises the worker loop."""

import pytest
from kafka.errors import KafkaConnectionError, UnsupportedVersionError

from worker.core.bounds import METADATA_S
from worker.core.clock import SystemClock
from worker.core.settings import Settings
from worker.kafka.kafka_python.source import KafkaSource


def _source(bootstrap: str, requests_topic: str, group: str) -> KafkaSource:
    settings = Settings.from_values(kafka_bootstrap_servers=bootstrap, redis_url="memory://",
                                    requests_topic=requests_topic, group=group,
                                    client_id="it-source").with_derived_defaults()
    source = KafkaSource(settings.kafka, SystemClock(), read_committed=False, metadata_s=METADATA_S)
    source.start()
    return source


def test_a_rebalance_finished_without_consuming_leaves_every_record_for_the_next_polls(bootstrap, topics, producer):
    for i in range(200):
        producer.send(topics.requests, {"id": f"r{i}"}, key=str(i).encode())
    producer.flush()
    source = _source(bootstrap, topics.requests, f"{topics.requests}-group")
    try:
        # The first join happens inside this paused poll: the partitions it assigns
        # are not paused yet and fetch records, which must not be consumed here.
        source.finish_rebalance(5.0)
        assert source.generation() > 0
        source.pause(False)
        offsets = set()
        for _ in range(50):
            offsets.update(r.position for r in source.poll(0.2, 500))
            if len(offsets) == 200:
                break
        assert len(offsets) == 200
    finally:
        source.close()


def test_a_poll_failing_while_the_broker_is_away_returns_nothing_and_the_next_one_goes_on(bootstrap, topics,
                                                                                        producer):
    producer.send(topics.requests, {"id": "r0"}, key=b"0")
    producer.flush()
    source = _source(bootstrap, topics.requests, f"{topics.requests}-group")
    consumer_poll = source._consumer.poll
    try:
        # What kafka-python raises out of its coordinator lookup when the broker refuses connections.
        source._consumer.poll = lambda **_: (_ for _ in ()).throw(KafkaConnectionError("111 ECONNREFUSED"))
        assert source.poll(0.1, 500) == []
        source._consumer.poll = lambda **_: (_ for _ in ()).throw(UnsupportedVersionError("not retriable"))
        with pytest.raises(UnsupportedVersionError):
            source.poll(0.1, 500)
        source._consumer.poll = consumer_poll
        source.finish_rebalance(5.0)
        source.pause(False)
        got = []
        for _ in range(50):
            got += source.poll(0.2, 500)
            if got:
                break
        assert [r.position.offset for r in got] == [0]
    finally:
        source._consumer.poll = consumer_poll
        source.close()
