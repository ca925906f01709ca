"""Several models in one worker, on real Kafka and Redis, on both clients: routing by the model field, the
model header, a model's own requests topic and the default, a canary split by the request id, unknown models
answered, and dedup across models (an id is answered once, whichever model answered it)."""

from __future__ import annotations

import random

import pytest

from producer.topics import create_topics
from tests.integration.faulty_model import expected_score
from tests.integration.kit import TopicReader, start_worker
from worker.core.routes import arm_point
from worker.models import load_model

CHURN = load_model("churn")
CANARY_WEIGHT = 0.3
CONFIG = """
default_model = "churn"
max_batch_size = 16

[models.churn]
model = "churn"
canary = "churn-next"
canary_weight = CANARY_WEIGHT

[models.churn-next]
model = "churn"
version = "next"
max_batch_size = 4

[models.faulty]
model = "tests.integration.faulty_model:faulty"
topic = "FAULTY_TOPIC"
"""
VALUES = [0.25] * 16


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_each_request_is_answered_once_by_the_model_it_names_or_the_default_split_by_its_id(
        bootstrap, redis_url, topics, producer, tmp_path, kafka_client, delivery):
    faulty_topic = f"{topics.requests}.faulty"
    create_topics(bootstrap, {faulty_topic: 2})
    config = tmp_path / "worker.toml"
    config.write_text(CONFIG.replace("CANARY_WEIGHT", str(CANARY_WEIGHT)).replace("FAULTY_TOPIC", faulty_topic))
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--config", str(config), "--delivery", delivery)
    rng = random.Random(7)
    default_ids = [f"d{i}" for i in range(200)]
    for request_id in default_ids:  # no model named: churn, or its canary for 30 % of the ids
        producer.send(topics.requests, {"id": request_id, "inputs": CHURN.sample_inputs(rng)},
                      key=request_id.encode())
    by_field = [f"f{i}" for i in range(60)]
    for request_id in by_field:
        producer.send(topics.requests, {"id": request_id, "model": "faulty", "inputs": {"values": VALUES}},
                      key=request_id.encode())
    by_header = [f"h{i}" for i in range(30)]
    for request_id in by_header:
        producer.send(topics.requests, {"id": request_id, "inputs": {"values": VALUES}}, key=request_id.encode(),
                      headers=[("model", b"faulty")])
    by_topic = [f"t{i}" for i in range(30)]
    for request_id in by_topic:  # no model named, on faulty's own topic
        producer.send(faulty_topic, {"id": request_id, "inputs": {"values": VALUES}}, key=request_id.encode())
    producer.send(faulty_topic, {"id": "t-churn", "model": "churn", "model_version": "next",
                                 "inputs": CHURN.sample_inputs(rng)}, key=b"t-churn")  # a name wins over a topic
    pinned = [f"v{i}" for i in range(20)]
    for request_id in pinned:  # a version named: that arm, whatever the id
        producer.send(topics.requests, {"id": request_id, "model": "churn", "model_version": "next",
                                        "inputs": CHURN.sample_inputs(rng)}, key=request_id.encode())
    unknown = ["u-name", "u-version"]
    producer.send(topics.requests, {"id": "u-name", "model": "text", "inputs": []}, key=b"u-name")
    producer.send(topics.requests, {"id": "u-version", "model": "faulty", "model_version": "9", "inputs": {}},
                  key=b"u-version")
    producer.flush()
    every = default_ids + by_field + by_header + by_topic + ["t-churn"] + pinned + unknown

    replies = TopicReader(bootstrap, topics.replies, read_committed=delivery == "exactly-once")
    replies.read_until(lambda got: len(got.by_id()) >= len(every), 120, "a reply to every request", watch=worker)
    # The same ids again, each now routed to another model by its field: answered already, so never again.
    for request_id in default_ids[:20] + by_field[:20]:
        producer.send(topics.requests, {"id": request_id, "model": "faulty" if request_id[0] == "d" else "churn",
                                        "inputs": {"values": VALUES}}, key=request_id.encode())
    producer.flush()
    replies.read(3.0)
    assert worker.process.poll() is None, worker.log()
    assert worker.stop() == 0
    by_id = replies.read(1.0).by_id()

    assert sorted(by_id) == sorted(every)
    assert all(len(answers) == 1 for answers in by_id.values()), {k: v for k, v in by_id.items() if len(v) > 1}
    reply = {request_id: answers[0] for request_id, answers in by_id.items()}
    live_version = CHURN.version
    for request_id in default_ids:  # the arm is the id's, on every worker: computed here the same way
        want = "next" if arm_point(request_id) >= 1 - CANARY_WEIGHT else live_version
        got = reply[request_id]
        assert (got["status"], got["model"], got["model_version"]) == ("ok", "churn", want), got
    canary_share = sum(reply[i]["model_version"] == "next" for i in default_ids) / len(default_ids)
    assert 0.15 < canary_share < 0.45
    score = expected_score(VALUES)
    for request_id in by_field + by_header + by_topic:
        got = reply[request_id]
        assert (got["status"], got["model"], got["model_version"]) == ("ok", "faulty", "1"), got
        assert got["outputs"]["score"] == pytest.approx(score, abs=1e-6)
    assert {(reply[i]["model"], reply[i]["model_version"]) for i in [*pinned, "t-churn"]} == {("churn", "next")}
    for request_id in unknown:
        error = reply[request_id]["error"]
        assert error["code"] == "unknown_model"
        assert f"churn ({live_version}, next), churn-next (next), faulty (1)" in error["message"]
