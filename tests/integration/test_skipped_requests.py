"""Requests deleted before the group read them (retention, or a delete-records request) are skipped, and the worker
says so on both clients, with how many: its own ``requests_skipped`` line (from kafka-python's fetcher lines, said
only at INFO; from librdkafka's OFFSET warning and the first record after it), and the count the metric
``streamscore_requests_skipped_total`` reports."""

from __future__ import annotations

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.integration.kit import TopicReader, start_worker
from tests.integration.test_pipeline import churn_inputs

COMMITTED, LOG_START, SENT = 10, 30, 50


def test_requests_deleted_before_they_were_read_are_skipped_with_a_line(
        bootstrap, redis_url, topics, producer, tmp_path, kafka_client):
    partition = TopicPartition(topics.requests, 0)
    for number, row in enumerate(churn_inputs(SENT)):
        producer.send(topics.requests, {"id": f"s{number}", "inputs": row}, key=f"s{number}".encode(), partition=0)
    producer.flush()
    group = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"{topics.requests}.group", enable_auto_commit=False)
    try:  # the group read up to COMMITTED, then stopped; retention deleted the log up to LOG_START meanwhile
        group.commit({partition: OffsetAndMetadata(COMMITTED, "", -1)})
    finally:
        group.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({partition: LOG_START})
    finally:
        admin.close()

    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client)
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: len(got.by_id()) >= SENT - LOG_START, 90, "the replies to what is left",
                      watch=worker)
    assert worker.stop() == 0, worker.log()
    assert sorted(reader.read(0.5).by_id()) == sorted(f"s{n}" for n in range(LOG_START, SENT))
    [skipped] = [e for e in worker.events() if e.get("event") == "requests_skipped"]
    assert (skipped["topic"], skipped["partition"]) == (topics.requests, 0)
    assert (skipped["at_offset"], skipped["reset_to"], skipped["skipped"]) == (COMMITTED, LOG_START, 20)
    [stopped] = [e for e in worker.events() if e.get("event") == "worker_stopped"]
    assert stopped["requests_skipped"] == LOG_START - COMMITTED  # streamscore_requests_skipped_total
    if kafka_client == "confluent":  # librdkafka's own line still passes
        assert any(e.get("logger") == "librdkafka" and "offset reset (at offset 10" in e.get("event", "")
                   for e in worker.events()), worker.log()
