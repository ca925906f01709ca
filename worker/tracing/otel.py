"""OpenTelemetry spans of the stream's work: a span per micro-batch, a span per reply in its request's trace.

Off unless ``--otel`` is given or an exporter is named by the standard
variables (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); the ``otel`` extra provides the SDK.
Spans go out in batches (the SDK's BatchSpanProcessor) over OTLP/HTTP, or to
stdout with ``OTEL_TRACES_EXPORTER=console``; the service is
``OTEL_SERVICE_NAME`` (default ``streamscore-worker``).

For each scored batch (``scored``):

- ``<requests topic> process``, kind CONSUMER, from the batch's hand-over to
  the model to its answer: a link to each request's trace context (its
  ``traceparent`` header; a micro-batch has many parents, so it has none),
  ``messaging.batch.message_count``, the model entry, and events when its
  compute started and finished;
- per request, ``<reply topic> publish``, kind PRODUCER, a child of the
  request's own context, so that a client's trace continues through the
  worker (a request without one: a child of the batch span), linked to the
  batch span, with the request's queue wait, batch wait and compute times
  (and few other attributes: each costs the SDK about a microsecond). Its
  reply carries this span's ``traceparent``.

A request answered without scoring (an error reply), a dead letter and a
duplicate get a span of their own in the request's trace that says so
(``streamscore.outcome``, ``error.type``). The spans are made on the loop's
thread when the replies are built; a span's end is not a delivery (the reply
is acknowledged later, or the batch is scored again after a crash).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags

from worker.core.errors import ConfigError
from worker.core.messages import Timings
from worker.core.wire import format_traceparent, parse_traceparent
from worker.ports import Scored

SERVICE_NAME = "streamscore-worker"


class OtelTracer:
    """The Tracer port (worker/ports.py) over an OpenTelemetry ``provider``; replies go to ``reply_topic`` unless
    a request names its own. ``owned``: the provider is this tracer's, shut down by ``close`` (else its owner's)."""

    def __init__(self, provider: trace.TracerProvider, reply_topic: str, owned: bool = True) -> None:
        self._provider, self._owned = provider, owned
        self._tracer = provider.get_tracer("streamscore")
        self._reply_topic = reply_topic

    def scored(self, scored: Scored, timings: Sequence[Timings], submitted_ms: int) -> list[bytes | None]:
        now_ns = time.time_ns()
        contexts = [_context(request.traceparent) for request in scored.batch]
        links = [Link(trace.get_current_span(context).get_span_context()) for context in contexts if context]
        topic = scored.batch[0].position.topic
        batch = self._tracer.start_span(
            f"{topic} process", kind=SpanKind.CONSUMER, links=links, start_time=submitted_ms * 1_000_000,
            attributes={"messaging.system": "kafka", "messaging.operation.type": "process",
                        "messaging.destination.name": topic, "messaging.batch.message_count": len(scored.batch),
                        "streamscore.model_entry": scored.entry})
        finished_ns = now_ns - int((time.monotonic() - scored.started - scored.compute_s) * 1e9)
        batch.add_event("compute started", timestamp=finished_ns - int(scored.compute_s * 1e9))
        batch.add_event("compute finished", timestamp=finished_ns)
        to_batch = [Link(batch.get_span_context())]
        traceparents: list[bytes | None] = []
        for request, context, timing in zip(scored.batch, contexts, timings, strict=True):
            reply_topic = request.reply_to or self._reply_topic
            span = self._tracer.start_span(
                f"{reply_topic} publish", context=context or trace.set_span_in_context(batch),
                kind=SpanKind.PRODUCER, links=to_batch if context else (), start_time=now_ns,
                attributes={"messaging.destination.name": reply_topic, "messaging.message.id": request.id,
                            "streamscore.queue_wait_ms": timing.queue_wait_ms,
                            "streamscore.batch_wait_ms": timing.batch_wait_ms,
                            "streamscore.compute_ms": timing.compute_ms})
            traceparents.append(_traceparent(span))
            span.end(end_time=now_ns)
        batch.end(end_time=now_ns)
        return traceparents

    def unscored(self, what: str, request_id: str | None, traceparent: bytes | None, topic: str,
                 code: str | None) -> bytes | None:
        attributes: dict[str, str] = {"messaging.system": "kafka", "streamscore.outcome": what}
        if request_id is not None:
            attributes["messaging.message.id"] = request_id
        if code is not None:
            attributes["error.type"] = code
        if topic:
            attributes["messaging.destination.name"] = topic
        name, kind = (f"{topic} publish", SpanKind.PRODUCER) if topic else (what, SpanKind.INTERNAL)
        span = self._tracer.start_span(name, context=_context(traceparent), kind=kind, attributes=attributes)
        span.end()
        return _traceparent(span)

    def close(self) -> None:
        """Export what is still buffered, and stop (a provider given by its owner is left running)."""
        shutdown = getattr(self._provider, "shutdown", None)
        if self._owned and shutdown is not None:
            shutdown()


def provider_from_environment(environ: Mapping[str, str]) -> TracerProvider:
    """A provider exporting as the standard variables say: OTLP/HTTP (default) or the console. Raises
    ConfigError for another exporter."""
    kind = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    exporter: SpanExporter
    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT ...
    elif kind == "console":
        exporter = ConsoleSpanExporter()
    else:
        raise ConfigError(f"OTEL_TRACES_EXPORTER={kind!r} is not supported: use otlp, console or none")
    service = environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _context(traceparent: bytes | None) -> Context | None:
    """The trace context a request's ``traceparent`` names; None without a valid one. Read by hand
    (core/wire.py): the SDK's propagator took a tenth of tracing's cost."""
    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return None
    trace_id, span_id, flags = parsed
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _traceparent(span: Span) -> bytes | None:
    """The W3C ``traceparent`` of ``span`` (None for an invalid one: a span of a no-op provider)."""
    context = span.get_span_context()
    return format_traceparent(context.trace_id, context.span_id, context.trace_flags) if context.is_valid else None
