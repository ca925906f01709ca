"""Backfill: re-scoring a time range of a topic as a bounded job, on a real broker and Redis, over either Kafka
client (the ``kafka_client`` fixture); a job started on one client resumes on the other."""

import os
import random
import signal
import subprocess
import sys
import time
import uuid

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient

from producer.topics import create_topics
from tests.integration.kit import REPO, STARTED, TopicReader, wait_until
from worker.app import build_bounded_source
from worker.core.clock import SystemClock
from worker.core.settings import Settings
from worker.core.timerange import Span, TimeRange, format_ms
from worker.jobs.backfill_plan import encode_plan
from worker.models import load_model

# Recent times: the broker's retention (7 days by default) deletes records stamped long ago.
BASE_MS = (time.time_ns() // 1_000_000 - 3_600_000) // 1000 * 1000
STEP_MS = 10  # record i is stamped BASE_MS + STEP_MS * i
TOTAL = 120_000
FIRST, LAST = 10_000, 110_000  # the range: records FIRST .. LAST - 1
RANGE = TimeRange(BASE_MS + STEP_MS * FIRST, BASE_MS + STEP_MS * LAST)  # from inclusive, until exclusive


def stamped(i):
    return BASE_MS + STEP_MS * i


@pytest.fixture(scope="module")
def big_topic(services):
    """120,000 requests over 4 partitions, 100,000 of them in RANGE; every 1000th has an expired
    deadline and a reply_to naming a live client's topic, every 1000th from the 500th one naming a topic deleted
    since (a backfill must ignore all three)."""
    bootstrap = services[0]
    topic = f"it-{uuid.uuid4().hex[:10]}.history"
    live = f"{topic}.live-client"
    create_topics(bootstrap, {topic: 4, live: 1})
    rng = random.Random(7)
    churn = load_model("churn")
    rows = [orjson.dumps(churn.sample_inputs(rng)).decode() for _ in range(500)]
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=20,
                             batch_size=512 * 1024)
    for i in range(TOTAL):
        extra = (f',"deadline_ms":1000,"reply_to":"{live}"' if i % 1000 == 0 else
                 f',"reply_to":"{topic}.deleted-client"' if i % 1000 == 500 else "")
        value = f'{{"id":"b{i}","inputs":{rows[i % len(rows)]}{extra}}}'.encode()
        producer.send(topic, key=f"b{i}".encode(), value=value, timestamp_ms=stamped(i))
    producer.flush()
    producer.close()
    return topic, live


def backfill(bootstrap, redis_url, tmp_path, topic, reply_topic, *extra, name="backfill", kafka_client="kafka-python",
             env=None, progress=False):
    """Start ``python -m worker backfill`` on ``kafka_client``, ``env`` added to its environment (``progress``:
    without --no-progress); returns the process and its log (stderr) and stdout paths."""
    log_path, out_path = tmp_path / f"{name}.log", tmp_path / f"{name}.out"
    env = dict(os.environ, **(env or {}), KAFKA_BOOTSTRAP_SERVERS=bootstrap, REDIS_URL=redis_url, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "worker", "backfill", "--requests-topic", topic, "--reply-topic", reply_topic,
               "--log-format", "json", *([] if progress else ["--no-progress"]), "--torch-threads", "1",
               "--kafka-client", kafka_client, *extra]
    with log_path.open("wb") as log_file, out_path.open("wb") as out_file:
        process = subprocess.Popen(command, env=env, cwd=REPO, stdout=out_file, stderr=log_file)
    STARTED.append(process)
    return process, log_path, out_path


def events(log_path, name):
    return [e for e in (orjson.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{"))
            if e.get("event") == name]


def make_reply_topics(bootstrap, name):
    create_topics(bootstrap, {name: 4, f"{name}.dlq": 1})
    return name


def read_all(bootstrap, topic, expected):
    reader = TopicReader(bootstrap, topic)
    try:
        reader.read_until(lambda got: len(got.records) >= expected, 120, f"{expected} records on {topic}")
        return reader.read(2.0)  # anything beyond what was expected would show here
    finally:
        reader.close()


def assert_exactly_the_range(landed):
    by_id = landed.by_id()
    assert len(landed.records) == LAST - FIRST, "a reply too many or too few"
    assert by_id.keys() == {f"b{i}" for i in range(FIRST, LAST)}, "records outside the range were scored"
    assert {r["status"] for r in landed.values()} == {"ok"}  # expired deadlines ignored


FAST = ("--max-batch-size", "256", "--max-poll-records", "2000", "--stats-interval-s", "1")


def test_a_backfill_scores_exactly_the_records_of_its_time_range_and_exits_0(bootstrap, redis_url, big_topic,
                                                                             tmp_path, kafka_client):
    topic, live = big_topic
    replies = make_reply_topics(bootstrap, f"{topic}.bf-once.{kafka_client}")
    process, log_path, out_path = backfill(bootstrap, redis_url, tmp_path, topic, replies,
                                           "--from-time", format_ms(RANGE.from_ms),  # ISO 8601 ...
                                           "--until-time", str(RANGE.until_ms), *FAST,  # ... and epoch ms
                                           "--job", f"{topic}.once.{kafka_client}",  # each client's run a job
                                           kafka_client=kafka_client, progress=True)
    assert process.wait(timeout=240) == 0, log_path.read_text()[-5000:]
    assert all(line.startswith("{") for line in log_path.read_text().splitlines()), "not JSON lines only"
    assert_exactly_the_range(read_all(bootstrap, replies, LAST - FIRST))
    [finished] = events(log_path, "backfill_finished")
    assert finished["complete"] and finished["offsets"] == LAST - FIRST == finished["committed"]
    assert (finished["consumed"], finished["replied_ok"], finished["duplicates"]) == (LAST - FIRST, LAST - FIRST, 0)
    assert "result        complete" in out_path.read_text()
    assert not TopicReader(bootstrap, live).read(1.0).records, "a reply went to a request's own reply_to"


def test_an_interrupted_backfill_resumes_where_it_stopped_and_repeats_nothing(bootstrap, redis_url, big_topic,
                                                                              tmp_path, kafka_client):
    topic, _ = big_topic
    replies = make_reply_topics(bootstrap, f"{topic}.bf-resumed.{kafka_client}")
    job = ("--from-time", str(RANGE.from_ms), "--until-time", format_ms(RANGE.until_ms),
           "--job", f"{topic}.resumed.{kafka_client}", *FAST)  # a job name of this run's own: dedup outlives topics
    first, first_log, _ = backfill(bootstrap, redis_url, tmp_path, topic, replies, *job, name="first",
                                   kafka_client=kafka_client)
    wait_until(lambda: first.poll() is not None or any(e["consumed"] >= 30_000
                                                       for e in events(first_log, "worker_stats")),
               180, "the backfill to be about a third done", interval_s=0.5)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 3, first_log.read_text()[-5000:]  # stopped early: resumable
    [stopped] = events(first_log, "backfill_finished")
    assert not stopped["complete"] and 0 < stopped["committed"] < LAST - FIRST

    second, second_log, _ = backfill(bootstrap, redis_url, tmp_path, topic, replies, *job, name="second",
                                     kafka_client=kafka_client)
    assert second.wait(timeout=240) == 0, second_log.read_text()[-5000:]
    [finished] = events(second_log, "backfill_finished")
    assert finished["complete"] and finished["done_before"] == stopped["committed"]
    assert finished["consumed"] == LAST - FIRST - stopped["committed"]  # nothing committed is read again
    assert finished["duplicates"] == 0
    assert_exactly_the_range(read_all(bootstrap, replies, LAST - FIRST))


def test_a_job_resumed_after_retention_deleted_part_of_its_span_says_how_many_were_lost(
        bootstrap, redis_url, topics, tmp_path, kafka_client):
    """The job stopped at offset 10 of its span 0..49 on partition 0; retention then deleted the log up to 30.
    Resumed, it scores 30..49 and says, in a warning and its summary, that 20 offsets were lost unread."""
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    committed, log_start, sent = 10, 30, 50
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all")
    for i in range(sent):
        producer.send(topics.requests, key=f"d{i}".encode(), partition=0, timestamp_ms=stamped(i),
                      value=orjson.dumps({"id": f"d{i}", "inputs": [0.5] * 16}))
    producer.flush()
    producer.close()
    time_range, job = TimeRange(stamped(0), stamped(sent)), f"{topics.requests}.deleted.{kafka_client}"
    group = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"streamscore-backfill.{job}",
                          enable_auto_commit=False)
    try:  # what a job interrupted at offset 10 left: its plan, with its offset
        group.commit({TopicPartition(topics.requests, 0): OffsetAndMetadata(
            committed, encode_plan(time_range, Span(0, sent)), -1)})
    finally:
        group.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topics.requests, 0): log_start})
    finally:
        admin.close()
    replies = make_reply_topics(bootstrap, f"{topics.requests}.bf-deleted")
    process, log_path, out_path = backfill(bootstrap, redis_url, tmp_path, topics.requests, replies,
                                           "--from-time", str(time_range.from_ms), "--until-time",
                                           str(time_range.until_ms), "--job", job, kafka_client=kafka_client)
    assert process.wait(timeout=120) == 0, log_path.read_text()[-5000:]
    [said] = events(log_path, "backfill_records_deleted")
    assert (said["partition"], said["next_offset"], said["log_start"], said["deleted"]) == (0, committed, log_start,
                                                                                           log_start - committed)
    [finished] = events(log_path, "backfill_finished")
    assert finished["complete"] and finished["deleted"] == log_start - committed
    assert finished["consumed"] == sent - log_start
    assert "deleted       20 offsets of the range deleted (retention)" in out_path.read_text()
    assert sorted(read_all(bootstrap, replies, sent - log_start).by_id()) == sorted(
        f"d{i}" for i in range(log_start, sent))


def bounded_source(kafka_client, settings, time_range):
    return build_bounded_source(settings.replace(kafka_client=kafka_client).kafka, SystemClock(), time_range)


@pytest.mark.parametrize("first_client, second_client", [
    ("kafka-python", "kafka-python"), ("confluent", "confluent"), ("kafka-python", "confluent"),
    ("confluent", "kafka-python")])
def test_an_open_range_ends_at_the_end_when_the_job_first_started_also_after_a_restart(bootstrap, topics,
                                                                                       first_client, second_client):
    if "confluent" in (first_client, second_client):
        pytest.importorskip("confluent_kafka")
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all")
    for i in range(40):
        producer.send(topics.requests, value=b"{}", partition=i % 2, timestamp_ms=stamped(i))
    producer.flush()
    settings = Settings.from_values(kafka_bootstrap_servers=bootstrap, redis_url="memory://",
                                    requests_topic=topics.requests, group=f"{topics.requests}.open", max_poll_records=7)

    def run_source(kafka_client, appended, stop_after=None):
        source = bounded_source(kafka_client, settings, TimeRange(stamped(10)))
        source.start()
        for i in range(appended):  # records appended after the start are not part of the job
            producer.send(topics.requests, value=b"{}", partition=i % 2, timestamp_ms=stamped(100 + i))
        producer.flush()
        handed = []
        while not source.finished() and (stop_after is None or len(handed) < stop_after):
            handed += source.poll(0.5, 7)
        source.commit({(r.position.topic, r.position.partition): r.position.offset + 1 for r in handed})
        complete = source.complete()
        source.close()
        return [(r.position.partition, r.position.offset) for r in handed], complete

    first, complete = run_source(first_client, appended=10, stop_after=14)
    assert not complete and 14 <= len(first) < 30
    rest, complete = run_source(second_client, appended=10)  # resumed on either client: the same plan
    assert complete
    # Records 10..39 alternate over partitions 0 and 1: offsets 5..19 of each.
    assert sorted(first + rest) == sorted((p, o) for p in (0, 1) for o in range(5, 20))
    producer.close()


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_a_backfill_reads_committed_requests_and_ends_before_a_transaction_still_open(bootstrap, topics, kafka_client):
    """As the live worker does (isolation.level read_committed by default): an aborted transaction's requests
    are never handed out, and the span ends at the last stable offset, so a transaction left open holds
    nothing up: it and what follows it are not in the job."""
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    servers = bootstrap.split(",")

    def transactional():
        producer = KafkaProducer(bootstrap_servers=servers, transactional_id=f"bf-{uuid.uuid4().hex[:8]}")
        producer.init_transactions()
        return producer

    def send(producer, keys, end=None):
        producer.begin_transaction()
        for key in keys:
            producer.send(topics.requests, key=key.encode(), value=b"{}", partition=0, timestamp_ms=stamped(1))
        producer.flush()
        if end is not None:
            end()

    committed, aborted, left_open = transactional(), transactional(), transactional()
    send(committed, [f"a{i}" for i in range(5)], committed.commit_transaction)
    send(aborted, [f"b{i}" for i in range(3)], aborted.abort_transaction)
    send(committed, [f"a{i}" for i in range(5, 10)], committed.commit_transaction)
    send(left_open, [f"c{i}" for i in range(3)])
    plain = KafkaProducer(bootstrap_servers=servers, acks="all")
    plain.send(topics.requests, key=b"d0", value=b"{}", partition=0, timestamp_ms=stamped(1))
    plain.flush()
    settings = Settings.from_values(kafka_bootstrap_servers=bootstrap, redis_url="memory://",
                                    requests_topic=topics.requests, group=f"{topics.requests}.tx-{kafka_client}")
    source = bounded_source(kafka_client, settings, TimeRange(stamped(0)))
    try:
        started = time.monotonic()
        source.start()
        handed = []
        while not source.finished() and time.monotonic() - started < 30:
            handed += source.poll(0.5, 100)
        assert source.finished(), "the job waits on the open transaction"
        assert [r.key for r in handed] == [f"a{i}".encode() for i in range(10)]
    finally:
        source.close()
        left_open.abort_transaction()
        for producer in (committed, aborted, left_open, plain):
            producer.close()


def test_a_backfill_refuses_a_group_whose_offsets_it_did_not_commit(bootstrap, redis_url, topics, tmp_path,
                                                                    kafka_client):
    group = f"{topics.requests}.live"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group, enable_auto_commit=False)
    consumer.assign([TopicPartition(topics.requests, 0)])
    consumer.commit({TopicPartition(topics.requests, 0): OffsetAndMetadata(0, "", -1)})
    consumer.close()
    make_reply_topics(bootstrap, topics.replies)
    process, log_path, _ = backfill(bootstrap, redis_url, tmp_path, topics.requests, topics.replies,
                                    "--from-time", "0", "--group", group, kafka_client=kafka_client)
    assert process.wait(timeout=60) == 2
    assert "no backfill committed" in log_path.read_text()


def test_a_backfill_stopped_while_its_model_warms_up_exits_3_at_once(bootstrap, redis_url, tmp_path, kafka_client):
    topic = f"it-{uuid.uuid4().hex[:10]}.history"
    create_topics(bootstrap, {topic: 1})
    replies = make_reply_topics(bootstrap, f"{topic}.bf")
    process, log_path, _ = backfill(bootstrap, redis_url, tmp_path, topic, replies, "--from-time", "0",
                                    "--model", "tests.component.stuck_model:stuck_in_warmup",  # never warm
                                    "--log-level", "debug",  # warmup_started is a debug line
                                    kafka_client=kafka_client)
    wait_until(lambda: events(log_path, "warmup_started") or process.poll() is not None, 90, "the warmup to start")
    assert process.poll() is None, log_path.read_text()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 3, log_path.read_text()  # interrupted: the same command goes on later
    (stopped,) = events(log_path, "stopped_while_starting")
    assert (stopped["signal"], stopped["exit_code"]) == ("SIGTERM", 3)
