"""A memory budget on real Kafka and Redis, on both clients: three models, room for two. Requests for all three
arrive mixed, so a model is loaded on first use while another waits for room, and the least recently used idle
one is let go; every request is answered once, by the model it named, and a duplicate sent after its answer gets
none."""

from __future__ import annotations

import random

import pytest

from tests.integration.faulty_model import expected_score
from tests.integration.kit import TopicReader, start_worker
from worker.models import load_model

CHURN = load_model("churn")
CONFIG = """
max_loaded_models = 2
max_batch_size = 8

[models.churn]
model = "churn"

[models.churn-b]
model = "churn"
version = "b"

[models.faulty]
model = "tests.integration.faulty_model:faulty"
"""
VALUES = [0.25] * 16
VERSIONS = {"churn": CHURN.version, "churn-b": "b", "faulty": "1"}


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_three_models_in_room_for_two_each_request_answered_once_by_its_model(
        bootstrap, redis_url, topics, producer, tmp_path, kafka_client, delivery):
    config = tmp_path / "worker.toml"
    config.write_text(CONFIG)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--config", str(config), "--delivery", delivery)
    rng = random.Random(11)
    asked: dict[str, str] = {}
    for wave in range(3):  # each wave mixes the three models: one of them always waits for room
        for i in range(40):
            model = rng.choice(list(VERSIONS))
            request_id = f"w{wave}-{i}"
            inputs = {"values": VALUES} if model == "faulty" else CHURN.sample_inputs(rng)
            producer.send(topics.requests, {"id": request_id, "model": model, "inputs": inputs},
                          key=request_id.encode())
            asked[request_id] = model
        producer.flush()
    replies = TopicReader(bootstrap, topics.replies, read_committed=delivery == "exactly-once")
    replies.read_until(lambda got: len(got.by_id()) >= len(asked), 180, "a reply to every request", watch=worker)
    for request_id in list(asked)[:15]:  # answered already: never again, whichever model is loaded now
        producer.send(topics.requests, {"id": request_id, "model": "faulty", "inputs": {"values": VALUES}},
                      key=request_id.encode())
    producer.flush()
    replies.read(3.0)
    assert worker.process.poll() is None, worker.log()
    assert worker.stop() == 0
    by_id = replies.read(1.0).by_id()

    assert sorted(by_id) == sorted(asked)
    assert all(len(answers) == 1 for answers in by_id.values()), {k: v for k, v in by_id.items() if len(v) > 1}
    for request_id, model in asked.items():
        got = by_id[request_id][0]
        assert (got["status"], got["model"], got["model_version"]) == ("ok", model, VERSIONS[model]), got
        if model == "faulty":
            assert got["outputs"]["score"] == pytest.approx(expected_score(VALUES), abs=1e-6)
    events = worker.events()
    loads = [e["model"] for e in events if e.get("event") == "model_loaded_on_first_use"]
    let_go = [e["model"] for e in events if e.get("event") == "model_let_go"]
    assert set(loads) == set(VERSIONS) and let_go, (loads, let_go)
    assert len(loads) - len(let_go) <= 2  # never more than two in memory
