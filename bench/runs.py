"""One closed-loop run of any contender: fresh topics, pre-fill, start, wait, measure, stop, clean up."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.commands import CommandFor
from bench.contender import TIME_LIMIT, ContenderProcess, CpuSample, cpu_per_request, throughput, wait_for_replies
from bench.replies import read_replies
from bench.results import ThroughputRun
from bench.topics import RunTopics, prefill
from producer.send import RequestBody

AfterDrain = Callable[[RunTopics, ThroughputRun], None]


@dataclass(frozen=True)
class RunContext:
    """What every run of one benchmark shares."""

    bootstrap: str
    partitions: int
    torch_threads: int
    log_dir: Path
    progress: bool
    worker_args: tuple[str, ...] = ()  # extra settings for every streamscore worker of the run
    load_client: str = "kafka-python"  # the Kafka client of the pre-fill and the open-loop sender and reader
    replication: int = 1  # copies of each partition of the run's topics (3 on the local three-broker cluster)
    startup_timeout_s: float = 180.0  # process start, imports, model load, group join (slow on a busy machine)
    redis_url: str = ""  # the contenders' dedup store: each run's keys are deleted after it ("": left as they are)


_STARTED = time.monotonic()


def say(message: str) -> None:
    """One progress line on stderr, with the seconds since the benchmark started."""
    print(f"{time.monotonic() - _STARTED:5.0f}s {message}", file=sys.stderr, flush=True)


def closed_loop(ctx: RunContext, label: str, bodies: list[RequestBody], command: CommandFor, timeout_s: float,
                from_worker: bool, after_drain: AfterDrain | None = None) -> ThroughputRun:
    """Pre-fill a fresh topic with ``bodies``, run the contender over it, and time it. Blocks.

    ``after_drain`` runs while the contender is still up and idle, once every
    request has its reply (the grid's open-loop runs). The contender is always
    stopped and the topics deleted, whatever happens.
    """
    topics = RunTopics.fresh(label)
    topics.create(ctx.bootstrap, ctx.partitions, ctx.replication)
    prefill(ctx.bootstrap, topics.requests, bodies, ctx.progress, ctx.load_client)
    ids = {str(b["id"]) for b in bodies}
    process = ContenderProcess(label, command(topics), ctx.log_dir / f"{label}.log")
    try:
        assigned = process.wait_assigned(ctx.startup_timeout_s)
        before = CpuSample.of(process)
        stopped_why = (wait_for_replies(process, ctx.bootstrap, topics.replies, len(ids), timeout_s, ctx.progress)
                       if assigned else f"no partitions_assigned line within {ctx.startup_timeout_s:.0f} s")
        after = CpuSample.of(process)
        if after_drain is None:
            process.stop()
        replies = read_replies(ctx.bootstrap, topics.replies)
        run = throughput(label, replies, ids, process.assigned_times(), from_worker)
        run.cpu_us_per_request = cpu_per_request(replies, ids, before, after)
        run.main_thread_us_per_request = cpu_per_request(replies, ids, before, after, main_thread=True)
        if stopped_why and not stopped_why.startswith(TIME_LIMIT):  # stalled or died: its figures mean nothing
            run.per_s = run.cpu_us_per_request = run.main_thread_us_per_request = None
        if stopped_why is None and after_drain is not None:
            after_drain(topics, run)
    finally:
        exit_code = process.stop()
        topics.delete(ctx.bootstrap, ctx.redis_url)
    run.exit_code = exit_code
    run.log = str(process.log_path)
    problems = [p for p in (run.note, stopped_why, f"exit code {exit_code}" if exit_code else "") if p]
    if problems:
        run.note = "; ".join(problems) + f" (log: {process.log_path})"
    return run
