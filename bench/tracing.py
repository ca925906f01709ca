"""``python -m bench.tracing``: what OpenTelemetry tracing costs a reply, off and on.

Times the loop's answer to a scored batch (stream/replies.py ``Responder.answer_scored``: stage times, the
replies built, encoded and handed to a sink that drops them) for ``--batches`` batches of ``--batch-size``
churn requests, each request carrying a ``traceparent``, three ways:

- ``off``: no tracer (the worker's default): what tracing being available costs when it is not on;
- ``on``: worker/tracing/otel.py over an SDK provider with the batch span processor and an exporter that
  drops what it is given (the export's own cost is the collector's, off the loop's thread);
- ``on, requests not sampled``: the same, the requests' producers not sampling them (flags ``00``): the SDK's
  default parent-based sampler makes their reply spans non-recording.

Prints microseconds per reply (best of ``--repeats``) and the difference against ``off``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from worker.core.messages import Position, Request
from worker.core.routes import Route
from worker.core.stats import WorkerStats
from worker.ports import Outcome, Scored
from worker.stream.replies import Responder


class Dropped(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class NoSink:
    pending = 0

    def send(self, topic: str, key: bytes, value: bytes, headers: Any, tag: Any) -> None:
        pass

    def send_group(self, records: Any, tag: Any, member: Any) -> None:
        pass


def batch(size: int, number: int, flags: str = "01") -> Scored:
    route = Route("churn", "churn", "v1", lambda inputs: inputs)
    requests = [Request(f"r{number}-{i}", [0.0] * 16, Position("requests", 0, i), route=route,
                        traceparent=f"00-{number * size + i + 1:032x}-{i + 1:016x}-{flags}".encode(),
                        produced_ms=int(time.time() * 1000), received_at=time.monotonic())
                for i in range(size)]
    return Scored("churn", requests, [Outcome({"churn_probability": 0.5})] * size, time.monotonic(), 0.002)


def per_reply_us(tracer: Any, batches: list[Scored], repeats: int) -> float:
    best = float("inf")
    traced = {"tracer": tracer} if tracer is not None else {}  # off: as a Responder without tracing was built
    default = batches[0].batch[0].route
    for _ in range(repeats):
        responder = Responder(NoSink(), "replies", "requests.dlq", lambda: default,  # type: ignore[arg-type, return-value]
                              WorkerStats(), **traced)
        started = time.perf_counter()
        for scored in batches:
            responder.answer_scored(scored, int(time.time() * 1000), set())
        best = min(best, time.perf_counter() - started)
    return best / sum(len(scored.batch) for scored in batches) * 1e6


def provider() -> TracerProvider:
    made = TracerProvider()
    made.add_span_processor(BatchSpanProcessor(Dropped(), max_queue_size=1 << 16))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--off-only", action="store_true",
                        help="time only the worker without tracing (runs on a checkout from before tracing too)")
    args = parser.parse_args(argv)
    sampled = [batch(args.batch_size, n) for n in range(args.batches)]
    unsampled = [batch(args.batch_size, n, flags="00") for n in range(args.batches)]
    ways: dict[str, tuple[Any, list[Scored]]] = {"off": (None, sampled)}
    if not args.off_only:
        from worker.tracing.otel import OtelTracer

        ways["on"] = (OtelTracer(provider(), "replies"), sampled)
        ways["on, requests not sampled"] = (OtelTracer(provider(), "replies"), unsampled)
    base = None
    print(f"{args.batches} batches of {args.batch_size}, best of {args.repeats}")
    print("| tracing | µs per reply | added |\n|---|---:|---:|")
    for name, (tracer, batches) in ways.items():
        us = per_reply_us(tracer, batches, args.repeats)
        base = us if base is None else base
        print(f"| {name} | {us:.1f} | {us - base:+.1f} |")
        if tracer is not None:
            tracer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
