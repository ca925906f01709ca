"""The whole pipeline against a real Kafka broker and a real Redis server."""

import random
import subprocess
import sys

import orjson
import pytest
import redis

from tests.integration.kit import REPO, TopicReader, start_worker, stop_while_sending, wait_until
from worker.models import load_model

CHURN = load_model("churn")


def churn_inputs(count, seed=0):
    rng = random.Random(seed)
    return [CHURN.sample_inputs(rng) for _ in range(count)]


@pytest.mark.parametrize("model_thread", ["off", "on"])
def test_every_request_gets_exactly_one_reply_equal_to_offline_scoring(bootstrap, redis_url, topics, producer,
                                                                      tmp_path, model_thread):
    inputs = churn_inputs(600)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--max-batch-size", "32", "--max-wait-ms", "20",
                          "--model-thread", model_thread)
    producer.send_requests(topics.requests, "r", inputs)
    reader = TopicReader(bootstrap, topics.replies)
    landed = reader.read_until(lambda got: len(got.by_id()) >= 600, 90, "600 replies", watch=worker)
    assert worker.stop() == 0, worker.log()
    landed = reader.read(1.0)

    by_id = landed.by_id()
    assert sorted(by_id) == sorted(f"r{i}" for i in range(600))
    assert all(len(replies) == 1 for replies in by_id.values())
    assert {r["status"] for r in landed.values()} == {"ok"}

    offline_in = tmp_path / "requests.jsonl"
    offline_in.write_bytes(b"".join(orjson.dumps({"id": f"r{i}", "inputs": row}) + b"\n"
                                    for i, row in enumerate(inputs)))
    offline_out = tmp_path / "replies.jsonl"
    subprocess.run([sys.executable, "-m", "worker", "score-file", str(offline_in), str(offline_out),
                    "--no-progress", "--max-batch-size", "50"], cwd=REPO, check=True)
    offline = [orjson.loads(line) for line in offline_out.read_bytes().splitlines()]
    assert [o["id"] for o in offline] == [f"r{i}" for i in range(600)]
    for reply in offline:
        streamed = by_id[reply["id"]][0]["outputs"]["churn_probability"]
        assert abs(streamed - reply["outputs"]["churn_probability"]) < 1e-6


def test_reply_headers_and_keys_follow_the_contract(bootstrap, redis_url, topics, producer, tmp_path):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    producer.send(topics.requests, {"id": "traced", "inputs": churn_inputs(1)[0]},
                  headers=[("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")])
    producer.flush()
    reader = TopicReader(bootstrap, topics.replies)
    landed = reader.read_until(lambda got: len(got.records) >= 1, 60, "one reply", watch=worker)
    assert worker.stop() == 0
    record = landed.records[0]
    headers = dict(record.headers)
    assert record.key == b"traced"
    assert headers["traceparent"].startswith(b"00-0af7651916cd43dd")
    assert headers["source-topic"] == topics.requests.encode()
    assert int(headers["batch-size"]) == 1
    assert {"queue-wait-ms", "batch-wait-ms", "compute-ms", "source-partition", "source-offset"} <= headers.keys()
    body = orjson.loads(record.value)
    assert body["model"] == "churn" and body["model_version"] == CHURN.version


def test_a_duplicated_request_id_is_answered_once_and_scored_once(bootstrap, redis_url, topics, producer, tmp_path):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    row = churn_inputs(1)[0]
    # Three distinct records, likely on different partitions, each followed on its partition by a marker of
    # its own (the same key): once every marker is answered, every record before it was consumed.
    for partition_key in (b"a", b"b", b"c"):
        producer.send(topics.requests, {"id": "dup-1", "inputs": row}, key=partition_key)
        producer.send(topics.requests, {"id": f"marker-{partition_key.decode()}", "inputs": row}, key=partition_key)
    producer.flush()
    reader = TopicReader(bootstrap, topics.replies)
    markers = {"marker-a", "marker-b", "marker-c"}
    reader.read_until(lambda got: markers <= got.by_id().keys(), 60, "the marker replies", watch=worker)
    assert worker.stop() == 0
    # Later, a fresh worker (as after a restart) must not score it again either.
    producer.send(topics.requests, {"id": "dup-1", "inputs": row}, key=b"d")
    producer.send(topics.requests, {"id": "marker-d", "inputs": row}, key=b"d")
    producer.flush()
    second = start_worker(bootstrap, redis_url, topics, tmp_path, name="second")
    landed = reader.read_until(lambda got: "marker-d" in got.by_id(), 60, "the second worker's marker reply",
                               watch=second)
    assert second.stop() == 0
    assert len(landed.by_id()["dup-1"]) == 1
    stopped = [e for w in (worker, second) for e in w.events() if e.get("event") == "worker_stopped"]
    # Each later record with the id is a counted duplicate (a record consumed again after a
    # rebalance counts again, so at least three).
    assert sum(e["duplicates"] for e in stopped) >= 3
    assert sum(e["replied_ok"] for e in stopped) == 5  # dup-1 once and the four markers
    done = redis.Redis.from_url(redis_url).get(f"{topics.requests}:done:dup-1")
    assert done is not None and orjson.loads(done)["id"] == "dup-1"


def test_malformed_records_get_error_replies_or_dead_letters_and_the_worker_keeps_going(
        bootstrap, redis_url, topics, producer, tmp_path):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    producer.send(topics.requests, b"{not json", key=b"bad-json")
    producer.send(topics.requests, b"\xff\xfe binary garbage")
    producer.send(topics.requests, {"inputs": [1.0] * 16})  # no id anywhere
    producer.send(topics.requests, {"id": "short", "inputs": [1.0, 2.0]})
    producer.send(topics.requests, {"id": "text", "inputs": "hello"})
    producer.send(topics.requests, None, key=b"tombstone")
    producer.flush()
    producer.send(topics.requests, {"id": "still-alive", "inputs": churn_inputs(1)[0]})
    producer.flush()
    replies = TopicReader(bootstrap, topics.replies)
    landed = replies.read_until(lambda got: {"bad-json", "short", "text", "tombstone", "still-alive"}
                                <= got.by_id().keys(), 60, "error replies and the good reply", watch=worker)
    dead = TopicReader(bootstrap, topics.dlq).read_until(lambda got: len(got.records) >= 2, 60, "two dead letters",
                                                         watch=worker)
    assert worker.process.poll() is None, "the worker died on bad input"
    assert worker.stop() == 0
    codes = {i: r[0].get("error", {}).get("code") for i, r in landed.by_id().items()}
    assert codes == {"bad-json": "invalid_json", "short": "wrong_input_length", "text": "invalid_inputs",
                     "tombstone": "empty_value", "still-alive": None}
    dead_values = sorted(r.value for r in dead.records)
    assert dead_values == sorted([b"\xff\xfe binary garbage", orjson.dumps({"inputs": [1.0] * 16})])
    reasons = {dict(r.headers)["dlq-error-code"] for r in dead.records}
    assert reasons == {b"invalid_json", b"missing_id"}


def test_per_request_reply_to_wins(bootstrap, redis_url, topics, producer, tmp_path):
    from producer.topics import create_topics

    private = f"{topics.requests}.private"
    create_topics(bootstrap, {private: 1})
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    row = churn_inputs(1)[0]
    producer.send(topics.requests, {"id": "to-private", "inputs": row, "reply_to": private})
    producer.send(topics.requests, {"id": "by-header", "inputs": row}, headers=[("reply-to", private.encode())])
    producer.send(topics.requests, {"id": "to-default", "inputs": row})
    producer.flush()
    landed_private = TopicReader(bootstrap, private).read_until(lambda got: len(got.records) >= 2, 60,
                                                                "private replies", watch=worker)
    landed_default = TopicReader(bootstrap, topics.replies).read_until(lambda got: len(got.records) >= 1, 60,
                                                                       "default", watch=worker)
    assert worker.stop() == 0
    assert sorted(landed_private.by_id()) == ["by-header", "to-private"]
    assert list(landed_default.by_id()) == ["to-default"]


def test_sigterm_mid_stream_loses_nothing_and_repeats_nothing(bootstrap, redis_url, topics, producer, tmp_path):
    total = 3000
    inputs = churn_inputs(total)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--max-batch-size", "16", "--max-wait-ms", "5")
    reader = TopicReader(bootstrap, topics.replies)
    producer.send_requests(topics.requests, "s", inputs[:total // 2])
    reader.read_until(lambda got: len(got.records) >= 200, 60, "the worker to be mid-stream", watch=worker)
    code = stop_while_sending(worker, producer, topics.requests, "s", inputs[total // 2:total], total // 2)
    assert code == 0, worker.log()
    answered_by_first = len(reader.read(0.5).by_id())
    assert answered_by_first < total, "the first worker finished everything: SIGTERM was not mid-stream"

    successor = start_worker(bootstrap, redis_url, topics, tmp_path, name="successor")
    reader.read_until(lambda got: len(got.by_id()) >= total, 90, f"{total} answered ids", watch=successor)
    assert successor.stop() == 0
    by_id = reader.read(0.5).by_id()
    assert sorted(by_id) == sorted(f"s{i}" for i in range(total))
    assert max(len(replies) for replies in by_id.values()) == 1, "a clean stop must not cause duplicate replies"


def test_expired_request_is_not_scored_and_its_id_stays_usable(bootstrap, redis_url, topics, producer, tmp_path):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    row = churn_inputs(1)[0]
    producer.send(topics.requests, {"id": "late", "inputs": row, "deadline_ms": 1_000})  # 1970: long gone
    producer.flush()
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: "late" in got.by_id(), 60, "the expired reply", watch=worker)
    producer.send(topics.requests, {"id": "late", "inputs": row})  # the client retries without a deadline
    producer.flush()
    landed = reader.read_until(lambda got: len(got.by_id().get("late", [])) == 2, 60, "the retried reply", watch=worker)
    assert worker.stop() == 0
    assert [r["status"] for r in landed.by_id()["late"]] == ["expired", "ok"]


def test_a_corrected_retry_in_the_same_poll_as_its_refused_first_try_is_scored(bootstrap, redis_url, topics,
                                                                                 producer, tmp_path):
    """Written before the worker starts, on one partition, so that one poll holds both tries: the retry's id is
    claimed by the first try until its error reply releases it (it was counted a duplicate and got no reply)."""
    row = churn_inputs(1)[0]
    for request_id, first_try in (("short", {"inputs": row[:3]}), ("late", {"inputs": row, "deadline_ms": 1_000})):
        producer.send(topics.requests, {"id": request_id, **first_try}, key=b"one-partition")
        producer.send(topics.requests, {"id": request_id, "inputs": row}, key=b"one-partition")
    producer.flush()
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    reader = TopicReader(bootstrap, topics.replies)
    landed = reader.read_until(lambda got: all(len(got.by_id().get(i, [])) == 2 for i in ("short", "late")), 60,
                               "both tries of each id answered", watch=worker)
    assert worker.stop() == 0
    assert [r["status"] for r in landed.by_id()["short"]] == ["error", "ok"]
    assert [r["status"] for r in landed.by_id()["late"]] == ["expired", "ok"]


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_second_worker_joining_mid_batch_loses_nothing(bootstrap, redis_url, topics, producer, tmp_path, assignor):
    """A rebalance while a worker holds unscored requests: no request may be lost or scored twice."""
    slow_batches = ("--max-batch-size", "1000", "--max-wait-ms", "4000", "--stats-interval-s", "0.2",
                    "--assignor", assignor)
    first = start_worker(bootstrap, redis_url, topics, tmp_path, *slow_batches, name="first")
    inputs = churn_inputs(200)
    producer.send_requests(topics.requests, "j", inputs)
    wait_until(lambda: any(e.get("consumed", 0) >= 200 for e in first.events()), 60,
               "the first worker to hold every request")
    second = start_worker(bootstrap, redis_url, topics, tmp_path, *slow_batches, name="second")
    wait_until(lambda: any(e.get("event") == "partitions_assigned" and e["partitions"] for e in second.events()),
               60, "the second worker to get partitions")
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: len(got.by_id()) >= 200, 90, "200 answered ids", watch=first)
    assert first.stop() == 0 and second.stop() == 0
    by_id = reader.read(0.5).by_id()
    assert sorted(by_id) == sorted(f"j{i}" for i in range(200))
    assert max(len(replies) for replies in by_id.values()) == 1


def test_processes_share_the_group_and_stop_together(bootstrap, redis_url, topics, producer, tmp_path):
    supervisor = start_worker(bootstrap, redis_url, topics, tmp_path, "--processes", "2", name="supervisor")
    wait_until(lambda: len({e["client_id"] for e in supervisor.events()
                            if e.get("event") == "partitions_assigned" and e["partitions"]}) == 2,
               90, "both processes to own partitions")
    producer.send_requests(topics.requests, "p", churn_inputs(400))
    reader = TopicReader(bootstrap, topics.replies)
    landed = reader.read_until(lambda got: len(got.by_id()) >= 400, 90, "400 replies", watch=supervisor)
    assert supervisor.stop() == 0
    stopped = [e for e in supervisor.events() if e.get("event") == "worker_stopped"]
    assert len(stopped) == 2 and all(e["replied_ok"] > 0 for e in stopped)  # both did work
    assert sorted(e["client_id"] for e in stopped) == ["streamscore-worker-0", "streamscore-worker-1"]
    assert max(len(r) for r in landed.by_id().values()) == 1
