"""Whether the settings fit the broker: checked at start against what the broker said. Pure.

A session timeout outside the broker's range is accepted by both clients and
refused only at the group join (InvalidSessionTimeoutError), after the model's
load. A reply or dead-letter topic that does not exist fails only at the
first send (confluent-kafka: after blocking for its timeout, on every restart)
or, where the broker creates topics on demand, is created by kafka-python's
producer under a misspelled name. So both are refused at start instead.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from worker.core.errors import ConfigError
from worker.core.sections import KafkaSettings, setting_names


@dataclass(frozen=True)
class SessionTimeouts:
    """The session timeouts (ms) a classic consumer group may use: the broker's
    group.min.session.timeout.ms and group.max.session.timeout.ms, or Kafka's defaults."""

    low: int
    high: int
    from_broker: bool


KAFKA_DEFAULT_SESSION_TIMEOUTS = SessionTimeouts(6_000, 1_800_000, from_broker=False)

# What a topic the worker reads or writes is created with, in the message that says to create it.
_PARTITIONS = {"requests_topic": 4, "reply_topic": 4, "dead_letter_topic": 1, "shadow_topic": 4}


def check_session_timeout(kafka: KafkaSettings, allowed: SessionTimeouts) -> None:
    """Raises ConfigError naming the setting and the range when session_timeout_ms is outside ``allowed``.
    With the consumer group protocol (KIP-848) the broker sets the session timeout: nothing to check."""
    if kafka.kafka_group_protocol != "classic" or allowed.low <= kafka.session_timeout_ms <= allowed.high:
        return
    names = "group.min.session.timeout.ms and group.max.session.timeout.ms"
    if allowed.from_broker:
        source = f"the broker's {names}"
    else:
        source = f"Kafka's defaults of {names}: the broker's could not be read"
    raise ConfigError(f"session_timeout_ms={kafka.session_timeout_ms} ({setting_names('session_timeout_ms')}) "
                      f"is outside what the broker lets a consumer group use: {allowed.low} to {allowed.high} ms "
                      f"({source}); the group join would fail with InvalidSessionTimeoutError. Choose a value "
                      "in that range")


def check_group_protocol(kafka: KafkaSettings, served: Collection[str] | None) -> None:
    """Raises ConfigError when the consumer group protocol is asked for and the broker does not run it (its
    group.coordinator.rebalance.protocols; None: unknown, let through): librdkafka's member of such a group waits
    without an error and consumes nothing."""
    if kafka.kafka_group_protocol == "classic" or served is None or kafka.kafka_group_protocol in served:
        return
    raise ConfigError(f"kafka_group_protocol={kafka.kafka_group_protocol} ({setting_names('kafka_group_protocol')}): "
                      f"the broker runs the group protocols {', '.join(sorted(served))} only (its "
                      "group.coordinator.rebalance.protocols; KIP-848 is on by default from Kafka 4.0, and on 3.7-3.9 "
                      "needs group.coordinator.rebalance.protocols=classic,consumer): use --kafka-group-protocol "
                      "classic")


def check_topics_exist(kafka: KafkaSettings, existing: Collection[str], shadow: bool = False) -> None:
    """Raises ConfigError naming, in one line, each of the requests, reply and dead-letter topics (and with
    ``shadow``, the shadow topic) the broker does not have, its setting, and the command that creates it."""
    missing = [name for name in _PARTITIONS
               if (name != "shadow_topic" or shadow) and getattr(kafka, name) not in existing]
    if not missing:
        return
    named = [f"{name} {getattr(kafka, name)!r} ({setting_names(name)})" for name in missing]
    commands = ", ".join(f"`python -m producer create-topic {getattr(kafka, name)} --partitions "
                         f"{_PARTITIONS[name]}`" for name in missing)
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    does, it, existing_ones = ("does", "it", "an existing one") if len(named) == 1 else ("do", "them", "existing ones")
    raise ConfigError(f"{listed} {does} not exist on the broker (or this client may not describe {it}); the worker "
                      f"never creates topics: create {it} ({commands}), or name {existing_ones}")
