"""Tracing adapters: OpenTelemetry spans of batches and replies (otel.py), behind the Tracer port."""
