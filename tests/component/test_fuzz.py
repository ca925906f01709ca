"""Generated hostile input through the decoder and the whole worker loop: nothing crashes, nothing is lost."""

import json
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.component.harness import Harness
from tests.fakes import routes_of
from worker.core.messages import InvalidRecord, Position, RawRecord, Request
from worker.core.wire import decode_request
from worker.models.churn import churn_model

PREPARE = routes_of(churn_model().prepare)
POS = Position("requests", 0, 0)

numbers = st.one_of(st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), st.text(max_size=3))
inputs = st.one_of(
    st.lists(numbers, min_size=0, max_size=20),
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=16, max_size=16),  # valid ones, often
    st.text(max_size=50), st.dictionaries(st.text(max_size=3), numbers, max_size=3), numbers,
)
ids = st.one_of(st.text(min_size=0, max_size=300), st.integers(), st.none(), st.just("é✓\u0000𝄞"))
bodies = st.fixed_dictionaries({"id": ids, "inputs": inputs},
                               optional={"reply_to": st.one_of(st.text(max_size=20), st.integers()),
                                         "deadline_ms": st.one_of(st.integers(), st.text(max_size=5))})


def encode(body, style):
    if style == "json":
        return json.dumps(body, allow_nan=True).encode()  # NaN, Infinity and huge ints included
    if style == "nested":
        return ("[" * 5000 + "]" * 5000).encode()
    return json.dumps(body)[: len(json.dumps(body)) // 2].encode()  # truncated


def generated_records(header_values: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(
        st.one_of(bodies.flatmap(lambda b: st.sampled_from(["json", "truncated"]).map(lambda s: encode(b, s))),
                  st.binary(max_size=100), st.just(encode({}, "nested")), st.none()),
        st.one_of(st.none(), st.binary(max_size=400),
                  st.text(alphabet=string.printable, max_size=20).map(str.encode)),
        st.lists(st.tuples(st.text(max_size=10), header_values), max_size=3),
    )


records = generated_records(st.binary(max_size=20))  # what kafka-python's producer sends (test_fuzz_kafka.py)
# and null header values, as the Java client sends them (the fake sink refuses to send one on, as kafka-python does)
jvm_records = generated_records(st.one_of(st.binary(max_size=20), st.none()))


@settings(max_examples=10_000, deadline=None)
@given(jvm_records)
def test_decoder_classifies_every_generated_record(record):
    value, key, headers = record
    result = decode_request(RawRecord(POS, key, value, headers, 0, 0.0), PREPARE, 1 << 20)
    assert isinstance(result, (Request, InvalidRecord))
    if isinstance(result, InvalidRecord):
        assert result.code and result.message
        assert result.value == value  # a dead letter keeps the original bytes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(jvm_records, min_size=1, max_size=100))
def test_every_generated_record_ends_as_a_reply_a_dead_letter_or_a_duplicate(batch):
    h = Harness(max_wait_ms=0)
    for value, key, headers in batch:
        h.source.produce(value if value is not None else None, key=key, headers=headers)
    h.steps(3)
    h.worker.stop()
    h.worker.run()
    stats = h.worker.stats
    answered = stats.replied_ok + stats.replied_error + stats.replied_expired
    assert stats.consumed == len(batch)
    assert answered + stats.dead_lettered + stats.duplicates == len(batch)
    assert len(h.sink.sent) == answered + stats.dead_lettered
    assert h.source.committed == {("requests", 0): len(batch)}
