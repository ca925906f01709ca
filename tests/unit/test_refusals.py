"""Sends refused for good: both clients' errors read alike, and the ladder of what replaces them."""

from __future__ import annotations

import confluent_kafka
import kafka.errors
import pytest

from worker.core.messages import Position
from worker.core.refusals import (
    CUT_DEAD_LETTER,
    DEAD_LETTER,
    ERROR_REPLY,
    GIVE_UP,
    REPLY,
    Refusals,
    Refused,
    next_step,
    refusal,
)


@pytest.mark.parametrize(("error", "expected"), [
    (kafka.errors.MessageSizeTooLargeError(), "MESSAGE_TOO_LARGE"),
    (kafka.errors.RecordListTooLargeError(), "RECORD_LIST_TOO_LARGE"),
    (kafka.errors.TopicAuthorizationFailedError(), "TOPIC_AUTHORIZATION_FAILED"),
    (kafka.errors.InvalidRecordError(), "INVALID_RECORD"),
    (confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE)),
     "MESSAGE_TOO_LARGE"),
    (confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED)),
     "TOPIC_AUTHORIZATION_FAILED"),
    (confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.INVALID_RECORD)),
     "INVALID_RECORD"),
    (kafka.errors.InvalidTopicError(), "INVALID_TOPIC_EXCEPTION"),
    (confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.TOPIC_EXCEPTION)),
     "INVALID_TOPIC_EXCEPTION"),
    # Failures a retry may cure are not refusals.
    (kafka.errors.KafkaTimeoutError(), None),
    (kafka.errors.NotLeaderForPartitionError(), None),
    (confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError._MSG_TIMED_OUT)), None),
    (confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION)),
     None),
    (BufferError("queue full"), None),
    (RuntimeError(), None),
    (ValueError(10), None),
])
def test_refusal_reads_both_clients_errors(error, expected):
    assert refusal(error) == expected


def test_the_ladder_goes_down_one_step_at_a_time_to_giving_up():
    assert next_step(REPLY, "MESSAGE_TOO_LARGE") == ERROR_REPLY
    assert next_step(REPLY, "TOPIC_AUTHORIZATION_FAILED") == DEAD_LETTER
    assert next_step(ERROR_REPLY, "MESSAGE_TOO_LARGE") == DEAD_LETTER
    assert next_step(DEAD_LETTER, "MESSAGE_TOO_LARGE") == CUT_DEAD_LETTER
    assert next_step(DEAD_LETTER, "INVALID_RECORD") == CUT_DEAD_LETTER
    assert next_step(CUT_DEAD_LETTER, "INVALID_RECORD") == GIVE_UP


def test_refusals_forget_the_oldest_past_their_bound():
    refusals = Refusals(remembered=2)
    assert not refusals
    first, second, third = (Position("t", 0, offset) for offset in range(3))
    refusals.remember(first, Refused(ERROR_REPLY, "why 1", "replies"))
    refusals.remember(second, Refused(DEAD_LETTER, "why 2", "replies"))
    refusals.remember(first, Refused(DEAD_LETTER, "why 1", "replies"))  # refused again: now the newest
    refusals.remember(third, Refused(DEAD_LETTER, "why 3", "replies"))
    assert refusals.get(first) == Refused(DEAD_LETTER, "why 1", "replies")
    assert refusals.get(second) is None
    assert refusals.get(Position("t", 1, 0)) is None and refusals
