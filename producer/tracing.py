"""The client's spans (OpenTelemetry's API, when it is installed: the ``otel`` extra; nothing otherwise).

``ScoringClient`` (and the asyncio client over it) starts a span ``<requests
topic> send`` (kind PRODUCER) for each request, a child of the caller's
current span, and sends its context as the request's ``traceparent`` header;
the span ends when the broker has the record. When the reply comes, a span
``<reply topic> receive`` (kind CONSUMER) is made in the trace the reply's
``traceparent`` names: the worker's span for that reply, a child of the send
span (docs/tracing.md). So one trace runs from the caller through the
worker's batch to the reply. Without an SDK configured by the application
(``trace.set_tracer_provider``) the spans record nothing, and a request
carries a ``traceparent`` only if the caller's own context has one.
"""

from __future__ import annotations

from collections.abc import Callable

from producer.ports import Headers
from worker.core.wire import H_TRACEPARENT, format_traceparent, parse_traceparent

try:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags
except ImportError:  # the otel extra is not installed: no spans, no headers
    trace = None  # type: ignore[assignment]


class ClientTracing:
    def __init__(self, requests_topic: str, reply_topic: str) -> None:
        self._requests_topic, self._reply_topic = requests_topic, reply_topic
        self._tracer = trace.get_tracer("streamscore.producer") if trace is not None else None

    def send(self, request_id: str) -> tuple[Callable[[], None], Headers]:
        """Start the send span of a request; returns what ends it, and the headers that carry its context."""
        if self._tracer is None:
            return _nothing, ()
        span: Span = self._tracer.start_span(
            f"{self._requests_topic} send", kind=SpanKind.PRODUCER,
            attributes={"messaging.system": "kafka", "messaging.operation.type": "send",
                        "messaging.destination.name": self._requests_topic, "messaging.message.id": request_id})
        context = span.get_span_context()
        if not context.is_valid:
            span.end()
            return _nothing, ()
        return span.end, ((H_TRACEPARENT, format_traceparent(context.trace_id, context.span_id,
                                                             context.trace_flags)),)

    def received(self, request_id: str, headers: Headers) -> None:
        """A reply came: its span, in the trace its ``traceparent`` names (none without one)."""
        if self._tracer is None:
            return
        parsed = parse_traceparent(dict(headers).get(H_TRACEPARENT))
        if parsed is None:
            return
        trace_id, span_id, flags = parsed
        parent = trace.set_span_in_context(NonRecordingSpan(SpanContext(trace_id, span_id, is_remote=True,
                                                                        trace_flags=TraceFlags(flags))))
        self._tracer.start_span(f"{self._reply_topic} receive", context=parent, kind=SpanKind.CONSUMER,
                                attributes={"messaging.system": "kafka", "messaging.operation.type": "receive",
                                            "messaging.destination.name": self._reply_topic,
                                            "messaging.message.id": request_id}).end()


def _nothing() -> None:
    pass
