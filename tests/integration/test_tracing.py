"""OpenTelemetry spans on real Kafka and Redis, on both clients, with the SDK's in-memory exporter: requests from
twenty traces scored in shared batches give batch spans linked to every trace, a reply span per request in its
own trace (the reply's traceparent names it), and spans for an error reply, a dead letter and a duplicate; and a
ScoringClient's request makes one trace from the caller's span through the worker to the reply's receipt."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from producer.client import ScoringClient
from tests.integration.kit import TopicReader, wait_until
from worker.app import build_worker
from worker.core.settings import Settings

TRACES = 20
VALUES = [0.25] * 16


def trace_id(i: int) -> str:
    return f"{i + 1:032x}"


def span_id(i: int) -> str:
    return f"{i + 1:016x}"


@contextlib.contextmanager
def traced_worker(bootstrap, redis_url, topics, kafka_client, provider, **settings: str) -> Iterator[None]:
    """A worker in this process, tracing with ``provider``, until the block ends."""
    values = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "REDIS_URL": redis_url,
              "STREAMSCORE_REQUESTS_TOPIC": topics.requests, "STREAMSCORE_REPLY_TOPIC": topics.replies,
              "STREAMSCORE_DEAD_LETTER_TOPIC": topics.dlq, "STREAMSCORE_GROUP": f"{topics.requests}.group",
              "STREAMSCORE_DEDUP_NAMESPACE": topics.requests, "STREAMSCORE_KAFKA_CLIENT": kafka_client,
              "STREAMSCORE_TORCH_THREADS": "1", "STREAMSCORE_STATS_INTERVAL_S": "0", **settings}
    worker = build_worker(Settings.from_sources(None, values), tracer_provider=provider)
    running = threading.Thread(target=worker.run, name="worker")
    running.start()
    try:
        yield
    finally:
        worker.stop()
        running.join(60)


def in_memory() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_batches_link_every_trace_and_each_reply_continues_its_requests_trace(
        bootstrap, redis_url, topics, producer, kafka_client):
    provider, exporter = in_memory()
    with traced_worker(bootstrap, redis_url, topics, kafka_client, provider, STREAMSCORE_MAX_WAIT_MS="300",
                       STREAMSCORE_WAIT_TO_FILL="true"):
        for i in range(TRACES):  # one partition: they share batches
            producer.send(topics.requests, {"id": f"t{i}", "inputs": VALUES}, key=f"t{i}".encode(), partition=0,
                          headers=[("traceparent", f"00-{trace_id(i)}-{span_id(i)}-01".encode())])
        producer.send(topics.requests, {"id": "short", "inputs": [0.5]}, key=b"short",
                      headers=[("traceparent", f"00-{trace_id(99)}-{span_id(99)}-01".encode())])
        producer.send(topics.requests, b"not json", headers=[("traceparent", f"00-{trace_id(98)}-{span_id(98)}-01"
                                                              .encode())])
        producer.flush()
        replies = TopicReader(bootstrap, topics.replies)
        replies.read_until(lambda got: len(got.records) >= TRACES + 1, 60, "every reply")
        producer.send(topics.requests, {"id": "t0", "inputs": VALUES}, key=b"t0")  # answered already
        producer.flush()
        dead = TopicReader(bootstrap, topics.dlq)
        dead.read_until(lambda got: len(got.records) >= 1, 30, "the dead letter")
        wait_until(lambda: any(s.attributes.get("streamscore.outcome") == "duplicate"
                               for s in exporter.get_finished_spans()), 30, "the duplicate's span")
    spans = exporter.get_finished_spans()

    batches = [s for s in spans if s.name == f"{topics.requests} process"]
    assert all(s.kind is SpanKind.CONSUMER and s.parent is None for s in batches)
    assert sum(s.attributes["messaging.batch.message_count"] for s in batches) == TRACES
    assert max(s.attributes["messaging.batch.message_count"] for s in batches) > 1  # a batch of many traces
    linked = {f"{link.context.trace_id:032x}" for s in batches for link in s.links}
    assert linked == {trace_id(i) for i in range(TRACES)}

    published = {s.attributes["messaging.message.id"]: s for s in spans if s.name == f"{topics.replies} publish"}
    headers = {r.key.decode(): dict(r.headers) for r in replies.read().records}
    for i in range(TRACES):
        span = published[f"t{i}"]
        assert f"{span.context.trace_id:032x}" == trace_id(i) and f"{span.parent.span_id:016x}" == span_id(i)
        assert span.kind is SpanKind.PRODUCER and "streamscore.outcome" not in span.attributes  # a reply, scored
        assert headers[f"t{i}"]["traceparent"].startswith(f"00-{trace_id(i)}-{span.context.span_id:016x}-".encode())
    error = published["short"]
    assert error.attributes["streamscore.outcome"] == "error reply" and f"{error.context.trace_id:032x}" == trace_id(99)
    assert error.attributes["error.type"] == "wrong_input_length"
    (dead_span,) = [s for s in spans if s.attributes.get("streamscore.outcome") == "dead letter"]
    assert f"{dead_span.context.trace_id:032x}" == trace_id(98) and dead_span.attributes["error.type"] == "invalid_json"
    (duplicate,) = [s for s in spans if s.attributes.get("streamscore.outcome") == "duplicate"]
    assert duplicate.attributes["messaging.message.id"] == "t0"



CLIENT_PROVIDER, CLIENT_SPANS = in_memory()


def test_a_client_request_is_one_trace_from_the_callers_span_to_the_replys_receipt(
        bootstrap, redis_url, topics, kafka_client):
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(CLIENT_PROVIDER)  # the application's, as a user sets it; once per process
    assert trace.get_tracer_provider() is CLIENT_PROVIDER
    CLIENT_SPANS.clear()
    with traced_worker(bootstrap, redis_url, topics, kafka_client, CLIENT_PROVIDER), \
            ScoringClient(bootstrap, topics.requests, topics.replies, kafka_client=kafka_client) as client, \
            trace.get_tracer("the caller").start_as_current_span("checkout") as caller:
        reply = client.score(VALUES, request_id=f"c-{kafka_client}", timeout_s=60)
        wait_until(lambda: any(s.name.endswith("receive") for s in CLIENT_SPANS.get_finished_spans()), 10,
                   f"the client's receive span; spans: {[(s.name, s.kind) for s in CLIENT_SPANS.get_finished_spans()]}")
    assert reply["status"] == "ok"
    spans = {span.name: span for span in CLIENT_SPANS.get_finished_spans()}
    send, publish, receive = (spans[f"{topics.requests} send"], spans[f"{topics.replies} publish"],
                              spans[f"{topics.replies} receive"])
    assert {span.context.trace_id for span in (send, publish, receive)} == {caller.get_span_context().trace_id}
    assert send.parent.span_id == caller.get_span_context().span_id
    assert publish.parent.span_id == send.context.span_id  # the worker's reply span, under the client's send
    assert receive.parent.span_id == publish.context.span_id  # the receipt, under the worker's reply span
