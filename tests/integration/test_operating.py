"""Operating the worker on real Kafka and Redis: a SIGTERM whose drain outlives --shutdown-timeout-s, a
--processes child killed with SIGKILL, a static member killed and started again, and a log reader that goes
away."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.kit import REPO, TopicReader, start_worker, wait_until
from tests.integration.test_pipeline import churn_inputs

SLOW_MODEL = ("--model", "tests.chaos.slow_model:stalling_linear", "--model-thread", "on")


def test_sigterm_mid_batch_exits_at_the_deadline_and_a_successor_answers_the_rest(
        bootstrap, redis_url, topics, producer, tmp_path, monkeypatch):
    trigger = tmp_path / "stall-trigger"
    monkeypatch.setenv("CHAOS_STALL_TRIGGER", str(trigger))  # read by tests.chaos.slow_model
    monkeypatch.setenv("CHAOS_STALL_S", "60")
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *SLOW_MODEL, "--shutdown-timeout-s", "2",
                          "--max-batch-size", "8", "--max-wait-ms", "5", name="slow")
    reader = TopicReader(bootstrap, topics.replies)
    rows = churn_inputs(40)
    producer.send_requests(topics.requests, "d", rows[:8])
    reader.read_until(lambda got: len(got.by_id()) >= 8, 90, "the first 8 replies", watch=worker)
    trigger.touch()  # the next batch stalls for 60 s
    producer.send_requests(topics.requests, "d", rows[8:], 8)
    wait_until(lambda: any(tmp_path.glob("stall-trigger.taken-by-*")), 60, "a batch to stall")

    sent_at = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    code = worker.process.wait(timeout=30)
    took_s = time.monotonic() - sent_at
    assert code == 4, worker.log()
    assert took_s < 2 + 3, f"exited {took_s:.1f} s after SIGTERM"  # the deadline, plus process teardown
    (stopped,) = [e for e in worker.events() if e.get("event") == "worker_stopped"]
    assert stopped["deadline_cut"] and stopped["unfinished"] >= 1
    answered_by_first = set(reader.read(0.5).by_id())
    assert len(answered_by_first) < 40

    successor = start_worker(bootstrap, redis_url, topics, tmp_path, *SLOW_MODEL, name="successor")
    reader.read_until(lambda got: len(got.by_id()) >= 40, 90, "all 40 answered", watch=successor)
    assert successor.stop() == 0
    assert sorted(reader.read(0.5).by_id()) == sorted(f"d{i}" for i in range(40))  # no loss


def test_a_child_killed_with_sigkill_is_restarted_and_replies_keep_coming(bootstrap, redis_url, topics, producer,
                                                                          tmp_path):
    # The broker's least session timeout: the dead child's partitions move within seconds, not 45.
    supervisor = start_worker(bootstrap, redis_url, topics, tmp_path, "--processes", "2",
                              "--session-timeout-ms", "6000", name="supervisor")

    def events(name: str) -> list[dict]:
        return [e for e in supervisor.events() if e.get("event") == name]

    wait_until(lambda: len({e["client_id"] for e in events("partitions_assigned") if e["partitions"]}) == 2,
               90, "both processes to own partitions")
    (started,) = events("processes_started")
    victim = started["pids"][0]
    reader = TopicReader(bootstrap, topics.replies)
    rows = churn_inputs(400)
    producer.send_requests(topics.requests, "k", rows[:200])
    reader.read_until(lambda got: len(got.by_id()) >= 200, 90, "200 replies", watch=supervisor)

    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: events("process_restarted"), 30, "the supervisor to start a new child")
    (exited,) = events("process_exited")
    assert (exited["index"], exited["exit_code"]) == (0, -signal.SIGKILL)
    (restarted,) = events("process_restarted")
    assert restarted["index"] == 0 and restarted["pid"] not in started["pids"]
    producer.send_requests(topics.requests, "k", rows[200:], 200)
    reader.read_until(lambda got: len(got.by_id()) >= 400, 120, "400 replies", watch=supervisor)

    def new_child_owns_partitions() -> bool:
        log = supervisor.events()
        since = next(i for i, e in enumerate(log) if e.get("event") == "process_restarted")
        return any(e.get("event") == "partitions_assigned" and e["partitions"] and e["client_id"].endswith("-0")
                   for e in log[since:])

    wait_until(new_child_owns_partitions, 60, "the new child to own partitions")
    assert supervisor.stop() == 0
    assert sorted(reader.read(0.5).by_id()) == sorted(f"k{i}" for i in range(400))


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_static_member_killed_and_started_again_answers_before_its_session_timeout(
        bootstrap, redis_url, topics, producer, tmp_path, client):
    # A dynamic member started again waits for the killed one to time out (45 s); a static one takes its place.
    static = ("--kafka-client", client, "--group-instance-id", "static-0", "--session-timeout-ms", "45000")
    first = start_worker(bootstrap, redis_url, topics, tmp_path, *static, name="first")
    reader = TopicReader(bootstrap, topics.replies)
    rows = churn_inputs(200)
    producer.send_requests(topics.requests, "s", rows[:100])
    reader.read_until(lambda got: len(got.by_id()) >= 100, 90, "100 replies", watch=first)
    first.kill()

    started = time.monotonic()
    second = start_worker(bootstrap, redis_url, topics, tmp_path, *static, name="second")
    producer.send_requests(topics.requests, "s", rows[100:], 100)
    reader.read_until(lambda got: len(got.by_id()) >= 200, 40, "200 replies", watch=second)
    took_s = time.monotonic() - started
    assert took_s < 30, f"answered {took_s:.1f} s after the start again, as a dynamic member would"
    assert second.stop() == 0
    assert sorted(reader.read(0.5).by_id()) == sorted(f"s{i}" for i in range(200))


STUCK_IN_WARMUP = ("--model", "tests.component.stuck_model:stuck_in_warmup", "--log-level", "debug")


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_the_model_warms_up_ends_the_worker_at_once(bootstrap, redis_url, topics, tmp_path, signum,
                                                                   code):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *STUCK_IN_WARMUP)  # its warmup never ends
    wait_until(lambda: any(e.get("event") == "warmup_started" for e in worker.events())
               or worker.process.poll() is not None, 90, "the warmup to start")
    assert worker.process.poll() is None, worker.log()
    worker.process.send_signal(signal.SIGHUP)  # a reload asked too early: noted, and the worker goes on
    time.sleep(1.0)
    assert worker.process.poll() is None, worker.log()
    worker.process.send_signal(signum)
    assert worker.process.wait(timeout=10) == code, worker.log()
    (stopped,) = [e for e in worker.events() if e.get("event") == "stopped_while_starting"]
    assert (stopped["signal"], stopped["exit_code"]) == (signal.Signals(signum).name, code)
    assert "Traceback" not in worker.log()


def test_a_worker_whose_log_reader_went_away_before_it_started_answers_and_stops_cleanly(
        bootstrap, redis_url, topics, producer):
    """``worker ... 2>&1 | head -3``: the pipe closes while the model loads, so the line that says the worker
    started (written once it joined its group) cannot be written. The worker must go on, not die a member."""
    command = [sys.executable, "-m", "worker", "run", "--requests-topic", topics.requests,
               "--reply-topic", topics.replies, "--dead-letter-topic", topics.dlq,
               "--group", f"{topics.requests}.group", "--dedup-namespace", topics.requests, "--log-format", "json",
               "--torch-threads", "1"]
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "REDIS_URL": redis_url, "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert worker.stderr is not None
        worker.stderr.readline()  # the first log line, then the reader goes away
        worker.stderr.close()
        producer.send_requests(topics.requests, "p", churn_inputs(20))
        reader = TopicReader(bootstrap, topics.replies)
        landed = reader.read_until(lambda got: len(got.by_id()) >= 20 or worker.poll() is not None, 90,
                                   "20 replies")
        assert worker.poll() is None, f"the worker exited {worker.returncode} once its log reader went away"
        assert len(landed.by_id()) == 20
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_a_worker_of_another_assignor_than_its_group_stops_at_once_naming_the_setting(bootstrap, redis_url, topics,
                                                                                      producer, tmp_path, kafka_client):
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    first = start_worker(bootstrap, redis_url, topics, tmp_path, "--assignor", "range", name="range")
    reader = TopicReader(bootstrap, topics.replies)
    producer.send_requests(topics.requests, "g", churn_inputs(4))
    reader.read_until(lambda got: len(got.by_id()) >= 4, 90, "4 replies", watch=first)
    second = start_worker(bootstrap, redis_url, topics, tmp_path, "--assignor", "cooperative-sticky",
                          "--kafka-client", kafka_client, name="sticky")
    assert second.process.wait(timeout=90) == 2
    [failed] = [e for e in second.events() if e.get("event") == "worker_failed"]
    assert "--assignor, STREAMSCORE_ASSIGNOR" in failed["error"] and "Traceback" not in second.log()
    assert first.stop() == 0
    reader.close()
