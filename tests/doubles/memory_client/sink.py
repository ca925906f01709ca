"""The memory client's sinks: its producer under the worker's shared sink (worker/kafka/sends.py), and in
transactions under the worker's transactional policy (worker/kafka/transactional.py), as each real client's are.

The producer writes each record to the broker as it is sent: the broker's answer (the record's place, or the
error that refused it: no such topic, over the topic's max.message.bytes, a fenced producer) is known at once,
and ``settle`` reports it. A transactional producer writes into its open transaction, which the broker commits or
aborts whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from tests.doubles.memory_client.broker import GroupMetadata, MemoryBroker
from tests.doubles.memory_client.errors import InvalidConfiguration, MemoryKafkaError
from worker.core.bounds import TRANSACTION_CALL_S
from worker.core.messages import Headers, Position
from worker.core.offsets import TopicPartition as TP
from worker.kafka.sends import LedgerSink, SendGroup, SendLedger
from worker.kafka.transactional import TransactionalSends
from worker.ports import Record

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """The broker's answer to one send: where it landed, or why it was refused."""

    landed: Position | None
    error: MemoryKafkaError | None


class MemoryProducer:
    """The memory client's producer: plain, or transactional once ``init_transactions`` made it the newest of
    its transactional id (fencing the ones before)."""

    def __init__(self, broker: MemoryBroker, transactional_id: str | None = None) -> None:
        self._broker = broker
        self._transactional_id = transactional_id
        self._epoch: int | None = None

    def init_transactions(self) -> None:
        if self._transactional_id is None:
            raise InvalidConfiguration("init_transactions needs a transactional id")
        self._epoch = self._broker.init_transactions(self._transactional_id)

    def produce(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> Answer:
        try:
            return Answer(self._broker.append(topic, None, key, value, headers, self._identity()), None)
        except MemoryKafkaError as exc:
            return Answer(None, exc)

    def begin_transaction(self) -> None:
        self._broker.begin(*self._transactional())

    def send_offsets_to_transaction(self, offsets: dict[TP, tuple[int, str]], group_metadata: GroupMetadata,
                                    timeout_s: float | None = None) -> None:
        self._broker.add_offsets(*self._transactional(), offsets, group_metadata)

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        self._broker.end(*self._transactional(), commit=True)

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        self._broker.end(*self._transactional(), commit=False)

    def _identity(self) -> tuple[str, int] | None:
        return None if self._transactional_id is None else self._transactional()

    def _transactional(self) -> tuple[str, int]:
        if self._transactional_id is None or self._epoch is None:
            raise InvalidConfiguration("a transactional call before init_transactions")
        return self._transactional_id, self._epoch


class MemorySink(LedgerSink[T, Answer]):
    SEND_ERRORS: ClassVar[tuple[type[Exception], ...]] = (MemoryKafkaError,)

    def __init__(self, broker: MemoryBroker) -> None:
        self._broker = broker
        self._producer = MemoryProducer(broker)
        self._pending: SendLedger[T, Answer] = SendLedger(lambda answer: (True, answer.error))

    def _queue(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> Answer:
        return self._producer.produce(topic, key, value, headers)

    def _queue_group(self, records: Sequence[Record]) -> SendGroup[Answer]:
        answers = Answers(len(records))
        for i, (topic, key, value, headers) in enumerate(records):
            error = self._producer.produce(topic, key, value, headers).error
            if error is not None:
                answers.failed(i, error)
        return answers

    def _flush(self, timeout_s: float) -> None:
        pass  # every send was answered when it was made

    def _close(self, timeout_s: float) -> bool:
        return True  # nothing is ever out


class Answers(SendGroup[Answer]):
    """A group's answers, every one known when it was sent."""

    def outcome(self) -> tuple[bool, dict[int, Exception]]:
        return True, self._refused


class MemoryTransactionalSink(TransactionalSends[T], MemorySink[T]):
    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]] = (MemoryKafkaError,)

    def __init__(self, broker: MemoryBroker, transactional_id: str, call_s: float = TRANSACTION_CALL_S) -> None:
        super().__init__(broker)
        self._transactional_id = transactional_id
        self._timeout = (call_s,)
        self._producer = MemoryProducer(broker, transactional_id)
        self._producer.init_transactions()  # aborts what a previous instance with this id left open

    def _offsets(self, offsets: dict[TP, int]) -> Any:
        return {tp: (offset, "") for tp, offset in offsets.items()}

    def _renew_producer(self) -> None:
        self._producer = MemoryProducer(self._broker, self._transactional_id)
        self._producer.init_transactions()

    def _unanswered_for(self, waited_s: float | None) -> Exception:
        return MemoryKafkaError(f"sends unanswered after {waited_s} s")  # never: nothing is ever out

    def _describe(self, error: Exception) -> str:
        return f"{type(error).__name__}: {error}"
