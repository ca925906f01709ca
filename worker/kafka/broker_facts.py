"""What the broker has and allows, read once at start (after the preflight): its topics, the session timeouts
a group may use, and the group protocols it runs.

One admin client of the worker's Kafka client (a ``BrokerAdmin``: each client's broker_facts.py) lists the
topics and asks one broker for its configs, every request with the same timeout, so this ends within
seconds. Where the configs cannot be read (an ACL without DESCRIBE_CONFIGS on the cluster, a broker that
refuses) Kafka's defaults stand in, and a log line says so; where the topics cannot be listed, the broker
is as good as absent.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from worker.core.broker_fit import KAFKA_DEFAULT_SESSION_TIMEOUTS, SessionTimeouts
from worker.core.errors import ServiceUnavailable

log = structlog.get_logger(__name__)

SESSION_CONFIGS = ("group.min.session.timeout.ms", "group.max.session.timeout.ms")
# The group protocols the broker runs (Kafka 3.7+): "classic", and "consumer" (KIP-848) where enabled. A broker
# without it predates KIP-848.
GROUP_PROTOCOLS_CONFIG = "group.coordinator.rebalance.protocols"
RELIST_S = 0.25  # a topic created a moment ago may not be in the broker's metadata yet: ask again this often
ADMIN_TIMEOUT_S = 10.0  # each admin request's


@dataclass(frozen=True)
class BrokerFacts:
    topics: frozenset[str]
    session_timeouts: SessionTimeouts
    group_protocols: frozenset[str] | None = None  # None: could not be read


class BrokerAdmin(Protocol):
    """A client's admin requests, each blocking up to the timeout it was built with."""

    ERRORS: tuple[type[Exception], ...]  # what the client raises for a request refused or unanswered

    def topics(self) -> set[str]: ...
    def broker_configs(self, names: Sequence[str]) -> dict[str, str]:
        """One broker's values of the configs ``names``; raises ERRORS, or LookupError for one not given."""
    def close(self) -> None: ...


def read_broker_facts(admin: BrokerAdmin, bootstrap_servers: str, expected_topics: Collection[str] = (),
                      wait_s: float = 5.0) -> BrokerFacts:
    """The broker's topics and session timeout range, then ``admin`` closed. Blocks up to the admin's timeout
    per request, and lists the topics again for up to ``wait_s`` while any of ``expected_topics`` is not there
    yet. Raises ServiceUnavailable when no broker answers."""
    try:
        return BrokerFacts(_topics(admin, bootstrap_servers, set(expected_topics), wait_s), _session_timeouts(admin),
                           _group_protocols(admin))
    finally:
        admin.close()


def _topics(admin: BrokerAdmin, bootstrap_servers: str, expected: set[str], wait_s: float) -> frozenset[str]:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            topics = frozenset(admin.topics())
        except admin.ERRORS as exc:
            raise unavailable(bootstrap_servers, exc) from None
        if expected <= topics or time.monotonic() >= deadline:
            return topics
        time.sleep(RELIST_S)


def _session_timeouts(admin: BrokerAdmin) -> SessionTimeouts:
    unreadable: tuple[type[Exception], ...] = (*admin.ERRORS, LookupError, TypeError, ValueError)  # or no figures
    try:
        configs = admin.broker_configs(SESSION_CONFIGS)
        low, high = (int(configs[name]) for name in SESSION_CONFIGS)
    except unreadable as exc:
        log.warning("broker_configs_unreadable", configs=list(SESSION_CONFIGS), error=f"{type(exc).__name__}: {exc}",
                    using=[KAFKA_DEFAULT_SESSION_TIMEOUTS.low, KAFKA_DEFAULT_SESSION_TIMEOUTS.high])
        return KAFKA_DEFAULT_SESSION_TIMEOUTS
    return SessionTimeouts(low, high, from_broker=True)


def _group_protocols(admin: BrokerAdmin) -> frozenset[str] | None:
    unreadable: tuple[type[Exception], ...] = (*admin.ERRORS, TypeError)
    try:
        value = admin.broker_configs([GROUP_PROTOCOLS_CONFIG])[GROUP_PROTOCOLS_CONFIG]
    except LookupError:
        return frozenset({"classic"})  # a broker older than KIP-848
    except unreadable as exc:
        log.warning("broker_configs_unreadable", configs=[GROUP_PROTOCOLS_CONFIG], error=f"{type(exc).__name__}: {exc}")
        return None
    return frozenset(part.strip() for part in str(value).split(",") if part.strip())


def unavailable(bootstrap_servers: str, exc: Exception) -> ServiceUnavailable:
    return ServiceUnavailable(f"the Kafka broker at KAFKA_BOOTSTRAP_SERVERS={bootstrap_servers} did not answer an "
                              f"admin request at start ({type(exc).__name__}: {exc})")
