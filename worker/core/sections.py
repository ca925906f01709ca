"""The sections of Settings (worker/core/settings.py): one small frozen dataclass per concern.

Each section checks its own values when it is built, and raises ConfigError naming the setting; what
spans sections is checked by Settings. A setting's field name is its name everywhere (flag
``--max-batch-size``, variable ``STREAMSCORE_MAX_BATCH_SIZE``, messages), so names are unique across
sections. A setting with a fixed set of values is typed with a Literal, whose values are the only
ones accepted (``amp must be off, bf16 or fp16, got 'fp8'``).
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field, fields
from typing import Literal, get_args, get_origin, get_type_hints
from urllib.parse import SplitResult, urlsplit, urlunsplit

from worker.core.clients import CLIENTS, check_kafka_client
from worker.core.errors import ConfigError
from worker.core.formats import FORMATS
from worker.core.kafka_properties import DEFAULT_ISOLATION, KafkaProperties
from worker.core.registry import Group, Setting, declared, setting, unusable_file
from worker.core.security import SECURITY, KafkaSecurity, read_secret_file
from worker.core.tls import ClientPair, unusable_pair

GroupProtocol = Literal["classic", "consumer"]
OffsetReset = Literal["earliest", "latest"]
Assignor = Literal["range", "roundrobin", "cooperative-sticky"]
Amp = Literal["off", "bf16", "fp16"]
ModelThread = Literal["auto", "on", "off"]
Delivery = Literal["at-least-once", "exactly-once"]
LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]
Codec = Literal["none", "gzip", "snappy", "lz4", "zstd"]

AMP_MODES: tuple[Amp, ...] = get_args(Amp)
GROUP_PROTOCOLS: tuple[GroupProtocol, ...] = get_args(GroupProtocol)
# The largest max_batch_size. Everything about a batch happens at once: its requests are held in memory (each up to
# max_record_bytes), their ids claimed in one Redis pipeline, their replies produced together, and no reply leaves
# before the whole batch is scored. Throughput stops growing long before this: the GPU bench goes up to 8,192 for
# churn. 65,536 leaves eight times that of headroom; a typo (100,000,000) is refused instead of allocated.
MAX_BATCH_SIZE = 65_536
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")  # REDIS_URL through Sentinels, and the same over TLS
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")  # a Redis Cluster, and the same over TLS
TLS_SCHEMES = ("rediss", "rediss+sentinel", "rediss+cluster")
MAX_TRANSACTION_INTERVAL_MS = 10_000  # exactly-once: longest commit interval (a transaction stays open that long)


@dataclass(frozen=True)
class KafkaSettings:
    """The brokers, the client library, the topics and the consumer group."""

    kafka_bootstrap_servers: str = setting(
        "", "Kafka brokers, host:port[,host:port]; `make up` prints the local one", env="KAFKA_BOOTSTRAP_SERVERS",
        flag="--bootstrap-servers")
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity, metadata={"nested": True})
    kafka_client: str = setting(
        "kafka-python", "the Kafka client library: kafka-python, or confluent (confluent-kafka over librdkafka: "
        "far less CPU per record; install the `confluent` extra)")
    kafka_group_protocol: GroupProtocol = setting(
        "classic", "consumer group protocol: classic, or consumer (KIP-848: the broker assigns the partitions "
        "and sets the session timeout; --kafka-client confluent only)")
    requests_topic: str = setting("", "topic to consume scoring requests from (required)")
    reply_topic: str = setting("", "default reply topic (default: <requests-topic>.replies)")
    dead_letter_topic: str = setting("", "where unreadable records go (default: <requests-topic>.dlq)")
    shadow_topic: str = setting("", "with --config and a model's shadow: where each sampled request's live and "
                                 "candidate answers go (default: <requests-topic>.shadow)")
    group: str = setting("", "consumer group id (default: streamscore-<model>); workers of one model on two "
                         "requests topics should each name their own, or each topic's rebalances stop the other's")
    group_instance_id: str = setting(
        "", "a static member's id in the group (KIP-345, the client property group.instance.id): a worker started "
        "again with the same id within session_timeout_ms gets its partitions back at once, without a rebalance, "
        "where a dynamic member waits for the killed one to time out; a static member's clean stop does not leave "
        "the group either, so its partitions wait the session timeout before another worker takes them. Every "
        "running worker of the group needs its own; with --processes N, child i takes <id>-<i>. '' (the "
        "default): a dynamic member. Classic group protocol only")
    max_poll_records: int = setting(500, "records fetched per poll")
    max_poll_interval_ms: int = setting(300_000, "Kafka max.poll.interval.ms: longest allowed gap between polls")
    session_timeout_ms: int = setting(45_000, "Kafka session.timeout.ms")
    auto_offset_reset: OffsetReset = setting(
        "earliest", "where a new group starts: earliest or latest; also where a consumer goes on when its offset is "
        "no longer in the log (retention deleted it)")
    assignor: Assignor = setting("range", "partition assignment: range, roundrobin, or cooperative-sticky "
                                  "(incremental rebalances; every worker of a group must use the same kind)")
    client_id: str = setting("streamscore-worker", "Kafka client.id")
    reply_compression: Codec = setting(
        "none", "codec of the reply and dead-letter batches: none, gzip, snappy, lz4 or zstd. none by default, as "
        "every Kafka client's: any consumer reads it, while a reader without a codec's library cannot read that "
        "codec's batches (the producer property compression.type sets the same)")
    # --consumer-property / --producer-property, [kafka.consumer] / [kafka.producer], STREAMSCORE_KAFKA_CONSUMER_*:
    # client properties by their Java names (worker/core/kafka_properties.py).
    kafka_properties: KafkaProperties = field(default_factory=KafkaProperties, metadata={"nested": True})

    def __post_init__(self) -> None:
        _at_least(self, 1, "max_poll_records", "max_poll_interval_ms", "session_timeout_ms")
        _check_choices(self)
        _check_bootstrap_servers(self)
        _validate_kafka_client(self)
        _validate_topics(self)
        self.kafka_properties.check(self.kafka_client)
        codec = self.kafka_properties.value("producer", "compression.type")
        if codec is not None and self.reply_compression != "none" and codec != self.reply_compression:
            raise ConfigError(f"reply_compression ({setting_names('reply_compression')}) is {self.reply_compression} "
                              f"and the producer property compression.type is {codec}: set one of them")

    @property
    def read_committed(self) -> bool:
        """Whether requests are read read_committed (the consumer property isolation.level, by default yes)."""
        return (self.kafka_properties.value("consumer", "isolation.level") or DEFAULT_ISOLATION) == "read_committed"

    @property
    def reply_codec(self) -> str:
        """The codec of reply batches: the producer property compression.type, else reply_compression."""
        return str(self.kafka_properties.value("producer", "compression.type") or self.reply_compression)


@dataclass(frozen=True)
class DedupSettings:
    """Where answered request ids are remembered (Redis, or memory://), and for how long."""

    redis_url: str = setting(
        "", "Redis for dedup, redis://[user[:password]@]host:port/db, rediss:// for TLS, "
        "redis+sentinel://host:port[,host:port...]/service[/db] through Sentinels (follows a failover; "
        "docs/scaling.md), redis+cluster://host:port[,host:port...] a Redis Cluster, rediss+sentinel:// and "
        "rediss+cluster:// the same over TLS; memory:// keeps it in this process (one worker only)", env="REDIS_URL")
    redis_password_file: str = setting(
        "", "file holding the Redis password (of the URL's ACL user, or the default user): a mounted secret, "
        "instead of a password in REDIS_URL", env="REDIS_PASSWORD_FILE", path=True)
    redis_sentinel_user: str = setting(
        "", "redis+sentinel://: the ACL user the Sentinels are asked as, when they have ACL users (the URL's user "
        "is the primary's)", env="REDIS_SENTINEL_USER")
    redis_sentinel_password_file: str = setting(
        "", "redis+sentinel://: file holding the Sentinels' password (their requirepass, or REDIS_SENTINEL_USER's), "
        "when they want one (the URL's password is the primary's)", env="REDIS_SENTINEL_PASSWORD_FILE", path=True)
    redis_ca_file: str = setting(
        "", "rediss://: PEM file of the CA that signed the Redis server's certificate (default: the system's)",
        env="REDIS_CA_FILE", path=True)
    redis_cert_file: str = setting(
        "", "rediss:// with mutual TLS (tls-auth-clients): this client's certificate, PEM", env="REDIS_CERT_FILE",
        path=True)
    redis_key_file: str = setting(
        "", "rediss:// with mutual TLS: the certificate's private key, PEM (default: in REDIS_CERT_FILE)",
        env="REDIS_KEY_FILE", path=True)
    redis_key_password_file: str = setting(
        "", "rediss:// with mutual TLS and an encrypted key: file holding its passphrase (a mounted secret)",
        env="REDIS_KEY_PASSWORD_FILE", path=True)
    dedup_namespace: str = setting("streamscore", "prefix of Redis keys: IDs are remembered per namespace, not per "
                                   "topic, so give each deployment sharing a Redis its own; another one re-scores on "
                                   "purpose")
    dedup_ttl_s: int = setting(86_400, "how long an answered request id is remembered")
    dedup_lease_ms: int = setting(300_000, "how long a claim on a request id holds while it is scored")
    dedup_min_replicas: int = setting(0, "wait until this many Redis replicas have a batch's done marks (WAIT) "
                                       "before its offsets may be committed, so that a failover loses none; "
                                       "fewer pauses consumption as a Redis outage does. 0: do not wait "
                                       "(docs/scaling.md)")

    def __post_init__(self) -> None:
        _at_least(self, 1, "dedup_ttl_s", "dedup_lease_ms")
        _at_least(self, 0, "dedup_min_replicas")
        if self.dedup_min_replicas and self.redis_url.startswith("memory://"):
            raise ConfigError("dedup_min_replicas needs Redis (REDIS_URL redis://, rediss://, redis+sentinel:// or "
                              "rediss+sentinel://): memory:// has no replicas")
        if self.redis_url and urlsplit(self.redis_url).scheme not in ("redis", "rediss", "unix", "memory",
                                                                      *SENTINEL_SCHEMES, *CLUSTER_SCHEMES):
            raise ConfigError("REDIS_URL must start with redis://, rediss://, unix://, redis+sentinel://, "
                              "rediss+sentinel://, redis+cluster://, rediss+cluster:// or memory://, got "
                              f"{redact_url(self.redis_url)!r}")
        _check_url_parses(self.redis_url)
        if self.dedup_min_replicas and urlsplit(self.redis_url).scheme in CLUSTER_SCHEMES:
            raise ConfigError("dedup_min_replicas is not supported on a Redis Cluster (redis[s]+cluster://) yet: "
                              "unset it, or use a primary and replicas behind Sentinel (redis[s]+sentinel://)")
        _validate_redis_secrets(self)

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["redis_url"] = redact_url(self.redis_url)
        return "DedupSettings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


@dataclass(frozen=True)
class ModelSettings:
    """The model, where and how it runs."""

    model: str = setting("churn", "the model: a built-in name (churn, minilm), a torch.export .pt2 file, a "
                          "TorchScript .pt/.ts file, or package.module:factory; with --config, score-file and "
                          "inspect-model take the name of one of its [models.NAME] (default: its default_model)",
                          per_model=True)
    model_config: str = setting("", "JSON or TOML file: the model's inputs and outputs spec, and the keyword "
                                 "arguments of a factory (every key but inputs and outputs)", per_model=True, path=True)
    weights: str = setting("", "weights for a factory's module: .safetensors, or a state_dict saved with "
                            "torch.save (.pt/.pth), loaded with strict key matching", per_model=True, path=True)
    allow_pickle: bool = setting(False, "allow loading pickled Python objects (a whole module saved with "
                                  "torch.save): unpickling runs the file's code, so only for files you trust",
                                  per_model=True)
    device: str = setting("auto", "torch device: auto, cpu, cuda, cuda:N", per_model=True)
    amp: Amp = setting("off", "mixed precision of the forward pass: off, bf16 or fp16 (fp16 needs a CUDA device); "
                        "replies stay float32", per_model=True)
    model_thread: ModelThread = setting("auto", "on: the model runs on a thread of its own, so polling, sending, "
                                         "Redis and commits overlap its compute; off: one thread does everything; "
                                         "auto: on for CUDA devices; on CPU (where it measured slower) off "
                                         "until a batch outlives max_poll_interval_ms, then on")
    torch_threads: int = setting(0, "torch intra-op threads; 0 leaves torch's default")
    shadow_queue: int = setting(1000, "with a model's shadow: how many sampled requests may wait for the "
                                 "candidate; more are dropped and counted, never delaying a live reply")
    model_watch_s: float = setting(5.0, "with --config: how often the files each model is made of are looked at; "
                                    "one that changed is loaded, checked and switched in without a restart "
                                    "(docs/fleet.md); 0: only on SIGHUP")
    max_loaded_models: int = setting(0, "with --config: how many of its models may be in memory at once; the "
                                      "others are loaded on first use, letting go of the least recently used idle "
                                      "one (docs/fleet.md); 0: no limit, every model loaded at start")
    model_memory_mb: float = setting(0.0, "with --config: how many MiB the loaded models' parameters and buffers "
                                      "may take on their devices; past it the least recently used idle model is let "
                                      "go, as with max_loaded_models; 0: no limit")

    def __post_init__(self) -> None:
        _at_least(self, 0, "torch_threads", "model_watch_s", "max_loaded_models", "model_memory_mb")
        _at_least(self, 1, "shadow_queue")
        _check_choices(self)
        if re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device) is None:
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N ({setting_names('device')}), "
                              f"got {self.device!r}")
        if self.device == "cpu":  # "auto" is resolved, and checked again, when the runner picks its device
            check_amp(self.amp, "cpu")


@dataclass(frozen=True)
class BatchingSettings:
    """How requests are batched: size, wait (or latency target), waiting to fill, tokens; the largest request taken."""

    max_batch_size: int = setting(64, "score a batch once it has this many requests (at most 65536)", per_model=True)
    max_wait_ms: int = setting(0, "... or once its oldest request has waited this long for more to join it. "
                                "0: none waits; a batch is what arrived while the model was busy (or in one "
                                "poll), so batches grow with the load by themselves. Above 0, a batch still goes "
                                "at once when the model is idle and a short poll finds nothing more "
                                "(unless --wait-to-fill)", per_model=True)
    wait_to_fill: bool = setting(False, "let a batch wait its whole max_wait_ms (or latency target) for more "
                                  "requests even when the model is idle and nothing more is arriving: fewer, "
                                  "larger batches, for models whose batch cost hardly grows with its size")
    latency_target_ms: int = setting(
        0, "instead of max_wait_ms: a target for queue wait + batch wait + compute, from each record's Kafka "
        "timestamp. A batch waits for more only while that pays (the wait it adds to the requests in hand, at "
        "the arrival rate seen, is less than what a batch costs whatever its size: both learned online) and "
        "never once its oldest request would miss the target after the batch's compute; 0: off",
        per_model=True)
    max_batch_tokens: int = setting(0, "text models: cap a batch's summed token count too; 0 means no cap",
                                    per_model=True)
    max_record_bytes: int = setting(1_048_576, "larger request values are refused (record_too_large)")

    def __post_init__(self) -> None:
        _at_least(self, 1, "max_batch_size", "max_record_bytes")
        _at_least(self, 0, "max_wait_ms", "latency_target_ms", "max_batch_tokens")
        if self.max_batch_size > MAX_BATCH_SIZE:
            raise ConfigError(
                f"max_batch_size ({setting_names('max_batch_size')}) must be at most {MAX_BATCH_SIZE}, got "
                f"{self.max_batch_size}: a batch is claimed in Redis, scored and answered as one, and held in memory "
                "until then; past a few thousand requests it only adds latency")


@dataclass(frozen=True)
class DeliverySettings:
    """How replies and offsets are committed: at-least-once or exactly-once, and how often."""

    commit_interval_ms: int = setting(0, "least time between offset commits (at-least-once: asynchronous, 0 "
                                        "commits whenever the last commit was answered) or transaction commits "
                                        "(exactly-once: 0 commits every loop step; at most 10000)")
    delivery: Delivery = setting("at-least-once", "at-least-once (replies acknowledged, then offsets committed; "
                                  "dedup suppresses redeliveries) or exactly-once (replies and offsets in one Kafka "
                                  "transaction: read replies with isolation.level=read_committed)")
    transactional_id: str = setting("", "exactly-once: this worker's transactional id, unique among running "
                                     "workers and the same across its restarts (default: "
                                     "<group>.<client-id>.<host>, with .1, .2, ... for the next workers on one host)")

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly-once"

    def __post_init__(self) -> None:
        _at_least(self, 0, "commit_interval_ms")
        _check_choices(self)
        if not self.exactly_once and self.transactional_id:
            raise ConfigError("transactional_id is only used with delivery=exactly-once; unset it or set "
                              "--delivery exactly-once")
        if self.exactly_once and self.commit_interval_ms > MAX_TRANSACTION_INTERVAL_MS:
            raise ConfigError(f"commit_interval_ms ({self.commit_interval_ms}) must be at most "
                              f"{MAX_TRANSACTION_INTERVAL_MS} with delivery=exactly-once: an open transaction holds "
                              "back every read_committed reader of the reply topic")


@dataclass(frozen=True)
class OperationsSettings:
    """Running the worker: processes, shutdown, logs, stats, the HTTP surface."""

    processes: int = setting(1, "worker processes in this group on this host (one per GPU or core)")
    shutdown_timeout_s: float = setting(
        30.0, "after SIGTERM, the whole drain (the batch in hand, the replies' acknowledgements, the commit, the "
        "close) ends within this many seconds; what is unfinished then is left uncommitted and consumed again "
        "(a batch the model runs in the loop's thread, the CPU default, ends first: --model-thread on). It must "
        "fit below Kubernetes' terminationGracePeriodSeconds, with a few seconds to spare for process teardown")
    log_format: LogFormat = setting("auto", "auto (console on a terminal, else json), json or console")
    log_level: LogLevel = setting("info", "debug, info, warning or error")
    stats_interval_s: float = setting(10.0, "seconds between worker_stats log lines; 0 turns them off")
    otel: bool = setting(False, "OpenTelemetry spans of each batch and reply (the otel extra; docs/tracing.md), "
                          "exported as the standard OTEL_* variables say (OTLP/HTTP by default); also on when "
                          "OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, off with "
                          "OTEL_TRACES_EXPORTER=none")
    http_port: int = setting(0, "serve /metrics (Prometheus), /healthz and /readyz over HTTP at this port on every "
                              "address, IPv6 and IPv4; 0 serves nothing. With --processes N, child i serves on this "
                              "port + i (0 .. N-1), the supervisor on none")
    liveness_timeout_s: float = setting(
        60.0, "/healthz answers 503 once the loop has not polled for this long, or has held records without "
        "finishing any for this long. Each blocking call of a step gets at most a quarter of it (worker/core/"
        "bounds.py: with the defaults a broker outage holds a step's settle 15 s), and a poll's worth of batches "
        "at the speed measured in warmup is checked against it at start")

    def __post_init__(self) -> None:
        _at_least(self, 1, "processes")
        _at_least(self, 0, "stats_interval_s")
        if self.shutdown_timeout_s <= 0:
            raise ConfigError(f"{_named(self, 'shutdown_timeout_s')} must be above 0, got {self.shutdown_timeout_s}")
        if not 0 <= self.http_port <= 65535:
            raise ConfigError(f"{_named(self, 'http_port')} must be 0 (off) or a TCP port up to 65535, "
                              f"got {self.http_port}")
        if self.http_port and self.http_port + self.processes - 1 > 65535:
            raise ConfigError(f"http_port {self.http_port} with processes={self.processes} needs ports up to "
                              f"{self.http_port + self.processes - 1}: choose http_port <= {65536 - self.processes}")
        if self.liveness_timeout_s <= 0:
            raise ConfigError(f"liveness_timeout_s ({setting_names('liveness_timeout_s')}) must be above 0, "
                              f"got {self.liveness_timeout_s}")
        _check_choices(self)


SECTIONS: tuple[type, ...] = (KafkaSettings, DedupSettings, ModelSettings, BatchingSettings, DeliverySettings,
                              OperationsSettings)


# Each section as a group of settings (worker/core/registry.py), titled as its flags are in --help; the Kafka
# security settings are a group of their own, in the configuration file's [kafka_security] table, and so are the
# request formats (worker/core/formats.py).
GROUPS: tuple[Group, ...] = (
    Group("kafka", KafkaSettings, "Kafka settings", owns=("STREAMSCORE_",)),
    SECURITY,
    Group("dedup", DedupSettings, "dedup store settings", shares=("REDIS_",)),
    Group("model", ModelSettings, "model settings"),
    Group("batching", BatchingSettings, "batching settings"),
    Group("delivery", DeliverySettings, "delivery settings"),
    Group("operations", OperationsSettings, "operations settings"),
    FORMATS,
)
SETTINGS: tuple[Setting, ...] = declared(*GROUPS)  # every setting, in the order of --help and of the docs


def setting_names(name: str) -> str:
    """How a user sets the setting ``name``: its flag and its variable, e.g. ``--device, STREAMSCORE_DEVICE``."""
    (s,) = [s for s in SETTINGS if s.key == name]
    return f"{s.flag}, {s.env}"


def per_model(section: type) -> tuple[str, ...]:
    """The settings of ``section`` that a [models.NAME] table may set for its model."""
    return tuple(s.name for s in SETTINGS if s.group.kind is section and s.declared.per_model)


def _check_url_parses(url: str) -> None:
    """Refuse a REDIS_URL that reads as something else than meant: a password holding ``/``, ``#`` or ``?``
    unencoded ends the URL's server part there (its port is then part of the password, or what follows is read as
    a path or fragment). The message does not show the URL: the part of the password it would show is not
    redacted."""
    parts = urlsplit(url)
    if parts.scheme == "unix" or not parts.netloc:
        return  # a socket's path, not servers
    if parts.scheme in ("redis", "rediss"):  # one server: a password cut at '/', '#' or '?' leaves no port
        cut = not _port_reads(parts) or "@" in parts.path
    else:  # servers listed (Sentinels, cluster nodes): the list after the cut is in the path or the query
        cut = "@" in parts.path or "@" in parts.query and "@" not in parts.netloc
    if parts.fragment or cut:
        raise ConfigError("REDIS_URL cannot be read as a URL of servers (not shown: it may hold a password): its "
                          "port is not a number, or a password holds '/', '#', '?' or '@', which must be "
                          "percent-encoded in a URL (%2F, %23, %3F, %40); or give the password in "
                          "REDIS_PASSWORD_FILE")


def _port_reads(parts: SplitResult) -> bool:
    try:
        _ = parts.port
    except ValueError:  # what follows the server part's last ':' is no number
        return False
    return True


def redact_url(url: str) -> str:
    """The URL without its password, for logs."""
    parts = urlsplit(url)
    credentials, at, hosts = parts.netloc.rpartition("@")  # hosts: host:port, or several (Sentinels)
    if not at or ":" not in credentials:
        return url
    return urlunsplit(parts._replace(netloc=f"{credentials.partition(':')[0]}:***@{hosts}"))


def check_amp(amp: str, device_type: str) -> None:
    """Refuse fp16 autocast off CUDA: most CPUs have no fast float16 arithmetic; bf16 is what CPU autocast is for.

    Raises ConfigError naming the setting and what to use instead.
    """
    if amp == "fp16" and device_type != "cuda":
        raise ConfigError(f"amp=fp16 needs a CUDA device, and the device is {device_type}: "
                          "use --amp bf16 (STREAMSCORE_AMP=bf16) on CPU, or --amp off")


def _literal_choices(section: type) -> dict[str, tuple[str, ...]]:
    """The settings of ``section`` typed with a Literal, and their values."""
    hints = get_type_hints(section)
    return {name: get_args(hint) for name, hint in hints.items() if get_origin(hint) is Literal}


def _check_choices(section: object) -> None:
    for name, choices in _CHOICES[type(section)].items():
        _check_choice(_named(section, name), getattr(section, name), choices)


def _check_bootstrap_servers(kafka: KafkaSettings) -> None:
    """Each broker of a set list is what both clients take: [SCHEME://]HOST[:PORT], HOST an IPv6 address in
    brackets or a name without spaces, PORT 1-65535 (9092 when left out)."""
    for address in kafka.kafka_bootstrap_servers.split(",") if kafka.kafka_bootstrap_servers else ():
        found = broker_address(address)
        if found is None or not 1 <= found[1] <= 65535:
            raise ConfigError(f"{_named(kafka, 'kafka_bootstrap_servers')}: {address.strip()!r} is not HOST:PORT "
                              "(a port from 1 to 65535; brokers separated by commas, e.g. "
                              "broker-1:9092,broker-2:9092)")


_BROKER = re.compile(r"(?:[A-Za-z][A-Za-z0-9_+.-]*://)?(\[[0-9A-Fa-f:.]+\]|[^\s:/,\[\]]+)(?::(\d{1,5}))?")
DEFAULT_KAFKA_PORT = 9092


def broker_address(address: str) -> tuple[str, int] | None:
    """The host (an IPv6 address without its brackets) and port of one entry of a bootstrap list, as the Kafka
    clients read it (a listener's ``SCHEME://`` dropped, port 9092 when left out); None when it is not one."""
    found = _BROKER.fullmatch(address.strip())
    if found is None:
        return None
    return found.group(1).removeprefix("[").removesuffix("]"), int(found.group(2) or DEFAULT_KAFKA_PORT)


def _named(section: object, name: str) -> str:
    """The setting ``name`` of ``section`` as an error names it: with its flag and variable where it has them."""
    found = [s for s in SETTINGS if s.name == name and s.group.kind is type(section)]
    return f"{name} ({found[0].flag}, {found[0].env})" if len(found) == 1 and found[0].flag else name


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raises ConfigError, e.g. ``delivery (--delivery, STREAMSCORE_DELIVERY) must be at-least-once or
    exactly-once, got 'at-most-once'``."""
    if value not in choices:
        listed = choices[0] if len(choices) == 1 else ", ".join(choices[:-1]) + " or " + choices[-1]
        raise ConfigError(f"{name} must be {listed}, got {value!r}")


def _at_least(section: object, least: int, *names: str) -> None:
    """Raises ConfigError naming the setting, its flag and its variable, e.g. ``max_batch_size (--max-batch-size,
    STREAMSCORE_MAX_BATCH_SIZE) must be at least 1, got -5``."""
    for name in names:
        if getattr(section, name) < least:
            raise ConfigError(f"{name} ({setting_names(name)}) must be at least {least}, got {getattr(section, name)}")


def _validate_kafka_client(s: KafkaSettings) -> None:
    """What the chosen client's library refuses of the group settings, as its row of worker/core/clients.py says."""
    client = check_kafka_client(s.kafka_client, _named(s, "kafka_client"))
    if s.session_timeout_ms <= client.heartbeat_ms:
        raise ConfigError(f"session_timeout_ms ({setting_names('session_timeout_ms')}) must be above "
                          f"{client.heartbeat_ms} with kafka_client={s.kafka_client}, got {s.session_timeout_ms}: "
                          f"{s.kafka_client} heartbeats every {client.heartbeat_ms} ms and refuses a session "
                          "timeout that is not longer")
    if (client.poll_interval_covers_session and s.kafka_group_protocol == "classic"
            and s.max_poll_interval_ms < s.session_timeout_ms):
        raise ConfigError(f"max_poll_interval_ms ({s.max_poll_interval_ms}) must be at least session_timeout_ms "
                          f"({s.session_timeout_ms}) with kafka_client={s.kafka_client} (its library refuses less)")
    if s.kafka_group_protocol not in client.group_protocols:
        speakers = [name for name, row in CLIENTS.items() if s.kafka_group_protocol in row.group_protocols]
        raise ConfigError(f"kafka_group_protocol={s.kafka_group_protocol} (--kafka-group-protocol, KIP-848) needs "
                          f"--kafka-client {' or '.join(speakers)}: {s.kafka_client} speaks the "
                          f"{' and '.join(client.group_protocols)} protocol only")
    if s.kafka_group_protocol == "classic":
        return
    defaults = {f.name: f.default for f in fields(KafkaSettings)}
    if s.group_instance_id:
        raise ConfigError(f"group_instance_id={s.group_instance_id} (--group-instance-id) needs "
                          "kafka_group_protocol=classic: the worker makes static members of the classic protocol "
                          "only; unset --group-instance-id, or use --kafka-group-protocol classic")
    for name, flag in (("assignor", "--assignor"), ("session_timeout_ms", "--session-timeout-ms")):
        if getattr(s, name) != defaults[name]:
            raise ConfigError(f"{name}={getattr(s, name)} ({flag}) does not apply with kafka_group_protocol=consumer: "
                              f"the broker assigns the partitions and sets the session timeout; unset {flag}")


def _validate_topics(s: KafkaSettings) -> None:
    """Nothing the worker writes may go to the topic it reads: it would consume it again, without end."""
    consequence = {"reply_topic": "the worker would consume its own replies as requests, and answer each again",
                   "dead_letter_topic": "every dead letter would be consumed again as a request, and dead-lettered "
                                        "again"}
    for name, why in consequence.items():
        if s.requests_topic and getattr(s, name) == s.requests_topic:
            raise ConfigError(f"{name} ({setting_names(name)}) must differ from requests_topic "
                              f"({setting_names('requests_topic')}): both are {s.requests_topic!r}, and {why}")


def _validate_redis_secrets(s: DedupSettings) -> None:
    for env, path in (("REDIS_PASSWORD_FILE", s.redis_password_file), ("REDIS_CA_FILE", s.redis_ca_file),
                      ("REDIS_CERT_FILE", s.redis_cert_file), ("REDIS_KEY_FILE", s.redis_key_file),
                      ("REDIS_KEY_PASSWORD_FILE", s.redis_key_password_file),
                      ("REDIS_SENTINEL_PASSWORD_FILE", s.redis_sentinel_password_file)):
        if (problem := unusable_file(env, path)) is not None:
            raise ConfigError(problem)
    for env, path in (("REDIS_KEY_FILE", s.redis_key_file), ("REDIS_KEY_PASSWORD_FILE", s.redis_key_password_file)):
        if path and not s.redis_cert_file:
            raise ConfigError(f"{env} is set without REDIS_CERT_FILE: mutual TLS needs the certificate too")
    url = urlsplit(s.redis_url)
    if s.redis_password_file and url.password is not None:
        raise ConfigError("REDIS_URL carries a password and REDIS_PASSWORD_FILE is set: keep one (the file, "
                          "preferably: a password in the URL shows wherever the URL does)")
    for env, path in (("REDIS_CA_FILE", s.redis_ca_file), ("REDIS_CERT_FILE", s.redis_cert_file)):
        if path and url.scheme not in TLS_SCHEMES:
            raise ConfigError(f"{env} is set, but REDIS_URL={redact_url(s.redis_url)!r} does not use TLS: "
                              f"write rediss:// (rediss+sentinel://, rediss+cluster://), or unset {env}")
    for name, value in ((f"redis_sentinel_user ({setting_names('redis_sentinel_user')})", s.redis_sentinel_user),
                        ("REDIS_SENTINEL_PASSWORD_FILE", s.redis_sentinel_password_file)):
        if value and url.scheme not in SENTINEL_SCHEMES:
            raise ConfigError(f"{name} is set, but REDIS_URL={redact_url(s.redis_url)!r} names no Sentinels: "
                              "write redis+sentinel:// (rediss+sentinel:// over TLS), or unset it")
    if s.redis_sentinel_user and not s.redis_sentinel_password_file:
        raise ConfigError(f"redis_sentinel_user ({setting_names('redis_sentinel_user')}) is set without "
                          "REDIS_SENTINEL_PASSWORD_FILE: the Sentinels are asked as a user with its password")
    if s.redis_cert_file:
        _check_redis_client_pair(s.redis_cert_file, s.redis_key_file, s.redis_key_password_file)


def _check_redis_client_pair(cert_file: str, key_file: str, key_password_file: str) -> None:
    """Refuse a client certificate and key Redis could not use: redis-py would ask for an encrypted key's
    passphrase on the terminal at every connection, and a mismatched pair fails only at the first command."""
    passphrase = read_secret_file(key_password_file, "REDIS_KEY_PASSWORD_FILE") if key_password_file else ""
    try:  # an encrypted key without its passphrase is refused here, never prompted for
        ssl.create_default_context().load_cert_chain(cert_file, key_file or None, lambda: passphrase)
    except (ssl.SSLError, OSError) as exc:
        key = key_file or "(none: key in the certificate file)"
        why = unusable_pair(ClientPair(cert_file, key_file, "REDIS_CERT_FILE", "REDIS_KEY_FILE",
                                       "REDIS_KEY_PASSWORD_FILE", bool(key_password_file)), exc)
        raise ConfigError(f"REDIS_CERT_FILE={cert_file} and REDIS_KEY_FILE={key} are not a usable certificate and "
                          f"key pair: {why}") from None


_CHOICES = {section: _literal_choices(section) for section in SECTIONS}  # read when a section is built
