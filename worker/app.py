"""The composition root: build every part of the worker from Settings."""

from __future__ import annotations

import torch

from worker.clock import SystemClock
from worker.dedup import DedupStore, InMemoryDedupStore, RedisDedupStore
from worker.loop import SendTag, Worker
from worker.models import load_model
from worker.runner import TorchRunner
from worker.settings import Settings, require_services
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
    store.ping()  # fail at start, with the URL in the message, rather than at the first batch
    return store


def build_worker(settings: Settings) -> Worker:
    """Everything the streaming worker needs; raises ConfigError, ModelError or a connection error."""
    require_services(settings)
    clock = SystemClock()
    runner = build_runner(settings)
    dedup = build_dedup(settings, clock)
    source = KafkaSource(settings, clock)
    sink: KafkaSink[SendTag] = KafkaSink(settings.kafka_bootstrap_servers, settings.client_id)
    source.start()
    return Worker(settings, source, sink, dedup, runner, runner.prepare, clock)
