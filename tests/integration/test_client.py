"""ScoringClient and AsyncScoringClient against a real broker, Redis and worker process, on either Kafka client
library (``kafka_client=``; the worker stays on kafka-python unless a test says otherwise)."""

import asyncio
import random
import time
from concurrent.futures import wait

import orjson
import pytest

from producer import AsyncScoringClient, ClientRequest, ReplyTimeout, ScoringClient
from producer.topics import create_topics
from tests.integration.kit import TopicReader, start_worker
from worker.models import load_model
from worker.models.runner import TorchRunner

CHURN = load_model("churn")
RUNNER = TorchRunner(CHURN, "cpu", 256)


@pytest.fixture(params=["kafka-python", "confluent"])
def kafka_client(request):
    if request.param == "confluent":
        pytest.importorskip("confluent_kafka")
    return request.param


def churn_inputs(count, seed=0):
    rng = random.Random(seed)
    return [CHURN.sample_inputs(rng) for _ in range(count)]


def expected_scores(inputs):
    return [o.output["churn_probability"] for o in RUNNER.run([RUNNER.prepare(row) for row in inputs])]


def test_a_thousand_requests_in_flight_each_get_their_own_reply(bootstrap, redis_url, topics, tmp_path,
                                                                kafka_client):
    inputs = churn_inputs(1000)
    expected = expected_scores(inputs)
    with ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=180, retries=0,
                       kafka_client=kafka_client) as client:
        futures = [client.submit(row) for row in inputs]
        assert client.in_flight == 1000  # no worker yet: every one of them is waiting
        worker = start_worker(bootstrap, redis_url, topics, tmp_path)
        done, waiting = wait(futures, timeout=180)
        assert not waiting, f"{len(waiting)} requests unanswered\n{worker.log()[-3000:]}"
        assert client.in_flight == 0
    assert worker.stop() == 0
    replies = [f.result() for f in futures]
    assert len({r["id"] for r in replies}) == 1000
    for reply, score in zip(replies, expected, strict=True):  # each future got the reply to its own inputs
        assert reply["status"] == "ok"
        assert reply["outputs"]["churn_probability"] == pytest.approx(score, abs=1e-6)


def test_score_many_streams_every_result_and_bounds_the_requests_in_flight(bootstrap, redis_url, topics,
                                                                          tmp_path, kafka_client):
    inputs = churn_inputs(2000, seed=1)
    expected = expected_scores(inputs)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    seen_in_flight = []
    with ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=120,
                       kafka_client=kafka_client) as client:
        def items():
            for i, row in enumerate(inputs):
                seen_in_flight.append(client.in_flight)
                yield ClientRequest(row, id=f"many-{i}") if i % 2 else row

        results = list(client.score_many(items(), max_in_flight=100))
        stream = client.score_many(inputs, max_in_flight=300)
        assert next(stream).ok
        stream.close()  # the caller stops early: the rest is abandoned, not resent
        assert client.in_flight == 0
    assert worker.stop() == 0
    assert max(seen_in_flight) <= 100
    assert sorted(r.index for r in results) == list(range(2000))
    assert all(r.ok and r.error is None for r in results)
    assert all(r.request_id == f"many-{r.index}" for r in results if r.index % 2)
    for result in results:
        assert result.reply["id"] == result.request_id
        assert result.reply["outputs"]["churn_probability"] == pytest.approx(expected[result.index], abs=1e-6)


def test_the_asyncio_client_scores_submits_and_streams(bootstrap, redis_url, topics, tmp_path, kafka_client):
    inputs = churn_inputs(600, seed=2)
    expected = expected_scores(inputs)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)

    async def scenario():
        async with AsyncScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=120,
                                      kafka_client=kafka_client) as client:
            one = await client.score(inputs[0])
            gathered = await asyncio.gather(*(client.submit(row) for row in inputs[1:200]))

            async def rest():
                for row in inputs[200:]:
                    yield row
                    await asyncio.sleep(0)

            streamed = [result async for result in client.score_many(rest(), max_in_flight=50)]
            return [one, *gathered], streamed

    replies, streamed = asyncio.run(scenario())
    assert worker.stop() == 0
    for reply, score in zip(replies, expected[:200], strict=True):  # the first 200 were scored and submitted
        assert reply["outputs"]["churn_probability"] == pytest.approx(score, abs=1e-6)
    assert sorted(r.index for r in streamed) == list(range(400))
    for result in streamed:
        assert result.reply["outputs"]["churn_probability"] == pytest.approx(expected[200 + result.index], abs=1e-6)


def test_a_timeout_raises_after_retries_with_the_same_id_and_the_worker_scores_it_once(bootstrap, redis_url,
                                                                                      topics, tmp_path,
                                                                                      kafka_client):
    row = churn_inputs(1, seed=3)[0]
    with ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=1.5, retries=2,
                       kafka_client=kafka_client) as client:
        started = time.monotonic()
        with pytest.raises(ReplyTimeout, match=r"no reply for request patient-1 .* within 1.5 s \(3 sends\)"):
            client.score(row, request_id="patient-1")
        assert 1.4 < time.monotonic() - started < 5
        assert client.in_flight == 0
    requests = TopicReader(bootstrap, topics.requests).read_until(lambda got: len(got.records) >= 3, 30, "3 sends")
    assert [r.key for r in requests.records] == [b"patient-1"] * 3
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    reader = TopicReader(bootstrap, topics.replies)
    reader.read_until(lambda got: "patient-1" in got.by_id(), 60, "the reply", watch=worker)
    assert worker.stop() == 0
    assert len(reader.read(1.0).by_id()["patient-1"]) == 1  # three sends, one reply
    [stopped] = [e for e in worker.events() if e.get("event") == "worker_stopped"]
    assert (stopped["replied_ok"], stopped["duplicates"]) == (1, 2)


def test_a_client_with_a_reply_topic_of_its_own_shares_the_worker_with_others(bootstrap, redis_url, topics,
                                                                             tmp_path, kafka_client):
    own = f"{topics.requests}.replies.billing"
    create_topics(bootstrap, {own: 1})
    inputs = churn_inputs(200, seed=4)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path)
    with ScoringClient(bootstrap, topics.requests, own, kafka_client=kafka_client) as billing, \
            ScoringClient(bootstrap, topics.requests, topics.replies, kafka_client=kafka_client) as shared:
        billing_results = list(billing.score_many(inputs[:100], max_in_flight=30))
        shared_results = list(shared.score_many(inputs[100:], max_in_flight=30))
    assert worker.stop() == 0
    assert all(r.ok for r in billing_results + shared_results)
    on_own = TopicReader(bootstrap, own).read(1.0).by_id().keys()
    on_shared = TopicReader(bootstrap, topics.replies).read(1.0).by_id().keys()
    assert on_own == {r.request_id for r in billing_results}
    assert on_shared == {r.request_id for r in shared_results}


def test_a_missing_topic_is_named_at_once(bootstrap, topics, kafka_client):
    with pytest.raises(LookupError, match="requests topic 'nope-"):
        ScoringClient(bootstrap, "nope-" + topics.requests, topics.replies, kafka_client=kafka_client)
    with pytest.raises(LookupError, match="reply topic 'nope-"):
        ScoringClient(bootstrap, topics.requests, "nope-" + topics.replies, kafka_client=kafka_client)


def test_a_read_committed_client_never_takes_a_reply_of_an_aborted_transaction(bootstrap, topics, kafka_client):
    """What exactly-once users need: an aborted reply (which the worker sends again) is not the answer."""
    from kafka import KafkaProducer

    def reply_value(request_id, outputs):
        return orjson.dumps({"id": request_id, "status": "ok", "outputs": outputs, "model": "m", "model_version": "1"})

    writer = KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id=f"{topics.replies}.test")
    writer.init_transactions()
    with ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=60, retries=0,
                       read_committed=True, kafka_client=kafka_client) as client:
        future = client.submit([0.5] * 16, request_id="txn-1")
        for which, commit in (("aborted", False), ("committed", True)):
            writer.begin_transaction()
            writer.send(topics.replies, key=b"txn-1", value=reply_value("txn-1", {"which": which}))
            writer.flush()
            if commit:
                writer.commit_transaction()
            else:
                writer.abort_transaction()
        assert future.result(timeout=60)["outputs"] == {"which": "committed"}
    writer.close()


def test_a_read_committed_client_takes_each_reply_of_an_exactly_once_worker_on_the_same_client(
        bootstrap, redis_url, topics, tmp_path, kafka_client):
    inputs = churn_inputs(300, seed=7)
    expected = expected_scores(inputs)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--delivery", "exactly-once", "--max-batch-size", "16", "--max-wait-ms", "5")
    with ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=120, read_committed=True,
                       kafka_client=kafka_client) as client:
        results = list(client.score_many(inputs, max_in_flight=100))
    assert worker.stop() == 0
    assert {"exactly_once"} <= {e["event"] for e in worker.events()}
    assert sorted(r.index for r in results) == list(range(300))
    for result in results:
        assert result.ok, result.error
        assert result.reply["outputs"]["churn_probability"] == pytest.approx(expected[result.index], abs=1e-6)


def test_requests_given_up_on_are_forgotten_their_ids_work_again_and_late_replies_are_counted(
        bootstrap, redis_url, topics, tmp_path, kafka_client):
    """Cancelled (an asyncio task, a concurrent future) or timed out, a request leaves the in-flight table: the
    same id sent again waits for its reply like a new request, and a reply for one nobody waits for is
    dropped and counted. The worker starts only after the client gave up on each."""
    rows = churn_inputs(3, seed=8)
    expected = expected_scores(rows)

    async def scenario():
        async with AsyncScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=120, retries=0,
                                      kafka_client=kafka_client) as client:
            cancelled = asyncio.create_task(client.score(rows[0], request_id="again-async"))
            await until(lambda: client.sync.in_flight == 1, "the request in flight")
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert client.sync.in_flight == 0
            again_async = client.submit(rows[0], request_id="again-async")

            first = client.sync.submit(rows[1], request_id="again-sync")
            assert first.cancel()
            assert client.sync.in_flight == 1  # again-async only
            again_sync = client.sync.submit(rows[1], request_id="again-sync")
            assert again_sync is not first and not again_sync.done()

            with pytest.raises(ReplyTimeout):
                await client.score(rows[2], request_id="late-1", timeout_s=0.5)
            assert client.sync.in_flight == 2 and client.sync.late_replies == 0

            worker = start_worker(bootstrap, redis_url, topics, tmp_path)
            replies = await asyncio.wait_for(asyncio.gather(again_async, asyncio.wrap_future(again_sync)), 120)
            await until(lambda: client.sync.late_replies == 1, "late-1's reply, counted")
            assert client.sync.in_flight == 0
            return worker, replies

    worker, replies = asyncio.run(scenario())
    assert worker.stop() == 0
    assert [r["id"] for r in replies] == ["again-async", "again-sync"]
    for reply, score in zip(replies, expected[:2], strict=True):
        assert reply["outputs"]["churn_probability"] == pytest.approx(score, abs=1e-6)


async def until(condition, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.01)
