"""The confluent-kafka transport's own logic, without a broker: KafkaSecurity as librdkafka properties (which
librdkafka itself accepts), the consumer's properties per group protocol, the generation read from the group
metadata, OAUTHBEARER tokens and their expiry, and a sink whose broker never answers."""

from __future__ import annotations

import base64
import sys
import time

import orjson
import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from tests.fakes import FakeClock  # noqa: E402
from worker.core.bounds import METADATA_S  # noqa: E402
from worker.core.clock import SystemClock  # noqa: E402
from worker.core.errors import ConfigError  # noqa: E402
from worker.core.security import KafkaSecurity, Secret  # noqa: E402
from worker.core.settings import Settings  # noqa: E402
from worker.kafka.confluent.connection import client_config  # noqa: E402
from worker.kafka.confluent.sink import ConfluentSink  # noqa: E402
from worker.kafka.confluent.source import ConfluentSource, consumer_config  # noqa: E402
from worker.kafka.rebalance import RebalanceRecorder, group_generation  # noqa: E402
from worker.kafka.tokens import FileOAuthCallback, jwt_expiry  # noqa: E402

PASSWORD = "s3cret-Kafka-pw"
NOWHERE = "127.0.0.1:9"  # nothing listens there: clients are built, never connected


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name in ("ca", "cert", "key", "password", "token"):
        paths[name] = tmp_path / name
        paths[name].write_text("x\n")
    paths["password"].write_text(PASSWORD + "\n")
    return {k: str(v) for k, v in paths.items()}


def jwt(claims):
    def part(value):
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def without_callbacks(config):
    return {k: v for k, v in config.items() if not k.endswith("_cb") and k != "logger"}


def test_plaintext_takes_only_the_brokers_the_protocol_and_the_reconnect_backoff():
    assert without_callbacks(client_config("a:1,b:2")) == {"bootstrap.servers": "a:1,b:2",
                                                           "security.protocol": "PLAINTEXT",
                                                           "reconnect.backoff.max.ms": 1_000}


def test_scram_over_tls_reaches_librdkafka_with_the_password_from_its_file(files):
    security = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
                             sasl_password_file=files["password"], ssl_cafile=files["ca"])
    assert without_callbacks(client_config("k:9093", security)) == {
        "bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "reconnect.backoff.max.ms": 1_000,
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": PASSWORD, "ssl.ca.location": files["ca"],
        "ssl.endpoint.identification.algorithm": "https"}


def test_mutual_tls_without_hostname_checks(files):
    security = KafkaSecurity(protocol="SSL", ssl_cafile=files["ca"], ssl_certfile=files["cert"],
                             ssl_keyfile=files["key"], ssl_check_hostname=False)
    config = client_config("k:9093", security)
    assert (config["ssl.certificate.location"], config["ssl.key.location"]) == (files["cert"], files["key"])
    assert config["ssl.endpoint.identification.algorithm"] == "none"
    assert "sasl.mechanisms" not in config
    # A certificate file without a key file holds the key too (as Python's ssl reads it).
    alone = KafkaSecurity(protocol="SSL", ssl_certfile=files["cert"])
    assert client_config("k:9093", alone)["ssl.key.location"] == files["cert"]


def test_librdkafka_accepts_every_property_name_and_value():
    security = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="alice",
                             sasl_password=Secret(PASSWORD))
    confluent_kafka.Producer(client_config(NOWHERE, security))  # raises KafkaException for an unknown one


def test_oauthbearer_tokens_come_from_the_file_with_the_jwt_expiry(files, tmp_path):
    security = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_file=files["token"])
    callback = client_config("k:9093", security)["oauth_cb"]
    assert isinstance(callback, FileOAuthCallback)
    expires = int(time.time()) + 3600
    token = jwt({"sub": "worker", "exp": expires})
    (tmp_path / "token").write_text(token + "\n")
    assert callback("") == (token, float(expires))


def test_a_token_without_a_readable_expiry_is_asked_for_again_a_minute_later(tmp_path):
    path = tmp_path / "token"
    callback = FileOAuthCallback(str(path), clock=lambda: 1000.0)
    for token in ("opaque-token", jwt({"sub": "worker"}), jwt({"exp": "soon"}), "a.b!.c"):
        path.write_text(token)
        path.touch()
        callback._tokens._seen = None  # read the file again whatever the clock's granularity
        assert callback("") == (token, 1060.0)
    path.unlink()
    callback._tokens._seen = None
    with pytest.raises(ConfigError, match="KAFKA_SASL_OAUTH_TOKEN_FILE"):
        callback("")


def test_jwt_expiry_reads_the_exp_claim_only():
    assert jwt_expiry(jwt({"exp": 1_900_000_000})) == 1_900_000_000.0
    assert jwt_expiry(jwt({"exp": True})) is None
    assert jwt_expiry("not-a-jwt") is None


def settings(**values):
    return Settings.from_values(kafka_bootstrap_servers=NOWHERE, redis_url="memory://", requests_topic="req",
                                kafka_client="confluent", **values).with_derived_defaults().kafka


def test_the_classic_consumer_takes_our_assignor_and_session_timeout_and_commits_by_hand():
    config = consumer_config(settings(assignor="cooperative-sticky", session_timeout_ms=6000), read_committed=False)
    assert (config["partition.assignment.strategy"], config["session.timeout.ms"]) == ("cooperative-sticky", 6000)
    assert (config["enable.auto.commit"], config["allow.auto.create.topics"]) == (False, False)
    assert (config["group.id"], config["auto.offset.reset"], config["group.protocol"]) == (
        "streamscore-churn", "earliest", "classic")
    assert config["isolation.level"] == "read_uncommitted"
    assert consumer_config(settings(), read_committed=True)["isolation.level"] == "read_committed"


def test_the_consumer_protocol_leaves_assignor_and_session_timeout_to_the_broker():
    config = consumer_config(settings(kafka_group_protocol="consumer"), read_committed=False)
    assert config["group.protocol"] == "consumer"
    assert "partition.assignment.strategy" not in config and "session.timeout.ms" not in config
    confluent_kafka.Consumer(config).close()  # librdkafka accepts it


def test_a_static_member_sends_its_instance_id_and_a_dynamic_one_none():
    config = consumer_config(settings(group_instance_id="worker-0"), read_committed=False)
    assert config["group.instance.id"] == "worker-0"
    confluent_kafka.Consumer(config).close()  # librdkafka accepts it
    assert "group.instance.id" not in consumer_config(settings(), read_committed=False)


def test_a_static_member_is_refused_with_the_consumer_protocol_naming_the_setting():
    with pytest.raises(ConfigError, match=r"group_instance_id=w0 \(--group-instance-id\) needs .*=classic"):
        settings(group_instance_id="w0", kafka_group_protocol="consumer")


def test_the_generation_is_read_from_the_group_metadata_and_negative_before_joining():
    assert group_generation(b"CGMDv2:" + (7).to_bytes(4, sys.byteorder, signed=True) + b"g") == 7
    assert group_generation(b"CGMDv9:\x00\x00\x00\x01") is None  # a format we do not know: count ourselves
    assert group_generation(object()) is None
    source = ConfluentSource(settings(), SystemClock(), read_committed=False, metadata_s=METADATA_S)
    try:
        assert group_generation(source.group_metadata()) == -1
        assert source.generation() == -1 and not source.rebalancing() and source.take_revoked() == set()
        assert source.lag() == {}
        source.commit({})  # nothing to commit: no request
    finally:
        source.close(timeout_s=5)


class MemberConsumer:
    """A stand-in for librdkafka's consumer: a member of generation 5 that polls nothing."""

    def __init__(self):
        self.member_id = "member-1"

    def poll(self, timeout):
        return None

    def memberid(self):
        return self.member_id

    def consumer_group_metadata(self):
        return b"CGMDv2:" + (5).to_bytes(4, sys.byteorder, signed=True) + b"group"


def test_the_group_dropped_a_member_that_outlived_max_poll_interval_or_lost_its_member_id_by_the_next_poll():
    clock = FakeClock()
    source = ConfluentSource(settings(max_poll_interval_ms=10_000, session_timeout_ms=6_000), clock,
                             read_committed=False, metadata_s=METADATA_S)
    source._consumer.close()
    source._consumer = MemberConsumer()
    assert source.poll(0.0, 10) == [] and source.generation() == 5
    clock.advance(9.9)
    assert source.generation() == 5  # not yet: polls are what librdkafka counts from
    clock.advance(0.2)
    assert source.generation() == -1  # librdkafka left the group on its own thread
    source.poll(0.0, 10)
    assert source.generation() == 5
    source._consumer.member_id = ""  # the classic protocol's sign that the member left
    assert source.generation() == 5  # between polls librdkafka is not asked
    source.poll(0.0, 10)
    assert source.generation() == -1


def test_sends_that_no_broker_answers_stay_pending_in_send_order():
    sink: ConfluentSink[int] = ConfluentSink(NOWHERE, "unit")
    for i in range(3):
        sink.send("replies", b"k", b"v", [("n", b"1")], tag=i)
    assert sink.settle(0.2) == [] and sink.pending == 3


def test_a_send_that_finds_the_queue_full_is_retried_then_reported_failed():
    sink: ConfluentSink[str] = ConfluentSink(NOWHERE, "unit", max_block_s=0.2, **{"queue.buffering.max.messages": 1})
    sink.send("replies", None, b"first", [], tag="first")
    started = time.monotonic()
    sink.send("replies", None, b"second", [], tag="second")  # no room: waits, serving reports, then fails
    assert time.monotonic() - started >= 0.2
    (failed,) = sink.settle(0.1)
    assert failed.tag == "second" and isinstance(failed.error, BufferError)
    assert sink.pending == 1  # the first is still out


def test_a_record_refused_before_it_is_queued_is_reported_not_raised():
    sink: ConfluentSink[str] = ConfluentSink(NOWHERE, "unit", **{"message.max.bytes": 1000})
    sink.send("replies", None, b"x" * 5000, [], tag="too large")
    (refused,) = sink.settle(0.1)
    assert refused.tag == "too large" and isinstance(refused.error, confluent_kafka.KafkaException)


def tps(*partitions, offset=-1001):
    return [confluent_kafka.TopicPartition("t", p, offset) for p in partitions]


def test_an_eager_revocation_is_pending_until_its_assignment_which_gives_back_the_positions_of_those_kept():
    recorder = RebalanceRecorder("unit", eager=True)
    recorder.revoked(tps(0, 1, 2, 3, offset=7))
    assert recorder.pending and recorder.take_gone() == set()  # they may stay ours
    assert recorder.assigned(tps(0, 1)) == {("t", 0): 7, ("t", 1): 7}
    assert not recorder.pending and recorder.take_gone() == {("t", 2), ("t", 3)}


def test_an_incremental_revocation_is_gone_at_the_assignment_that_follows_even_an_empty_one():
    recorder = RebalanceRecorder("unit", eager=False)
    recorder.revoked([])
    assert not recorder.pending  # nothing announced: nothing leaves
    recorder.begin_poll()
    recorder.revoked(tps(2, 3, offset=4))
    assert recorder.pending
    assert recorder.assigned([]) == {}
    assert recorder.gone_in_poll() == {("t", 2), ("t", 3)} == recorder.take_gone()
    recorder.begin_poll()
    assert recorder.gone_in_poll() == set() and recorder.take_gone() == set()


def test_a_lost_partition_is_gone_even_when_assigned_back_and_restarts_from_the_commit():
    recorder = RebalanceRecorder("unit", eager=True)
    recorder.revoked(tps(0, 1, offset=9))
    recorder.lost(tps(1))
    assert recorder.assigned(tps(0, 1)) == {("t", 0): 9}  # partition 1 gets no position back
    assert recorder.take_gone() == {("t", 1)}
