"""A backfill that leaves live traffic alone: it holds while the live group lags, goes on once it caught up,
and reads under --max-rate; on a real broker and Redis, over either Kafka client."""

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

from tests.integration.kit import IMPORT_TIMES, OTHER_CLIENT, TopicReader, imported_packages, wait_until
from tests.integration.test_backfill import backfill, events, make_reply_topics
from tests.integration.test_pipeline import churn_inputs

RECORDS = 600


def commit_live_group(bootstrap, group, topic, to_end):
    """The live group's commits: at the start of every partition (lagging by everything), or at the end."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    ends = consumer.end_offsets(partitions)
    consumer.commit({tp: OffsetAndMetadata(ends[tp] if to_end else 0, "", -1) for tp in partitions})
    consumer.close(autocommit=False)


def test_a_backfill_waits_for_the_live_group_to_catch_up(bootstrap, redis_url, topics, producer, tmp_path,
                                                         kafka_client):
    producer.send_requests(topics.requests, "h", churn_inputs(RECORDS))
    live_group = f"{topics.requests}.live"
    commit_live_group(bootstrap, live_group, topics.requests, to_end=False)  # lagging by 600
    replies = make_reply_topics(bootstrap, f"{topics.requests}.bf")
    process, log_path, _ = backfill(bootstrap, redis_url, tmp_path, topics.requests, replies, "--from-time", "0",
                                    "--live-max-lag", "100", "--live-group", live_group, "--live-check-s", "0.5",
                                    "--max-rate", "1000", kafka_client=kafka_client, env=IMPORT_TIMES)
    wait_until(lambda: events(log_path, "backfill_yielding_to_live") or process.poll() is not None, 120,
               "the backfill to yield to the live group")
    assert process.poll() is None, log_path.read_text()[-3000:]
    [held] = events(log_path, "backfill_yielding_to_live")
    assert held["live_lag"] == RECORDS

    reader = TopicReader(bootstrap, replies)
    assert len(reader.read(2.0).records) == 0  # held: nothing scored while the live group lags

    commit_live_group(bootstrap, live_group, topics.requests, to_end=True)  # caught up
    assert process.wait(timeout=180) == 0, log_path.read_text()[-3000:]
    landed = reader.read_until(lambda got: len(got.records) >= RECORDS, 60, f"{RECORDS} backfill replies")
    reader.close()
    assert sorted(landed.by_id()) == sorted(f"h{i}" for i in range(RECORDS))
    [resumed] = events(log_path, "backfill_resuming")
    assert resumed["live_lag"] == 0
    # The whole job (start checks, source, sink, the live group's lag) on one client: the other's library unloaded.
    loaded = imported_packages(log_path.read_text())
    assert {"worker", "torch"} <= loaded and OTHER_CLIENT[kafka_client] not in loaded
