"""Consuming requests: kafka-python's KafkaConsumer behind the Source port (worker/kafka/group_source.py).

Auto-commit is off (the worker commits what it has answered), and topics are
never created by consuming. Rebalance callbacks run on kafka-python's IO
thread, so they only record the event; the worker acts on it between polls.
A partition revoked and assigned back in the same rebalance keeps its fetch
position, so its work in hand is kept; a lost one restarts from the committed
offset (worker/kafka/rebalance.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import structlog
from kafka import ConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import (
    CommitFailedError,
    InconsistentGroupProtocolError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    SaslAuthenticationFailedError,
    UnsupportedCodecError,
)
from kafka.structs import MemberState, TopicPartition

from worker.core.clock import Clock
from worker.core.errors import CommitDeferred
from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.connection import PASSWORD_MECHANISMS, credentials_refused_while_running
from worker.kafka.group_source import GroupSource
from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin
from worker.kafka.kafka_python.consumer import commit_offsets, failed_batch, fetch, group_consumer, raw_records
from worker.kafka.rebalance import RevocationRecorder, tp_of
from worker.kafka.skipped import SKIPPED
from worker.kafka.undecodable import codec_of

log = structlog.get_logger(__name__)

POLL_RETRY_S = 0.1  # pause after a poll that failed with a retriable error (the broker away)
# Errors of a commit that say "not now": the group is rebalancing, or the coordinator is away or slow
# (and whatever kafka-python marks retriable).
COMMIT_LATER = (RebalanceInProgressError, CommitFailedError, KafkaTimeoutError, KafkaConnectionError)

ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
             "cooperative-sticky": CooperativeStickyAssignor}


class _Listener(RevocationRecorder, ConsumerRebalanceListener):  # type: ignore[misc]
    """kafka-python's rebalance listener: its callbacks are RevocationRecorder's (worker/kafka/rebalance.py)."""


class KafkaSource(GroupSource):
    CLIENT = "kafka-python"
    COMMITTED_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaError,)

    def __init__(self, kafka: KafkaSettings, clock: Clock, *, read_committed: bool, metadata_s: float,
                 model_topics: tuple[str, ...] = ()) -> None:
        """``read_committed``: skip aborted transactions' records (isolation.level; always with exactly-once)."""
        super().__init__(kafka, clock, metadata_s, model_topics)
        self._consumer = group_consumer(
            kafka,
            auto_offset_reset=kafka.auto_offset_reset,
            max_poll_interval_ms=kafka.max_poll_interval_ms,
            session_timeout_ms=kafka.session_timeout_ms,
            partition_assignment_strategy=[ASSIGNORS[kafka.assignor]],
            isolation_level="read_committed" if read_committed else "read_uncommitted",
            group_instance_id=kafka.group_instance_id or None,
        )
        self._listener = _Listener(kafka.client_id)
        self._bootstrap, self._security, self._client_id = (kafka.kafka_bootstrap_servers,
                                                             kafka.kafka_security, kafka.client_id)
        self._lister: KafkaPythonAdmin | None = None
        self._lister_lock = threading.Lock()
        self._skipped_before = SKIPPED.total  # the process's count when this source began

    def skipped(self) -> int:
        """Requests skipped unread since this source began (worker/kafka/kafka_python/skipped.py: kafka-python's
        fetcher says them for the process, where one stream source consumes)."""
        return SKIPPED.total - self._skipped_before

    def _partitions(self, topic: str) -> set[int] | None:
        return self._consumer.partitions_for_topic(topic) or None

    def _subscribe(self) -> None:
        self._consumer.subscribe(self._topics, listener=self._listener)
        # Refresh metadata once subscribed: kafka-python snapshots the subscribed
        # topics' partitions on metadata updates only, and joining with an empty
        # snapshot makes it rejoin right after its first assignment (a needless
        # rebalance that, now and then, the broker never completes).
        self._consumer.topics()

    def _assigned(self) -> set[TP]:
        return {tp_of(tp) for tp in self._consumer.assignment()}

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        """A retriable error (the broker away: kafka-python raises its connection error out of the
        coordinator lookup) is logged and polled again next time, after a short pause."""
        if not self._rewound(timeout_s):
            return []
        try:
            fetched = fetch(self._consumer, timeout_s, max_records)
        except UnsupportedCodecError as exc:
            self._stop_undecodable(exc)
            return []
        except InconsistentGroupProtocolError as exc:
            raise self.refused_by_group() from exc
        except SaslAuthenticationFailedError as exc:
            if self._security.sasl_mechanism not in PASSWORD_MECHANISMS:
                raise
            raise credentials_refused_while_running(self._security.sasl_mechanism, str(exc)) from exc
        except KafkaError as exc:
            if not exc.retriable:
                raise
            log.warning("poll_failed", error=f"{type(exc).__name__}: {exc}", retry_in_s=POLL_RETRY_S)
            time.sleep(POLL_RETRY_S)
            return []
        return raw_records(fetched, self._clock.monotonic())

    def _stop_undecodable(self, exc: UnsupportedCodecError) -> None:
        """Pause the partition whose batch could not be decoded, at that batch: poll() would raise again at
        every call, and a restarted worker would fetch the same batch. When kafka-python does not tell which
        partition it was, every assigned partition is paused (nothing is lost; the log line says so)."""
        failed = failed_batch(self._consumer)
        if failed is None:
            stopped = list(self._consumer.assignment())
            codec = codec_of(str(exc))
            log.error("partitions_paused_undecodable", codec=codec, error=str(exc),
                      partitions=[f"{tp.topic}-{tp.partition}" for tp in stopped])
            self._undecodable.update({tp_of(tp): codec for tp in stopped})
        else:
            tp, offset = failed
            self._consumer.seek(tp, offset)
            stopped = [tp]
            self._stopped(tp_of(tp), offset, str(exc))
        self._consumer.pause(*stopped)

    def take_revoked(self) -> set[TP]:
        """Until the group is stable, revoked partitions still assigned stay pending (RevocationRecorder)."""
        still_ours = self._assigned()
        return self._listener.take_revoked(still_ours, self._consumer.group_metadata().state is MemberState.STABLE)

    def rebalancing(self) -> bool:
        return self._listener.pending

    def generation(self) -> int:
        return int(self._consumer.group_metadata().generation_id)

    def commit(self, offsets: dict[TP, int]) -> None:
        try:
            self._consumer.commit(commit_offsets(offsets))
        except COMMIT_LATER as exc:
            raise CommitDeferred(str(exc)) from exc

    def commit_async(self, offsets: dict[TP, int], on_done: Callable[[Exception | None], None]) -> None:
        def answered(_offsets: Any, response: Any) -> None:
            on_done(_deferred_or(response) if isinstance(response, Exception) else None)
        try:
            self._consumer.commit_async(commit_offsets(offsets), callback=answered)
        except KafkaError as exc:
            on_done(_deferred_or(exc))

    def finish_rebalance(self, timeout_s: float) -> None:
        """One poll with every partition paused. Partitions assigned during it are not paused and may return
        records: each is rewound to its first returned offset, so that the next poll gives them again."""
        self._consumer.pause(*self._consumer.assignment())
        try:
            fetched = self._consumer.poll(timeout_ms=int(timeout_s * 1000))
        except UnsupportedCodecError as exc:
            self._stop_undecodable(exc)
            return
        for tp, records in fetched.items():
            self._consumer.seek(tp, records[0].offset)

    def pause(self, paused: bool) -> None:
        if paused:
            self._consumer.pause(*self._consumer.assignment())  # newly assigned ones too, every call
        elif self._consumer.paused():  # never one stopped at an undecodable batch
            stopped = self.undecodable()
            resumed = [tp for tp in self._consumer.paused() if tp_of(tp) not in stopped]
            if resumed:
                self._consumer.resume(*resumed)

    def group_metadata(self) -> Any:
        return self._consumer.group_metadata()

    def _seek(self, tp: TP, offset: int) -> None:
        self._consumer.seek(TopicPartition(*tp), offset)

    def _seek_committed(self, partitions: set[TP]) -> None:
        """Within the metadata bound for all partitions together. kafka-python's own wait has none: it asks again
        while the offsets read as unstable (a transaction holding them still open), and on the three-broker
        cluster that held a rewind until the broker's transaction timeout (60 s), while the step that would
        have replaced the producer holding it open never came (docs/chaos/cluster-eos-failover-2026-12-05.md)."""
        deadline = time.monotonic() + self._metadata_s
        committed = {tp: self._consumer.committed(tp, timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)))
                     for tp in map(TopicPartition._make, partitions)}
        for tp, offset in committed.items():
            if offset is not None:
                self._consumer.seek(tp, offset)
            elif self._reset_to_earliest:
                self._consumer.seek_to_beginning(tp)
            else:
                self._consumer.seek_to_end(tp)

    def list_topics(self) -> set[str]:
        """From a client of its own (so that another thread may ask while the loop polls: the consumer is not
        thread-safe, and its own lookup waits without a bound). Blocks up to about twice the metadata bound;
        raises KafkaError, or ServiceUnavailable when no broker answered its first request."""
        with self._lister_lock:
            if self._lister is None:
                self._lister = KafkaPythonAdmin(self._bootstrap, self._security, self._metadata_s,
                                                client_id=f"{self._client_id}-topics")
            return self._lister.topics()

    def lag(self) -> dict[TP, int]:
        """Highwater minus position, both as of the last fetch (no request is waited for)."""
        lag: dict[TP, int] = {}
        for tp in self._consumer.assignment():
            end = self._consumer.highwater(tp)
            if end is None:
                continue
            try:
                position = self._consumer.position(tp, timeout_ms=0)
            except KafkaError:  # a position being reset or validated right now: leave it out this time
                continue
            if position is not None:
                lag[tp_of(tp)] = max(0, end - position)
        return lag

    def close(self, timeout_s: float = 30.0) -> None:
        self._consumer.close(autocommit=False, timeout_ms=int(timeout_s * 1000))
        with self._lister_lock:
            if self._lister is not None:
                self._lister.close()


def _deferred_or(exc: Exception) -> Exception:
    if isinstance(exc, COMMIT_LATER) or getattr(exc, "retriable", False):
        return CommitDeferred(str(exc) or type(exc).__name__)
    return exc
