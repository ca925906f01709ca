"""A batch answered in one pass sends exactly what the per-request path sends, and counts the same.

The Responder answers a scored batch in the wire contract's JSON in one pass (no Reply a request) unless
a tracer or another reply format needs each Reply; an encoder that is not the default one forces the
per-request path, which is the reference here. Hypothesis draws batches of every kind the one pass must
hand over or keep: error outcomes, reply_to, traceparents, requests of no route, values over the size
bound, and sends refused for good afterwards (their replacement is built from what the one pass kept).
"""

from __future__ import annotations

from typing import Any

import confluent_kafka
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.hot_path import RecordingSink, per_request
from worker.core.messages import Position, Request
from worker.core.routes import Route
from worker.core.stats import WorkerStats
from worker.core.wire import MAX_SEND_BYTES
from worker.ports import Delivery, Outcome, Scored
from worker.stream.replies import Responder

DEFAULT = Route("churn", "churn", "mlp16", lambda inputs: inputs)
CANARY = Route("churn@2", "churn", "mlp32", lambda inputs: inputs)
TOO_LARGE = confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE))


outputs = st.one_of(
    st.lists(st.floats(allow_nan=False, width=32), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(-10**6, 10**6), max_size=3),
    st.text(max_size=20),
    st.just("x" * MAX_SEND_BYTES),  # over the bound: the reply becomes reply_too_large
)
errors = [Outcome(None, "model_error", "it raised"), Outcome(None, "invalid_inputs", "no")]
outcomes = st.one_of(outputs.map(Outcome), st.sampled_from(errors))
requests = st.builds(
    lambda i, rid, reply_to, traceparent, route, produced, polled: Request(
        rid, None, Position("requests", i % 3, 100 + i), reply_to, None, traceparent, produced, polled, route),
    st.integers(0, 10**6), st.text(min_size=1, max_size=12),
    st.one_of(st.none(), st.sampled_from(["replies-a", "other.replies"])),
    st.one_of(st.none(), st.just(b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")),
    st.sampled_from([None, DEFAULT, CANARY]), st.integers(0, 10**13), st.floats(0, 100.0))


def answered(batch: list[Request], results: list[Outcome], refused: set[int], encode: Any) -> tuple[list, dict]:
    sink = RecordingSink()
    stats = WorkerStats()
    responder = Responder(sink, "replies", "dead-letters", lambda: DEFAULT, stats, encode=encode)
    responder.answer_scored(Scored("churn", batch, results, 50.0, 0.0123), 1_700_000_000_000, set())
    refused_at = {batch[i].position for i in refused}
    deliveries = [Delivery(tag, TOO_LARGE if tag.position in refused_at else None) for *_, tag in sink.sends()]
    responder.take_refused(deliveries, resend=True)
    # By record: the one pass sends a batch's ok replies as one group, after the replies that leave it.
    sends = sorted([(topic, key, value, headers, tag.position, tag.done,
                     tag.sent.reply() if hasattr(tag.sent, "reply") else tag.sent)
                    for topic, key, value, headers, tag in sink.sends()], key=lambda send: send[4].offset)
    counts = {"ok": stats.replied_ok, "error": stats.replied_error, "models": dict(stats.model_replies),
              "codes": dict(stats.error_codes), "dead": stats.dead_lettered,
              "stages": {name: (h.counts, h.sum) for name, h in stats.stage_seconds.items()}}
    return sends, counts


@settings(max_examples=300, deadline=None)
@given(data=st.data(), size=st.integers(0, 12))
def test_one_pass_sends_and_counts_what_the_per_request_path_does(data, size):
    batch = data.draw(st.lists(requests, min_size=size, max_size=size, unique_by=lambda r: r.position.offset))
    results = data.draw(st.lists(outcomes, min_size=size, max_size=size))
    refused = data.draw(st.sets(st.integers(0, max(0, size - 1)), max_size=3)) if size else set()
    assert answered(batch, results, refused, None) == answered(batch, results, refused, per_request)


def test_a_plain_batch_takes_the_one_pass():
    batch = [Request(f"r{i}", None, Position("requests", 0, i), route=DEFAULT) for i in range(3)]
    sink = RecordingSink()
    Responder(sink, "replies", "dead-letters", lambda: DEFAULT, WorkerStats()).answer_scored(
        Scored("churn", batch, [Outcome([0.5])] * 3, 0.0, 0.001), 0, set())
    assert [len(records) for records, _ in sink.made] == [3]  # one group
    assert [type(tag.sent).__name__ for *_, tag in sink.sends()] == ["Answered"] * 3


def test_a_batch_whose_partitions_all_left_sends_nothing_not_even_an_empty_group():
    batch = [Request(f"r{i}", None, Position("requests", 0, i), route=DEFAULT) for i in range(3)]
    sink = RecordingSink()
    Responder(sink, "replies", "dead-letters", lambda: DEFAULT, WorkerStats()).answer_scored(
        Scored("churn", batch, [Outcome([0.5])] * 3, 0.0, 0.001), 0, {("requests", 0)})
    assert sink.made == []
