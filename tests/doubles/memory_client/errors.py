"""The memory client's exceptions: one root, each carrying the Kafka protocol's error code as ``errno``, as
kafka-python's do, so that the worker reads them as it reads a real client's (worker/core/refusals.py)."""

from __future__ import annotations

from typing import ClassVar


class MemoryKafkaError(Exception):
    """What any call of the memory client raises, or reports for a send it lost."""

    errno: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False


class NoBrokerAnswers(MemoryKafkaError):
    """No memory broker listens at the address (MemoryBroker.start was not called for it, or it stopped)."""

    retriable = True


class InvalidConfiguration(MemoryKafkaError):
    """The client refuses its configuration (the Transport says so as a ConfigError)."""

    errno = 40  # INVALID_CONFIG


class UnknownTopicOrPartition(MemoryKafkaError):
    errno = 3


class MessageTooLarge(MemoryKafkaError):
    """A record larger than its topic's max.message.bytes: refused for good."""

    errno = 10


class IllegalGeneration(MemoryKafkaError):
    """A commit of a member the group no longer counts in its generation (dropped, or a stale generation)."""

    errno = 22


class RebalanceInProgress(MemoryKafkaError):
    errno = 27
    retriable = True


class ProducerFenced(MemoryKafkaError):
    """A newer producer with the same transactional id started: this one can never send again."""

    errno = 90
