"""Requests a consumer skipped without reading them, on either client: said, and counted for the metrics.

A group's committed offset (or a consumer's position) that its partition's log no longer holds, because
retention or a delete-records request removed the records there, is out of range: the consumer starts again at
the offset ``auto_offset_reset`` names and never reads the requests between. Each client tells it its own way
(kafka-python's fetcher lines: worker/kafka/kafka_python/skipped.py; librdkafka's OFFSET line and the first record
after it: worker/kafka/confluent/skipped.py); both end in a ``SkippedTally``, which logs ``requests_skipped`` (or
``offset_past_log_end``) and adds to the count each stream source reports as
``streamscore_requests_skipped_total``: one for the process on kafka-python (its fetcher's lines are the
process's), one a consumer on confluent-kafka.
"""

from __future__ import annotations

import threading

import structlog

log = structlog.get_logger(__name__)


class SkippedTally:
    """The requests this process's consumers skipped unread. Thread-safe: a client's log lines may come on its
    own threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = 0

    @property
    def total(self) -> int:
        return self._total

    def went_on(self, topic: str, partition: int | None, at_offset: int, reset_to: int) -> None:
        """The consumer of ``topic``/``partition`` was at ``at_offset``, out of range, and went on from
        ``reset_to``: say so, and count the requests between when it went forward."""
        if reset_to < at_offset:  # past the log's end: nothing skipped, what lies between is read again
            log.warning("offset_past_log_end", topic=topic, partition=partition, at_offset=at_offset,
                        reset_to=reset_to,
                        reason=f"the partition's log ends before offset {at_offset} (truncated after an unclean "
                               f"leader election, or the topic deleted and created again): the consumer goes on "
                               f"from offset {reset_to} (auto_offset_reset); requests answered already there are "
                               "duplicates")
            return
        skipped = reset_to - at_offset
        with self._lock:
            self._total += skipped
        log.warning("requests_skipped", topic=topic, partition=partition, at_offset=at_offset, reset_to=reset_to,
                    skipped=skipped,
                    reason=f"the partition's log no longer holds offset {at_offset} (retention deleted it, or a "
                           f"delete-records request): the consumer goes on from offset {reset_to} "
                           f"(auto_offset_reset), and the {skipped} requests between are never read",
                    advice="keep the requests topic's retention.ms above the longest time a request may wait "
                           "unread (docs/operations.md)")


SKIPPED = SkippedTally()  # kafka-python's, one a process: its fetcher's lines, which tell it, are the process's
