"""New model versions without a restart, under load, on real Kafka and Redis, on both clients: a model file
replaced while requests stream in is switched in between two batches (every request answered once, by the
version its reply names, no partition going back to the old version), a broken file is refused while the
version before serves on, and a SIGHUP adds a model declared in the configuration file meanwhile."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from tests.integration.kit import TopicReader, start_worker, wait_until
from tests.unit.test_model_loading import Net

REQUESTS = 2_400
RATE_PER_S = 400
CONFIG = """
model_watch_s = 0.2
max_batch_size = 16

[models.net]
model = "net.pt"
model_config = "net.json"
"""
EXTRA = """
[models.extra]
model = "churn"
"""


def write_version(path: Path, seed: int) -> torch.nn.Module:
    """A TorchScript file of Net with weights from ``seed``, written whole at once (as a deploy would)."""
    torch.manual_seed(seed)
    net = Net(4).eval()
    partial = path.with_name(path.name + ".partial")
    torch.jit.script(net).save(str(partial))
    os.replace(partial, path)
    return net


def test_a_new_file_is_switched_in_under_load_and_every_request_is_answered_once_by_the_version_it_names(
        bootstrap, redis_url, topics, producer, tmp_path, kafka_client):
    nets = {1: write_version(tmp_path / "net.pt", seed=1)}
    (tmp_path / "net.json").write_text(json.dumps({"inputs": {"kind": "vector", "length": 8},
                                                   "outputs": {"names": ["low", "high"]}}))
    config = tmp_path / "worker.toml"
    config.write_text(CONFIG)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--config", str(config))
    rng = random.Random(3)
    rows = {f"s{i}": [rng.random() for _ in range(8)] for i in range(REQUESTS)}
    switched = threading.Event()

    def send_all() -> None:
        for number, (request_id, row) in enumerate(rows.items()):
            if number == 2 * REQUESTS // 3:  # the last third only once version 2 serves: on a busy machine its
                switched.wait(60)  # load can take longer than the first two thirds take to stream in
            producer.send(topics.requests, {"id": request_id, "inputs": row}, key=request_id.encode())
            if number % 20 == 19:
                producer.flush()
                time.sleep(20 / RATE_PER_S)
        producer.flush()

    replies = TopicReader(bootstrap, topics.replies)
    sender = threading.Thread(target=send_all)
    sender.start()
    replies.read_until(lambda got: len(got.by_id()) >= REQUESTS // 3, 60, "a third answered", watch=worker)
    nets[2] = write_version(tmp_path / "net.pt", seed=2)  # while requests stream in
    wait_until(lambda: any(e.get("event") == "model_version_switched" and e.get("model") == "net"
                           for e in worker.events()), 60, "version 2 switched in")
    switched.set()
    replies.read_until(lambda got: len(got.by_id()) >= 2 * REQUESTS // 3, 60, "two thirds answered",
                             watch=worker)
    (tmp_path / "net.pt").write_bytes(b"not a TorchScript file")  # a broken deploy: refused, version 2 serves on
    wait_until(lambda: "model_version_refused" in worker.log(), 30, "the broken file refused")
    sender.join()
    replies.read_until(lambda got: len(got.by_id()) >= REQUESTS, 90, "every request answered", watch=worker)

    config.write_text(CONFIG + EXTRA)  # a model more, read on SIGHUP
    worker.process.send_signal(signal.SIGHUP)
    wait_until(lambda: any(e.get("event") == "model_version_switched" and e.get("model") == "extra"
                           for e in worker.events()), 60, "the new model switched in")
    for number in range(10):
        producer.send(topics.requests, {"id": f"x{number}", "model": "extra", "inputs": [0.5] * 16},
                      key=f"x{number}".encode())
    producer.flush()
    replies.read_until(lambda got: len(got.by_id()) >= REQUESTS + 10, 60, "the new model's replies", watch=worker)
    assert worker.process.poll() is None, worker.log()
    assert worker.stop() == 0
    landed = replies.read(1.0)
    by_id = landed.by_id()

    assert len(by_id) == REQUESTS + 10
    assert all(len(answers) == 1 for answers in by_id.values()), {k: v for k, v in by_id.items() if len(v) > 1}
    versions = list(dict.fromkeys(by_id[f"s{i}"][0]["model_version"] for i in range(REQUESTS)))
    assert len(versions) == 2, versions  # the first file's, then the second's: the broken one never answered
    for request_id, row in rows.items():
        reply = by_id[request_id][0]
        net = nets[1 + versions.index(reply["model_version"])]
        low, high = net(torch.tensor([row])).tolist()[0]
        assert reply["status"] == "ok" and reply["outputs"] == pytest.approx({"low": low, "high": high}, abs=1e-5)
    for partition in range(4):  # each partition, in offset order: the old version, then the new one, never back
        in_order = sorted((int(dict(r.headers)["source-offset"]), r.value) for r in landed.records
                          if dict(r.headers)["source-partition"] == str(partition).encode())
        seen = [json.loads(value)["model_version"] for _, value in in_order if b'"model":"net"' in value]
        assert seen == sorted(seen, key=versions.index), partition
    assert {(by_id[f"x{n}"][0]["model"], by_id[f"x{n}"][0]["status"]) for n in range(10)} == {("extra", "ok")}
    print(f"\nswitch under load ({kafka_client}): {REQUESTS} requests at {RATE_PER_S}/s, "
          f"{sum(by_id[f's{i}'][0]['model_version'] == versions[0] for i in range(REQUESTS))} by the first version, "
          f"{sum(by_id[f's{i}'][0]['model_version'] == versions[1] for i in range(REQUESTS))} by the second; "
          f"every one answered once")
