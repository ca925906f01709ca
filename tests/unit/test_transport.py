"""The Transport table (worker/kafka/transport.py): one row a client, each naming a module whose TRANSPORT
builds every client the worker uses; the composition root looks the client up there, and nowhere else."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from kafka.errors import KafkaConfigurationError, KafkaTimeoutError

from worker.core.clients import CLIENTS, Client
from worker.core.errors import ConfigError, ServiceUnavailable
from worker.core.settings import Settings
from worker.kafka.transport import Transport, no_broker, transport_for

REPO = Path(__file__).resolve().parents[2]
METHODS = [name for name, _ in inspect.getmembers(Transport, inspect.isfunction) if not name.startswith("_")]


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_row_names_a_transport_with_every_method_of_the_protocol(client):
    if client == "confluent":
        pytest.importorskip("confluent_kafka")
    transport = transport_for(client)
    assert set(METHODS) == {"admin", "built", "partition_reader", "preflight", "refused", "sink", "stream",
                            "watch_admin"}
    for name in METHODS:
        ours = inspect.signature(getattr(Transport, name)).parameters
        theirs = inspect.signature(getattr(transport, name)).parameters
        assert list(theirs) == [p for p in ours if p != "self"], f"{client}: {name} takes other parameters"
    assert all(issubclass(error, Exception) for error in transport.errors) and transport.errors
    assert importlib.import_module(CLIENTS[client].transport).TRANSPORT is transport


def test_an_unknown_client_is_refused_naming_the_ones_there_are():
    with pytest.raises(ConfigError, match="kafka_client must be kafka-python or confluent, got 'aiokafka'"):
        transport_for("aiokafka")


def test_a_refused_configuration_is_a_setting_to_fix_and_anything_else_a_broker_that_does_not_answer():
    kafka = Settings.from_values(kafka_bootstrap_servers="127.0.0.1:1").kafka
    assert isinstance(no_broker(kafka, ValueError("linger.ms out of range"), refused=True), ConfigError)
    unavailable = no_broker(kafka, OSError("connection refused"), refused=False)
    assert isinstance(unavailable, ServiceUnavailable) and "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1" in str(unavailable)


def test_the_composition_root_looks_the_client_up_once():
    source = (REPO / "worker" / "app.py").read_text(encoding="utf-8")
    assert len(re.findall(r"\bkafka_client\b", re.sub(r'"""[\s\S]*?"""', "", source))) == 1
    assert "confluent" not in source and "kafka_python" not in source


def test_each_transport_tells_its_librarys_refused_configuration_from_a_broker_that_does_not_answer():
    kafka_python = transport_for("kafka-python")
    assert kafka_python.refused(KafkaConfigurationError("linger_ms"))
    assert not kafka_python.refused(KafkaTimeoutError())
    confluent_kafka = pytest.importorskip("confluent_kafka")
    confluent = transport_for("confluent")
    assert confluent.refused(confluent_kafka.KafkaException(confluent_kafka.KafkaError(
        confluent_kafka.KafkaError._INVALID_ARG)))
    assert not confluent.refused(confluent_kafka.KafkaException(confluent_kafka.KafkaError(
        confluent_kafka.KafkaError._TRANSPORT)))


def test_a_clients_error_while_it_is_built_is_said_as_the_workers():
    kafka = Settings.from_values(kafka_bootstrap_servers="127.0.0.1:1").kafka
    transport = transport_for("kafka-python")
    def refuse() -> None:
        raise KafkaConfigurationError("linger_ms must be >= 0")

    def no_answer() -> None:
        raise KafkaTimeoutError()

    with pytest.raises(ConfigError, match="refused its configuration"):
        transport.built(kafka, refuse)
    with pytest.raises(ServiceUnavailable, match="no Kafka broker answers"):
        transport.built(kafka, no_answer)


def test_a_clients_group_rules_are_its_rows(monkeypatch):
    """A new client states what its library refuses of the group settings in its row, not in a branch by name."""
    monkeypatch.setitem(CLIENTS, "slow-heart", Client("tests.doubles.memory_client.transport", "json", "slow-heart",
                                                      heartbeat_ms=10_000))
    assert Settings.from_values(kafka_client="slow-heart", session_timeout_ms=10_001).kafka.kafka_client == "slow-heart"
    with pytest.raises(ConfigError, match=r"session_timeout_ms .* must be above 10000 with kafka_client=slow-heart"):
        Settings.from_values(kafka_client="slow-heart", session_timeout_ms=9_000)
    with pytest.raises(ConfigError, match=r"kafka_group_protocol=consumer .* needs --kafka-client confluent: "
                       r"slow-heart speaks the classic protocol only"):
        Settings.from_values(kafka_client="slow-heart", kafka_group_protocol="consumer")
