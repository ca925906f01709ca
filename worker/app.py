"""The composition root: build every part of the worker from Settings."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable

import redis
import structlog
import torch

from worker.core.bounds import step_bounds
from worker.core.broker_fit import check_session_timeout, check_topics_exist
from worker.core.clock import SystemClock
from worker.core.errors import ConfigError, ServiceUnavailable
from worker.core.pacing import LiveFirst, RatePacer
from worker.core.settings import Settings, require_services
from worker.core.shutdown import StopRequest
from worker.core.stats import WorkerStats
from worker.core.timerange import TimeRange
from worker.dedup.memory import InMemoryDedupStore
from worker.dedup.redis_store import RedisDedupStore, start_failure
from worker.formats import codecs
from worker.formats.schemas import RegistrySchemas
from worker.jobs.backfill import BackfillJob, ReplyTopicSink
from worker.jobs.bounded_source import BoundedSource
from worker.jobs.paced_source import PacedSource
from worker.kafka.broker_facts import BrokerAdmin, read_broker_facts
from worker.kafka.exactly_once import ExactlyOnce
from worker.kafka.group_lag import GroupLag
from worker.kafka.preflight import check_kafka
from worker.models import load_model
from worker.models.runner import TorchRunner, pick_device
from worker.ports import DedupStore, PartitionReader, SchemaResolver, Scorer, SendTag, Sink, Source, Transactions
from worker.stream.loop import Worker
from worker.stream.scoring import InlineScorer, ThreadScorer
from worker.surface.http import HttpSurface

log = structlog.get_logger(__name__)


def build_runner(settings: Settings) -> TorchRunner:
    """Load the model, place it on its device and warm it up.

    Raises ConfigError when a poll's worth of batches, at the speed measured in
    warmup, would not fit comfortably in max_poll_interval_ms, or when amp does
    not suit the device.
    """
    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
    log.debug("model_loading", model=settings.model)
    model = load_model(settings.model, settings.model_config, settings.weights, settings.allow_pickle)
    runner = TorchRunner(model, settings.device, settings.max_batch_size, settings.amp)
    warmup = runner.warmup(settings.max_batch_size)
    check_poll_interval(settings, warmup.batch_s, warmup.warmed_size if warmup.estimated else None)
    return runner


def check_poll_interval(settings: Settings, batch_s: float, estimated_from: int | None = None) -> None:
    """The time between two polls is at most one poll's worth of batches plus the wait limit.

    Past max_poll_interval_ms the broker takes the worker's partitions away, so
    insist on a margin of two (batches of real inputs may be slower than warmup's).
    With the HTTP surface on, insist on the same margin below liveness_timeout_s:
    a step that long is not a stuck loop, and must not get the worker restarted.
    ``estimated_from``: the size of the warmup batch a full batch's ``batch_s`` was scaled from, if any.
    """
    batches = math.ceil(settings.max_poll_records / settings.max_batch_size)
    worst_s = max(settings.max_wait_ms, settings.latency_target_ms) / 1000 + batches * batch_s
    timed = "in warmup" if estimated_from is None else f"estimated from warmup batches of {estimated_from}"
    if 2 * worst_s * 1000 > settings.max_poll_interval_ms:
        raise ConfigError(
            f"a poll's worth of records (max_poll_records={settings.max_poll_records}: {batches} batches of "
            f"max_batch_size={settings.max_batch_size} at {batch_s:.2f} s each {timed}) needs about "
            f"{worst_s:.1f} s, more than half of max_poll_interval_ms={settings.max_poll_interval_ms}: lower "
            "max_poll_records or max_batch_size, or raise max_poll_interval_ms")
    if settings.http_port and 2 * worst_s > settings.liveness_timeout_s:
        raise ConfigError(
            f"a poll's worth of records ({batches} batches at {batch_s:.2f} s each {timed}) needs about "
            f"{worst_s:.1f} s, more than half of liveness_timeout_s={settings.liveness_timeout_s:g}: /healthz "
            "would fail while the loop works; raise --liveness-timeout-s, or lower max_poll_records or "
            "max_batch_size")


def build_scorer(settings: Settings, runner: TorchRunner, clock: SystemClock) -> Scorer:
    """The model on its own thread when asked, or by default on a GPU: there its compute leaves the
    CPU to the loop. On shared CPU cores the thread measured slower (bench/profile_worker.py)."""
    on = settings.model_thread == "on" or (settings.model_thread == "auto" and runner.device.type == "cuda")
    return ThreadScorer(runner, clock) if on else InlineScorer(runner, clock)


def build_schemas(settings: Settings) -> SchemaResolver | None:
    """The schema registry's schemas for registry-framed requests; None for JSON requests. Raises ConfigError
    (the codec's library is not installed, the password file cannot be read)."""
    if not settings.formats.framed:
        return None
    codecs.check_installed(settings.formats.request_format)
    return RegistrySchemas.from_formats(settings.formats)


def build_dedup(settings: Settings, clock: SystemClock) -> DedupStore:
    if settings.redis_url.startswith("memory://"):
        return InMemoryDedupStore(clock, settings.dedup_ttl_s, settings.dedup_lease_ms)
    bounds = step_bounds(settings)
    store = RedisDedupStore(settings.redis_url, settings.dedup_namespace, settings.dedup_ttl_s,
                            settings.dedup_lease_ms, password_file=settings.redis_password_file,
                            ca_file=settings.redis_ca_file, connect_s=bounds.store_connect_s,
                            read_s=bounds.store_read_s)
    try:
        store.ping()  # fail at start, naming the setting, rather than at the first batch
    except redis.RedisError as exc:
        raise start_failure(exc, settings.redis_url, settings.redis_ca_file) from None
    return store


def start_surface(settings: Settings, stats: WorkerStats, stopping: Callable[[], bool]) -> HttpSurface | None:
    """The HTTP surface (metrics, probes) on ``http_port``, already serving; None when the port is 0.

    Start it before ``build_worker``: it answers /healthz during a long model load. Raises ConfigError
    when the port cannot be bound.
    """
    if not settings.http_port:
        return None
    surface = HttpSurface(settings.http_port, stats, SystemClock(), settings.liveness_timeout_s, stopping)
    surface.start()
    return surface


# The Kafka adapters: each client's modules are imported only when ``settings.kafka_client`` names it, so that
# neither client loads the other's library (confluent-kafka is an extra; kafka-python stays the default).


def _no_broker(settings: Settings, exc: Exception) -> ServiceUnavailable:
    return ServiceUnavailable(f"no Kafka broker answers at KAFKA_BOOTSTRAP_SERVERS="
                              f"{settings.kafka_bootstrap_servers} ({type(exc).__name__}: {exc})")


def build_kafka(settings: Settings, clock: SystemClock) -> tuple[Source, Sink[SendTag], Transactions | None]:
    """The request source (started: subscribed to the requests topic), the reply sink and, for exactly-once,
    the transactions over both, on the client library that ``settings.kafka_client`` names.

    Raises ServiceUnavailable when no broker answers, LookupError when the requests topic does not exist.
    """
    if settings.kafka_client == "confluent":
        return _confluent_kafka(settings, clock)
    return _kafka_python_kafka(settings, clock)


def _kafka_python_kafka(settings: Settings, clock: SystemClock) -> tuple[Source, Sink[SendTag],
                                                                        Transactions | None]:
    from kafka.errors import KafkaError

    from worker.kafka.kafka_python.sink import KafkaSink
    from worker.kafka.kafka_python.source import KafkaSource
    from worker.kafka.kafka_python.transactions import TransactionalSink

    transactions: ExactlyOnce[SendTag] | None = None
    block_ms = int(step_bounds(settings).send_block_s * 1000)
    try:
        source = KafkaSource(settings, clock)
        sink: KafkaSink[SendTag]
        if settings.delivery == "exactly-once":
            transactional: TransactionalSink[SendTag] = TransactionalSink(
                settings.kafka_bootstrap_servers, settings.client_id, settings.transactional_id,
                security=settings.kafka_security, transaction_s=step_bounds(settings).transaction_s,
                max_block_ms=block_ms)
            sink, transactions = transactional, ExactlyOnce(transactional, source)
            log.info("exactly_once", transactional_id=settings.transactional_id)
        else:
            sink = KafkaSink(settings.kafka_bootstrap_servers, settings.client_id, security=settings.kafka_security,
                             max_block_ms=block_ms)
    except KafkaError as exc:
        raise _no_broker(settings, exc) from exc
    source.start()
    return source, sink, transactions


def _confluent_kafka(settings: Settings, clock: SystemClock) -> tuple[Source, Sink[SendTag], Transactions | None]:
    from confluent_kafka import KafkaException

    from worker.kafka.confluent.sink import ConfluentSink
    from worker.kafka.confluent.source import ConfluentSource
    from worker.kafka.confluent.transactions import TransactionalSink as ConfluentTransactionalSink

    transactions: ExactlyOnce[SendTag] | None = None
    bounds = step_bounds(settings)
    try:
        source = ConfluentSource(settings, clock)
        sink: ConfluentSink[SendTag]
        if settings.delivery == "exactly-once":
            transactional: ConfluentTransactionalSink[SendTag] = ConfluentTransactionalSink(
                settings.kafka_bootstrap_servers, settings.client_id, settings.transactional_id,
                security=settings.kafka_security, max_block_s=bounds.send_block_s,
                transaction_s=bounds.transaction_s)
            sink, transactions = transactional, ExactlyOnce(transactional, source)
            log.info("exactly_once", transactional_id=settings.transactional_id, kafka_client="confluent")
        else:
            sink = ConfluentSink(settings.kafka_bootstrap_servers, settings.client_id,
                                 security=settings.kafka_security, max_block_s=bounds.send_block_s)
        source.start()
    except KafkaException as exc:
        raise _no_broker(settings, exc) from exc
    return source, sink, transactions


def build_bounded_source(settings: Settings, clock: SystemClock, time_range: TimeRange, *,
                         keep_deadlines: bool = False,
                         on_progress: Callable[[int], None] | None = None) -> BoundedSource:
    """A backfill's bounded source over ``time_range`` (not started), on the client library that
    ``settings.kafka_client`` names. Raises ServiceUnavailable when no broker answers."""
    reader: PartitionReader
    if settings.kafka_client == "confluent":
        from worker.kafka.confluent.bounded_source import ConfluentPartitionReader

        reader = ConfluentPartitionReader(settings, clock)
    else:
        from kafka.errors import KafkaError

        from worker.kafka.kafka_python.bounded_source import KafkaPartitionReader

        try:
            reader = KafkaPartitionReader(settings, clock)
        except KafkaError as exc:
            raise _no_broker(settings, exc) from exc
    return BoundedSource(reader, settings.requests_topic, settings.group, time_range, keep_deadlines=keep_deadlines,
                         on_progress=on_progress)


def build_reply_sink(settings: Settings) -> Sink[SendTag]:
    """A plain (not transactional) reply sink on the client library that ``settings.kafka_client`` names."""
    if settings.kafka_client == "confluent":
        from worker.kafka.confluent.sink import ConfluentSink

        return ConfluentSink(settings.kafka_bootstrap_servers, settings.client_id, security=settings.kafka_security)
    from kafka.errors import KafkaError

    from worker.kafka.kafka_python.sink import KafkaSink

    try:
        return KafkaSink(settings.kafka_bootstrap_servers, settings.client_id, security=settings.kafka_security)
    except KafkaError as exc:
        raise _no_broker(settings, exc) from exc


def build_backfill(job: BackfillJob) -> tuple[Worker, BoundedSource]:
    """A backfill's worker over its range and its source, planned (or resumed), the model loaded: the
    BuildBackfill that worker/jobs/backfill.py runs.

    Raises ConfigError (a reply topic missing, a group that is not a
    backfill's), LookupError (no such topic), ServiceUnavailable, ModelError.
    """
    settings = job.settings
    if settings.delivery != "at-least-once":
        raise ConfigError("backfill supports delivery=at-least-once only (its resume plan lives in the "
                          "consumer group's commit metadata); unset STREAMSCORE_DELIVERY / --delivery")
    pick_device(settings.device)  # a GPU this machine lacks: said before the job's plan is made
    clock = SystemClock()
    check_kafka(settings.kafka_bootstrap_servers, settings.kafka_security)
    source = build_bounded_source(settings, clock, job.time_range, keep_deadlines=job.keep_deadlines,
                                  on_progress=job.on_progress)
    sink = build_reply_sink(settings)
    missing = source.missing_topics([settings.reply_topic, settings.dead_letter_topic])
    if missing:
        raise ConfigError(f"topic(s) {', '.join(missing)} do not exist; create them first, e.g. "
                          f"`python -m producer create-topic {missing[0]} --partitions 4`")
    source.start()
    runner = build_runner(settings)
    dedup = build_dedup(settings, clock)
    worker = Worker(settings, _paced(job, source, clock), ReplyTopicSink(sink, settings.reply_topic),
                    dedup, runner, runner.prepare,
                    clock, stop_requested=job.stop_requested, scorer=build_scorer(settings, runner, clock),
                    schemas=build_schemas(settings))
    freeze_start_up_heap()
    return worker, source


def _paced(job: BackfillJob, source: BoundedSource, clock: SystemClock) -> PacedSource:
    """The job's source at its --max-rate, holding while the live group lags (read on the job's client)."""
    pacing, settings = job.pacing, job.settings
    live = live_lag = None
    if pacing.live_max_lag:
        live = LiveFirst(pacing.live_max_lag, pacing.live_check_s, clock)
        live_lag = _group_lag(settings, clock, pacing.live_group)
    return PacedSource(source, RatePacer(pacing.max_rate, clock), live, live_lag)


def _group_lag(settings: Settings, clock: SystemClock, group: str) -> GroupLag:
    """Another group's lag on the requests topic, read by a partition reader in that group."""
    if settings.kafka_client == "confluent":
        from confluent_kafka import KafkaException

        from worker.kafka.confluent.bounded_source import ConfluentPartitionReader

        return GroupLag(ConfluentPartitionReader(settings, clock, group=group), settings.requests_topic, group,
                        (KafkaException,))
    from kafka.errors import KafkaError

    from worker.kafka.kafka_python.bounded_source import KafkaPartitionReader

    return GroupLag(KafkaPartitionReader(settings, clock, group=group), settings.requests_topic, group, (KafkaError,))


def check_broker_fit(settings: Settings) -> None:
    """Refuse, naming the setting, a session timeout the broker would refuse at the group join, and a
    requests, reply or dead-letter topic it does not have (nothing creates them: see worker/core/broker_fit.py).
    Blocks for a few seconds at most; raises ConfigError, or ServiceUnavailable when the broker does not answer."""
    topics = [settings.requests_topic, settings.reply_topic, settings.dead_letter_topic]
    facts = read_broker_facts(_broker_admin(settings), settings.kafka_bootstrap_servers, expected_topics=topics)
    check_session_timeout(settings, facts.session_timeouts)
    check_topics_exist(settings, facts.topics)


def _broker_admin(settings: Settings) -> BrokerAdmin:
    if settings.kafka_client == "confluent":
        from worker.kafka.confluent.broker_facts import ConfluentAdmin

        return ConfluentAdmin(settings.kafka_bootstrap_servers, settings.kafka_security)
    from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin

    return KafkaPythonAdmin(settings.kafka_bootstrap_servers, settings.kafka_security)


def build_worker(settings: Settings, stop_requested: StopRequest | None = None,
                 stats: WorkerStats | None = None) -> Worker:
    """Everything the streaming worker needs; it counts in ``stats`` (default: its own), which notes
    the model once it is loaded and warm.

    Raises ConfigError, ModelError, or ServiceUnavailable naming the setting
    that points at a service that does not answer.
    """
    require_services(settings)
    pick_device(settings.device)  # a GPU this machine lacks: said before any service is contacted
    clock = SystemClock()
    # The services first: a wrong password should stop the worker in seconds, not after the model's load.
    check_kafka(settings.kafka_bootstrap_servers, settings.kafka_security)
    dedup = build_dedup(settings, clock)
    check_broker_fit(settings)  # once both services answer: then whether the settings fit the broker
    runner = build_runner(settings)
    stats = stats if stats is not None else WorkerStats()
    stats.model = (runner.name, runner.version, str(runner.device))
    source, sink, transactions = build_kafka(settings, clock)
    bounds = step_bounds(settings)
    log.info("step_bounds", worst_step_s=round(bounds.worst_step_s(settings.delivery == "exactly-once"), 2),
             settle_s=bounds.settle_s, send_block_s=bounds.send_block_s, metadata_s=bounds.metadata_s,
             store_call_s=round(bounds.store_call_s, 2), transaction_s=bounds.transaction_s)
    worker = Worker(settings, source, sink, dedup, runner, runner.prepare, clock, stop_requested=stop_requested,
                    transactions=transactions, scorer=build_scorer(settings, runner, clock), stats=stats,
                    schemas=build_schemas(settings))
    freeze_start_up_heap()
    return worker


def freeze_start_up_heap() -> None:
    """Move every object alive once the parts are built and the model warm (torch's modules, the model,
    the clients) out of the garbage collector's sight, so that a full collection while the loop runs walks
    only what the loop made since.

    Measured (bench/tail.py, docs/benchmarks.md "Where the tail comes from"): unfrozen, each full collection
    paused the loop 200-290 ms, several times a minute at 6,000 req/s; frozen, at most 1.6 ms. The objects
    frozen live as long as the process anyway.
    """
    gc.collect()
    gc.freeze()
    log.info("heap_frozen", objects=gc.get_freeze_count())
