"""Helpers for tests against a real broker: unique topics, worker processes, waiting on conditions."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from producer.topics import create_topics
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import client_config

REPO = Path(__file__).resolve().parents[2]
STARTED: list[subprocess.Popen[bytes]] = []  # every worker process a test started; see kill_leftovers()


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


@dataclass
class Topics:
    requests: str
    replies: str
    dlq: str

    @classmethod
    def create(cls, bootstrap: str, partitions: int = 4, security: KafkaSecurity = PLAINTEXT) -> Topics:
        base = f"it-{uuid.uuid4().hex[:10]}"
        topics = cls(f"{base}.requests", f"{base}.replies", f"{base}.dlq")
        create_topics(bootstrap, {topics.requests: partitions, topics.replies: partitions, topics.dlq: 1},
                      security=security)
        return topics

    def delete(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        """Best effort, with an admin client of its own (a test's may still name a controller that moved): on the
        three-broker cluster, whose state outlives a run, a few hundred runs' topics slowed its controller."""
        admin = KafkaAdminClient(**client_config(bootstrap, security), client_id="streamscore-test-cleanup")
        try:
            admin.delete_topics([self.requests, self.replies, self.dlq])
        except Exception as exc:  # noqa: BLE001 - cleanup only: the figures are out already
            print(f"topics not deleted: {exc!r}")
        finally:
            admin.close()


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def events(self) -> list[dict]:
        """The worker's JSON log lines so far; a last line still being written (no newline yet) is left out: a
        debug line of 269 KB was once read half-written."""
        log = self.log()
        events = []
        for line in log[:log.rfind("\n") + 1].splitlines():
            if line.startswith("{"):
                events.append(orjson.loads(line))
        return events

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, wait, and fail with the worker's log unless it exits 0."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout_s)
        if code != 0:
            raise AssertionError(f"the worker exited {code}:\n{self.log()}")
        return code

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


IMPORT_TIMES = {"PYTHONPROFILEIMPORTTIME": "1"}  # a child run with this lists every module it imports on stderr
OTHER_CLIENT = {"kafka-python": "confluent_kafka", "confluent": "kafka"}  # the library a client must not load


def imported_packages(log: str) -> set[str]:
    """The top-level packages a child run with IMPORT_TIMES imported, read from its stderr."""
    return set(re.findall(r"^import time:.*\|\s+([A-Za-z_]\w*)", log, re.MULTILINE))


def start_worker(bootstrap: str, redis_url: str, topics: Topics, tmp_path: Path, *extra: str,
                 name: str = "worker", env: dict[str, str] | None = None,
                 entry: tuple[str, ...] = ("-m", "worker")) -> WorkerProcess:
    """A worker on the topics; ``env`` adds variables (the security settings of a secured cluster); ``entry``:
    what the interpreter runs (a module that wraps the worker's)."""
    log_path = tmp_path / f"{name}-{uuid.uuid4().hex[:6]}.log"
    # This checkout first; what the test run's own path adds (an extra's packages) after it.
    path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, **(env or {}), "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "REDIS_URL": redis_url,
           "PYTHONPATH": path}
    command = [sys.executable, *entry, "run", "--requests-topic", topics.requests,
               "--reply-topic", topics.replies, "--dead-letter-topic", topics.dlq,
               "--group", f"{topics.requests}.group", "--dedup-namespace", topics.requests,
               "--log-format", "json", "--stats-interval-s", "0", "--torch-threads", "1", *extra]
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, env=env, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT)
    STARTED.append(process)
    return WorkerProcess(process, log_path)


def kill_leftovers() -> None:
    """Kill the workers a test left running (it failed before stopping them)."""
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


class Producer:
    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._producer = KafkaProducer(**client_config(bootstrap, security), acks="all", linger_ms=2)

    def send(self, topic: str, value: bytes | dict | None, key: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None, partition: int | None = None) -> None:
        raw = orjson.dumps(value) if isinstance(value, dict) else value
        self._producer.send(topic, key=key, value=raw, headers=headers or [], partition=partition)

    def send_requests(self, topic: str, prefix: str, rows: list, first: int = 0) -> None:
        """One request per row, keyed by its id ``<prefix><first + n>``; then flush."""
        for number, row in enumerate(rows, start=first):
            request_id = f"{prefix}{number}"
            self.send(topic, {"id": request_id, "inputs": row}, key=request_id.encode())
        self.flush()

    def flush(self) -> None:
        self._producer.flush()

    def close(self) -> None:
        self._producer.close()


@dataclass
class Landed:
    """Every record that landed on a topic, read from its beginning."""

    records: list = field(default_factory=list)

    def values(self) -> list[dict]:
        return [orjson.loads(r.value) for r in self.records]

    def by_id(self) -> dict[str, list[dict]]:
        grouped: dict[str, list[dict]] = {}
        for value in self.values():
            grouped.setdefault(value["id"], []).append(value)
        return grouped


class TopicReader:
    """Reads a topic from its beginning; ``read_committed`` hides records of open and aborted transactions."""

    def __init__(self, bootstrap: str, topic: str, read_committed: bool = False,
                 security: KafkaSecurity = PLAINTEXT) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap, security), group_id=None,
                                       enable_auto_commit=False,
                                       isolation_level="read_committed" if read_committed else "read_uncommitted")
        partitions = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic))]
        self._consumer.assign(partitions)
        self._consumer.seek_to_beginning(*partitions)
        self.landed = Landed()

    def read(self, timeout_s: float = 0.2) -> Landed:
        for records in self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=10_000).values():
            self.landed.records.extend(records)
        return self.landed

    def read_until(self, condition: Callable[[Landed], bool], timeout_s: float, what: str,
                   watch: WorkerProcess | None = None) -> Landed:
        """Read until ``condition`` holds; fails early, with its log, if the watched worker dies."""

        def done() -> bool:
            if watch is not None and watch.process.poll() is not None:
                raise AssertionError(f"the worker exited ({watch.process.returncode}) while waiting for "
                                     f"{what}:\n{watch.log()}")
            return condition(self.read())

        try:
            wait_until(done, timeout_s, what, interval_s=0)
        except AssertionError as failure:
            if watch is not None and "exited" not in str(failure):
                raise AssertionError(f"{failure}\nworker log:\n{watch.log()}") from None
            raise
        return self.landed

    def close(self) -> None:
        self._consumer.close()


def stop_while_sending(worker: WorkerProcess, producer: Producer, topic: str, prefix: str, rows: list,
                       first: int, chunk: int = 50, pause_s: float = 0.05) -> int:
    """SIGTERM ``worker`` while ``rows`` still arrive (ids ``<prefix><first + n>``, in paced chunks sent from a
    thread, the signal once the first is out), and return its exit code: the stop comes mid-stream however fast
    the worker (rows sent at once could all be polled before the signal)."""
    first_sent = threading.Event()

    def send() -> None:
        for start in range(0, len(rows), chunk):
            producer.send_requests(topic, prefix, rows[start:start + chunk], first + start)
            first_sent.set()
            time.sleep(pause_s)

    sender = threading.Thread(target=send, name="paced-sender")
    sender.start()
    try:
        assert first_sent.wait(30), "the first chunk was not sent"
        return worker.stop()
    finally:
        sender.join(60)
