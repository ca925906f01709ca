"""The OpenTelemetry tracer (worker/tracing/otel.py) on the SDK's in-memory exporter: a batch span linked to every
request's trace, a reply span per request in that request's trace, the reply's traceparent naming it; spans for
what is not scored; and when tracing is on at all."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from worker.app import build_tracer, otel_wanted
from worker.core.errors import ConfigError
from worker.core.messages import Position, Request, Timings
from worker.core.settings import Settings
from worker.ports import Outcome, Scored
from worker.tracing.otel import OtelTracer

TRACE_A = "0af7651916cd43dd8448eb211c80319c"
TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"


def traceparent(trace_id: str, span_id: str) -> bytes:
    return f"00-{trace_id}-{span_id}-01".encode()


def traced() -> tuple[OtelTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracer(provider, "replies"), exporter


def request(request_id: str, parent: bytes | None, reply_to: str | None = None) -> Request:
    return Request(request_id, [0.0], Position("requests", 0, 0), reply_to=reply_to, traceparent=parent)


def test_a_batch_has_one_span_linked_to_each_trace_and_each_reply_a_span_in_its_requests_trace():
    tracer, exporter = traced()
    batch = [request("a", traceparent(TRACE_A, "00f067aa0ba902b7")),
             request("b", traceparent(TRACE_B, "b7ad6b7169203331"), reply_to="elsewhere"),
             request("c", None)]
    scored = Scored("churn", batch, [Outcome(0.5)] * 3, started=0.0, compute_s=0.004)
    replies = tracer.scored(scored, [Timings(1.0, 2.0, 4.0)] * 3, submitted_ms=1_700_000_000_000)

    spans = {span.name: span for span in exporter.get_finished_spans() if span.name.endswith("process")}
    (process,) = spans.values()
    assert process.name == "requests process" and process.kind is SpanKind.CONSUMER
    assert process.parent is None and process.attributes["messaging.batch.message_count"] == 3
    assert {format(link.context.trace_id, "032x") for link in process.links} == {TRACE_A, TRACE_B}
    assert [event.name for event in process.events] == ["compute started", "compute finished"]

    published = [span for span in exporter.get_finished_spans() if span.kind is SpanKind.PRODUCER]
    by_id = {span.attributes["messaging.message.id"]: span for span in published}
    assert by_id["a"].name == "replies publish" and by_id["b"].name == "elsewhere publish"
    assert format(by_id["a"].context.trace_id, "032x") == TRACE_A
    assert format(by_id["a"].parent.span_id, "016x") == "00f067aa0ba902b7"
    assert [link.context.span_id for link in by_id["a"].links] == [process.context.span_id]
    assert by_id["c"].parent.span_id == process.context.span_id  # no context of its own: under the batch
    assert by_id["a"].attributes["streamscore.compute_ms"] == 4.0
    for request_id, reply in zip("abc", replies, strict=True):
        span = by_id[request_id]
        ids = f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-".encode()
        assert reply is not None and reply.startswith(ids)  # then the flags: sampled (and random, for a new trace)


def test_what_is_not_scored_gets_a_span_that_says_so_in_its_requests_trace():
    tracer, exporter = traced()
    reply = tracer.unscored("error reply", "r1", traceparent(TRACE_A, "00f067aa0ba902b7"), "replies",
                            "invalid_inputs")
    tracer.unscored("duplicate", "r2", b"not a traceparent", "", None)
    tracer.unscored("dead letter", None, None, "requests.dlq", "invalid_json")
    error, duplicate, dead = exporter.get_finished_spans()
    assert (error.name, error.attributes["streamscore.outcome"], error.attributes["error.type"]) == (
        "replies publish", "error reply", "invalid_inputs")
    assert format(error.context.trace_id, "032x") == TRACE_A and reply is not None and TRACE_A.encode() in reply
    assert (duplicate.name, duplicate.kind, duplicate.parent) == ("duplicate", SpanKind.INTERNAL, None)
    assert dead.attributes["streamscore.outcome"] == "dead letter" and "messaging.message.id" not in dead.attributes


def test_tracing_is_on_by_flag_or_an_exporter_variable_and_off_with_none():
    assert not otel_wanted(False, {})
    assert otel_wanted(True, {})
    assert otel_wanted(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert not otel_wanted(True, {"OTEL_TRACES_EXPORTER": "none"})
    settings = Settings.from_values(otel=True)
    assert build_tracer(Settings.from_values(), {}) is None
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER='jaeger' is not supported"):
        build_tracer(settings, {"OTEL_TRACES_EXPORTER": "jaeger"})
    before = trace.get_tracer_provider()
    tracer = build_tracer(settings, {"OTEL_TRACES_EXPORTER": "console"})
    assert tracer is not None
    tracer.close()
    assert trace.get_tracer_provider() is before  # the application's global provider is left alone
