"""Shadow scoring on real Kafka and Redis, on both clients: a sample of the live requests, chosen by a hash of
their ids, is scored by the candidate too, each pair lands on the shadow topic with both answers, the live
replies are the live model's alone, and ``python -m worker compare`` reads the pairs back."""

from __future__ import annotations

import json
import random

import orjson
import pytest
import torch

from producer.topics import create_topics
from tests.integration.kit import TopicReader, start_worker
from tests.integration.test_model_versions import write_version
from worker.cli import main
from worker.stream.shadow import sampled_point

REQUESTS = 400
FRACTION = 0.5
CONFIG = f"""
max_batch_size = 16

[models.net]
model = "live.pt"
model_config = "net.json"
shadow = "candidate"
shadow_fraction = {FRACTION}

[models.candidate]
model = "candidate.pt"
model_config = "net.json"
"""


def test_a_sample_of_the_requests_is_scored_by_the_candidate_too_and_compare_reads_the_pairs(
        bootstrap, redis_url, topics, producer, tmp_path, kafka_client, capsys):
    live = write_version(tmp_path / "live.pt", seed=1)
    candidate = write_version(tmp_path / "candidate.pt", seed=2)
    (tmp_path / "net.json").write_text(json.dumps({"inputs": {"kind": "vector", "length": 8},
                                                   "outputs": {"names": ["low", "high"]}}))
    (tmp_path / "worker.toml").write_text(CONFIG)
    shadow_topic = f"{topics.requests}.shadow"
    create_topics(bootstrap, {shadow_topic: 2})
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--config", str(tmp_path / "worker.toml"))
    rng = random.Random(5)
    rows = {f"s{i}": [rng.random() for _ in range(8)] for i in range(REQUESTS)}
    for request_id, row in rows.items():
        producer.send(topics.requests, {"id": request_id, "inputs": row}, key=request_id.encode())
    producer.flush()
    sampled = {request_id for request_id in rows if sampled_point(request_id) < FRACTION}

    replies = TopicReader(bootstrap, topics.replies)
    replies.read_until(lambda got: len(got.by_id()) >= REQUESTS, 90, "every live reply", watch=worker)
    shadows = TopicReader(bootstrap, shadow_topic)
    shadows.read_until(lambda got: len(got.by_id()) >= len(sampled), 60, "every sampled pair", watch=worker)
    assert worker.stop() == 0
    by_id, pairs = replies.read(0.5).by_id(), shadows.read(0.5).by_id()

    assert len(by_id) == REQUESTS and all(len(answers) == 1 for answers in by_id.values())
    assert set(pairs) == sampled and all(len(records) == 1 for records in pairs.values())
    live_version = by_id["s0"][0]["model_version"]
    for request_id, (pair,) in pairs.items():
        expect_live = dict(zip(["low", "high"], live(torch.tensor([rows[request_id]])).tolist()[0], strict=True))
        expect_candidate = dict(zip(["low", "high"], candidate(torch.tensor([rows[request_id]])).tolist()[0],
                                    strict=True))
        assert pair["model"] == "net" and pair["live"]["version"] == live_version
        assert pair["candidate"]["version"] != live_version
        assert pair["live"]["outputs"] == by_id[request_id][0]["outputs"]  # the very answer sent
        assert pair["live"]["outputs"] == pytest.approx(expect_live, abs=1e-5)
        assert pair["candidate"]["outputs"] == pytest.approx(expect_candidate, abs=1e-5)
    assert {reply["model_version"] for (reply,) in by_id.values()} == {live_version}  # the candidate never answers

    code = main(["compare", "--no-progress", "--json", "--bootstrap-servers", bootstrap, "--shadow-topic",
                 shadow_topic])
    report = orjson.loads(capsys.readouterr().out)
    assert code == 0 and report["pairs"] == len(sampled)
    (net,) = report["models"]
    assert (net["model"], net["pairs"]) == ("net", len(sampled))
