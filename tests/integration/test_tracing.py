"""OpenTelemetry spans on real Kafka and Redis, on both clients, with the SDK's in-memory exporter: requests from
twenty traces scored in shared batches give batch spans linked to every trace, a reply span per request in its
own trace (the reply's traceparent names it), and spans for an error reply, a dead letter and a duplicate."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.integration.kit import TopicReader, wait_until
from worker.app import build_worker
from worker.core.settings import Settings

TRACES = 20
VALUES = [0.25] * 16


def trace_id(i: int) -> str:
    return f"{i + 1:032x}"


def span_id(i: int) -> str:
    return f"{i + 1:016x}"


def test_batches_link_every_trace_and_each_reply_continues_its_requests_trace(
        bootstrap, redis_url, topics, producer, kafka_client):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = Settings.from_sources(None, {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "REDIS_URL": redis_url,
        "STREAMSCORE_REQUESTS_TOPIC": topics.requests, "STREAMSCORE_REPLY_TOPIC": topics.replies,
        "STREAMSCORE_DEAD_LETTER_TOPIC": topics.dlq, "STREAMSCORE_GROUP": f"{topics.requests}.group",
        "STREAMSCORE_DEDUP_NAMESPACE": topics.requests, "STREAMSCORE_KAFKA_CLIENT": kafka_client,
        "STREAMSCORE_MAX_WAIT_MS": "300", "STREAMSCORE_WAIT_TO_FILL": "true", "STREAMSCORE_TORCH_THREADS": "1",
        "STREAMSCORE_STATS_INTERVAL_S": "0"})
    worker = build_worker(settings, tracer_provider=provider)
    running = threading.Thread(target=worker.run, name="worker")
    running.start()
    try:
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
    finally:
        worker.stop()
        running.join(60)
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

