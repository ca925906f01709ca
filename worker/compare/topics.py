"""Reading a whole topic once, over kafka-python, with a consumer in no group (nothing committed, nobody's
offsets moved): every partition from its beginning to the end offset it had when the reader was opened.

Records written after that are not read, so that the report is of a fixed
set. ``read_committed``: records of aborted or still-open transactions are
skipped (the end offsets are the last stable ones).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from tqdm import tqdm

from worker.compare.pairs import ReadTally
from worker.compare.read import Record
from worker.core.errors import ServiceUnavailable
from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config
from worker.kafka.metadata import wait_for
from worker.kafka.preflight import check_kafka

METADATA_WAIT_S = 3.0  # a topic created a moment ago may not be in the broker's metadata yet
STALL_S = 30.0  # no record for this long, short of the end offsets: stop reading, and say so in the report
POLL_S = 0.5


def open_consumer(bootstrap_servers: str, security: KafkaSecurity) -> KafkaConsumer:
    """A consumer in no group, that never creates a topic. Raises ServiceUnavailable within seconds when no broker
    answers, ConfigError when the security settings do not fit it (worker/kafka/preflight.py)."""
    check_kafka(bootstrap_servers, security)
    return KafkaConsumer(**client_config(bootstrap_servers, security), group_id=None, enable_auto_commit=False,
                         allow_auto_create_topics=False, client_id="streamscore-compare",
                         isolation_level="read_committed")


def missing_topic(topic: str, flag: str) -> LookupError:
    return LookupError(f"{flag} {topic!r}: no such topic on the broker. Check the name; if it is right, nothing "
                       f"was written to it yet: create it with `python -m producer create-topic {topic} "
                       "--partitions 4` and let the worker fill it")


class TopicReader:
    """Every partition of ``topic`` from its beginning to its end offset now. Not thread-safe; one pass."""

    def __init__(self, consumer: Any, topic: str, flag: str) -> None:
        """Blocks up to METADATA_WAIT_S for the topic's metadata. Raises LookupError when it does not exist,
        ServiceUnavailable when the broker fails to answer."""
        self._consumer, self.topic = consumer, topic
        with self._broker_errors():
            partitions = wait_for(lambda: consumer.partitions_for_topic(topic) or None, METADATA_WAIT_S,
                                  lambda: missing_topic(topic, flag))
            tps = [TopicPartition(topic, partition) for partition in sorted(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            begins, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        self._ends = {tp: int(ends[tp]) for tp in tps}
        self.offsets = sum(int(ends[tp]) - int(begins[tp]) for tp in tps)  # records, and transaction markers

    def records(self, tally: ReadTally, max_records: int | None = None, progress: bool = True,
                clock: Callable[[], float] = time.monotonic) -> Iterator[Record]:
        """Each record up to the end offsets, in offset order per partition (partitions interleaved); stops
        early after ``max_records`` of this topic, or when nothing came for STALL_S, and says why in the tally.
        Counts every record in ``tally.records``. Blocks in polls of POLL_S; raises ServiceUnavailable when the
        broker fails to answer."""
        read = 0
        remaining = self._unfinished(set(self._ends))
        last_record = clock()
        with tqdm(total=self.offsets, unit="rec", desc=f"reading {self.topic}", disable=not progress) as bar:
            while remaining:
                for tp, record in self._fetch():
                    if max_records is not None and read >= max_records:
                        tally.stop(f"--max-records {max_records} reached on {self.topic}")
                        return
                    read += 1
                    tally.records += 1
                    bar.update(1)
                    yield Record(f"{tp.topic}[{tp.partition}]@{record.offset}", record.key, record.value,
                                 tuple(record.headers or ()))
                    last_record = clock()
                remaining = self._unfinished(remaining)
                if remaining and clock() - last_record > STALL_S:
                    unfinished = ", ".join(str(tp.partition) for tp in sorted(remaining))
                    tally.stop(f"no record of {self.topic} for {STALL_S:g} s before its end offsets "
                               f"(partitions {unfinished} unfinished)")
                    return

    def _fetch(self) -> list[tuple[TopicPartition, Any]]:
        """The records of one poll that are below the end offsets."""
        with self._broker_errors():
            fetched = self._consumer.poll(timeout_ms=int(POLL_S * 1000), max_records=5000)
        return [(tp, record) for tp, batch in fetched.items() for record in batch if record.offset < self._ends[tp]]

    def _unfinished(self, partitions: set[TopicPartition]) -> set[TopicPartition]:
        with self._broker_errors():
            return {tp for tp in partitions if self._consumer.position(tp) < self._ends[tp]}

    @contextlib.contextmanager
    def _broker_errors(self) -> Iterator[None]:
        try:
            yield
        except KafkaError as exc:
            raise ServiceUnavailable(f"reading {self.topic}: the broker failed: {type(exc).__name__}: {exc}") from exc
