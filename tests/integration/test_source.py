"""KafkaSource on a real broker: what its rebalance handling promises the worker loop."""

from worker.core.clock import SystemClock
from worker.core.settings import Settings
from worker.kafka.source import KafkaSource


def _source(bootstrap: str, requests_topic: str, group: str) -> KafkaSource:
    settings = Settings(kafka_bootstrap_servers=bootstrap, redis_url="memory://", requests_topic=requests_topic,
                        group=group, client_id="it-source").with_derived_defaults()
    source = KafkaSource(settings, SystemClock())
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
