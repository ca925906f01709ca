"""What the broker has and allows, read once at start: its topics, and the session timeouts a group may use.

Run after the preflight (worker/kafka/preflight.py), which has already
reached and authenticated to a broker. One kafka-python admin client lists
the topics (Metadata) and asks one broker for group.min.session.timeout.ms and
group.max.session.timeout.ms (DescribeConfigs); every request has the same
timeout, so this ends within seconds. Where the configs cannot be read (an ACL
without DESCRIBE_CONFIGS on the cluster, a broker that refuses) Kafka's defaults
stand in, and a log line says so; where the topics cannot be listed, the
broker is as good as absent.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

import structlog
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError

from worker.core.broker_fit import KAFKA_DEFAULT_SESSION_TIMEOUTS, SessionTimeouts
from worker.core.errors import ServiceUnavailable
from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config

log = structlog.get_logger(__name__)

SESSION_CONFIGS = ("group.min.session.timeout.ms", "group.max.session.timeout.ms")
RELIST_S = 0.25  # a topic created a moment ago may not be in the broker's metadata yet: ask again this often


@dataclass(frozen=True)
class BrokerFacts:
    topics: frozenset[str]
    session_timeouts: SessionTimeouts


def read_broker_facts(bootstrap_servers: str, security: KafkaSecurity, expected_topics: Collection[str] = (),
                      wait_s: float = 5.0, timeout_s: float = 10.0) -> BrokerFacts:
    """The broker's topics and session timeout range. Blocks up to about ``timeout_s`` per request, and lists
    the topics again for up to ``wait_s`` while any of ``expected_topics`` is not there yet.

    Raises ServiceUnavailable when no broker answers; ConfigError when a password file cannot be read.
    """
    timeout_ms = int(timeout_s * 1000)
    try:
        admin = KafkaAdminClient(**client_config(bootstrap_servers, security), client_id="streamscore-start-check",
                                 request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)
    except KafkaError as exc:
        raise _unavailable(bootstrap_servers, exc) from None
    try:
        return BrokerFacts(_topics(admin, bootstrap_servers, set(expected_topics), wait_s), _session_timeouts(admin))
    finally:
        admin.close()


def _topics(admin: KafkaAdminClient, bootstrap_servers: str, expected: set[str], wait_s: float) -> frozenset[str]:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            topics = frozenset(admin.list_topics())
        except KafkaError as exc:
            raise _unavailable(bootstrap_servers, exc) from None
        if expected <= topics or time.monotonic() >= deadline:
            return topics
        time.sleep(RELIST_S)


def _session_timeouts(admin: KafkaAdminClient) -> SessionTimeouts:
    try:
        broker_id = admin.describe_cluster()["brokers"][0]["broker_id"]
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker_id),
                                                           list(SESSION_CONFIGS))], config_filter="all")
        configs = described["broker"][str(broker_id)]
        low, high = (int(configs[name]["value"]) for name in SESSION_CONFIGS)
    except (KafkaError, LookupError, TypeError, ValueError) as exc:  # refused, or an answer without the figures
        log.warning("broker_configs_unreadable", configs=list(SESSION_CONFIGS), error=f"{type(exc).__name__}: {exc}",
                    using=[KAFKA_DEFAULT_SESSION_TIMEOUTS.low, KAFKA_DEFAULT_SESSION_TIMEOUTS.high])
        return KAFKA_DEFAULT_SESSION_TIMEOUTS
    return SessionTimeouts(low, high, from_broker=True)


def _unavailable(bootstrap_servers: str, exc: KafkaError) -> ServiceUnavailable:
    return ServiceUnavailable(f"the Kafka broker at KAFKA_BOOTSTRAP_SERVERS={bootstrap_servers} did not answer an "
                              f"admin request at start ({type(exc).__name__}: {exc})")
