"""bench/produce_calls.py on the real broker: each way sends every reply, and the table gives each way's CPU."""

from confluent_kafka import Consumer, TopicPartition

from bench import produce_calls
from bench.confluent_ceiling import sink_like_producer
from bench.topics import RunTopics


def records_on(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-produce-calls"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(produce_calls.PARTITIONS))
    finally:
        consumer.close()


def test_each_way_sends_every_reply_and_gives_its_cpu(bootstrap):
    topics = RunTopics.fresh("test-produce-calls")
    topics.create(bootstrap, produce_calls.PARTITIONS)
    producer = sink_like_producer(bootstrap, "test-produce-calls")
    replies = produce_calls.Replies.churn(1_200, topics.requests)  # two whole polls and a part
    try:
        for sent, send in enumerate(produce_calls.WAYS.values(), start=1):
            cost = produce_calls.measure(producer, topics.replies, replies, send)
            assert records_on(bootstrap, topics.replies) == sent * 1_200
            assert cost.send > 0 and cost.process >= cost.send
    finally:
        topics.delete(bootstrap)


def test_the_command_prints_a_row_a_way(bootstrap, monkeypatch, capsys):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
    assert produce_calls.main(["--replies", "600", "--repeats", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| produce")]
    assert [row.split(" | ")[0] for row in rows] == [f"| {way}" for way in produce_calls.WAYS]
    assert all(len(row.split(" | ")[-1].split(", ")) == 2 for row in rows)  # both repeats' figures
