"""The whole pipeline over the secured endpoints: Kafka over SASL_SSL (SCRAM-SHA-512) and over mutual TLS,
Redis over TLS as an ACL user. Every client here, the tests' own included, goes the secured way."""

import asyncio
import base64
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from producer import AsyncScoringClient, ScoringClient
from producer.topics import create_topics
from tests.integration.kit import REPO, Producer, TopicReader, Topics, start_worker
from tests.integration.redis_cluster import LocalCluster
from tests.integration.sentinels import SentinelSet, free_port
from tests.integration.test_pipeline import churn_inputs
from worker.core.security import KafkaSecurity


def worker_on(access, topics, tmp_path, *extra, name="worker"):
    return start_worker(access.bootstrap, access.redis_url, topics, tmp_path, *extra, name=name, env=access.env)


def answered_ids(bootstrap, security, topics, worker, prefix, count, send_security=None):
    """Send ``count`` churn requests (ids ``prefix``0, 1, ...; over ``send_security``, default ``security``), read
    the replies over ``security`` until each id is answered, stop the worker (exit 0); the answered ids, sorted."""
    producer = Producer(bootstrap, send_security or security)
    producer.send_requests(topics.requests, prefix, churn_inputs(count))
    producer.close()
    reader = TopicReader(bootstrap, topics.replies, security=security)
    landed = reader.read_until(lambda got: len(got.by_id()) >= count, 120, f"{count} replies", watch=worker)
    reader.close()
    assert worker.stop() == 0
    return sorted(landed.by_id())


def ids(prefix, count):
    return sorted(f"{prefix}{i}" for i in range(count))


def test_requests_are_scored_once_and_remembered_in_redis_over_tls(secure, secure_topics, secure_producer,
                                                                  tmp_path):
    topics = secure_topics
    worker = worker_on(secure, topics, tmp_path, "--max-batch-size", "32")
    secure_producer.send_requests(topics.requests, "s", churn_inputs(300))
    secure_producer.send_requests(topics.requests, "s", churn_inputs(5))  # the same ids again: duplicates
    reader = TopicReader(secure.bootstrap, topics.replies, security=secure.security)
    reader.read_until(lambda got: len(got.by_id()) >= 300, 120, "300 replies", watch=worker)
    assert worker.stop() == 0
    by_id = reader.read(1.0).by_id()
    reader.close()

    assert sorted(by_id) == sorted(f"s{i}" for i in range(300))
    assert all(len(replies) == 1 for replies in by_id.values())
    assert {r["status"] for replies in by_id.values() for r in replies} == {"ok"}
    assert secure.redis().get(f"{topics.requests}:done:s0") is not None  # dedup wrote over TLS, as the ACL user
    [stopped] = [e for e in worker.events() if e["event"] == "worker_stopped"]
    assert stopped["duplicates"] == 5


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_the_clients_score_over_sasl_ssl(sasl_ssl, tmp_path, kafka_client):
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    topics = _topics(sasl_ssl)
    worker = worker_on(sasl_ssl, topics, tmp_path)
    rows = churn_inputs(50, seed=3)
    with ScoringClient(sasl_ssl.bootstrap, topics.requests, topics.replies, timeout_s=120,
                       security=sasl_ssl.security, kafka_client=kafka_client) as client:
        results = list(client.score_many(rows, max_in_flight=20))

    async def score_async():
        async with AsyncScoringClient(sasl_ssl.bootstrap, topics.requests, topics.replies, timeout_s=120,
                                      security=sasl_ssl.security, kafka_client=kafka_client) as client:
            return await asyncio.gather(*(client.score(row) for row in rows[:10]))

    replies = asyncio.run(score_async())
    assert worker.stop() == 0
    assert [r.ok for r in results] == [True] * 50
    assert [r["status"] for r in replies] == ["ok"] * 10


def test_the_producer_cli_sends_and_collects_over_sasl_ssl(sasl_ssl, tmp_path):
    topics = _topics(sasl_ssl)
    worker = worker_on(sasl_ssl, topics, tmp_path)
    env = {**os.environ, **sasl_ssl.env, "PYTHONPATH": str(REPO)}
    producer = [sys.executable, "-m", "producer"]
    sent = subprocess.run([*producer, "send", topics.requests, "--synthetic", "churn", "--count", "40",
                           "--no-progress"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    reader = TopicReader(sasl_ssl.bootstrap, topics.replies, security=sasl_ssl.security)
    reader.read_until(lambda got: len(got.by_id()) >= 40, 120, "40 replies", watch=worker)
    reader.close()
    assert worker.stop() == 0
    out = tmp_path / "replies.jsonl"
    collected = subprocess.run([*producer, "collect", topics.replies, str(out), "--no-progress"], env=env, cwd=REPO,
                               capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stderr
    assert len(out.read_text().splitlines()) == 40


def test_exactly_once_over_sasl_ssl(sasl_ssl, tmp_path):
    topics = _topics(sasl_ssl)
    committed = TopicReader(sasl_ssl.bootstrap, topics.replies, read_committed=True, security=sasl_ssl.security)
    worker = worker_on(sasl_ssl, topics, tmp_path, "--delivery", "exactly-once", "--max-batch-size", "16")
    producer = Producer(sasl_ssl.bootstrap, sasl_ssl.security)
    producer.send_requests(topics.requests, "x", churn_inputs(200))
    producer.close()
    landed = committed.read_until(lambda got: len(got.by_id()) >= 200, 120, "200 committed replies", watch=worker)
    assert worker.stop() == 0
    landed = committed.read(1.0)
    committed.close()
    assert sorted(landed.by_id()) == sorted(f"x{i}" for i in range(200))
    assert len(landed.records) == 200
    assert "exactly_once" in {e["event"] for e in worker.events()}


def test_a_backfill_runs_over_sasl_ssl(sasl_ssl, tmp_path):
    topics = _topics(sasl_ssl)
    producer = Producer(sasl_ssl.bootstrap, sasl_ssl.security)
    producer.send_requests(topics.requests, "b", churn_inputs(120))
    producer.close()
    replies = f"{topics.requests}.backfill"
    create_topics(sasl_ssl.bootstrap, {replies: 2, f"{replies}.dlq": 1}, security=sasl_ssl.security)
    env = {**os.environ, **sasl_ssl.env, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "worker", "backfill", "--requests-topic", topics.requests,
                           "--reply-topic", replies, "--from-time", "0", "--no-progress", "--log-format", "json",
                           "--torch-threads", "1"], env=env, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    reader = TopicReader(sasl_ssl.bootstrap, replies, security=sasl_ssl.security)
    landed = reader.read_until(lambda got: len(got.records) >= 120, 60, "120 backfill replies")
    reader.close()
    assert sorted(landed.by_id()) == sorted(f"b{i}" for i in range(120))


def _topics(access):
    return Topics.create(access.bootstrap, security=access.security)


def unsigned_jwt(subject, lifetime_s=3600):
    """A token for Kafka's unsecured OAUTHBEARER validator (the local broker's; test only)."""
    def part(claims):
        return base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()

    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


def test_oauthbearer_with_a_token_file(sasl_ssl, tmp_path):
    token = tmp_path / "token"
    token.write_text(unsigned_jwt("streamscore") + "\n")
    oauth = sasl_ssl.with_env(KAFKA_SASL_MECHANISM="OAUTHBEARER", KAFKA_SASL_USERNAME="",
                              KAFKA_SASL_PASSWORD_FILE="", KAFKA_SASL_OAUTH_TOKEN_FILE=str(token))
    topics = _topics(sasl_ssl)
    worker = start_worker(sasl_ssl.bootstrap, sasl_ssl.redis_url, topics, tmp_path, name="oauth", env=oauth)
    assert answered_ids(sasl_ssl.bootstrap, sasl_ssl.security, topics, worker, "o", 20,
                        send_security=KafkaSecurity.from_sources(None, oauth)) == ids("o", 20)

    token.write_text("not-a-jwt")  # a refused token is named as such
    env = {**os.environ, **oauth, "PYTHONPATH": str(REPO)}
    refused = subprocess.run([sys.executable, "-m", "producer", "create-topic", "never-made"], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "refused the OAUTHBEARER token in KAFKA_SASL_OAUTH_TOKEN_FILE" in refused.stderr


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_mutual_tls_with_an_encrypted_key_and_its_passphrase_file(mtls, tmp_path, kafka_client):
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    from tests.secure.test_secure_failures import encrypted_key

    passphrase = tmp_path / "key-passphrase"
    passphrase.write_text("key-passphrase\n")
    locked = mtls.with_env(KAFKA_SSL_KEYFILE=encrypted_key(mtls, tmp_path),
                           KAFKA_SSL_KEY_PASSWORD_FILE=str(passphrase))
    security = KafkaSecurity.from_sources(None, locked)
    topics = Topics.create(mtls.bootstrap, security=security)
    worker = start_worker(mtls.bootstrap, mtls.redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          env=locked)
    assert answered_ids(mtls.bootstrap, security, topics, worker, "e", 40) == ids("e", 40)


@pytest.fixture
def redis_wanting_certificates(mtls, tmp_path):
    """A Redis of the test's own over TLS that wants a client certificate (tls-auth-clients yes), with the local
    services' CA and server certificate; yields its rediss:// URL."""
    secure = Path(mtls.env["KAFKA_SSL_CAFILE"]).parent
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                               "--tls-cert-file", str(secure / "server.pem"), "--tls-key-file",
                               str(secure / "server.key"), "--tls-ca-cert-file", str(secure / "ca.pem"),
                               "--tls-auth-clients", "yes", "--save", "", "--appendonly", "no", "--dir",
                               str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the test's Redis did not start"
                time.sleep(0.1)
        yield f"rediss://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)


def test_redis_mutual_tls_with_a_client_certificate_and_its_encrypted_key(mtls, redis_wanting_certificates, tmp_path):
    from tests.secure.test_secure_failures import encrypted_key
    from worker.dedup.redis_store import RedisAccess, connect_redis

    url, ca = redis_wanting_certificates, mtls.env["KAFKA_SSL_CAFILE"]
    cert, key = mtls.env["KAFKA_SSL_CERTFILE"], mtls.env["KAFKA_SSL_KEYFILE"]  # the services' client certificate
    passphrase = tmp_path / "key-passphrase"
    passphrase.write_text("key-passphrase\n")
    both = mtls.with_env(REDIS_PASSWORD_FILE="", REDIS_CA_FILE=ca, REDIS_CERT_FILE=cert,
                         REDIS_KEY_FILE=encrypted_key(mtls, tmp_path), REDIS_KEY_PASSWORD_FILE=str(passphrase))
    topics = Topics.create(mtls.bootstrap, security=mtls.security)

    refused = start_worker(mtls.bootstrap, url, topics, tmp_path, name="no-certificate",
                           env={**both, "REDIS_CERT_FILE": "", "REDIS_KEY_FILE": "", "REDIS_KEY_PASSWORD_FILE": ""})
    assert refused.process.wait(timeout=60) == 2
    assert "REDIS_CERT_FILE" in refused.log() and "Traceback" not in refused.log()

    worker = start_worker(mtls.bootstrap, url, topics, tmp_path, env=both)
    assert answered_ids(mtls.bootstrap, mtls.security, topics, worker, "m", 30) == ids("m", 30)
    assert connect_redis(url, RedisAccess(ca_file=ca, cert_file=cert, key_file=key)).get(f"{topics.requests}:done:m0")



def test_sentinels_over_tls_through_rediss_sentinel(mtls, tmp_path):
    """Sentinels, a primary and its replica listening with TLS only: rediss+sentinel:// reaches them with
    REDIS_CA_FILE; redis+sentinel:// is refused at start, naming the TLS scheme."""
    ca = Path(mtls.env["KAFKA_SSL_CAFILE"])
    sentinels = SentinelSet(tmp_path, tls=ca.parent).start()
    topics = Topics.create(mtls.bootstrap, security=mtls.security)
    env = mtls.with_env(REDIS_PASSWORD_FILE="", REDIS_CA_FILE=str(ca))
    try:
        plaintext = start_worker(mtls.bootstrap, sentinels.url.replace("rediss+", "redis+"), topics, tmp_path,
                                 name="plaintext", env={**env, "REDIS_CA_FILE": ""})
        assert plaintext.process.wait(timeout=60) == 2
        assert "write rediss+sentinel://" in plaintext.log() and "Traceback" not in plaintext.log()

        worker = start_worker(mtls.bootstrap, sentinels.url, topics, tmp_path, env=env)
        answered = answered_ids(mtls.bootstrap, mtls.security, topics, worker, "t", 30)
        assert sentinels.client(sentinels.primary_port()).get(f"{topics.requests}:done:t0")
    finally:
        sentinels.stop()
    assert answered == ids("t", 30)


def test_a_redis_cluster_over_tls_through_rediss_cluster(mtls, tmp_path):
    """A three-primary Redis Cluster whose nodes listen, and speak to each other, with TLS only: rediss+cluster://
    reaches every node with REDIS_CA_FILE, and the done marks spread over the three; without the CA, or over
    redis+cluster://, the worker stops at start naming what to set."""
    ca = Path(mtls.env["KAFKA_SSL_CAFILE"])
    cluster = LocalCluster(tmp_path, tls=ca.parent).start()
    topics = Topics.create(mtls.bootstrap, security=mtls.security)
    env = mtls.with_env(REDIS_PASSWORD_FILE="", REDIS_CA_FILE=str(ca))
    try:
        for url, ca_file, said in ((cluster.url, "", "point REDIS_CA_FILE at the CA"),
                                   (cluster.url.replace("rediss+", "redis+"), "", "write rediss+cluster://")):
            refused = start_worker(mtls.bootstrap, url, topics, tmp_path, name="refused",
                                   env={**env, "REDIS_CA_FILE": ca_file})
            assert refused.process.wait(timeout=60) == 2
            assert said in refused.log() and "Traceback" not in refused.log(), refused.log()
        worker = start_worker(mtls.bootstrap, cluster.url, topics, tmp_path, env=env)
        answered = answered_ids(mtls.bootstrap, mtls.security, topics, worker, "c", 60)
        marks = cluster.keys_per_node(f"{topics.requests}:done:*")
    finally:
        cluster.stop()
    assert answered == ids("c", 60)
    assert sum(marks) == 60 and all(count > 0 for count in marks), marks
