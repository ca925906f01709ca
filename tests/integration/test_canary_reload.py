"""A canary turned off and back on by SIGHUP, under load, on real Kafka and Redis, on both clients.

While requests stream in, the configuration file loses its canary (and the canary's own entry), then gains
it back at another weight, each change read on a SIGHUP. Every request is answered once, ok; one sent before
a change was asked for is answered by the arm its id picks under the weight then served, one sent after the
change was switched in by the arm it picks under the new one (live alone while no canary is declared), and
one in flight meanwhile by either."""

from __future__ import annotations

import signal
import threading
import time

from tests.integration.kit import TopicReader, start_worker, wait_until
from worker.core.routes import arm_point

RATE_PER_S = 300
PHASE = 450  # requests sent in each of the three phases, at least
STABLE = """
max_batch_size = 16

[models.churn]
model = "churn"
"""
CANARY = """canary = "churn-next"
canary_weight = {weight}

[models.churn-next]
model = "churn"
version = "next"
"""


def configured(weight: float | None) -> str:
    return STABLE + (CANARY.format(weight=weight) if weight is not None else "")


def expected_arm(request_id: str, weight: float | None) -> str:
    """"next" for a request the canary answers at ``weight`` (None: no canary), else "live"."""
    return "next" if weight is not None and arm_point(request_id) >= 1 - weight else "live"


def test_a_canary_turned_off_and_on_again_by_sighup_under_load(bootstrap, redis_url, topics, producer, tmp_path,
                                                                 kafka_client):
    config = tmp_path / "worker.toml"
    config.write_text(configured(0.5))
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--config", str(config))
    sent: list[str] = []
    stop_sending = threading.Event()

    def send_all() -> None:
        while not stop_sending.is_set():
            request_id = f"c{len(sent)}"
            producer.send(topics.requests, {"id": request_id, "inputs": [0.25] * 16}, key=request_id.encode())
            sent.append(request_id)
            if len(sent) % 15 == 0:
                producer.flush()
                time.sleep(15 / RATE_PER_S)
        producer.flush()

    replies = TopicReader(bootstrap, topics.replies)
    sender = threading.Thread(target=send_all)
    sender.start()
    weights = [0.5, None, 0.2]
    phases: list[list[str]] = []  # each weight's requests: sent once it served, answered before the next change
    switched_at = 0  # the first request sent once the weight served
    try:
        for number, weight in enumerate(weights[1:], start=1):
            wait_until(lambda begun=switched_at: len(sent) >= begun + PHASE, 60, f"phase {number} sent")
            replies.read_until(lambda got, begun=switched_at: set(sent[begun:begun + PHASE]) <= got.by_id().keys(),
                               120, f"phase {number} answered", watch=worker)
            answered = replies.read().by_id().keys()
            phases.append([request_id for request_id in sent[switched_at:] if request_id in answered])
            switches = _switches(worker)
            config.write_text(configured(weight))
            worker.process.send_signal(signal.SIGHUP)
            wait_until(lambda before=switches: _switches(worker) > before, 60, f"change {number} switched in")
            switched_at = len(sent)
        wait_until(lambda: len(sent) >= switched_at + PHASE, 60, "the last phase sent")
    finally:
        stop_sending.set()
        sender.join()
    phases.append(sent[switched_at:])
    replies.read_until(lambda got: len(got.by_id()) >= len(sent), 90, "every request answered", watch=worker)
    assert worker.stop() == 0
    assert "model_version_refused" not in worker.log()  # a change of routing alone loads no model again
    by_id = replies.read(1.0).by_id()

    assert sorted(by_id) == sorted(sent)
    assert all(len(answers) == 1 for answers in by_id.values()), {k: v for k, v in by_id.items() if len(v) > 1}
    assert {(answers[0]["status"], answers[0]["model"]) for answers in by_id.values()} == {("ok", "churn")}
    arms = {request_id: "next" if answers[0]["model_version"] == "next" else "live"
            for request_id, answers in by_id.items()}
    for ids, weight in zip(phases, weights, strict=True):
        assert len(ids) >= PHASE, weight
        wrong = [i for i in ids if arms[i] != expected_arm(i, weight)]
        assert not wrong, (weight, wrong[:10])
    canary_share = [sum(arms[i] == "next" for i in ids) / len(ids) for ids in phases]
    assert canary_share[1] == 0 and 0.3 < canary_share[0] < 0.7 and 0.05 < canary_share[2] < 0.35, canary_share
    in_flight = len(sent) - sum(map(len, phases))
    print(f"\ncanary by SIGHUP ({kafka_client}): {len(sent)} requests, canary shares by phase "
          f"{[round(share, 2) for share in canary_share]}, {in_flight} in flight across the two changes, "
          "every one answered once")


def _switches(worker) -> int:
    """How many times the worker has switched in a new model table so far."""
    return sum(event.get("event") == "models_switched" for event in worker.events())
