"""What each step measures, as plain dataclasses that serialise to the results JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.model_ceiling import ModelCeiling

DEFINITIONS = {
    "throughput": (
        "closed loop: a fresh requests topic is filled with N requests before the consumer under test starts; "
        "throughput = replies / (time of the last reply - time the consumer got its partitions). The start is "
        "the consumer's own partitions_assigned log line (after process start, imports, model load, warmup and "
        "group join); the end is the last reply record's Kafka CreateTime, which the consumer's producer stamps "
        "when it sends the reply. Both are wall-clock times of the consumer's process, so reading the replies "
        "(done after the run) costs the consumer nothing."
    ),
    "cpu_us_per_request": (
        "CPU time (user + system, all threads, from /proc) the consumer process used between the moment the "
        "harness saw its partitions_assigned line and the moment every reply was in, divided by the replies it "
        "sent in that window; less disturbed by other load than throughput is"
    ),
    "latency": (
        "open loop: while the worker runs, a sender in the bench process sends requests at a fixed rate and a "
        "reader in the same process stamps each reply when its poll returns; latency = reply received - request "
        "sent (wall clock, one process). Requests sent during the first warmup_s seconds are left out. Offered "
        "loads are fractions of the closed-loop throughput of the same worker configuration in this run."
    ),
    "model_ceiling": (
        "forward passes per second times batch size, on tensors collated in advance from the workload's requests, "
        "torch.inference_mode, the worker's thread count, after 3 warmup passes; collate and split not timed"
    ),
    "kafka_ceiling": (
        "bench/kafka_ceiling.py: poll up to 500, send one reply per record with a value as long as streamscore's "
        "and its seven headers, flush, check every send, commit; acks=all, idempotent, linger 2 ms; no model"
    ),
    "confluent_ceiling": (
        "bench/confluent_ceiling.py: the Kafka ceiling's job on confluent-kafka (librdkafka): consume up to 500, "
        "one reply per record with the same value size and headers, flush, check every delivery report, commit"
    ),
    "naive": (
        "bench/naive.py: poll one record, decode, model on a batch of one, send and wait for the ack, commit "
        "that offset; acks=all, idempotent"
    ),
}


@dataclass
class ThroughputRun:
    """One closed-loop run of one consumer over a pre-filled topic."""

    contender: str
    requests: int                   # pre-filled
    replies: int                    # distinct pre-filled ids answered
    seconds: float | None           # partitions assigned -> last reply sent
    per_s: float | None
    complete: bool                  # every pre-filled request answered before the run's time limit
    status_counts: dict[str, int] = field(default_factory=dict)
    duplicate_replies: int = 0
    cpu_us_per_request: float | None = None  # the consumer process's CPU (all threads) per reply, while timed
    main_thread_us_per_request: float | None = None  # of it, its main thread's
    compute_ms_p50: float | None = None   # streamscore's compute-ms header, median over replies
    mean_batch_size: float | None = None  # streamscore's batch-size header, mean over replies
    exit_code: int | None = None
    log: str = ""
    note: str = ""


@dataclass
class LatencyRun:
    """One open-loop run at a fixed offered rate."""

    load: float                 # fraction of the closed-loop maximum
    offered_per_s: float
    achieved_per_s: float       # what the sender managed (it can fall behind on a busy machine)
    sent: int
    measured: int               # requests after the warmup that got a reply
    missing: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    mean_batch_size: float | None
    # Per stage, from the replies' headers: queue_wait (request sent -> worker polled it), batch_wait (polled ->
    # its batch started), compute (the batch's model time), reply_to_reader (reply sent -> reader got it).
    stages_p50_ms: dict[str, float | None] = field(default_factory=dict)
    stages_p99_ms: dict[str, float | None] = field(default_factory=dict)


@dataclass
class GridPoint:
    batch_size: int
    max_wait_ms: int
    throughput: ThroughputRun
    latency: list[LatencyRun] = field(default_factory=list)
    failed_attempts: list[str] = field(default_factory=list)  # what went wrong in earlier tries of this point
    model_ceiling: ModelCeiling | None = None  # at this batch size, measured just before this point's worker


@dataclass
class Target:
    name: str
    measured: float | None
    target: float | None  # None: the bound itself depends on a figure that was not measured
    comparison: str      # ">=" or "<="
    unit: str
    met: bool | None     # None: not measured in this run
    detail: str


@dataclass
class WorkloadResult:
    name: str
    model: str
    about: str
    status: str                       # "ran" or "skipped"
    note: str = ""
    model_version: str = ""
    reply_bytes: int = 0
    plan: dict[str, Any] = field(default_factory=dict)
    model_ceiling: list[ModelCeiling] = field(default_factory=list)
    kafka_ceiling: ThroughputRun | None = None
    kafka_ceiling_latency: LatencyRun | None = None  # the ceiling loop at the chosen point's grid_load rate
    naive: ThroughputRun | None = None
    grid: list[GridPoint] = field(default_factory=list)
    # The second transport (--kafka-client confluent): its bare loop, streamscore on it at the chosen point
    # (throughput and latency), and streamscore on it in exactly-once mode (throughput).
    confluent_ceiling: ThroughputRun | None = None
    confluent: GridPoint | None = None
    confluent_exactly_once: ThroughputRun | None = None
    # the same with one transaction per EXACTLY_ONCE_INTERVAL_MS (bench/suite.py) instead of one per step
    confluent_exactly_once_interval: ThroughputRun | None = None
    targets: list[Target] = field(default_factory=list)
    seconds: float = 0.0

    def point(self, batch_size: int, max_wait_ms: int) -> GridPoint | None:
        return next((p for p in self.grid if (p.batch_size, p.max_wait_ms) == (batch_size, max_wait_ms)), None)

    def ceiling_at(self, batch_size: int) -> ModelCeiling | None:
        """The model ceiling measured at the start of the workload (for the plot and the overview)."""
        return next((c for c in self.model_ceiling if c.batch_size == batch_size), None)


def to_json(value: Any) -> Any:
    """Dataclasses (nested) as JSON-ready dicts."""
    return asdict(value) if hasattr(value, "__dataclass_fields__") else value


def percentile(sorted_values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of an ascending list; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * pct // 100))  # ceil(n * pct / 100), at least 1
    return sorted_values[int(rank) - 1]
