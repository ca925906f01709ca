"""All of the worker's configuration, from environment variables and flags, checked at start.

Each setting has a flag (``--max-batch-size``) and an environment variable
(``STREAMSCORE_MAX_BATCH_SIZE``); the flag wins. Those of the services follow the usual names:
``KAFKA_BOOTSTRAP_SERVERS``, the ``KAFKA_SECURITY_*``/``KAFKA_SASL_*``/``KAFKA_SSL_*`` of
worker/core/security.py, ``REDIS_URL``, ``REDIS_PASSWORD_FILE`` and ``REDIS_CA_FILE``. An unknown ``STREAMSCORE_*``
variable, a malformed value or a conflict between values is a ConfigError that
names the setting.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib.util import find_spec
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from worker.core.errors import ConfigError
from worker.core.formats import Formats, add_format_flags, env_names
from worker.core.security import KafkaSecurity, add_security_flags

ENV_PREFIX = "STREAMSCORE_"
# Read by deploy/local/services.sh and deploy/venv.sh, not by the worker: not "unknown".
TOOLING_ENV = {"STREAMSCORE_STATE_DIR", "STREAMSCORE_CACHE_DIR"}
PLAIN_ENV = {"kafka_bootstrap_servers": "KAFKA_BOOTSTRAP_SERVERS", "redis_url": "REDIS_URL",
             "redis_password_file": "REDIS_PASSWORD_FILE", "redis_ca_file": "REDIS_CA_FILE"}
AMP_MODES = ("off", "bf16", "fp16")
KAFKA_CLIENTS = ("kafka-python", "confluent")
GROUP_PROTOCOLS = ("classic", "consumer")
# The largest max_batch_size. Everything about a batch happens at once: its requests are held in memory (each up to
# max_record_bytes), their ids claimed in one Redis pipeline, their replies produced together, and no reply leaves
# before the whole batch is scored. Throughput stops growing long before this: the GPU bench goes up to 8,192 for
# churn. 65,536 leaves eight times that of headroom; a typo (100,000,000) is refused instead of allocated.
MAX_BATCH_SIZE = 65_536
MAX_TRANSACTION_INTERVAL_MS = 10_000  # exactly-once: longest commit interval (a transaction stays open that long)
KAFKA_PYTHON_HEARTBEAT_MS = 3_000  # kafka-python's heartbeat_interval_ms, which the worker keeps


def _setting(default: Any, help: str, *, flag: str | None = None) -> Any:
    return field(default=default, metadata={"help": help, "flag": flag})


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap_servers: str = _setting(
        "", "Kafka brokers, host:port[,host:port]; `make up` prints the local one", flag="--bootstrap-servers")
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity, metadata={"nested": True})
    formats: Formats = field(default_factory=Formats, metadata={"nested": True})  # worker/core/formats.py
    kafka_client: str = _setting(
        "kafka-python", "the Kafka client library: kafka-python, or confluent (confluent-kafka over librdkafka: "
        "far less CPU per record; install the `confluent` extra)")
    kafka_group_protocol: str = _setting(
        "classic", "consumer group protocol: classic, or consumer (KIP-848: the broker assigns the partitions "
        "and sets the session timeout; --kafka-client confluent only)")
    redis_url: str = _setting(
        "", "Redis for dedup, redis://[user[:password]@]host:port/db, rediss:// for TLS; memory:// keeps it in "
        "this process (one worker only)")
    redis_password_file: str = _setting(
        "", "file holding the Redis password (of the URL's ACL user, or the default user): a mounted secret, "
        "instead of a password in REDIS_URL")
    redis_ca_file: str = _setting(
        "", "rediss://: PEM file of the CA that signed the Redis server's certificate (default: the system's)")
    requests_topic: str = _setting("", "topic to consume scoring requests from (required)")
    reply_topic: str = _setting("", "default reply topic (default: <requests-topic>.replies)")
    dead_letter_topic: str = _setting("", "where unreadable records go (default: <requests-topic>.dlq)")
    group: str = _setting("", "consumer group id (default: streamscore-<model>)")
    model: str = _setting("churn", "the model: a built-in name (churn, minilm), a torch.export .pt2 file, a "
                          "TorchScript .pt/.ts file, or package.module:factory")
    model_config: str = _setting("", "JSON or TOML file: the model's inputs and outputs spec, and the keyword "
                                 "arguments of a factory (every key but inputs and outputs)")
    weights: str = _setting("", "weights for a factory's module: .safetensors, or a state_dict saved with "
                            "torch.save (.pt/.pth), loaded with strict key matching")
    allow_pickle: bool = _setting(False, "allow loading pickled Python objects (a whole module saved with "
                                  "torch.save): unpickling runs the file's code, so only for files you trust")
    device: str = _setting("auto", "torch device: auto, cpu, cuda, cuda:N")
    amp: str = _setting("off", "mixed precision of the forward pass: off, bf16 or fp16 (fp16 needs a CUDA device); "
                        "replies stay float32")
    model_thread: str = _setting("auto", "on: the model runs on a thread of its own, so polling, sending, "
                                 "Redis and commits overlap its compute; off: one thread does everything; "
                                 "auto: on for CUDA devices (on shared CPU cores it measured slower)")
    processes: int = _setting(1, "worker processes in this group on this host (one per GPU or core)")
    shutdown_timeout_s: float = _setting(
        30.0, "after SIGTERM, the whole drain (the batch in hand, the replies' acknowledgements, the commit, the "
        "close) ends within this many seconds; what is unfinished then is left uncommitted and consumed again. "
        "It must fit below Kubernetes' terminationGracePeriodSeconds, with a few seconds to spare for process "
        "teardown")
    torch_threads: int = _setting(0, "torch intra-op threads; 0 leaves torch's default")
    max_batch_size: int = _setting(64, "score a batch once it has this many requests (at most 65536)")
    max_wait_ms: int = _setting(0, "... or once its oldest request has waited this long for more to join it. "
                                "0: none waits; a batch is what arrived while the model was busy (or in one "
                                "poll), so batches grow with the load by themselves. Above 0, a batch still goes "
                                "at once when the model is idle and a short poll finds nothing more "
                                "(unless --wait-to-fill)")
    wait_to_fill: bool = _setting(False, "let a batch wait its whole max_wait_ms (or latency target) for more "
                                  "requests even when the model is idle and nothing more is arriving: fewer, "
                                  "larger batches, for models whose batch cost hardly grows with its size")
    latency_target_ms: int = _setting(
        0, "instead of max_wait_ms: a target for queue wait + batch wait + compute, from each record's Kafka "
        "timestamp; a batch waits only while its oldest request still meets it after the batch's compute "
        "(learned online); 0: off")
    max_batch_tokens: int = _setting(0, "text models: cap a batch's summed token count too; 0 means no cap")
    max_poll_records: int = _setting(500, "records fetched per poll")
    max_record_bytes: int = _setting(1_048_576, "larger request values are refused (record_too_large)")
    max_poll_interval_ms: int = _setting(300_000, "Kafka max.poll.interval.ms: longest allowed gap between polls")
    session_timeout_ms: int = _setting(45_000, "Kafka session.timeout.ms")
    auto_offset_reset: str = _setting("earliest", "where a new group starts: earliest or latest")
    assignor: str = _setting("range", "partition assignment: range, roundrobin, or cooperative-sticky "
                             "(incremental rebalances; every worker of a group must use the same kind)")
    commit_interval_ms: int = _setting(0, "least time between offset commits (at-least-once: asynchronous, 0 "
                                        "commits whenever the last commit was answered) or transaction commits "
                                        "(exactly-once: 0 commits every loop step; at most 10000)")
    delivery: str = _setting("at-least-once", "at-least-once (replies acknowledged, then offsets committed; dedup "
                             "suppresses redeliveries) or exactly-once (replies and offsets in one Kafka "
                             "transaction: read replies with isolation.level=read_committed)")
    transactional_id: str = _setting("", "exactly-once: this worker's transactional id, unique among running "
                                     "workers and the same across its restarts (default: <group>.<client-id>)")
    dedup_namespace: str = _setting("streamscore", "prefix of Redis keys; use another to re-score on purpose")
    dedup_ttl_s: int = _setting(86_400, "how long an answered request id is remembered")
    dedup_lease_ms: int = _setting(300_000, "how long a claim on a request id holds while it is scored")
    client_id: str = _setting("streamscore-worker", "Kafka client.id")
    log_format: str = _setting("auto", "auto (console on a terminal, else json), json or console")
    log_level: str = _setting("info", "debug, info, warning or error")
    stats_interval_s: float = _setting(10.0, "seconds between worker_stats log lines; 0 turns them off")
    http_port: int = _setting(0, "serve /metrics (Prometheus), /healthz and /readyz over HTTP on 0.0.0.0 at this "
                              "port; 0 serves nothing. With --processes N, child i serves on this port + i "
                              "(0 .. N-1), the supervisor on none")
    liveness_timeout_s: float = _setting(
        60.0, "/healthz answers 503 once the loop has not polled for this long, or has held records without "
        "finishing any for this long. Each blocking call of a step gets at most a quarter of it (worker/core/"
        "bounds.py: with the defaults a broker outage holds a step's settle 15 s), and a poll's worth of batches "
        "at the speed measured in warmup is checked against it at start")

    def __post_init__(self) -> None:
        _validate(self)

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["redis_url"] = redact_url(self.redis_url)  # kafka_security shows no secret of its own
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @classmethod
    def from_sources(cls, args: argparse.Namespace | None = None,
                     environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, overridden by environment variables, overridden by flags."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        known = {f.name for f in fields(cls) if not f.metadata.get("nested")}
        for name in environ:
            if name.startswith(ENV_PREFIX) and name[len(ENV_PREFIX):].lower() not in known and name not in TOOLING_ENV \
                    and name not in env_names():
                raise ConfigError(f"unknown setting {name}; see `python -m worker --help` for the valid ones")
        values["kafka_security"] = KafkaSecurity.from_sources(args, environ)
        values["formats"] = Formats.from_sources(args, environ)
        for f in _own_fields():
            env_name = PLAIN_ENV.get(f.name, ENV_PREFIX + f.name.upper())
            raw = environ.get(env_name)
            if raw is not None:
                values[f.name] = _convert(f.name, env_name, raw, type(f.default))
            if args is not None and getattr(args, f.name, None) is not None:
                values[f.name] = getattr(args, f.name)
        return cls(**values).with_derived_defaults()

    def with_derived_defaults(self) -> Settings:
        group = self.group or f"streamscore-{self.model.replace(':', '.').replace('/', '.')}"
        own_transactional_id = f"{group}.{self.client_id}" if self.delivery == "exactly-once" else ""
        return replace(
            self,
            reply_topic=self.reply_topic or f"{self.requests_topic}.replies",
            dead_letter_topic=self.dead_letter_topic or f"{self.requests_topic}.dlq",
            group=group,
            transactional_id=self.transactional_id or own_transactional_id,
        )


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; defaults stay None so that env vars can fill them."""
    for f in _own_fields():
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        env_name = PLAIN_ENV.get(f.name, ENV_PREFIX + f.name.upper())
        if isinstance(f.default, bool):
            parser.add_argument(flag, dest=f.name, action="store_const", const=True, default=None,
                                help=f"{f.metadata['help']} ({env_name}=true)")
            continue
        shown = f.default not in ("", 0) or isinstance(f.default, float)
        default = f" (default: {f.default})" if shown else ""
        parser.add_argument(flag, dest=f.name, type=type(f.default), metavar=env_name,
                            help=f"{f.metadata['help']}{default}")
    add_security_flags(parser)
    add_format_flags(parser)


def setting_names(name: str) -> str:
    """How a user sets the setting ``name``: its flag and its variable, e.g. ``--device, STREAMSCORE_DEVICE``."""
    (f,) = [f for f in _own_fields() if f.name == name]
    return f"{f.metadata['flag'] or '--' + name.replace('_', '-')}, {PLAIN_ENV.get(name, ENV_PREFIX + name.upper())}"


def _own_fields() -> list[Any]:
    """The settings defined here, not those of a nested group such as kafka_security."""
    return [f for f in fields(Settings) if not f.metadata.get("nested")]


def redact_url(url: str) -> str:
    """The URL without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _convert(name: str, env_name: str, raw: str, kind: type) -> Any:
    if kind is bool:
        if raw.lower() not in ("1", "true", "yes", "0", "false", "no", ""):
            raise ConfigError(f"{env_name}={raw!r} is not a valid boolean: use true or false (setting {name})")
        return raw.lower() in ("1", "true", "yes")
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{env_name}={raw!r} is not a valid {kind.__name__} (setting {name})") from None


def _validate(s: Settings) -> None:
    def need(condition: bool, message: str) -> None:
        if not condition:
            raise ConfigError(message)

    for name in ("processes", "max_batch_size", "max_poll_records", "max_record_bytes", "max_poll_interval_ms",
                 "session_timeout_ms", "dedup_ttl_s", "dedup_lease_ms"):
        need(getattr(s, name) >= 1, f"{name} must be >= 1, got {getattr(s, name)}")
    for name in ("max_wait_ms", "latency_target_ms", "max_batch_tokens", "commit_interval_ms", "torch_threads",
                 "stats_interval_s"):
        need(getattr(s, name) >= 0, f"{name} must be >= 0, got {getattr(s, name)}")
    need(s.max_batch_size <= MAX_BATCH_SIZE,
         f"max_batch_size ({setting_names('max_batch_size')}) must be at most {MAX_BATCH_SIZE}, got "
         f"{s.max_batch_size}: a batch is claimed in Redis, scored and answered as one, and held in memory "
         "until then; past a few thousand requests it only adds latency")
    need(s.shutdown_timeout_s > 0, f"shutdown_timeout_s must be > 0, got {s.shutdown_timeout_s}")
    need(0 <= s.http_port <= 65535, f"http_port must be 0 (off) or a TCP port up to 65535, got {s.http_port}")
    need(s.http_port == 0 or s.http_port + s.processes - 1 <= 65535,
         f"http_port {s.http_port} with processes={s.processes} needs ports up to {s.http_port + s.processes - 1}: "
         f"choose http_port <= {65536 - s.processes}")
    need(s.liveness_timeout_s > 0, f"liveness_timeout_s must be > 0, got {s.liveness_timeout_s}")
    need(s.auto_offset_reset in ("earliest", "latest"),
         f"auto_offset_reset must be earliest or latest, got {s.auto_offset_reset!r}")
    need(s.assignor in ("range", "roundrobin", "cooperative-sticky"),
         f"assignor must be range, roundrobin or cooperative-sticky, got {s.assignor!r}")
    _validate_kafka_client(s)
    need(s.model_thread in ("auto", "on", "off"), f"model_thread must be auto, on or off, got {s.model_thread!r}")
    need(s.delivery in ("at-least-once", "exactly-once"),
         f"delivery must be at-least-once or exactly-once, got {s.delivery!r}")
    need(s.delivery == "exactly-once" or not s.transactional_id,
         "transactional_id is only used with delivery=exactly-once; unset it or set --delivery exactly-once")
    need(s.delivery == "at-least-once" or s.commit_interval_ms <= MAX_TRANSACTION_INTERVAL_MS,
         f"commit_interval_ms ({s.commit_interval_ms}) must be at most {MAX_TRANSACTION_INTERVAL_MS} with "
         "delivery=exactly-once: an open transaction holds back every read_committed reader of the reply topic")
    need(s.log_format in ("auto", "json", "console"), f"log_format must be auto, json or console, got {s.log_format!r}")
    need(s.log_level in ("debug", "info", "warning", "error"),
         f"log_level must be debug, info, warning or error, got {s.log_level!r}")
    need(re.fullmatch(r"auto|cpu|cuda(:\d+)?", s.device) is not None,
         f"device must be auto, cpu, cuda or cuda:N ({setting_names('device')}), got {s.device!r}")
    need(s.amp in AMP_MODES, f"amp must be off, bf16 or fp16, got {s.amp!r}")
    _validate_topics(s)
    if s.device == "cpu":  # "auto" is resolved, and checked again, when the runner picks its device
        check_amp(s.amp, "cpu")
    need(s.max_wait_ms < s.max_poll_interval_ms,
         f"max_wait_ms ({s.max_wait_ms}) must be well below max_poll_interval_ms ({s.max_poll_interval_ms})")
    need(s.latency_target_ms < s.max_poll_interval_ms,
         f"latency_target_ms ({s.latency_target_ms}) must be well below max_poll_interval_ms "
         f"({s.max_poll_interval_ms})")
    need(s.dedup_lease_ms > 2 * max(s.max_wait_ms, s.latency_target_ms),
         f"dedup_lease_ms ({s.dedup_lease_ms}) must exceed twice the batch wait (max_wait_ms {s.max_wait_ms}, "
         f"latency_target_ms {s.latency_target_ms}): "
         "a lease shorter than a batch's life lets two workers score one request")
    if s.redis_url:
        need(urlsplit(s.redis_url).scheme in ("redis", "rediss", "unix", "memory"),
             f"REDIS_URL must start with redis://, rediss://, unix:// or memory://, got {redact_url(s.redis_url)!r}")
    _validate_redis_secrets(s)


def _validate_topics(s: Settings) -> None:
    """Nothing the worker writes may go to the topic it reads: it would consume it again, without end."""
    consequence = {"reply_topic": "the worker would consume its own replies as requests, and answer each again",
                   "dead_letter_topic": "every dead letter would be consumed again as a request, and dead-lettered "
                                        "again"}
    for name, why in consequence.items():
        if s.requests_topic and getattr(s, name) == s.requests_topic:
            raise ConfigError(f"{name} ({setting_names(name)}) must differ from requests_topic "
                              f"({setting_names('requests_topic')}): both are {s.requests_topic!r}, and {why}")


def check_kafka_client(name: str) -> None:
    """Refuse a Kafka client library that is not one of KAFKA_CLIENTS, or not installed (the worker's and the
    producer side's ``--kafka-client``). Raises ConfigError naming the fix."""
    if name not in KAFKA_CLIENTS:
        raise ConfigError(f"kafka_client must be kafka-python or confluent, got {name!r}")
    if name == "confluent" and find_spec("confluent_kafka") is None:
        raise ConfigError("kafka_client=confluent (--kafka-client, STREAMSCORE_KAFKA_CLIENT) needs the confluent-kafka "
                          "package, which is not installed: install the `confluent` extra "
                          "(pip install 'streamscore[confluent]'), or use --kafka-client kafka-python")


def _validate_kafka_client(s: Settings) -> None:
    check_kafka_client(s.kafka_client)
    if s.kafka_client == "kafka-python" and s.session_timeout_ms <= KAFKA_PYTHON_HEARTBEAT_MS:
        raise ConfigError(f"session_timeout_ms ({setting_names('session_timeout_ms')}) must be above "
                          f"{KAFKA_PYTHON_HEARTBEAT_MS} with kafka_client=kafka-python, got {s.session_timeout_ms}: "
                          f"kafka-python heartbeats every {KAFKA_PYTHON_HEARTBEAT_MS} ms and refuses a session "
                          "timeout that is not longer")
    if (s.kafka_client == "confluent" and s.kafka_group_protocol == "classic"
            and s.max_poll_interval_ms < s.session_timeout_ms):
        raise ConfigError(f"max_poll_interval_ms ({s.max_poll_interval_ms}) must be at least session_timeout_ms "
                          f"({s.session_timeout_ms}) with kafka_client=confluent (librdkafka refuses less)")
    if s.kafka_group_protocol not in GROUP_PROTOCOLS:
        raise ConfigError(f"kafka_group_protocol must be classic or consumer, got {s.kafka_group_protocol!r}")
    if s.kafka_group_protocol == "classic":
        return
    if s.kafka_client != "confluent":
        raise ConfigError("kafka_group_protocol=consumer (--kafka-group-protocol, KIP-848) needs --kafka-client "
                          f"confluent: {s.kafka_client} speaks the classic protocol only")
    defaults = {f.name: f.default for f in fields(Settings)}
    for name, flag in (("assignor", "--assignor"), ("session_timeout_ms", "--session-timeout-ms")):
        if getattr(s, name) != defaults[name]:
            raise ConfigError(f"{name}={getattr(s, name)} ({flag}) does not apply with kafka_group_protocol=consumer: "
                              f"the broker assigns the partitions and sets the session timeout; unset {flag}")


def _validate_redis_secrets(s: Settings) -> None:
    for env, path in (("REDIS_PASSWORD_FILE", s.redis_password_file), ("REDIS_CA_FILE", s.redis_ca_file)):
        if path and not os.path.isfile(path):
            raise ConfigError(f"{env}={path}: no such file")
    url = urlsplit(s.redis_url)
    if s.redis_password_file and url.password is not None:
        raise ConfigError("REDIS_URL carries a password and REDIS_PASSWORD_FILE is set: keep one (the file, "
                          "preferably: a password in the URL shows wherever the URL does)")
    if s.redis_ca_file and url.scheme != "rediss":
        raise ConfigError(f"REDIS_CA_FILE is set, but REDIS_URL={redact_url(s.redis_url)!r} does not use TLS: "
                          "write rediss://, or unset REDIS_CA_FILE")


def check_amp(amp: str, device_type: str) -> None:
    """Refuse fp16 autocast off CUDA: most CPUs have no fast float16 arithmetic; bf16 is what CPU autocast is for.

    Raises ConfigError naming the setting and what to use instead.
    """
    if amp == "fp16" and device_type != "cuda":
        raise ConfigError(f"amp=fp16 needs a CUDA device, and the device is {device_type}: "
                          "use --amp bf16 (STREAMSCORE_AMP=bf16) on CPU, or --amp off")


def require_services(s: Settings) -> None:
    """Checks needed only by the streaming worker (score-file needs neither service)."""
    if not s.kafka_bootstrap_servers:
        raise ConfigError("KAFKA_BOOTSTRAP_SERVERS is not set: export it or pass --bootstrap-servers "
                          "(`make up` starts a local broker and prints it)")
    if not s.redis_url:
        raise ConfigError("REDIS_URL is not set: export it or pass --redis-url "
                          "(`make up` starts a local Redis and prints it; memory:// for a single test worker)")
    if not s.requests_topic:
        raise ConfigError("requests_topic is not set: pass --requests-topic or STREAMSCORE_REQUESTS_TOPIC")
