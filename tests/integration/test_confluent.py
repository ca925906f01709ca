"""The whole pipeline over the second Kafka transport (``--kafka-client confluent``), on a real broker and Redis:
the guarantees of tests/integration/test_pipeline.py and test_exactly_once.py, checked on what landed."""

from __future__ import annotations

import pytest
from kafka.partitioner.default import murmur2

from tests.integration.gated_model import GATE_ENV, HOLD
from tests.integration.kit import (
    IMPORT_TIMES,
    TopicReader,
    imported_packages,
    start_worker,
    stop_while_sending,
    wait_until,
)
from tests.integration.test_pipeline import CHURN, churn_inputs
from worker.models.runner import TorchRunner

pytest.importorskip("confluent_kafka")

CONFLUENT = ("--kafka-client", "confluent")


def stopped_events(*workers):
    return [e for w in workers for e in w.events() if e.get("event") == "worker_stopped"]


def test_every_request_gets_one_correct_reply_and_a_duplicated_id_is_scored_once(bootstrap, redis_url, topics,
                                                                                 producer, tmp_path):
    inputs = churn_inputs(500)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *CONFLUENT, "--max-batch-size", "32",
                          "--max-wait-ms", "20", env=IMPORT_TIMES)
    producer.send_requests(topics.requests, "c", inputs)
    for partition_key in (b"a", b"b", b"c"):  # three more records with an id already sent, likely on other partitions
        producer.send(topics.requests, {"id": "c7", "inputs": inputs[7]}, key=partition_key)
    producer.send(topics.requests, {"id": "marker", "inputs": inputs[0]})
    producer.flush()
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: len(got.by_id()) >= 501, 90, "501 answered ids", watch=worker)
    assert worker.stop() == 0, worker.log()
    by_id = reader.read(1.0).by_id()

    assert sorted(by_id) == sorted([f"c{i}" for i in range(500)] + ["marker"])
    assert max(len(replies) for replies in by_id.values()) == 1
    # Each reply on its key's partition as the Java client and kafka-python pick it (murmur2), not librdkafka's.
    assert all(r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 4 for r in reader.landed.records)  # 4: tests/conftest.py
    runner = TorchRunner(CHURN, "cpu", 64)  # the same model, scored here, offline
    offline = runner.run([runner.prepare(row) for row in inputs])
    for i, outcome in enumerate(offline):
        reply = by_id[f"c{i}"][0]
        assert (reply["status"], reply["model"]) == ("ok", "churn")
        assert abs(reply["outputs"]["churn_probability"] - outcome.output["churn_probability"]) < 1e-6
    (stopped,) = stopped_events(worker)
    assert stopped["replied_ok"] == 501 and stopped["duplicates"] >= 3
    assert any(e.get("event") == "partitions_assigned" for e in worker.events())
    loaded = imported_packages(worker.log())  # start checks, source, sink: nothing of kafka-python
    assert {"worker", "confluent_kafka"} <= loaded and "kafka" not in loaded


def test_sigterm_mid_stream_loses_nothing_and_repeats_nothing(bootstrap, redis_url, topics, producer, tmp_path):
    total = 3000
    inputs = churn_inputs(total, seed=3)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *CONFLUENT, "--max-batch-size", "16",
                          "--max-wait-ms", "5")
    reader = TopicReader(bootstrap, topics.replies)
    producer.send_requests(topics.requests, "s", inputs[:total // 2])
    reader.read_until(lambda got: len(got.records) >= 200, 60, "the worker to be mid-stream", watch=worker)
    code = stop_while_sending(worker, producer, topics.requests, "s", inputs[total // 2:], total // 2)
    assert code == 0, worker.log()
    answered_by_first = len(reader.read(0.5).by_id())
    assert answered_by_first < total, "the first worker finished everything: SIGTERM was not mid-stream"

    successor = start_worker(bootstrap, redis_url, topics, tmp_path, *CONFLUENT, name="successor")
    reader.read_until(lambda got: len(got.by_id()) >= total, 90, f"{total} answered ids", watch=successor)
    assert successor.stop() == 0
    by_id = reader.read(0.5).by_id()
    assert sorted(by_id) == sorted(f"s{i}" for i in range(total))
    assert max(len(replies) for replies in by_id.values()) == 1, "a clean stop must not cause duplicate replies"
    first_stopped = stopped_events(worker)[0]
    assert first_stopped["unfinished"] == 0  # the drain answered and committed everything it had taken


@pytest.mark.parametrize("group", [
    ("--assignor", "range"),
    ("--assignor", "cooperative-sticky"),
    ("--kafka-group-protocol", "consumer"),  # KIP-848: the broker assigns
], ids=["range", "cooperative-sticky", "consumer-protocol"])
def test_a_second_worker_joining_mid_batch_loses_nothing(bootstrap, redis_url, topics, producer, tmp_path, group):
    """A rebalance while a worker holds unscored requests: no request may be lost or scored twice."""
    slow_batches = (*CONFLUENT, *group, "--max-batch-size", "1000", "--max-wait-ms", "4000",
                    "--stats-interval-s", "0.2")
    first = start_worker(bootstrap, redis_url, topics, tmp_path, *slow_batches, name="first")
    producer.send_requests(topics.requests, "j", churn_inputs(200))
    wait_until(lambda: any(e.get("consumed", 0) >= 200 for e in first.events()), 60,
               "the first worker to hold every request")
    second = start_worker(bootstrap, redis_url, topics, tmp_path, *slow_batches, name="second")
    wait_until(lambda: any(e.get("event") == "partitions_assigned" and e["partitions"] for e in second.events()),
               60, "the second worker to get partitions")
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: len(got.by_id()) >= 200, 90, "200 answered ids", watch=first)
    assert first.stop() == 0 and second.stop() == 0
    by_id = reader.read(0.5).by_id()
    assert sorted(by_id) == sorted(f"j{i}" for i in range(200))
    assert max(len(replies) for replies in by_id.values()) == 1
    assert sum(e["replied_ok"] for e in stopped_events(first, second)) == 200  # each scored once
    assert any(e.get("event") == "partitions_revoked" for e in first.events())  # there was a handover


def test_exactly_once_a_killed_worker_leaves_no_duplicate_for_a_read_committed_reader(
        bootstrap, redis_url, topics, producer, tmp_path):
    exactly_once = (*CONFLUENT, "--delivery", "exactly-once", "--max-batch-size", "16", "--max-wait-ms", "5",
                    "--session-timeout-ms", "6000")  # the replacement waits for the killed worker's session to end
    committed = TopicReader(bootstrap, topics.replies, read_committed=True)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *exactly_once, name="first")
    producer.send_requests(topics.requests, "e", churn_inputs(2000, seed=5))
    committed.read_until(lambda got: len(got.records) >= 200, 90, "200 committed replies", watch=worker)
    worker.kill()  # mid-stream: its open transaction is aborted by the next instance
    replacement = start_worker(bootstrap, redis_url, topics, tmp_path, *exactly_once, name="second")
    producer.send_requests(topics.requests, "e", churn_inputs(500, seed=6), 2000)
    committed.read_until(lambda got: len(got.by_id()) >= 2500, 120, "2,500 committed replies", watch=replacement)
    assert replacement.stop() == 0
    by_id = committed.read(1.0).by_id()
    assert sorted(by_id) == sorted(f"e{i}" for i in range(2500))
    assert [i for i, replies in by_id.items() if len(replies) > 1] == []
    assert {"exactly_once"} <= {e["event"] for e in replacement.events()}


def group_is_empty(admin, group):
    return not admin.describe_consumer_groups([group])[group].result(10).members


@pytest.mark.parametrize("group_protocol", [("--session-timeout-ms", "6000"), ("--kafka-group-protocol", "consumer")],
                         ids=["classic", "consumer-protocol"])
def test_a_batch_that_outlives_max_poll_interval_sends_no_reply_for_the_partitions_it_lost(
        bootstrap, redis_url, topics, producer, tmp_path, monkeypatch, group_protocol):
    """librdkafka leaves the group on its own thread once max.poll.interval.ms passes without a poll; the
    worker must notice before it sends the held batch's replies, and answer the records again, once."""
    gate = tmp_path / "batch-gate"
    monkeypatch.setenv(GATE_ENV, str(gate))  # a batch with a HOLD request waits for this file
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *CONFLUENT, *group_protocol, "--model",
                          "tests.integration.gated_model:held_linear", "--max-poll-interval-ms", "7000",
                          "--max-wait-ms", "200")
    wait_until(lambda: any(e.get("event") == "partitions_assigned" for e in worker.events()), 60, "an assignment")
    for i in range(8):
        producer.send(topics.requests, {"id": f"h{i}", "inputs": [HOLD if i == 0 else 0.5] + [0.5] * 15},
                      key=f"h{i}".encode())
    producer.flush()
    # The loop is held in the batch until librdkafka has left the group for it.
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its requests die with it
    wait_until(lambda: group_is_empty(admin, f"{topics.requests}.group"), 60, "the held worker to leave its group",
               interval_s=0.5)
    gate.touch()
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: len(got.by_id()) >= 8, 90, "8 answered ids", watch=worker)
    assert worker.stop() == 0, worker.log()
    by_id = reader.read(1.0).by_id()
    assert sorted(by_id) == [f"h{i}" for i in range(8)]
    assert max(len(replies) for replies in by_id.values()) == 1
    assert any(e.get("event") == "membership_lost_during_batch" for e in worker.events()), worker.log()
    # By default on CPU, such a batch moves the model to a thread of its own: the loop polls on while it runs.
    assert [e["batch"] for e in worker.events() if e.get("event") == "model_thread_started"] == [8], worker.log()
