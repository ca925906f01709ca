"""What both clients' stream sources do alike (kafka_python/source.py, confluent/source.py): the topics they
consume, waited for at start, the partitions they stopped at a record batch they cannot decode, and a rewind to
the committed offsets that asks the group coordinator only for those it was not given, and waits for it when
it cannot answer."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from typing import ClassVar

import structlog

from worker.core.clock import Clock
from worker.core.errors import ConfigError
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.metadata import missing_requests_topic, wait_for
from worker.kafka.undecodable import codec_of, report_stopped

log = structlog.get_logger(__name__)
REWIND_RETRY_S = 0.2  # pause before a poll asks again for the committed offsets a rewind could not read


class GroupSource(ABC):
    """A Source's client-free part: a member of ``kafka.group`` consuming the requests topic and
    ``model_topics``. Not thread-safe. A client's source supplies the abstract methods."""

    CLIENT: ClassVar[str]  # the client's name in log lines
    COMMITTED_ERRORS: ClassVar[tuple[type[Exception], ...]]  # what reading the committed offsets may raise

    def __init__(self, kafka: KafkaSettings, clock: Clock, metadata_s: float, model_topics: tuple[str, ...]) -> None:
        """``metadata_s``: the longest a metadata request may block (worker/core/bounds.py)."""
        self._clock = clock
        self._group, self._assignor = kafka.group, kafka.assignor
        self._topics = [kafka.requests_topic, *model_topics]
        self._reset_to_earliest = kafka.auto_offset_reset == "earliest"
        self._metadata_s = metadata_s
        self._undecodable: dict[TP, str] = {}  # partitions stopped at a batch we cannot decode, and its codec
        self._rewind_owed = False  # a rewind could not read the committed offsets: nothing is consumed until it can
        self._known: dict[TP, int] = {}  # the offsets the last rewind was given

    def refused_by_group(self) -> ConfigError:
        """What to say when the group refuses this worker's join (INCONSISTENT_GROUP_PROTOCOL): it stops."""
        return ConfigError(
            f"the group {self._group} refused this worker: its members use another partition assignor than "
            f"assignor={self._assignor} (--assignor, STREAMSCORE_ASSIGNOR), or another group protocol. Every "
            "member of a group must use the same one: to change it, stop every worker of the group and start them "
            "all with the new one, or start the new ones in a group of their own (--group: a new group starts "
            "from --auto-offset-reset, not from the old group's offsets)")

    def start(self, wait_s: float = 10.0) -> None:
        """Wait up to ``wait_s`` for each topic in the broker's metadata (one created a moment ago may not be
        there yet), then subscribe. Raises LookupError naming a topic that does not exist."""
        for topic in self._topics:
            self._wait_for_topic(topic, wait_s)
        self._subscribe()

    def _wait_for_topic(self, topic: str, wait_s: float) -> None:
        wait_for(lambda: self._partitions(topic), wait_s, lambda: missing_requests_topic(topic))

    def undecodable(self) -> dict[TP, str]:
        assigned = self._assigned()
        self._undecodable = {tp: codec for tp, codec in self._undecodable.items() if tp in assigned}
        return dict(self._undecodable)

    def _stopped(self, tp: TP, offset: int, error: str) -> None:
        """``tp`` paused at the undecodable batch at ``offset``: noted and said (worker/kafka/undecodable.py)."""
        self._undecodable[tp] = codec_of(error)
        report_stopped(tp, offset, self._undecodable[tp], self.CLIENT, error)

    def finished(self) -> bool:
        return False  # a live topic never ends

    def rewind(self, known: Mapping[TP, int] | None = None) -> None:
        """Put each assigned partition back to its committed offset: the one in ``known`` where it has one,
        without a request, and the group coordinator's for the others. When that coordinator cannot tell them
        now (it is moving: a broker died or stopped answering), nothing is consumed until it can: each poll
        asks again first (``_rewound``). Consuming on from the positions in hand would skip what an aborted
        transaction held."""
        self._known = dict(known or {})
        assigned = self._assigned()
        for tp in assigned & self._known.keys():
            self._seek(tp, self._known[tp])
        try:
            self._seek_committed(assigned - self._known.keys())
        except self.COMMITTED_ERRORS as exc:
            if not self._rewind_owed:
                log.warning("rewind_waits_for_coordinator", error=f"{type(exc).__name__}: {exc}")
            self._rewind_owed = True
            return
        if self._rewind_owed:
            log.info("rewound")
        self._rewind_owed = False

    def _rewound(self, timeout_s: float) -> bool:
        """False while a rewind is owed and the committed offsets still cannot be read: the caller returns no
        records, after a pause of up to ``timeout_s``."""
        if self._rewind_owed:
            self.rewind(self._known)
            if self._rewind_owed:
                time.sleep(min(timeout_s, REWIND_RETRY_S))
                return False
        return True

    @abstractmethod
    def _partitions(self, topic: str) -> Collection[int] | None:
        """The topic's partitions in the broker's metadata; None while there are none."""

    @abstractmethod
    def _subscribe(self) -> None:
        """Join the group on ``self._topics``."""

    def assigned(self) -> set[TP]:
        return self._assigned()

    @abstractmethod
    def _assigned(self) -> set[TP]:
        """The partitions assigned to this member now."""

    @abstractmethod
    def _seek(self, tp: TP, offset: int) -> None:
        """Consume ``tp`` from ``offset`` next."""

    @abstractmethod
    def _seek_committed(self, partitions: set[TP]) -> None:
        """Seek each of ``partitions`` to its committed offset (or the reset policy's end without one): no
        request when there are none. Raises one of COMMITTED_ERRORS when the committed offsets cannot be read."""
