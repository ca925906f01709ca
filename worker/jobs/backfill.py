"""``python -m worker backfill``: re-score a time range of a topic as a bounded job.

The job is the streaming worker (same loop, model, batching, dedup and
delivery guarantees) over a BoundedSource, on either Kafka client: it reads
the records of the range (see worker/jobs/bounded_source.py for the exact
bounds), scores them, and exits 0 once every partition's committed offset
reached its stop.

It keeps away from live traffic: its own consumer group and dedup namespace
(both named after the job, by default the topic and the range), every reply
to its own reply topic whatever the request's ``reply_to``, dead letters to
``<reply topic>.dlq``. The environment variables that name the live worker's
group, topics and namespace are ignored; only flags set them here.

Stopped by SIGTERM or Ctrl-C, it finishes the batch in hand, commits, and
exits 3; the same command again goes on from the committed offsets. Stopped
while it starts (its plan made, its model loading or warming up), it exits 3
at once. Request
deadlines are ignored (old requests would all be expired) unless
``--keep-deadlines``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from msgspec import structs
from tqdm import tqdm

from worker.core.clock import SystemClock
from worker.core.errors import ConfigError
from worker.core.messages import InvalidRecord, RawRecord, Request
from worker.core.offsets import TopicPartition as TP
from worker.core.settings import Settings, add_flags, require_services
from worker.core.shutdown import StopRequest
from worker.core.timerange import TimeRange, format_ms, parse_time
from worker.jobs.bounded_source import BoundedSource
from worker.ports import Decoded, RequestDecoder
from worker.signals import exit_if_signalled_while_starting, stop_on_signals
from worker.stream.loop import Worker

log = structlog.get_logger(__name__)

EXIT_INTERRUPTED = 3
# What these name belongs to the live worker; a backfill takes them from flags only.
LIVE_ONLY_ENV = ("STREAMSCORE_GROUP", "STREAMSCORE_REPLY_TOPIC", "STREAMSCORE_DEAD_LETTER_TOPIC",
                 "STREAMSCORE_DEDUP_NAMESPACE", "STREAMSCORE_PROCESSES")

DESCRIPTION = """\
Re-score the records of --requests-topic whose timestamps are in
[--from-time, --until-time) and exit: 0 when all are answered, 3 when stopped
early (SIGTERM, Ctrl-C; run the same command again to go on), 1 on a delivery
failure, 2 on a bad setting. Without --until-time the range ends at the end
of each partition when the job first started.

Times are ISO 8601 (UTC unless an offset is given) or Unix epoch milliseconds.
Replies go to --reply-topic (required; never the live reply topic, whatever
a request's reply_to), dead letters to <reply-topic>.dlq (not to the
--dead-letter-topic default below, which is the live worker's); create both
first. The job's consumer group and
dedup namespace are named after --job (default: <topic>.<from ms>-<until ms>),
so that live traffic and its dedup are untouched; the same command again
resumes the same job, another --job runs the range again.
"""

EPILOG = """\
example:
  python -m producer create-topic requests.backfill --partitions 4
  python -m producer create-topic requests.backfill.dlq --partitions 1
  python -m worker backfill --requests-topic requests --reply-topic requests.backfill \\
      --from-time 2026-11-29T00:00:00Z --until-time 2026-11-30T00:00:00Z
"""


def add_backfill_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("backfill", help="re-score a time range of a topic, then exit",
                                 description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from-time", required=True, help="first timestamp to score (inclusive)")
    parser.add_argument("--until-time", help="end of the range (exclusive; default: the end at start)")
    parser.add_argument("--job", help="job name: sets the default --group (streamscore-backfill.<job>) and "
                                      "--dedup-namespace (backfill.<job>)")
    parser.add_argument("--keep-deadlines", action="store_true",
                        help="answer requests whose deadline_ms passed 'expired' (default: score them all)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    pacing = parser.add_argument_group("leaving live traffic alone")
    pacing.add_argument("--max-rate", type=float, default=0.0, metavar="RECORDS_PER_S",
                        help="read at most this many records per second on average (default: 0, no limit)")
    pacing.add_argument("--live-max-lag", type=int, default=0, metavar="RECORDS",
                        help="live first: hold (read nothing, stay in the job's group) while the live group lags "
                             "by more than this many records on the topic, go on once its lag fell to half "
                             "(default: 0, off)")
    pacing.add_argument("--live-group", metavar="GROUP",
                        help="the live workers' consumer group (default: the live worker's default, "
                             "streamscore-<model>)")
    pacing.add_argument("--live-check-s", type=float, default=5.0, metavar="SECONDS",
                        help="how often the live group's lag is read (default: 5)")
    add_flags(parser)


def backfill_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[Settings, TimeRange]:
    """The job's Settings and range from flags and environment. Raises ConfigError."""
    time_range = TimeRange(parse_time(args.from_time, "--from-time"),
                           None if args.until_time is None else parse_time(args.until_time, "--until-time"))
    settings = Settings.from_sources(args, {k: v for k, v in environ.items() if k not in LIVE_ONLY_ENV})
    require_services(settings)
    if args.reply_topic is None:
        raise ConfigError("backfill needs --reply-topic: its replies go to a topic of their own, never to the "
                          "live one (create it with `python -m producer create-topic NAME`)")
    live = Settings.from_sources(argparse.Namespace(**{**vars(args), "reply_topic": None}), environ)
    if args.reply_topic in {live.kafka.reply_topic, f"{settings.kafka.requests_topic}.replies"}:
        raise ConfigError(f"--reply-topic {args.reply_topic} is the live workers' reply topic: their readers would "
                          "get every re-scored request answered a second time; give the backfill a topic of its "
                          f"own, e.g. --reply-topic {settings.kafka.requests_topic}.backfill")
    if settings.operations.processes != 1:
        raise ConfigError("a backfill runs in one process (it assigns itself every partition); drop --processes")
    job = args.job or f"{settings.kafka.requests_topic}.{time_range.label()}"
    return settings.replace(group=args.group or f"streamscore-backfill.{job}",
                            dedup_namespace=args.dedup_namespace or f"backfill.{job}",
                            dead_letter_topic=args.dead_letter_topic or f"{args.reply_topic}.dlq"), time_range


class RepliesToTheJob:
    """A backfill's decoder: the requests ``decoder`` reads, their ``reply_to`` (field or header) left out, so that
    every reply goes to the job's reply topic, and a reply_to topic deleted since (or one naming a requests topic)
    refuses nothing; and, unless ``keep_deadlines``, their ``deadline_ms`` too, so that old requests are scored,
    not expired, whatever their format (JSON or registry-framed). Dead letters keep their topic."""

    def __init__(self, decoder: RequestDecoder, keep_deadlines: bool = False) -> None:
        self._decoder = decoder
        self._keep_deadlines = keep_deadlines

    @property
    def blocked(self) -> bool:
        return self._decoder.blocked

    @property
    def waiting(self) -> int:
        return self._decoder.waiting

    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        return [(record, self._for_the_job(decoded)) for record, decoded in self._decoder.decode(records, now)]

    def _for_the_job(self, decoded: Request | InvalidRecord) -> Request | InvalidRecord:
        if isinstance(decoded, Request) and decoded.deadline_ms is not None and not self._keep_deadlines:
            return structs.replace(decoded, reply_to=None, deadline_ms=None)
        return structs.replace(decoded, reply_to=None) if decoded.reply_to else decoded

    def drop(self, partitions: set[TP]) -> int:
        return self._decoder.drop(partitions)


@dataclass(frozen=True)
class Pacing:
    """How the job leaves live traffic alone: a rate limit, and a live group it yields to."""

    max_rate: float = 0.0
    live_max_lag: int = 0
    live_group: str = ""
    live_check_s: float = 5.0

    @classmethod
    def from_args(cls, args: argparse.Namespace, settings: Settings) -> Pacing:
        """Raises ConfigError naming the flag."""
        if args.max_rate < 0 or args.live_max_lag < 0 or args.live_check_s <= 0:
            raise ConfigError(f"--max-rate ({args.max_rate:g}) and --live-max-lag ({args.live_max_lag}) must be "
                              f">= 0 and --live-check-s ({args.live_check_s:g}) > 0")
        live_group = args.live_group or f"streamscore-{settings.model.model.replace(':', '.').replace('/', '.')}"
        if args.live_max_lag and live_group == settings.kafka.group:
            raise ConfigError(f"--live-group {live_group!r} is the backfill's own group: name the live workers'")
        return cls(args.max_rate, args.live_max_lag, live_group, args.live_check_s)


@dataclass(frozen=True)
class BackfillJob:
    """What one run of a backfill is asked to do: what ``BuildBackfill`` builds the job's parts from."""

    settings: Settings
    time_range: TimeRange
    stop_requested: StopRequest
    keep_deadlines: bool = False
    pacing: Pacing = Pacing()
    on_progress: Callable[[int], None] | None = None


# The worker over the job's range and its source, planned (or resumed), the model loaded. The composition root
# provides it (worker/app.py's build_backfill), so that this job never chooses an adapter itself.
BuildBackfill = Callable[[BackfillJob], tuple[Worker, BoundedSource]]


@dataclass(frozen=True)
class BackfillSummary:
    topic: str
    time_range: TimeRange
    reply_topic: str
    group: str
    offsets: int  # in the job's span
    done_before: int  # committed by earlier runs of the job
    committed: int  # committed now
    stats: dict[str, Any]  # the worker's, for this run
    seconds: float
    complete: bool
    deleted: int = 0  # offsets of the span deleted before the job read them (retention), in this run or before

    def fields(self) -> dict[str, Any]:
        return {"topic": self.topic, "from_ms": self.time_range.from_ms, "until_ms": self.time_range.until_ms,
                "reply_topic": self.reply_topic, "group": self.group, "offsets": self.offsets,
                "done_before": self.done_before, "committed": self.committed, "seconds": round(self.seconds, 3),
                "complete": self.complete, "deleted": self.deleted, **self.stats}

    def render(self) -> str:
        s = self.stats
        until = "the end at start" if self.time_range.until_ms is None else format_ms(self.time_range.until_ms)
        rate = s.get("consumed", 0) / self.seconds if self.seconds else 0.0
        result = ("complete" if self.complete else
                  f"INTERRUPTED: {self.committed:,} of {self.offsets:,} offsets done; "
                  "run the same command again to go on")
        if self.deleted:
            result += f", {self.deleted:,} offsets of the range lost before they were read (see deleted)"
        deleted = [f"  deleted       {self.deleted:,} offsets of the range deleted (retention) before the job "
                   "read them: not scored"] if self.deleted else []
        return "\n".join([
            "backfill summary",
            f"  topic         {self.topic}  (group {self.group})",
            f"  range         {format_ms(self.time_range.from_ms)} (inclusive) .. {until} (exclusive)",
            f"  offsets       {self.offsets:,} in range, {self.done_before:,} done by earlier runs",
            f"  records       {s.get('consumed', 0):,} read in this run",
            f"  replies       {s.get('replied_ok', 0):,} ok, {s.get('replied_error', 0):,} error, "
            f"{s.get('replied_expired', 0):,} expired  -> {self.reply_topic}",
            f"  dead letters  {s.get('dead_lettered', 0):,}",
            *deleted,
            f"  duplicates    {s.get('duplicates', 0):,}  (ids answered before in this job, not re-scored)",
            f"  duration      {self.seconds:.1f} s  ({rate:,.0f} records/s)",
            f"  result        {result}",
        ])


class _ProgressBar:
    """A tqdm bar by offsets, opened once the job knows its size."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._bar: tqdm | None = None

    def open(self, total: int, initial: int, desc: str) -> None:
        self._bar = tqdm(total=total, initial=initial, unit="rec", desc=desc, disable=not self._enabled,
                         file=sys.stderr)

    def __call__(self, offsets: int) -> None:
        if self._bar is not None:
            self._bar.update(offsets)
            if self._bar.total is not None and self._bar.n >= self._bar.total:
                self.close()  # all read: end the bar's line before the worker's last log lines

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def run_backfill(args: argparse.Namespace, build: BuildBackfill, environ: Mapping[str, str] = os.environ) -> int:
    """Run the job, its parts made by ``build``; returns the exit code (0 complete, 3 interrupted).
    Raises WorkerError, LookupError."""
    settings, time_range = backfill_settings(args, environ)
    started = time.monotonic()
    stop_requested = StopRequest(SystemClock())
    stop_on_signals(stop_requested)
    progress = _ProgressBar(enabled=not args.no_progress)
    with exit_if_signalled_while_starting(lambda _signum: EXIT_INTERRUPTED):  # nothing read yet: go on later
        worker, source = build(BackfillJob(settings, time_range, stop_requested, args.keep_deadlines,
                                           Pacing.from_args(args, settings), progress))
    progress.open(source.total, source.done_before, f"backfill {settings.kafka.requests_topic}")
    log.info("backfill_started", settings=repr(settings), from_ms=time_range.from_ms, until_ms=time_range.until_ms,
             offsets=source.total, done_before=source.done_before)
    try:
        worker.run()
    finally:
        progress.close()
    kafka = settings.kafka
    summary = BackfillSummary(kafka.requests_topic, time_range, kafka.reply_topic, kafka.group,
                              source.total, source.done_before, source.committed_offsets(),
                              worker.stats.snapshot(), time.monotonic() - started, source.complete(),
                              source.deleted)
    log.info("backfill_finished", **summary.fields())
    print(summary.render())
    return 0 if summary.complete else EXIT_INTERRUPTED
