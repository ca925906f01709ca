"""Adding a Kafka client is one package and one row of the client table: the worker's own composition root
(worker/app.py) run on the memory client (tests/doubles/memory_client), whose row only these tests add, with
memory:// dedup. No broker, no Redis: the memory broker lives in this process. Nothing is patched: the start
check too is the Transport's (its preflight: the memory broker is there or not).
"""

from __future__ import annotations

import inspect
import threading
import uuid
from collections import Counter
from collections.abc import Iterator

import orjson
import pytest

from tests.doubles.memory_client import CLIENT, NAME
from tests.doubles.memory_client.broker import MemoryBroker
from worker import app
from worker.core.clients import CLIENTS
from worker.core.clock import SystemClock
from worker.core.errors import ServiceUnavailable
from worker.core.messages import Position
from worker.core.settings import Settings
from worker.core.shutdown import StopRequest
from worker.core.timerange import TimeRange
from worker.core.wire import encode_request
from worker.jobs.backfill import BackfillJob
from worker.kafka.transport import Transport, transport_for

INPUTS = [0.25] * 16  # a valid input row for the churn model
REPLY_HEADERS = {"queue-wait-ms", "batch-wait-ms", "compute-ms", "batch-size", "source-topic", "source-partition",
                 "source-offset"}
WAIT_S = 60.0


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryBroker]:
    """A memory broker with the topics of requests (4 partitions), replies (4) and dead letters (1); the memory
    client's row in the client table."""
    monkeypatch.setitem(CLIENTS, NAME, CLIENT)
    broker = MemoryBroker.start(f"memory-{uuid.uuid4().hex[:10]}:9092")
    for topic, partitions in (("requests", 4), ("requests.replies", 4), ("requests.dlq", 1)):
        broker.create_topic(topic, partitions)
    yield broker
    broker.stop()


def settings_on(broker: MemoryBroker, **values: object) -> Settings:
    return Settings.from_values(kafka_bootstrap_servers=broker.address, redis_url="memory://",
                                requests_topic="requests", kafka_client=NAME, torch_threads=1, stats_interval_s=0,
                                **values).with_derived_defaults()


def produce_requests(broker: MemoryBroker, count: int) -> dict[str, Position]:
    """``count`` valid requests keyed by their ids, one with inputs of the wrong length (``short``), and a record
    that is not JSON and has no key (a dead letter); where each request landed, by id."""
    landed = {}
    for i in range(count):
        request_id = f"r{i}"
        value = encode_request(INPUTS, request_id)
        landed[request_id] = broker.append("requests", None, request_id.encode(), value, [])
    landed["short"] = broker.append("requests", None, b"short", encode_request([0.5], "short"), [])
    broker.append("requests", 2, None, b"not json", [])
    return landed


class Running:
    """A worker on its own thread (as worker/cli.py runs it on the main one), until ``stop``."""

    def __init__(self, settings: Settings) -> None:
        self._stop = StopRequest(SystemClock())
        self._worker = app.build_worker(settings, self._stop)
        self._outcome: list[int | BaseException] = []
        self._thread = threading.Thread(target=self._run, name="worker")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._worker.run())
        except BaseException as exc:  # handed to the test, which raises it
            self._outcome.append(exc)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> int:
        """Stop, wait for the drain; the records left unfinished (raises what the loop raised)."""
        self._worker.stop()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the worker did not stop"
        (outcome,) = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def landed_on(broker: MemoryBroker, topic: str) -> list[tuple[int, object]]:
    return broker.records(topic, read_committed=True)


def wait_for_replies(broker: MemoryBroker, running: Running, replies: int) -> None:
    done = broker.wait(lambda: not running.alive or (len(landed_on(broker, "requests.replies")) >= replies
                                                      and len(landed_on(broker, "requests.dlq")) >= 1), WAIT_S)
    assert done and running.alive, (f"{len(landed_on(broker, 'requests.replies'))} replies of {replies} after "
                                    f"{WAIT_S} s; the worker {'runs' if running.alive else 'stopped'}")


def check_replies(broker: MemoryBroker, requests: dict[str, Position]) -> None:
    """One reply per request, in the wire contract's shape (docs/wire-contract.md), and one dead letter."""
    replies = [entry for _, entry in landed_on(broker, "requests.replies")]
    bodies = [orjson.loads(entry.value) for entry in replies]
    assert Counter(body["id"] for body in bodies) == Counter(set(requests))
    for entry, body in zip(replies, bodies, strict=True):
        request = requests[body["id"]]
        headers = dict(entry.headers)
        assert entry.key == body["id"].encode()
        assert set(headers) >= REPLY_HEADERS
        assert (headers["source-topic"], headers["source-partition"], headers["source-offset"]) == (
            request.topic.encode(), str(request.partition).encode(), str(request.offset).encode())
        assert (body["model"], isinstance(body["model_version"], str)) == ("churn", True)
        if body["id"] == "short":
            assert body["status"] == "error" and body["error"]["code"] == "wrong_input_length"
            assert "outputs" not in body
        else:
            assert body["status"] == "ok" and "error" not in body
            assert 0.0 <= body["outputs"]["churn_probability"] <= 1.0
    ((_, dead),) = landed_on(broker, "requests.dlq")
    assert (dead.value, dict(dead.headers)["dlq-error-code"]) == (b"not json", b"invalid_json")


def committed_everything(broker: MemoryBroker, group: str) -> bool:
    """The group's committed offsets are the ends of every requests partition: nothing left to consume again."""
    ends = {("requests", p): broker.end_offset(("requests", p), read_committed=True) for p in range(4)}
    committed = broker.in_group(group, lambda g: {tp: g.committed[tp][0] for tp in ends if tp in g.committed})
    return committed == {tp: end for tp, end in ends.items() if end}


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_the_worker_answers_every_request_once_on_a_client_added_by_one_row(broker, delivery):
    settings = settings_on(broker, delivery=delivery)
    assert settings.kafka.kafka_client == NAME
    requests = produce_requests(broker, 24)
    running = Running(settings)
    try:
        wait_for_replies(broker, running, len(requests))
    finally:
        unfinished = running.stop()
    assert unfinished == 0
    check_replies(broker, requests)
    assert committed_everything(broker, settings.kafka.group)
    # Exactly-once: the replies and the offsets went through the client's Transactions, at-least-once never.
    assert (broker.transactions_committed > 0) is settings.delivery.exactly_once


def test_a_backfill_reads_its_span_through_the_clients_partition_reader(broker):
    requests = produce_requests(broker, 10)
    settings = settings_on(broker, group="requests.backfill")
    worker, source = app.build_backfill(BackfillJob(settings, TimeRange(0), StopRequest(SystemClock())))
    assert worker.run() == 0  # returns once the span is read, answered and committed
    assert source.complete()
    check_replies(broker, requests)


def test_the_memory_row_names_a_transport_with_every_method_of_the_protocol(broker):
    transport = transport_for(NAME)
    methods = {name: method for name, method in inspect.getmembers(Transport, inspect.isfunction)
               if not name.startswith("_")}
    assert set(methods) == {"admin", "built", "partition_reader", "preflight", "refused", "sink", "stream",
                            "watch_admin"}
    for name, method in methods.items():
        ours = [p for p in inspect.signature(method).parameters if p != "self"]
        assert list(inspect.signature(getattr(transport, name)).parameters) == ours, name
    assert transport.errors and all(issubclass(error, Exception) for error in transport.errors)


def test_no_broker_at_the_address_is_a_service_that_does_not_answer(broker):
    kafka = settings_on(broker).kafka
    broker.stop()
    with pytest.raises(ServiceUnavailable, match=f"KAFKA_BOOTSTRAP_SERVERS={broker.address}"):
        transport_for(NAME).sink(kafka)
