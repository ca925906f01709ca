"""The HTTP surface of a real worker: exact metrics for a known load, and probes through real state changes
(a model still warming up, a Redis outage on a Redis of the test's own, the shared broker stopped and started
again, --processes serving one port each)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.chaos.local_services import LocalServices
from tests.integration.gated_model import GATE_ENV, HOLD
from tests.integration.kit import TopicReader, start_worker, wait_until

INPUTS = [0.25] * 16
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port(count: int = 1) -> int:
    """A port such that it and the ``count - 1`` after it are free now."""
    while True:
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            if port + count - 1 > 65535:
                continue
            try:
                for other in range(port + 1, port + count):
                    with socket.socket() as taken:
                        taken.bind(("127.0.0.1", other))
            except OSError:
                continue
            return port


def get(port: int, path: str) -> tuple[int | None, bytes]:
    """(status, body), or (None, b"") while nothing answers on the port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return None, b""


def probe(port: int, path: str) -> tuple[int | None, dict]:
    status, body = get(port, path)
    return status, orjson.loads(body) if body else {}


def scrape(port: int) -> Samples:
    status, body = get(port, "/metrics")
    assert status == 200, status
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_metrics_count_a_known_load_exactly(bootstrap, redis_url, topics, producer, tmp_path):
    port = free_port()
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--http-port", str(port))
    run = uuid.uuid4().hex[:8]
    for i in range(200):
        producer.send(topics.requests, {"id": f"{run}-ok-{i}", "inputs": INPUTS})
    for i in range(3):
        producer.send(topics.requests, {"id": f"{run}-short-{i}", "inputs": [1, 2]})  # an error reply each
    for _ in range(2):
        producer.send(topics.requests, b"\x00 no id anywhere")  # a dead letter each
    producer.flush()
    replies, dead = TopicReader(bootstrap, topics.replies), TopicReader(bootstrap, topics.dlq)
    try:
        answered = replies.read_until(lambda got: len(got.records) >= 203, 120, "203 replies", watch=worker)
        dead.read_until(lambda got: len(got.records) >= 2, 30, "2 dead letters", watch=worker)
    finally:
        replies.close()
        dead.close()
    for i in range(5):
        producer.send(topics.requests, {"id": f"{run}-ok-{i}", "inputs": INPUTS})  # answered already
    producer.flush()
    wait_until(lambda: (value(scrape(port), "streamscore_duplicates_total"),
                        value(scrape(port), "streamscore_requests_total")) == (5, 210), 60, "5 duplicates counted")
    wait_until(lambda: [v for (name, _), v in scrape(port).items() if name == "streamscore_consumer_lag"]
               == [0, 0, 0, 0], 30, "no lag on any of the 4 partitions")

    m = scrape(port)
    assert value(m, "streamscore_requests_total") == 210
    assert [value(m, "streamscore_replies_total", status=s) for s in ("ok", "error", "expired")] == [200, 3, 0]
    assert value(m, "streamscore_dead_letters_total") == 2
    assert value(m, "streamscore_duplicates_total") == 5
    assert value(m, "streamscore_handed_over_total") == 0
    assert value(m, "streamscore_batch_size_sum") == 200  # every scored request in one batch; refusals in none
    assert value(m, "streamscore_batch_size_count") == value(m, "streamscore_batch_size_bucket", le="+Inf") >= 4
    for stage in ("queue_wait", "batch_wait", "compute"):
        assert value(m, "streamscore_stage_seconds_count", stage=stage) == 200
    assert value(m, "streamscore_rebalances_total") >= 1
    assert [value(m, "streamscore_paused", reason=r) for r in ("dedup_outage", "backlog")] == [0, 0]
    version = answered.values()[0]["model_version"]
    assert value(m, "streamscore_model_info", entry="churn", model="churn", version=version, device="cpu") == 1
    assert value(m, "streamscore_model_replies_total", model="churn", version=version, status="ok") == 200
    assert value(m, "streamscore_model_scored_total", entry="churn") == 200
    status, body = probe(port, "/healthz")
    assert status == 200 and body["status"] == "ok"
    assert probe(port, "/readyz")[0] == 200
    worker.stop()


class OwnRedis:
    """A redis-server of this test's own on a free loopback port, stopped and started again at will."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self._workdir = workdir
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self._workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_until(self._answers, 10, f"redis-server on port {self.port}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)

    def _answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.RedisError:
            return False


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (deploy/local/services.sh installs it)")
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def test_ready_only_once_warm_and_not_while_redis_is_down(bootstrap, topics, producer, own_redis, tmp_path,
                                                          monkeypatch):
    gate = tmp_path / "warmup-gate"
    monkeypatch.setenv(GATE_ENV, str(gate))  # the worker's first batch (warmup) waits for this file
    port = free_port()
    worker = start_worker(bootstrap, own_redis.url, topics, tmp_path, "--http-port", str(port),
                          "--model", "tests.integration.gated_model:gated_linear")
    wait_until(lambda: probe(port, "/healthz")[0] is not None, 60, "the HTTP surface, before warmup ends")
    assert probe(port, "/healthz") == (200, {"status": "starting"})
    status, body = probe(port, "/readyz")
    assert status == 503 and "the models are not loaded and warmed up yet" in body["reasons"]
    assert not [name for name, _ in scrape(port) if name == "streamscore_model_info"]

    gate.touch()
    wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "ready once warm and in the group")

    own_redis.stop()
    producer.send(topics.requests, {"id": "during-the-outage", "inputs": INPUTS})
    producer.flush()
    wait_until(lambda: probe(port, "/readyz")[0] == 503, 60, "not ready while Redis is down")
    assert probe(port, "/readyz")[1]["reasons"] == ["consumption paused: the dedup store (Redis) is away or full"]
    assert value(scrape(port), "streamscore_paused", reason="dedup_outage") == 1
    assert probe(port, "/healthz")[0] == 200  # paused, not stuck: the loop goes on polling

    own_redis.start()
    wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "ready again once Redis answers")
    replies = TopicReader(bootstrap, topics.replies)
    try:
        landed = replies.read_until(lambda got: "during-the-outage" in got.by_id(), 60, "the held request's reply",
                                    watch=worker)
    finally:
        replies.close()
    assert landed.by_id()["during-the-outage"][0]["status"] == "ok"
    worker.stop()


def test_not_ready_while_the_brokers_do_not_answer_and_ready_again_once_they_do(bootstrap, redis_url, topics,
                                                                               producer, tmp_path, kafka_client):
    """The shared broker stopped and started again (as the chaos suite does): the worker keeps its partitions and
    polls on meanwhile, so only the broker watch can tell readiness."""
    services = LocalServices(bootstrap, redis_url)
    if (why := services.not_controllable()) is not None:
        pytest.skip(why)
    port = free_port()
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--http-port", str(port), "--kafka-client",
                          kafka_client, "--liveness-timeout-s", "8")
    wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "ready once warm and in the group")
    services.stop_kafka()
    try:
        wait_until(lambda: probe(port, "/readyz")[0] == 503 and any(
            "the Kafka brokers have not answered" in reason for reason in probe(port, "/readyz")[1]["reasons"]),
                   60, "not ready while the brokers are away")
        wait_until(lambda: "brokers_not_answering" in worker.log(), 30, "the silence logged")
    finally:
        services.start_kafka()
    wait_until(lambda: probe(port, "/readyz")[0] == 200, 90, "ready again once the brokers answer")
    assert "brokers_answering" in [event["event"] for event in worker.events()]
    producer.send(topics.requests, {"id": "after-the-outage", "inputs": INPUTS})
    producer.flush()
    replies = TopicReader(bootstrap, topics.replies)
    try:
        replies.read_until(lambda got: "after-the-outage" in got.by_id(), 60, "a reply after the outage",
                           watch=worker)
    finally:
        replies.close()
    worker.stop()


def test_with_processes_each_child_serves_on_its_own_port(bootstrap, redis_url, topics, tmp_path):
    port = free_port(2)
    supervisor = start_worker(bootstrap, redis_url, topics, tmp_path, "--processes", "2", "--http-port", str(port),
                              name="supervisor")
    for child_port in (port, port + 1):
        wait_until(lambda p=child_port: probe(p, "/readyz")[0] == 200, 90, f"a ready child on port {child_port}")
    assert supervisor.stop() == 0


def start_held(bootstrap, redis_url, topics, producer, tmp_path, monkeypatch, *extra):
    """A worker of held_linear, ready, and a HOLD request sent: its batch waits for the returned gate file."""
    gate = tmp_path / "batch-gate"
    monkeypatch.setenv(GATE_ENV, str(gate))
    port = free_port()
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--http-port", str(port),
                          "--liveness-timeout-s", "2", *extra, "--model", "tests.integration.gated_model:held_linear")
    wait_until(lambda: probe(port, "/readyz")[0] == 200, 90, "ready")
    producer.send(topics.requests, {"id": "held", "inputs": [HOLD] + [0.5] * 15})
    producer.flush()
    return worker, port, gate


def assert_held_answered_and_stopped(bootstrap, topics, worker):
    replies = TopicReader(bootstrap, topics.replies)
    try:
        landed = replies.read_until(lambda got: "held" in got.by_id(), 60, "the held request's reply", watch=worker)
    finally:
        replies.close()
    assert landed.by_id()["held"][0]["status"] == "ok"
    assert worker.stop() == 0


def test_a_held_loop_fails_liveness_and_recovers(bootstrap, redis_url, topics, producer, tmp_path, monkeypatch):
    worker, port, gate = start_held(bootstrap, redis_url, topics, producer, tmp_path, monkeypatch)
    wait_until(lambda: probe(port, "/healthz")[0] == 503, 30, "/healthz failing while the loop is held")
    # The record held in hand can trip the no-progress rule a moment before the poll age passes the timeout
    # too (the loop polled a few times between taking the record and the held batch); then the poll age rule.
    status, body = probe(port, "/healthz")
    assert body["status"] == "stuck" and ("the loop last polled" in body["reasons"][0]
                                          or "none finished" in body["reasons"][0]), body
    wait_until(lambda: "the loop last polled" in probe(port, "/healthz")[1].get("reasons", [""])[0], 10,
               "/healthz naming the loop's last poll")
    gate.touch()
    wait_until(lambda: probe(port, "/healthz")[0] == 200, 30, "/healthz passing once the loop goes on")
    assert_held_answered_and_stopped(bootstrap, topics, worker)


def test_a_batch_hung_on_the_model_thread_fails_liveness_while_the_loop_polls(bootstrap, redis_url, topics, producer,
                                                                             tmp_path, monkeypatch):
    worker, port, gate = start_held(bootstrap, redis_url, topics, producer, tmp_path, monkeypatch,
                                    "--model-thread", "on")  # the batch waits on the model thread
    wait_until(lambda: probe(port, "/healthz")[0] == 503, 30, "/healthz failing while the batch hangs")
    status, body = probe(port, "/healthz")
    assert body["status"] == "stuck" and "none finished" in body["reasons"][0], body  # not the poll age:
    assert body["last_poll_s_ago"] < 2  # the loop goes on polling beside the hung model call
    gate.touch()
    wait_until(lambda: probe(port, "/healthz")[0] == 200, 30, "/healthz passing once the batch returns")
    assert_held_answered_and_stopped(bootstrap, topics, worker)
