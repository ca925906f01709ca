"""The composition root: build every part of the worker from Settings."""

from __future__ import annotations

import threading

import redis
import torch
from kafka.errors import KafkaError

from worker.clock import SystemClock
from worker.dedup import DedupStore, InMemoryDedupStore, RedisDedupStore
from worker.loop import SendTag, Worker
from worker.models import load_model
from worker.runner import TorchRunner
from worker.errors import ServiceUnavailable
from worker.settings import Settings, redact_url, require_services
from worker.sink import KafkaSink
from worker.source import KafkaSource


def build_runner(settings: Settings) -> TorchRunner:
    """Load the model, place it on its device and warm it up."""
    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
    model = load_model(settings.model)
    runner = TorchRunner(model, settings.device, settings.max_batch_size)
    runner.warmup(settings.max_batch_size)
    return runner


def build_dedup(settings: Settings, clock: SystemClock) -> DedupStore:
    if settings.redis_url.startswith("memory://"):
        return InMemoryDedupStore(clock, settings.dedup_ttl_s, settings.dedup_lease_ms)
    store = RedisDedupStore(settings.redis_url, settings.dedup_namespace, settings.dedup_ttl_s,
                            settings.dedup_lease_ms)
    try:
        store.ping()  # fail at start, naming the setting, rather than at the first batch
    except redis.RedisError as exc:
        raise ServiceUnavailable(f"no Redis answers at REDIS_URL={redact_url(settings.redis_url)} ({exc})") from exc
    return store


def build_worker(settings: Settings, stop_requested: threading.Event | None = None) -> Worker:
    """Everything the streaming worker needs.

    Raises ConfigError, ModelError, or ServiceUnavailable naming the setting
    that points at a service that does not answer.
    """
    require_services(settings)
    clock = SystemClock()
    runner = build_runner(settings)
    dedup = build_dedup(settings, clock)
    try:
        source = KafkaSource(settings, clock)
        sink: KafkaSink[SendTag] = KafkaSink(settings.kafka_bootstrap_servers, settings.client_id)
    except KafkaError as exc:
        raise ServiceUnavailable(f"no Kafka broker answers at KAFKA_BOOTSTRAP_SERVERS="
                                 f"{settings.kafka_bootstrap_servers} ({type(exc).__name__}: {exc})") from exc
    source.start()
    return Worker(settings, source, sink, dedup, runner, runner.prepare, clock, stop_requested=stop_requested)
