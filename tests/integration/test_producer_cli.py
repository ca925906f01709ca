"""``python -m producer send``, ``score`` and ``collect`` against a real broker, Redis and worker."""

import csv
import os
import random
import subprocess
import sys
import time

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka import KafkaProducer

from producer.topics import create_topics
from tests.integration.kit import REPO, TopicReader, start_worker
from worker.core.timerange import format_ms
from worker.models import load_model

CHURN = load_model("churn")


def producer_cli(bootstrap, *args, timeout_s=120, env=None):
    env = dict(os.environ, **(env or {}), KAFKA_BOOTSTRAP_SERVERS=bootstrap, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "producer", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout_s)


def test_send_from_jsonl_csv_and_parquet_then_collect_and_join_by_id(bootstrap, redis_url, topics, tmp_path):
    rng = random.Random(5)
    jsonl = tmp_path / "requests.jsonl"
    jsonl.write_bytes(b"".join(orjson.dumps({"id": f"j{i}", "inputs": CHURN.sample_inputs(rng)}) + b"\n"
                               for i in range(150)) + b"{oops\n")
    table = tmp_path / "customers.csv"
    with table.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "customer", *(f"f{k}" for k in range(16))])
        for i in range(100):
            writer.writerow([f"c{i}", f"cust-{i % 7}", *CHURN.sample_inputs(rng)])
    parquet = tmp_path / "features.parquet"
    pq.write_table(pa.table({"id": [f"p{i}" for i in range(80)],
                             "inputs": [CHURN.sample_inputs(rng) for _ in range(80)]}), parquet, row_group_size=30)

    sent = producer_cli(bootstrap, "send", topics.requests, "--file", str(jsonl), "--rate", "500", "--no-progress")
    assert sent.returncode == 1, sent.stderr  # one unreadable line: reported, the rest sent
    assert "sent 150 requests" in sent.stderr and f"{jsonl}:151: not JSON" in sent.stderr
    sent = producer_cli(bootstrap, "send", topics.requests, "--file", str(table), "--key-field", "customer",
                        "--no-progress")
    assert sent.returncode == 0, sent.stderr
    assert "sent 100 requests" in sent.stderr and "skipped     0" in sent.stderr
    sent = producer_cli(bootstrap, "send", topics.requests, "--file", str(parquet), "--no-progress")
    assert sent.returncode == 0, sent.stderr
    assert "sent 80 requests" in sent.stderr and "skipped     0" in sent.stderr

    landed = TopicReader(bootstrap, topics.requests).read_until(lambda got: len(got.records) >= 330, 30, "requests")
    partition_of = {}
    for record in landed.records:
        if record.key.startswith(b"cust-"):  # keyed by customer: one partition per customer
            assert partition_of.setdefault(record.key, record.partition) == record.partition
    assert len(partition_of) == 7

    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    TopicReader(bootstrap, topics.replies).read_until(lambda got: len(got.records) >= 330, 90, "replies", watch=worker)
    assert worker.stop() == 0

    out = tmp_path / "replies.jsonl"
    collected = producer_cli(bootstrap, "collect", topics.replies, str(out), "--requests", str(jsonl),
                             "--no-progress")
    assert collected.returncode == 0, collected.stderr
    assert len(out.read_bytes().splitlines()) == 330
    report = orjson.loads((tmp_path / "replies.jsonl.report.json").read_bytes())
    assert (report["requests"], report["answered"], report["ok"], report["missing"]) == (150, 150, 150, 0)
    assert report["replies_to_other_requests"] == 180  # the CSV's and the Parquet file's
    collected = producer_cli(bootstrap, "collect", topics.replies, str(out), "--requests", str(parquet),
                             "--report", str(tmp_path / "parquet.json"), "--no-progress")
    assert collected.returncode == 0, collected.stderr
    report = orjson.loads((tmp_path / "parquet.json").read_bytes())
    assert (report["requests"], report["answered"], report["ok"], report["missing"]) == (80, 80, 80, 0)

    ghost = tmp_path / "with-ghost.jsonl"
    ghost.write_bytes(jsonl.read_bytes() + b'{"id": "ghost", "inputs": [1]}\n')
    collected = producer_cli(bootstrap, "collect", topics.replies, str(out), "--requests", str(ghost),
                             "--report", str(tmp_path / "ghost.json"), "--no-progress")
    assert collected.returncode == 1 and "missing  1" in collected.stderr
    assert orjson.loads((tmp_path / "ghost.json").read_bytes())["missing_ids"] == ["ghost"]


def test_send_and_score_on_confluent_kafka_key_records_as_kafka_python_does(bootstrap, redis_url, topics,
                                                                            tmp_path):
    pytest.importorskip("confluent_kafka")
    rng = random.Random(7)
    table = tmp_path / "customers.csv"
    with table.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["customer", *(f"f{k}" for k in range(16))])
        for i in range(200):
            writer.writerow([f"cust-{i % 11}", *CHURN.sample_inputs(rng)])
    jsonl = tmp_path / "requests.jsonl"
    jsonl.write_bytes(b"".join(orjson.dumps({"id": f"q{i}", "inputs": CHURN.sample_inputs(rng)}) + b"\n"
                               for i in range(300)))

    for client in ("kafka-python", "confluent"):
        sent = producer_cli(bootstrap, "send", topics.requests, "--file", str(table), "--key-field", "customer",
                            "--kafka-client", client, "--no-progress")
        assert sent.returncode == 0 and "sent 200 requests" in sent.stderr, sent.stderr
    # The client from the environment, as for the worker; a bad name there is refused as the flag's would be.
    sent = producer_cli(bootstrap, "send", topics.requests, "--file", str(jsonl), "--rate", "2000", "--no-progress",
                        env={"STREAMSCORE_KAFKA_CLIENT": "confluent"})
    assert sent.returncode == 0 and "sent 300 requests" in sent.stderr, sent.stderr
    refused = producer_cli(bootstrap, "send", topics.requests, "--file", str(jsonl), "--no-progress",
                           env={"STREAMSCORE_KAFKA_CLIENT": "librdkafka"})
    assert refused.returncode == 2, refused.stderr
    assert "kafka_client (--kafka-client, STREAMSCORE_KAFKA_CLIENT) must be kafka-python or confluent" in refused.stderr

    landed = TopicReader(bootstrap, topics.requests).read_until(lambda got: len(got.records) >= 700, 30, "requests")
    assert len(landed.records) == 700
    partition_of = {}
    for record in landed.records:
        if record.key.startswith(b"cust-"):  # one partition per customer, whichever client sent it
            assert partition_of.setdefault(record.key, record.partition) == record.partition
    assert len(partition_of) == 11 and len(set(partition_of.values())) > 1
    assert {r.key for r in landed.records if not r.key.startswith(b"cust-")} == {f"q{i}".encode() for i in range(300)}

    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    replies = TopicReader(bootstrap, topics.replies)
    replies.read_until(lambda got: len(got.records) >= 700, 90, "700 replies", watch=worker)
    scored = producer_cli(bootstrap, "score", topics.requests, topics.replies, orjson.dumps(CHURN.sample_inputs(rng))
                          .decode(), "--kafka-client", "confluent", "--timeout-s", "60")
    # Its reply printed to a reader that went away (score ... | head, head done): quiet, as SIGPIPE would be.
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as gone:
        unread = subprocess.run([sys.executable, "-m", "producer", "score", topics.requests, topics.replies,
                                 orjson.dumps(CHURN.sample_inputs(rng)).decode(), "--timeout-s", "60"],
                                env={**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
                                     "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "PYTHONPATH": str(REPO)},
                                cwd=REPO, stdout=gone, stderr=subprocess.PIPE, text=True, timeout=120)
    assert worker.stop() == 0
    assert scored.returncode == 0, scored.stderr
    assert orjson.loads(scored.stdout)["status"] == "ok"
    assert (unread.returncode, unread.stderr) == (141, "")
    assert {v["id"] for v in replies.read(1.0).values()} >= {f"q{i}" for i in range(300)}


def test_collect_joins_a_backfills_replies_with_the_requests_of_its_range(bootstrap, redis_url, topics, tmp_path,
                                                                          kafka_client):
    base = (time.time_ns() // 1_000_000 - 600_000) // 1000 * 1000
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
    rng = random.Random(6)
    for i in range(300):
        value = {"id": f"t{i}", "inputs": CHURN.sample_inputs(rng) if i != 150 else [1.0]}
        producer.send(topics.requests, key=f"t{i}".encode(), value=orjson.dumps(value), timestamp_ms=base + i)
        if i == 200:  # no id anywhere: a dead letter
            producer.send(topics.requests, value=b'{"inputs": []}', timestamp_ms=base + i)
    producer.flush()
    producer.close()
    backfill_topic = f"{topics.requests}.bf"
    create_topics(bootstrap, {backfill_topic: 2, f"{backfill_topic}.dlq": 1})
    window = ("--from-time", str(base + 100), "--until-time", format_ms(base + 250))  # t100 .. t249
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap, REDIS_URL=redis_url, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "worker", "backfill", "--requests-topic", topics.requests,
                           "--reply-topic", backfill_topic, *window, "--no-progress", "--torch-threads", "1",
                           "--kafka-client", kafka_client],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "151 in range" in done.stdout and "149 ok, 1 error" in done.stdout and "dead letters  1" in done.stdout

    out = tmp_path / "backfill.jsonl"
    collected = producer_cli(bootstrap, "collect", backfill_topic, str(out), "--requests-topic", topics.requests,
                             "--requests-from-time", window[1], "--requests-until-time", window[3], "--no-progress")
    assert collected.returncode == 0, collected.stderr
    report = orjson.loads((tmp_path / "backfill.jsonl.report.json").read_bytes())
    assert (report["requests"], report["answered"], report["ok"], report["error"], report["missing"]) == (
        150, 150, 149, 1, 0)
    assert report["requests_without_id"] == 1 and report["error_codes"] == {"wrong_input_length": 1}
    assert {orjson.loads(line)["id"] for line in out.read_bytes().splitlines()} == {f"t{i}" for i in range(100, 250)}
    dead = TopicReader(bootstrap, f"{backfill_topic}.dlq").read_until(lambda got: len(got.records) >= 1, 30,
                                                                      "dead letter")
    assert len(dead.records) == 1


def test_create_topic_answers_a_refused_or_existing_topic_in_one_line(bootstrap):
    suffix = f"{time.time_ns()}"
    for args, said in ((["bad topic!"], "InvalidTopicError"),
                       ([f"rf-{suffix}", "--replication-factor", "3"], "at most the number of brokers")):
        result = producer_cli(bootstrap, "create-topic", *args)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr and said in result.stderr, result.stderr
    refused = producer_cli(bootstrap, "create-topic", f"p-{suffix}", "--partitions", "0")
    assert refused.returncode == 2 and "--partitions: must be at least 1, got 0" in refused.stderr, refused.stderr
    name = f"exists-{suffix}"
    assert producer_cli(bootstrap, "create-topic", name, "--partitions", "2").stderr.strip() == f"{name}: created"
    again = producer_cli(bootstrap, "create-topic", name, "--partitions", "4")
    assert again.returncode == 0
    assert f"{name}: exists already, with 2 partitions, not the 4 asked for" in again.stderr
    single = f"single-{suffix}"
    producer_cli(bootstrap, "create-topic", single, "--partitions", "1")
    assert producer_cli(bootstrap, "create-topic", single, "--partitions", "1").stderr.strip() == \
        f"{single}: exists already, with 1 partition"


def test_score_refuses_inputs_that_are_not_json_saying_what_to_give(bootstrap):
    result = producer_cli(bootstrap, "score", "no-such-requests", "no-such-replies", "not json")
    assert result.returncode == 2
    assert "INPUTS is not JSON" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_score_without_a_worker_gives_up_after_its_timeout_with_exit_code_1(bootstrap, topics):
    result = producer_cli(bootstrap, "score", topics.requests, topics.replies, "[0.1]", "--timeout-s", "2")
    assert result.returncode == 1, result.stderr
    assert f"is a worker consuming {topics.requests}?" in result.stderr and "raise --timeout-s" in result.stderr
    assert "Traceback" not in result.stderr


def test_collect_reads_only_committed_replies(bootstrap, topics, tmp_path):
    """An exactly-once worker killed mid-transaction leaves aborted replies, sent again by the next: they are not
    replies, and collect must not count them as duplicates (it read them before)."""

    def reply_value(request_id, which):
        return orjson.dumps({"id": request_id, "status": "ok", "outputs": {"which": which}, "model": "m",
                             "model_version": "1"})

    writer = KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id=f"{topics.replies}.collect")
    writer.init_transactions()
    for which, commit in (("aborted", False), ("committed", True)):
        writer.begin_transaction()
        for i in range(5):
            writer.send(topics.replies, key=f"t{i}".encode(), value=reply_value(f"t{i}", which))
        writer.flush()
        if commit:
            writer.commit_transaction()
        else:
            writer.abort_transaction()
    writer.close()
    out = tmp_path / "replies.jsonl"
    collected = producer_cli(bootstrap, "collect", topics.replies, str(out), "--no-progress")
    assert collected.returncode == 0, collected.stderr
    assert [orjson.loads(line)["outputs"]["which"] for line in out.read_bytes().splitlines()] == ["committed"] * 5
    assert "0 duplicates skipped" in collected.stderr, collected.stderr
