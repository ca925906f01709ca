"""bench/produce_calls.py on the real broker: each way sends every reply with the headers it names, and the
table gives each way's CPU."""

from confluent_kafka import Consumer, TopicPartition

from bench import produce_calls
from bench.thread_cpu import ThreadCpu
from bench.topics import RunTopics

HEADERS = {"produce, seven headers": 7, "produce, one header": 1, "produce, no headers": 0,
           "produce_batch, no headers": 0, "produce, seven headers, reports of failures only": 7}


def ends(consumer: Consumer, topic: str) -> list[int]:
    return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(produce_calls.PARTITIONS)]


def headers_at(consumer: Consumer, topic: str, offset: int) -> int:
    """How many headers the record at ``offset`` of partition 0 carries."""
    consumer.assign([TopicPartition(topic, 0, offset)])
    message = consumer.poll(10)
    assert message is not None and message.error() is None and message.offset() == offset
    return len(message.headers() or [])


def test_each_way_sends_every_reply_with_its_headers_and_gives_its_cpu(bootstrap):
    assert list(HEADERS) == list(produce_calls.WAYS)
    topics = RunTopics.fresh("test-produce-calls")
    topics.create(bootstrap, produce_calls.PARTITIONS)
    producers = produce_calls.sink_like_producers(bootstrap, "test-produce-calls")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-produce-calls",
                         "enable.auto.commit": False})
    replies = produce_calls.Replies.churn(1_200, topics.requests)  # two whole polls and a part
    try:
        for way, (send, failures_only) in produce_calls.WAYS.items():
            before = ends(consumer, topics.replies)
            cost = produce_calls.measure(producers[failures_only], topics.replies, replies, send, failures_only)
            after = ends(consumer, topics.replies)
            assert sum(after) - sum(before) == 1_200, way
            assert headers_at(consumer, topics.replies, before[0]) == HEADERS[way], way
            assert cost.send > 0 and cost.deliveries > 0, way
            assert cost.librdkafka > 0 or not ThreadCpu.available, way
    finally:
        consumer.close()
        topics.delete(bootstrap)


def test_the_command_prints_a_row_a_way(bootstrap, monkeypatch, capsys):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
    assert produce_calls.main(["--replies", "600", "--repeats", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| produce")]
    assert [row.split(" | ")[0] for row in rows] == [f"| {way}" for way in produce_calls.WAYS]
    assert all(len(row.split(" | ")[-1].split(", ")) == 2 for row in rows)  # both repeats' figures
