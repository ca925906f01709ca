"""The confluent-kafka transport over the secured endpoints: the same KafkaSecurity settings, turned into
librdkafka's properties, reach Kafka over SASL_SSL (SCRAM-SHA-512, and OAUTHBEARER from a token file) and
over mutual TLS."""

import pytest

from tests.integration.kit import Producer, TopicReader, Topics, start_worker
from tests.integration.test_pipeline import churn_inputs
from tests.secure.test_secure_pipeline import unsigned_jwt
from worker.core.security import KafkaSecurity

pytest.importorskip("confluent_kafka")

CONFLUENT = ("--kafka-client", "confluent")


def test_requests_are_scored_once_over_each_secured_way(secure, secure_topics, secure_producer, tmp_path):
    topics = secure_topics
    worker = start_worker(secure.bootstrap, secure.redis_url, topics, tmp_path, *CONFLUENT, "--max-batch-size", "32",
                          env=secure.env)
    secure_producer.send_requests(topics.requests, "c", churn_inputs(200))
    reader = TopicReader(secure.bootstrap, topics.replies, security=secure.security)
    reader.read_until(lambda got: len(got.by_id()) >= 200, 120, "200 replies", watch=worker)
    assert worker.stop() == 0
    by_id = reader.read(1.0).by_id()
    reader.close()
    assert sorted(by_id) == sorted(f"c{i}" for i in range(200))
    assert max(len(replies) for replies in by_id.values()) == 1
    assert not [e for e in worker.events() if e.get("event") == "kafka_client_error"]


def test_oauthbearer_tokens_come_from_the_token_file(sasl_ssl, tmp_path):
    token = tmp_path / "token"
    token.write_text(unsigned_jwt("streamscore") + "\n")
    oauth = sasl_ssl.with_env(KAFKA_SASL_MECHANISM="OAUTHBEARER", KAFKA_SASL_USERNAME="",
                              KAFKA_SASL_PASSWORD_FILE="", KAFKA_SASL_OAUTH_TOKEN_FILE=str(token))
    topics = Topics.create(sasl_ssl.bootstrap, security=sasl_ssl.security)
    worker = start_worker(sasl_ssl.bootstrap, sasl_ssl.redis_url, topics, tmp_path, *CONFLUENT, name="oauth",
                          env=oauth)
    producer = Producer(sasl_ssl.bootstrap, KafkaSecurity.from_sources(None, oauth))
    producer.send_requests(topics.requests, "o", churn_inputs(20))
    producer.close()
    reader = TopicReader(sasl_ssl.bootstrap, topics.replies, security=sasl_ssl.security)
    landed = reader.read_until(lambda got: len(got.by_id()) >= 20, 120, "20 replies", watch=worker)
    reader.close()
    assert worker.stop() == 0
    assert sorted(landed.by_id()) == sorted(f"o{i}" for i in range(20))
