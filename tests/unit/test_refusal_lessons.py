"""What one refusal of a record sent alone teaches holds for the rest of its batch (worker/core/refusals.py
``Lessons``): a topic that refuses every record costs a batch a few sends alone, not one a record, and a
record that fits is still delivered whatever was refused beside it.

The sink here plays a broker as kafka-python's idempotent producer meets it, the hardest case for the
ladder: once one record of a settle is refused, every record of that settle fails with the same error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import confluent_kafka
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from worker.core.messages import Headers, Position, Request
from worker.core.refusals import record_bytes
from worker.core.routes import Route
from worker.core.stats import WorkerStats
from worker.ports import Delivery, Outcome, Record, Scored, Tag
from worker.stream.replies import Responder

DEFAULT = Route("churn", "churn", "mlp16", lambda inputs: inputs)


def kafka_error(code: int) -> confluent_kafka.KafkaException:
    return confluent_kafka.KafkaException(confluent_kafka.KafkaError(code))


TOO_LARGE = kafka_error(confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE)
NOT_ALLOWED = kafka_error(confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED)


class RefusingSink:
    """Topics with a max.message.bytes, and topics that refuse every record; a settle with one refused record
    fails every record in it, with that record's error."""

    def __init__(self, limits: dict[str, int], forbidden: frozenset[str] = frozenset()) -> None:
        self._limits = limits
        self._forbidden = forbidden
        self._out: list[tuple[Record, Tag]] = []
        self.delivered: list[Record] = []
        self.settles_of_one = 0  # records sent alone

    @property
    def pending(self) -> int:
        return len(self._out)

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: Tag) -> None:
        self._out.append(((topic, key, value, headers), tag))

    def send_group(self, records: Sequence[Record], tag: Tag, member: Callable[[int], Tag]) -> None:
        self._out += [(record, member(i)) for i, record in enumerate(records)]

    def _refusal(self, record: Record) -> Exception | None:
        topic, key, value, headers = record
        if topic in self._forbidden:
            return NOT_ALLOWED
        if topic in self._limits and record_bytes(key, value, headers) > self._limits[topic]:
            return TOO_LARGE
        return None

    def settle(self, timeout_s: float = 0.0) -> list[Delivery[Tag]]:
        out, self._out = self._out, []
        self.settles_of_one += len(out) == 1
        error = next((e for e in (self._refusal(record) for record, _ in out) if e is not None), None)
        if error is None:
            self.delivered += [record for record, _ in out]
        return [Delivery(tag, error) for _, tag in out]

    def close(self, timeout_s: float = 0.0) -> None:
        pass


def answer_all(sink: RefusingSink, outputs: list[object], reply_to: str, compressed: bool = False) -> None:
    """Answer one scored batch, one request an output, and settle until nothing is left out."""
    batch = [Request(f"id-{n}", None, Position("requests", 0, n), reply_to, None, None, 0, 0.0, DEFAULT)
             for n in range(len(outputs))]
    responder = Responder(sink, "replies", "dead-letters", lambda: DEFAULT, WorkerStats(), compressed=compressed)
    responder.answer_scored(Scored("churn", batch, [Outcome(output) for output in outputs], 0.0, 0.001),
                            1_700_000_000_000, set())
    for _ in range(10 * len(outputs)):
        if not sink.pending:
            break
        responder.take_refused(sink.settle(), resend=True)
    assert not sink.pending


def topics_of(sink: RefusingSink) -> list[str]:
    return [topic for topic, *_ in sink.delivered]


def test_a_topic_refusing_every_reply_and_error_reply_costs_a_few_sends_alone_not_two_a_record():
    sink = RefusingSink({"small": 100})
    answer_all(sink, [[0.5] * 16 for _ in range(40)], reply_to="small")
    assert topics_of(sink) == ["dead-letters"] * 40  # each reply refused, then its error reply: a dead letter
    assert sink.settles_of_one <= 4, sink.settles_of_one  # one alone a step, and one for a smaller record


def test_a_topic_the_worker_may_not_write_to_costs_one_send_alone():
    sink = RefusingSink({}, forbidden=frozenset({"forbidden"}))
    answer_all(sink, [[0.5] * 16 for _ in range(40)], reply_to="forbidden")
    assert topics_of(sink) == ["dead-letters"] * 40
    assert sink.settles_of_one == 1


@pytest.mark.parametrize("compressed", [False, True])
def test_a_reply_that_fits_is_delivered_whatever_was_refused_beside_it(compressed):
    sink = RefusingSink({"small": 1000})  # a reply of [0.5] takes about 720 bytes, its headers counted
    outputs: list[object] = [["x" * 2000] if n % 4 == 0 else [0.5] for n in range(20)]
    answer_all(sink, outputs, reply_to="small", compressed=compressed)
    assert topics_of(sink) == ["small"] * 20
    codes = sorted((orjson.loads(value).get("error") or {}).get("code", "ok") for _, _, value, _ in sink.delivered)
    assert codes == ["ok"] * 15 + ["reply_too_large"] * 5
    assert sink.settles_of_one <= (20 if compressed else 4)


def test_compressed_batches_teach_nothing_by_size():
    """Compressed, a larger record may take fewer bytes: every record refused with others is tried alone."""
    sink = RefusingSink({"small": 100})
    answer_all(sink, [[0.5] * 16 for _ in range(10)], reply_to="small", compressed=True)
    assert topics_of(sink) == ["dead-letters"] * 10
    assert sink.settles_of_one == 20  # each reply alone, then each error reply alone


@given(key=st.one_of(st.none(), st.binary(max_size=300)), value=st.one_of(st.none(), st.binary(max_size=20_000)),
       headers=st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=200))), max_size=9))
def test_a_records_bytes_are_what_kafkas_record_format_writes(key, value, headers):
    """Sizes compared between records must be exact: kafka-python's own encoder of format v2 says how large."""
    assert record_bytes(key, value, headers) == DefaultRecordBatchBuilder.size_in_bytes(0, 0, key, value, headers)
