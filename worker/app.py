"""The composition root: build every part of the worker from Settings, each part from its sections."""

from __future__ import annotations

import gc
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import redis
import structlog
import torch

from worker.core.batcher import request_batcher
from worker.core.bounds import StepBounds, step_bounds
from worker.core.broker_fit import check_group_protocol, check_session_timeout, check_topics_exist
from worker.core.clock import SystemClock
from worker.core.errors import (
    ConfigError,
    RegistryUnavailable,
    SchemaNotFound,
    SchemaRefused,
    ServiceUnavailable,
)
from worker.core.model_cache import ModelCache
from worker.core.model_table import ModelEntry
from worker.core.pacing import LiveFirst, RatePacer
from worker.core.routes import Routes
from worker.core.sections import CLUSTER_SCHEMES
from worker.core.settings import (
    BatchingSettings,
    DedupSettings,
    KafkaSettings,
    OperationsSettings,
    Settings,
    require_services,
)
from worker.core.shutdown import StopRequest
from worker.core.stats import ServedModel, WorkerStats
from worker.core.timerange import TimeRange
from worker.core.transactional_ids import hold as hold_transactional_id
from worker.dedup.memory import InMemoryDedupStore
from worker.dedup.redis_cluster import RedisClusterDedupStore
from worker.dedup.redis_store import RedisAccess, RedisDedupStore, prove_access, start_failure
from worker.formats import codecs
from worker.formats.replies import framed_replies
from worker.formats.schemas import RegistrySchemas
from worker.jobs.backfill import BackfillJob, RepliesToTheJob
from worker.jobs.bounded_source import BoundedSource
from worker.jobs.paced_source import PacedSource
from worker.kafka.broker_facts import BrokerAdmin, read_broker_facts
from worker.kafka.broker_watch import ASK_TIMEOUT_S, BrokerWatch
from worker.kafka.group_lag import GroupLag
from worker.kafka.transport import Transport, transport_for
from worker.models import load_model
from worker.models.runner import TorchRunner, free_memory, pick_device, return_large_blocks
from worker.models.versions import declared_contract, refusal
from worker.ports import (
    DedupStore,
    ModelRunner,
    ReplyEncode,
    RequestDecoder,
    Scorer,
    Sink,
    Source,
    Tag,
    Tracer,
    Transactions,
)
from worker.stream.framed import FramedRequests
from worker.stream.json_requests import JsonRequests
from worker.stream.loop import Worker
from worker.stream.parts import Extras, assemble
from worker.stream.reloads import Reloads
from worker.stream.residency import ModelLoads
from worker.stream.scoring import InlineScorer, InlineThenThreadScorer, ThreadScorer
from worker.stream.served import LoadedEntry, ServedModels
from worker.stream.shadow import Candidate, Shadow
from worker.stream.topic_formats import TopicDecoders
from worker.surface.http import HttpSurface

log = structlog.get_logger(__name__)


def build_runner(settings: Settings, entry: ModelEntry | None = None, streaming: bool = True) -> TorchRunner:
    """Load the model (the configuration file's ``entry``, or the ``model`` setting's), place it on its device
    and warm it up.

    Raises ConfigError when, ``streaming``, a poll's worth of batches, at the speed
    measured in warmup, would not fit comfortably in max_poll_interval_ms (or the
    liveness timeout), or when amp does not suit the device.
    """
    chosen = entry.model_settings(settings.model) if entry else settings.model
    batching = entry.batching(settings.batching) if entry else settings.batching
    if settings.model.torch_threads:
        torch.set_num_threads(settings.model.torch_threads)
    log.debug("model_loading", model=chosen.model, entry=entry.name if entry else None)
    model = load_model(chosen.model, chosen.model_config, chosen.weights, chosen.allow_pickle,
                       entry.version if entry else "")
    runner = TorchRunner(model, chosen.device, batching.max_batch_size, chosen.amp)
    warmup = runner.warmup(batching.max_batch_size)
    if streaming:
        check_poll_interval(settings, batching, warmup.batch_s, warmup.warmed_size if warmup.estimated else None)
    return runner


def build_one_model(settings: Settings) -> TorchRunner:
    """The one model score-file and inspect-model serve, loaded and warm.

    Args:
        settings: the worker's settings (``Settings.from_sources``, or ``worker.ray_data.scoring_settings``): the
            ``model`` setting's model, or the configuration file's model that ``Settings.only_model`` kept.

    Returns:
        The runner that ``score_table`` and ``score_file`` take; its replies carry the model's name and its
        table's ``version``, as the stream's do.

    Raises:
        ConfigError: amp on a device it does not suit (no poll here: the poll interval is not checked).
        ModelError: a model that cannot be found, read or loaded, or that fails its warm-up batch.
    """
    entries = settings.models.entries
    runner = build_runner(settings, entries[0] if entries else None, streaming=False)  # no poll, no probes
    if entries:
        runner.name = entries[0].name
        runner.version = entries[0].version or runner.version
    return runner


def build_models(settings: Settings) -> ServedModels:
    """Every model served, loaded and warm, with its batcher, and the routes to them: the configuration file's
    model table, or the one model of the ``model`` setting. Under a memory budget (``on_first_use``) only the
    pinned ones are loaded now (canary splits, shadow pairs), the others on first use (stream/residency.py).
    Raises ConfigError (a canary of the same version as the model it splits, and what build_runner raises),
    ModelError."""
    table = settings.models
    if not table.entries:
        return ServedModels(table, [load_entry(settings, None)])
    if not on_first_use(settings):
        return ServedModels(table, [load_entry(settings, entry) for entry in table.entries])
    return_large_blocks()  # before any model loads: what a model let go held goes back to the system
    pinned = table.pinned()
    log.info("models_on_first_use", loaded_now=pinned, on_first_use=[e.name for e in table.entries
                                                                     if e.name not in pinned],
             max_loaded_models=settings.model.max_loaded_models, model_memory_mb=settings.model.model_memory_mb)
    return ServedModels(table, [load_entry(settings, table.entry(name)) for name in pinned], on_first_use=True)


def on_first_use(settings: Settings) -> bool:
    """Whether the models load on first use: a memory budget is set."""
    return bool(settings.model.max_loaded_models or settings.model.model_memory_mb)


def build_loads(settings: Settings, models: ServedModels) -> ModelLoads | None:
    """Loading on first use under the memory budget (None: every model was loaded at start). Raises ConfigError
    when the pinned models alone take more than model_memory_mb."""
    if not models.on_first_use:
        return None
    budget = settings.model
    cache = ModelCache(budget.max_loaded_models, int(budget.model_memory_mb * 1024 * 1024), models.table.pinned())
    for name, loaded in models.live().items():
        cache.add(name, loaded.info.memory_bytes)
    if cache.victims(lambda name: False)[1] is False:
        raise ConfigError(f"model_memory_mb={budget.model_memory_mb:g} is too little: the models of canary splits "
                          f"and shadow pairs, which stay loaded, take {cache.loaded_bytes / 1024 / 1024:.1f} MiB")
    return ModelLoads(cache, lambda entry: load_entry(settings, entry), free_memory)


def load_entry(settings: Settings, entry: ModelEntry | None) -> LoadedEntry:
    """One model of the configuration file (None: the ``model`` setting's), loaded and warm, with its batcher.
    Raises what build_runner raises."""
    started = time.monotonic()
    runner = build_runner(settings, entry)
    version = entry.version if entry is not None and entry.version else runner.version
    name = entry.name if entry is not None else runner.name
    batching = entry.batching(settings.batching) if entry is not None else settings.batching
    info = ServedModel(name, name, version, str(runner.device), time.monotonic() - started, runner.memory_bytes)
    log.info("model_loaded", model=name, version=version, device=info.device, load_s=round(info.load_s, 2))
    return LoadedEntry(entry, runner, version, request_batcher(batching, runner.cost), info,
                       declared_contract(runner))


def build_shadow(settings: Settings, models: ServedModels, stats: WorkerStats, clock: SystemClock) -> Shadow | None:
    """Shadow scoring for the models that name a candidate (None when none does): each candidate loaded again,
    for the shadow thread alone, and checked to take the same inputs; started. Raises ConfigError (a candidate
    whose inputs and outputs differ from its model's, or of its version), ModelError."""
    shadowed = [entry for entry in settings.models.entries if entry.shadow]
    if not shadowed:
        return None
    live = models.live()
    candidates = {}
    for entry in shadowed:
        log.info("shadow_candidate_loading", model=entry.shadow, shadows=entry.name,
                 detail="a copy of its own, for the shadow thread")
        candidate = load_entry(settings, settings.models.entry(entry.shadow))
        why = refusal(live[entry.name], candidate)
        if why is not None:
            raise ConfigError(f"[models.{entry.name}] shadow {entry.shadow!r} cannot shadow it: {why}")
        batching = settings.models.entry(entry.shadow).batching(settings.batching)
        candidates[entry.name] = Candidate(candidate.runner, candidate.version, entry.shadow_fraction,
                                           batching.max_batch_size)
    shadow = Shadow(candidates, build_reply_sink(settings.kafka), settings.kafka.shadow_topic, stats, clock,
                    settings.model.shadow_queue)
    shadow.start()
    log.info("shadow_scoring", models={name: c.version for name, c in candidates.items()},
             topic=settings.kafka.shadow_topic)
    return shadow


def build_reloads(settings: Settings, models: ServedModels, stats: WorkerStats) -> Reloads | None:
    """New versions without a restart, for the models of a configuration file (None without one): started."""
    if not settings.models.source:
        return None
    reloads = Reloads(models.table, lambda: models.resident, lambda entry: load_entry(settings, entry), refusal,
                      stats, settings.model.model_watch_s, models.on_first_use)
    reloads.start()
    return reloads


def check_poll_interval(settings: Settings, batching: BatchingSettings, batch_s: float,
                        estimated_from: int | None = None) -> None:
    """The time between two polls is at most one poll's worth of batches plus the wait limit.

    Past max_poll_interval_ms the broker takes the worker's partitions away, so
    insist on a margin of two (batches of real inputs may be slower than warmup's).
    With the HTTP surface on, insist on the same margin below liveness_timeout_s:
    a step that long is not a stuck loop, and must not get the worker restarted.
    ``batching``: the model's own limits; ``estimated_from``: the size of the warmup batch a full batch's
    ``batch_s`` was scaled from, if any.
    """
    kafka, operations = settings.kafka, settings.operations
    batches = math.ceil(kafka.max_poll_records / batching.max_batch_size)
    worst_s = max(batching.max_wait_ms, batching.latency_target_ms) / 1000 + batches * batch_s
    timed = "in warmup" if estimated_from is None else f"estimated from warmup batches of {estimated_from}"
    if 2 * worst_s * 1000 > kafka.max_poll_interval_ms:
        raise ConfigError(
            f"a poll's worth of records (max_poll_records={kafka.max_poll_records}: {batches} batches of "
            f"max_batch_size={batching.max_batch_size} at {batch_s:.2f} s each {timed}) needs about "
            f"{worst_s:.1f} s, more than half of max_poll_interval_ms={kafka.max_poll_interval_ms}: lower "
            "max_poll_records or max_batch_size, or raise max_poll_interval_ms")
    if operations.http_port and 2 * worst_s > operations.liveness_timeout_s:
        raise ConfigError(
            f"a poll's worth of records ({batches} batches at {batch_s:.2f} s each {timed}) needs about "
            f"{worst_s:.1f} s, more than half of liveness_timeout_s={operations.liveness_timeout_s:g}: /healthz "
            "would fail while the loop works; raise --liveness-timeout-s, or lower max_poll_records or "
            "max_batch_size")


def build_scorer(settings: Settings, runners: Mapping[str, ModelRunner], clock: SystemClock) -> Scorer:
    """The models on a thread of their own when asked, or by default when one is on a GPU (loaded now, or to be
    loaded on first use): there its compute leaves the CPU to the loop. On shared CPU cores the thread measured
    slower (bench/profile_worker.py): by default they run inline there, until a batch outlives the group's poll
    interval (InlineThenThreadScorer)."""
    model = settings.model
    on_gpu = any(isinstance(runner, TorchRunner) and runner.device.type == "cuda" for runner in runners.values())
    later = [entry.model_settings(model).device for entry in settings.models.entries] if on_first_use(settings) else []
    on_gpu = on_gpu or any(pick_device(device).type == "cuda" for device in later)
    if model.model_thread == "on" or (model.model_thread == "auto" and on_gpu):
        return ThreadScorer(runners, clock)
    return InlineScorer(runners, clock) if model.model_thread == "off" else InlineThenThreadScorer(runners, clock)


def build_decoder(settings: Settings, routes: Routes) -> RequestDecoder:
    """From polled records to requests: the wire contract's JSON, or registry-framed records read with the schema
    registry's schemas; one decoder per format, each topic's records to its format's. Raises ConfigError (the
    codec's library is not installed, the password file cannot be read)."""
    formats, max_record_bytes = settings.formats, settings.batching.max_record_bytes

    def decoder_of(request_format: str) -> RequestDecoder:
        if request_format == "json":
            return JsonRequests(routes, max_record_bytes)
        codecs.check_installed(request_format)
        return FramedRequests(RegistrySchemas.from_formats(formats, request_format), routes, max_record_bytes,
                              formats.field_names(), formats.unknown_schema_retries)

    decoders = {name: decoder_of(name) for name in formats.used()}
    default = decoders[formats.format_of("")]  # no topic is named "": the default's
    if len(decoders) == 1:
        return default
    return TopicDecoders({topic: decoders[formats.format_of(topic)] for topic in formats.named_topics()}, default)


def build_reply_encoder(settings: Settings, models: ServedModels) -> ReplyEncode | None:
    """Replies in a registry format: each served name's reply schema, made from the outputs of its live model's
    reply to a sample request, registered (or looked up) now (None: the wire contract's JSON). Raises
    ConfigError (outputs of no registry type, a schema refused or not found, models loaded on first use),
    ServiceUnavailable (the registry does not answer)."""
    formats = settings.formats
    if formats.reply_format == "json":
        return None
    if on_first_use(settings):
        raise ConfigError(f"--reply-format {formats.reply_format} makes each model's reply schema from its outputs "
                          "at start, and under a memory budget (max_loaded_models, model_memory_mb) models load "
                          "later: use --reply-format json with a budget")
    samples = {}
    for name, route in models.routes.live().items():
        runner = models.runners[route.entry]
        if not isinstance(runner, TorchRunner):
            raise ConfigError(f"--reply-format {formats.reply_format}: model {name} cannot score a sample request")
        samples[name] = runner.sample_outputs()
    try:
        return framed_replies(formats, settings.kafka.reply_topic, samples, models.routes.default.model)
    except RegistryUnavailable as exc:
        raise ServiceUnavailable(f"{exc}: check SCHEMA_REGISTRY_URL (--schema-registry-url)") from None
    except (SchemaRefused, SchemaNotFound) as exc:
        mode = ("it was looked up only (--reply-schema-mode lookup): register it, or use register"
                if formats.reply_schema_mode == "lookup" else "the subject's compatibility rule may refuse it")
        raise ConfigError(f"the reply schema of --reply-format {formats.reply_format} could not be had: {exc}; "
                          f"{mode}") from None


def build_dedup(dedup: DedupSettings, bounds: StepBounds, clock: SystemClock) -> DedupStore:
    if dedup.redis_url.startswith("memory://"):
        return InMemoryDedupStore(clock, dedup.dedup_ttl_s, dedup.dedup_lease_ms)
    store: RedisDedupStore | RedisClusterDedupStore
    try:
        if urlsplit(dedup.redis_url).scheme in CLUSTER_SCHEMES:
            store = RedisClusterDedupStore(dedup.redis_url, dedup.dedup_namespace, dedup.dedup_ttl_s,
                                           dedup.dedup_lease_ms, access=RedisAccess.of(dedup),
                                           connect_s=bounds.store_connect_s, read_s=bounds.store_read_s)
        else:
            store = RedisDedupStore(dedup.redis_url, dedup.dedup_namespace, dedup.dedup_ttl_s,
                                    dedup.dedup_lease_ms, access=RedisAccess.of(dedup),
                                    connect_s=bounds.store_connect_s, read_s=bounds.store_read_s,
                                    min_replicas=dedup.dedup_min_replicas)
        store.ping()  # fail at start, naming the setting, rather than at the first batch
        prove_access(store)
    except redis.RedisError as exc:
        raise start_failure(exc, dedup.redis_url, dedup.redis_ca_file, dedup.dedup_namespace) from None
    return store


def start_surface(operations: OperationsSettings, stats: WorkerStats,
                  stopping: Callable[[], bool]) -> HttpSurface | None:
    """The HTTP surface (metrics, probes) on ``http_port``, already serving; None when the port is 0.

    Start it before ``build_worker``: it answers /healthz during a long model load. Raises ConfigError
    when the port cannot be bound.
    """
    if not operations.http_port:
        return None
    surface = HttpSurface(operations.http_port, stats, SystemClock(), operations.liveness_timeout_s, stopping)
    surface.start()
    return surface


def start_broker_watch(settings: Settings, stats: WorkerStats) -> BrokerWatch | None:
    """The watch of whether the brokers answer, for readiness, already looking; None without the HTTP surface."""
    if not settings.operations.http_port:
        return None
    kafka, transport = settings.kafka, _transport(settings.kafka)  # imported here, not on the watch's thread
    watch = BrokerWatch(lambda: transport.watch_admin(kafka, ASK_TIMEOUT_S, f"{kafka.client_id}-broker-watch"),
                        stats, SystemClock(), settings.operations.liveness_timeout_s)
    watch.start()
    return watch


def _transport(kafka: KafkaSettings) -> Transport:
    """The Kafka client library's Transport, as ``kafka_client`` names it: the one place this root looks at the
    client (worker/kafka/transport.py imports only the chosen library)."""
    return transport_for(kafka.kafka_client)


def build_kafka(settings: Settings, clock: SystemClock) -> tuple[Source, Sink[Tag], Transactions | None]:
    """The request source (started: subscribed to the requests topic), the reply sink and, for exactly-once,
    the transactions over both, on the chosen client library.

    Raises ServiceUnavailable when no broker answers, LookupError when the requests topic does not exist,
    ConfigError when another worker on this host holds the transactional id given.
    """
    kafka, delivery = settings.kafka, settings.delivery
    if delivery.exactly_once:
        delivery = replace(delivery, transactional_id=held_transactional_id(settings))
    return _transport(kafka).stream(kafka, delivery, step_bounds(kafka, settings.operations), clock,
                                    tuple(settings.models.topics()))


def held_transactional_id(settings: Settings) -> str:
    """The exactly-once worker's transactional id, held while its process runs: one the user gave as it is
    (ConfigError when another worker on this host holds it), else the default's first free slot."""
    return hold_transactional_id(settings.transactional_id, given=bool(settings.delivery.transactional_id))


def build_bounded_source(kafka: KafkaSettings, clock: SystemClock, time_range: TimeRange, *,
                         on_progress: Callable[[int], None] | None = None) -> BoundedSource:
    """A backfill's bounded source over ``time_range`` (not started), on the chosen client library. Raises
    ServiceUnavailable when no broker answers."""
    return BoundedSource(_transport(kafka).partition_reader(kafka, clock), kafka.requests_topic, kafka.group,
                         time_range, on_progress=on_progress)


def build_reply_sink(kafka: KafkaSettings) -> Sink[Any]:
    """A plain (not transactional) sink on the chosen client library: of replies (tagged Tag), or of shadow
    records (tagged with their request id)."""
    return _transport(kafka).sink(kafka)


def build_backfill(job: BackfillJob) -> tuple[Worker, BoundedSource]:
    """A backfill's worker over its range and its source, planned (or resumed), the model loaded: the
    BuildBackfill that worker/jobs/backfill.py runs.

    Raises ConfigError (a reply topic missing, a group that is not a
    backfill's), LookupError (no such topic), ServiceUnavailable, ModelError.
    """
    settings = job.settings
    kafka = settings.kafka
    if settings.delivery.exactly_once:
        raise ConfigError("backfill supports delivery=at-least-once only (its resume plan lives in the "
                          "consumer group's commit metadata); unset STREAMSCORE_DELIVERY / --delivery")
    pick_device(settings.model.device)  # a GPU this machine lacks: said before the job's plan is made
    clock = SystemClock()
    _transport(kafka).preflight(kafka)
    source = build_bounded_source(kafka, clock, job.time_range, on_progress=job.on_progress)
    sink = build_reply_sink(kafka)
    missing = source.missing_topics([kafka.reply_topic, kafka.dead_letter_topic])
    if missing:
        commands = [f"`python -m producer create-topic {name} --partitions "
                    f"{1 if name == kafka.dead_letter_topic else 4}`" for name in missing]
        raise ConfigError(f"topic(s) {', '.join(missing)} do not exist; create them first: {' and '.join(commands)}")
    source.start()
    models = build_models(settings)
    dedup = build_dedup(settings.dedup, step_bounds(kafka, settings.operations), clock)
    worker = _worker(settings, _paced(job, source, clock), sink, dedup, models, clock,
                     stop_requested=job.stop_requested, backfill=job)
    tune_collector(settings.kafka.max_poll_records)
    return worker, source


def _paced(job: BackfillJob, source: BoundedSource, clock: SystemClock) -> PacedSource:
    """The job's source at its --max-rate, holding while the live group lags (read on the job's client)."""
    pacing, kafka = job.pacing, job.settings.kafka
    live = live_lag = None
    if pacing.live_max_lag:
        live = LiveFirst(pacing.live_max_lag, pacing.live_check_s, clock)
        live_lag = _group_lag(kafka, clock, pacing.live_group)
    return PacedSource(source, RatePacer(pacing.max_rate, clock), live, live_lag)


def _group_lag(kafka: KafkaSettings, clock: SystemClock, group: str) -> GroupLag:
    """Another group's lag on the requests topic, read by a partition reader in that group."""
    transport = _transport(kafka)
    return GroupLag(transport.partition_reader(kafka, clock, group=group), kafka.requests_topic, group,
                    transport.errors)


def check_broker_fit(kafka: KafkaSettings, shadow: bool = False, model_topics: tuple[str, ...] = ()) -> None:
    """Refuse, naming the setting, a session timeout the broker would refuse at the group join, and a
    requests, reply or dead-letter topic (or, with ``shadow``, shadow topic; or a requests topic of a model of
    its own) it does not have (nothing creates them: see worker/core/broker_fit.py). Blocks for a few seconds at
    most; raises ConfigError, or ServiceUnavailable when the broker does not answer."""
    topics = [kafka.requests_topic, kafka.reply_topic, kafka.dead_letter_topic, *([kafka.shadow_topic] * shadow),
              *model_topics]
    facts = read_broker_facts(_broker_admin(kafka), kafka.kafka_bootstrap_servers, expected_topics=topics)
    check_session_timeout(kafka, facts.session_timeouts)
    check_group_protocol(kafka, facts.group_protocols)
    check_topics_exist(kafka, facts.topics, shadow)
    missing = [topic for topic in model_topics if topic not in facts.topics]
    if missing:
        raise ConfigError(f"topic {missing[0]!r} of a model ([models] topic = ...) does not exist; create it first, "
                          f"e.g. `python -m producer create-topic {missing[0]} --partitions 4`")


def _broker_admin(kafka: KafkaSettings) -> BrokerAdmin:
    return _transport(kafka).admin(kafka)


def build_tracer(settings: Settings, environ: Mapping[str, str],
                 provider: Any = None) -> Tracer | None:
    """OpenTelemetry spans when --otel or the OTEL_* variables ask for them (None: no tracing), over ``provider``
    (an opentelemetry TracerProvider, left running at the end; default: one exporting as the variables say,
    shut down at the end). Raises ConfigError when the
    otel extra is not installed, or for an exporter not supported."""
    if provider is None and not otel_wanted(settings.operations.otel, environ):
        return None
    try:
        from worker.tracing.otel import OtelTracer, provider_from_environment
    except ImportError as exc:
        raise ConfigError(f"tracing (--otel, OTEL_*) needs the otel extra: pip install 'streamscore[otel]' ({exc})") \
            from None
    tracer = OtelTracer(provider or provider_from_environment(environ), settings.kafka.reply_topic,
                        owned=provider is None)
    log.info("tracing", exporter=environ.get("OTEL_TRACES_EXPORTER", "otlp") if provider is None else "given")
    return tracer


def otel_wanted(on: bool, environ: Mapping[str, str]) -> bool:
    """Whether tracing is on: ``--otel``, or an exporter named by the OTEL_* variables (``none`` turns it off)."""
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return on or any(environ.get(name) for name in OTEL_EXPORTER_VARIABLES)


OTEL_EXPORTER_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def build_worker(settings: Settings, stop_requested: StopRequest | None = None,
                 stats: WorkerStats | None = None, tracer_provider: Any = None) -> Worker:
    """Everything the streaming worker needs; it counts in ``stats`` (default: its own), which notes
    the model once it is loaded and warm; ``tracer_provider``: an OpenTelemetry provider to trace with, whatever
    the settings say (tests give one with an in-memory exporter).

    Raises ConfigError, ModelError, or ServiceUnavailable naming the setting
    that points at a service that does not answer.
    """
    require_services(settings)
    kafka = settings.kafka
    pick_device(settings.model.device)  # a GPU this machine lacks: said before any service is contacted
    clock = SystemClock()
    bounds = step_bounds(kafka, settings.operations)
    # The services first: a wrong password should stop the worker in seconds, not after the model's load.
    _transport(kafka).preflight(kafka)
    dedup = build_dedup(settings.dedup, bounds, clock)
    shadowed = [entry for entry in settings.models.entries if entry.shadow]
    # Once both services answer: then whether the settings fit the broker.
    check_broker_fit(kafka, bool(shadowed), tuple(settings.models.topics()))
    models = build_models(settings)
    stats = stats if stats is not None else WorkerStats()
    stats.serve(models.served(), models.routes.reply_names())
    source, sink, transactions = build_kafka(settings, clock)
    log.info("step_bounds", worst_step_s=round(bounds.worst_step_s(settings.delivery.exactly_once), 2),
             settle_s=bounds.settle_s, send_block_s=bounds.send_block_s, metadata_s=bounds.metadata_s,
             store_call_s=round(bounds.store_call_s, 2), transaction_s=bounds.transaction_s,
             transaction_call_s=bounds.transaction_call_s)
    extras = Extras(transactions=transactions, reloads=build_reloads(settings, models, stats),
                    shadow=build_shadow(settings, models, stats, clock),
                    tracer=build_tracer(settings, os.environ, tracer_provider),
                    encode_reply=build_reply_encoder(settings, models))
    worker = _worker(settings, source, sink, dedup, models, clock, stop_requested, stats, extras)
    tune_collector(settings.kafka.max_poll_records)
    return worker


def _worker(settings: Settings, source: Source, sink: Sink[Tag], dedup: DedupStore, models: ServedModels,
            clock: SystemClock, stop_requested: StopRequest | None, stats: WorkerStats | None = None,
            extras: Extras = Extras(), backfill: BackfillJob | None = None) -> Worker:
    """The loop over these parts and ``extras``, given the sections it reads, its models where ``model_thread``
    says (and their loads on first use under a memory budget), and its requests' decoder (a ``backfill``'s: every
    reply to the job's reply topic, deadlines dropped unless it keeps them)."""
    stats = stats if stats is not None else WorkerStats()
    extras = replace(extras, scorer=build_scorer(settings, models.runners, clock), loads=build_loads(settings, models))
    decoder = build_decoder(settings, models.routes)
    if backfill is not None:
        decoder = RepliesToTheJob(decoder, backfill.keep_deadlines)
    parts = assemble(source, sink, dedup, models, decoder, clock,
                     stats, settings.kafka, settings.delivery, settings.operations, extras)
    return Worker(parts, clock, stats, kafka=settings.kafka, batching=settings.batching,
                  operations=settings.operations, stop_requested=stop_requested)


YOUNG_OBJECTS_A_RECORD = 20  # the collector's first generation holds this many new objects a record of a full poll
MAX_YOUNG_OBJECTS = 100_000  # however large the polls: a collection walks at most about this many


def tune_collector(max_poll_records: int) -> None:
    """Set the garbage collector for the loop, once the parts are built and the model warm.

    Every object alive then (torch's modules, the model, the clients) leaves the collector's sight, so that a
    full collection while the loop runs walks only what the loop made since. Measured (bench/tail.py,
    docs/benchmarks.md "Where the tail comes from"): unfrozen, each full collection paused the loop 200-290 ms,
    several times a minute at 6,000 req/s; frozen, at most 1.6 ms. The objects frozen live as long as the
    process anyway.

    And the first generation is collected once YOUNG_OBJECTS_A_RECORD times ``max_poll_records`` more objects
    are alive than at its last collection (MAX_YOUNG_OBJECTS at most), not Python's 700: a full poll's requests,
    replies and their parts held more than that at once, so the collector ran every poll over objects their
    reference counts free at the step's end (0.6 µs a request of churn; docs/benchmarks.md "The collector's
    first generation"). What outlives a step in a reference cycle is still collected, a few polls' worth later.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(min(max(700, YOUNG_OBJECTS_A_RECORD * max_poll_records), MAX_YOUNG_OBJECTS), older, oldest)
    log.info("heap_frozen", objects=gc.get_freeze_count(), young_threshold=gc.get_threshold()[0])
