"""The floor of exactly-once failover: a bare transactional producer per client library, its partition leader
SIGKILLed under load on the local three-broker cluster, and how long a read_committed reader sees nothing.

    make up-cluster
    python -m bench.eos_floor --runs 3 --out docs/chaos/eos-floor-2026-12-04.md

Each run: a topic of 6 partitions (replication 3, min.insync.replicas 2); one producer of the client sends
``--rate`` records a second in transactions committed every ``--commit-ms``; ``--kill-at`` seconds in, the
leader of partition 0 is SIGKILLed (`deploy/local/cluster.sh kill N`), and started again ``--down-s`` later.
A read_committed reader (librdkafka) notes when each record becomes visible. The gap is the longest time
without a newly visible record after the kill; the producer's own gap is the longest time between two
successful commits. The producer recovers as each library documents: abort what is abortable, otherwise
(fenced, fatal, or an abort that fails) a new producer whose init_transactions completes or aborts the old
one's transaction; each call is bounded by ``--call-timeout-s``. No streamscore code runs here: this is what
the issue's worker figures are measured against.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "deploy" / "local" / "cluster.sh"
PARTITIONS = 6


@dataclass
class Run:
    client: str
    sent: int = 0
    seen: int = 0
    reader_gap_s: float = 0.0
    producer_gap_s: float = 0.0
    replaced: int = 0  # producers replaced (fatal errors, failed aborts)
    aborted: int = 0
    commits: list[float] = field(default_factory=list)


def _create_topic(bootstrap: str) -> str:
    topic = f"eos-floor-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])
    futures[topic].result(30)
    time.sleep(2)  # leaders elected
    return topic


def _delete_topic(bootstrap: str, topic: str) -> None:
    """Best effort: on the three-broker cluster, whose state outlives a run, leftover topics slow its controller."""
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer: a dropped one cancels it
        admin.delete_topics([topic])[topic].result(30)
    except Exception as exc:  # noqa: BLE001 - cleanup only: the figures are out already
        print(f"topic {topic} not deleted: {exc!r}")


def _leader_of_partition_0(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return int(metadata.topics[topic].partitions[0].leader)


def _cluster(*args: str) -> None:
    subprocess.run([str(CLUSTER), *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Reader(threading.Thread):
    """read_committed, from the start of the topic: when each record became visible."""

    def __init__(self, bootstrap: str, topic: str, assigned: bool = False) -> None:
        """``assigned``: every partition assigned, no group joined (no group coordinator a kill can take away)."""
        super().__init__(daemon=True)
        self.arrivals: list[float] = []
        self._stopping = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-floor-{uuid.uuid4().hex[:8]}",
                                   "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                   "enable.auto.commit": False})
        if assigned:
            self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        else:
            self._consumer.subscribe([topic])

    def run(self) -> None:
        while not self._stopping.is_set():
            for message in self._consumer.consume(500, timeout=0.1):
                if message.error() is None:
                    self.arrivals.append(time.monotonic())

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)
        self._consumer.close()


class Transactional:
    """One library's transactional producer, its calls bounded, replaced when it cannot go on."""

    def __init__(self, client: str, bootstrap: str, call_timeout_s: float) -> None:
        self.client, self._bootstrap, self._timeout_s = client, bootstrap, call_timeout_s
        self._id = f"eos-floor-{client}-{uuid.uuid4().hex[:6]}"
        self._producer: object = None
        self.replaced = -1
        self.replace()

    def replace(self) -> None:
        """A new producer of the same transactional id (fences the old one and settles its transaction)."""
        self.replaced += 1
        if self._producer is not None:
            self.close(0)
        while True:
            try:
                self._producer = self._new()
                return
            except Exception:  # noqa: BLE001 - a coordinator still moving: try again, as a worker would
                time.sleep(0.5)

    def _new(self) -> object:
        if self.client == "confluent":
            producer = Producer({"bootstrap.servers": self._bootstrap, "transactional.id": self._id,
                                 "linger.ms": 5})
            producer.init_transactions(self._timeout_s)
            return producer
        from kafka import KafkaProducer

        from worker.kafka.kafka_python.transactions import BoundedProducer

        producer = BoundedProducer(bootstrap_servers=self._bootstrap.split(","), transactional_id=self._id,
                                   linger_ms=5, max_block_ms=int(self._timeout_s * 1000))
        assert isinstance(producer, KafkaProducer)
        producer.init_transactions()
        return producer

    def transaction(self, topic: str, values: list[bytes], keyed: bool = False) -> None:
        """Send ``values`` in one transaction and commit it; ``keyed``: each value its own key, so that a
        transaction spans the topic's partitions (else the client's sticky partitioner may put it in one).
        Raises what the library raised."""
        producer: object = self._producer
        if self.client == "confluent":
            assert isinstance(producer, Producer)
            producer.begin_transaction()
            for value in values:
                producer.produce(topic, value, key=value if keyed else None)
            producer.commit_transaction(self._timeout_s)
            return
        producer.begin_transaction()  # type: ignore[attr-defined]
        for value in values:
            producer.send(topic, key=value if keyed else None, value=value)  # type: ignore[attr-defined]
        producer.commit_transaction(self._timeout_s)  # type: ignore[attr-defined]

    def abort(self) -> bool:
        try:
            self._producer.abort_transaction(self._timeout_s)  # type: ignore[attr-defined]
            return True
        except Exception:  # noqa: BLE001 - an abort that fails: the producer is replaced
            return False

    def abortable(self, exc: Exception) -> bool:
        if self.client == "confluent":
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            return error is not None and bool(error.txn_requires_abort()) and not error.fatal()
        return True  # kafka-python's errors do not say: an abort is tried, and the producer replaced if it fails

    def close(self, timeout_s: float = 5) -> None:
        _close(self.client, self._producer, timeout_s)


def _close(client: str, producer: Any, timeout_s: float) -> None:
    """A producer given up on: what it still holds after ``timeout_s`` is not waited for. kafka-python's is closed
    by force (its own close raises after a flush that timed out and leaves it open, to raise again when
    collected)."""
    from worker.kafka.kafka_python.sink import close_for_good

    with contextlib.suppress(Exception):  # a producer given up on, whatever state it is in
        if client == "confluent":
            producer.flush(timeout_s)
        else:
            close_for_good(producer, timeout_s)


def one_run(client: str, bootstrap: str, args: argparse.Namespace, say: Callable[[str], None]) -> Run:
    topic = _create_topic(bootstrap)
    run = Run(client)
    reader = Reader(bootstrap, topic)
    reader.start()
    producer = Transactional(client, bootstrap, args.call_timeout_s)
    per_transaction = max(1, round(args.rate * args.commit_ms / 1000))
    started = time.monotonic()
    killed_at = down_node = None
    while (now := time.monotonic()) - started < args.seconds:
        if killed_at is None and now - started >= args.kill_at:
            down_node = _leader_of_partition_0(bootstrap, topic)
            _cluster("kill", str(down_node))
            killed_at = time.monotonic()
            say(f"  {client}: node {down_node} killed at {killed_at - started:.1f} s")
        if down_node is not None and killed_at is not None and now - killed_at >= args.down_s:
            _cluster("start", str(down_node))
            down_node = None
        _one_transaction(producer, topic, run, per_transaction)
        time.sleep(max(0.0, args.commit_ms / 1000 - (time.monotonic() - now)))
    if down_node is not None:
        _cluster("start", str(down_node))
    producer.close()
    time.sleep(3)  # the last commits become visible
    reader.stop()
    run.seen, run.replaced = len(reader.arrivals), producer.replaced
    assert killed_at is not None
    run.reader_gap_s = _longest_gap(reader.arrivals, killed_at)
    run.producer_gap_s = _longest_gap(run.commits, killed_at)
    _cluster("up")  # every node back and in sync before the next run
    _delete_topic(bootstrap, topic)
    return run


def _one_transaction(producer: Transactional, topic: str, run: Run, records: int, keyed: bool = False) -> None:
    """Send ``records`` in one transaction and commit it; on failure abort, or replace the producer."""
    values = [f"{run.sent + i}".encode() for i in range(records)]
    try:
        producer.transaction(topic, values, keyed)
        run.sent += len(values)
        run.commits.append(time.monotonic())
    except Exception as exc:  # noqa: BLE001 - the library's failure is what is measured
        if producer.abortable(exc) and producer.abort():
            run.aborted += 1
        else:
            producer.replace()


class Plain:
    """One library's plain producer as the worker's at-least-once sink is set up (acks=all, idempotent): the
    at-least-once floor. A failed send is not retried by hand (the library retries until its delivery timeout):
    what it costs shows in the reader's gap."""

    def __init__(self, client: str, bootstrap: str) -> None:
        self.client = client
        if client == "confluent":
            self._producer: object = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                               "enable.idempotence": True, "linger.ms": 5})
        else:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all",
                                           enable_idempotence=True, linger_ms=5)

    def send(self, topic: str, values: list[bytes]) -> None:
        """Each value its own key, so that the records spread over the topic's partitions."""
        if self.client == "confluent":
            producer = self._producer
            assert isinstance(producer, Producer)
            for value in values:
                while True:
                    try:
                        producer.produce(topic, value, key=value)
                        break
                    except BufferError:  # the local queue is full while a leader is away: wait for room
                        producer.poll(0.1)
            producer.poll(0)
            return
        for value in values:
            self._producer.send(topic, key=value, value=value)  # type: ignore[attr-defined]

    def close(self, timeout_s: float = 5) -> None:
        _close(self.client, self._producer, timeout_s)


class Beside(threading.Thread):
    """The floor in someone else's faults: a bare producer of ``client`` sending ``rate`` records a second to a
    topic of its own, spread over all its partitions (so that every leader kill reaches it), and its reader, for
    as long as it runs (tests/cluster runs one beside the worker, through the same kills). ``transactional``: in
    transactions committed every ``commit_ms``, read read_committed (the exactly-once floor); otherwise a
    plain idempotent producer sending every ``commit_ms`` (the at-least-once floor). ``stop`` returns the
    reader's longest gap."""

    def __init__(self, client: str, bootstrap: str, rate: float = 200.0, commit_ms: float = 100.0,
                 call_timeout_s: float = 10.0, transactional: bool = True) -> None:
        super().__init__(daemon=True)
        self._servers = bootstrap  # (Thread has a _bootstrap of its own)
        self.topic = _create_topic(bootstrap)
        self.figures = Run(client)
        self._reader = Reader(bootstrap, self.topic, assigned=True)
        self._producer: Transactional | Plain = (Transactional(client, bootstrap, call_timeout_s) if transactional
                                                 else Plain(client, bootstrap))
        self._records = max(1, round(rate * commit_ms / 1000))
        self._commit_s = commit_ms / 1000
        self._stopping = threading.Event()
        self._since = 0.0

    def start(self) -> None:
        """Returns once the reader sees the first record (at most 30 s): the gap is measured from there."""
        self._reader.start()
        super().start()
        deadline = time.monotonic() + 30
        while not self._reader.arrivals and time.monotonic() < deadline:
            time.sleep(0.05)
        self._since = self._reader.arrivals[0] if self._reader.arrivals else time.monotonic()

    def run(self) -> None:
        while not self._stopping.is_set():
            began = time.monotonic()
            if isinstance(self._producer, Transactional):
                _one_transaction(self._producer, self.topic, self.figures, self._records, keyed=True)
            else:
                self._producer.send(self.topic, [f"{self.figures.sent + i}".encode() for i in range(self._records)])
                self.figures.sent += self._records
            time.sleep(max(0.0, self._commit_s - (time.monotonic() - began)))

    def stop(self) -> float:
        self._stopping.set()
        self.join(60)
        self._producer.close()
        time.sleep(3)  # the last records become visible
        self._reader.stop()
        arrivals = self._reader.arrivals
        self.figures.seen = len(arrivals)
        if isinstance(self._producer, Transactional):
            self.figures.replaced = self._producer.replaced
        self.figures.reader_gap_s = _longest_gap(arrivals, self._since)
        _delete_topic(self._servers, self.topic)
        return self.figures.reader_gap_s


def _longest_gap(times: list[float], since: float) -> float:
    """The longest time after ``since`` without an event (from ``since`` to the first, and between two)."""
    after = [t for t in times if t >= since]
    if not after:
        return float("inf")
    return max([after[0] - since, *(b - a for a, b in zip(after, after[1:], strict=False))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eos_floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094",
                        help="the three-broker cluster (`make up-cluster`; default %(default)s)")
    parser.add_argument("--clients", default="confluent,kafka-python")
    parser.add_argument("--runs", type=int, default=3, help="runs per client (default %(default)s)")
    parser.add_argument("--seconds", type=float, default=40.0, help="length of a run (default %(default)s)")
    parser.add_argument("--kill-at", type=float, default=5.0, help="seconds in (default %(default)s)")
    parser.add_argument("--down-s", type=float, default=15.0, help="the node stays down this long (%(default)s)")
    parser.add_argument("--rate", type=float, default=500.0, help="records a second (default %(default)s)")
    parser.add_argument("--commit-ms", type=float, default=100.0, help="a commit every (default %(default)s)")
    parser.add_argument("--call-timeout-s", type=float, default=10.0,
                        help="bound of each transactional call (default %(default)s)")
    parser.add_argument("--out", type=Path, help="write the table (Markdown) here too")
    args = parser.parse_args(argv)
    runs: list[Run] = []
    for client in args.clients.split(","):
        for index in range(args.runs):
            print(f"{client} run {index + 1}/{args.runs}", flush=True)
            runs.append(one_run(client, args.bootstrap, args, lambda line: print(line, flush=True)))
            last = runs[-1]
            print(f"  reader gap {last.reader_gap_s:.1f} s, producer gap {last.producer_gap_s:.1f} s, sent "
                  f"{last.sent}, seen {last.seen}, aborted {last.aborted}, replaced {last.replaced}", flush=True)
    lines = ["# Exactly-once failover floor: bare transactional producers, partition 0's leader SIGKILLed",
             "", f"`python -m bench.eos_floor --runs {args.runs}`, {time.strftime('%Y-%m-%d')}, on the local "
             f"three-broker cluster (2 cores); {args.rate:.0f} records/s, a commit every {args.commit_ms:.0f} ms, "
             f"the node down {args.down_s:.0f} s, each transactional call bounded at {args.call_timeout_s:.0f} s.",
             "", "| client | run | reader gap (s) | producer gap (s) | sent | seen | aborted | replaced |",
             "|---|---|---|---|---|---|---|---|"]
    for client in args.clients.split(","):
        mine = [run for run in runs if run.client == client]
        for index, run in enumerate(mine, 1):
            lines.append(f"| {client} | {index} | {run.reader_gap_s:.1f} | {run.producer_gap_s:.1f} | {run.sent} | "
                         f"{run.seen} | {run.aborted} | {run.replaced} |")
        gaps = [run.reader_gap_s for run in mine]
        lines.append(f"| {client} | median / worst | {statistics.median(gaps):.1f} / {max(gaps):.1f} | | | | | |")
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
