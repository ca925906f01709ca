"""One workload, every step: model ceiling, streamscore's chosen configuration, Kafka ceiling, naive
baseline, the rest of the grid.

The chosen configuration runs before the Kafka ceiling so that the ceiling
loop can also be timed in an open loop at the very rate streamscore's 50%
load run was given: the latency of the bare Kafka round trips, for reference.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace

from bench import commands
from bench.grid import run_grid
from bench.model_ceiling import measure_model_ceiling
from bench.openloop import open_loop
from bench.plan import Plan
from bench.results import LatencyRun, ThroughputRun, WorkloadResult
from bench.runs import AfterDrain, RunContext, closed_loop, say
from bench.targets import EXACTLY_ONCE_INTERVAL_MS, LATENCY_LOAD, evaluate
from bench.topics import RunTopics
from bench.workloads import RequestPool, Workload, load_or_skip, reply_size
from worker.models import Servable

REPLY_SAMPLES = 32


def run_workload(ctx: RunContext, redis_url: str, workload: Workload, quick: bool,
                 chosen: tuple[int, int]) -> WorkloadResult:
    """Every measurement of one workload; a workload whose model does not load is returned as skipped."""
    result = WorkloadResult(workload.name, workload.model, workload.about, status="ran")
    started = time.monotonic()
    servable, note = load_or_skip(workload)
    if servable is None:
        result.status, result.note = "skipped", note or ""
        say(f"[{workload.name}] {result.note}")
        return result
    plan = workload.plan(quick)
    result.plan, result.model_version = asdict(plan), servable.version
    say(f"[{workload.name}] generating requests ({workload.about})")
    pool = RequestPool(workload, max(plan.requests, plan.ceiling_requests, plan.naive_requests,
                                     plan.model_ceiling_items))
    result.reply_bytes = reply_size(servable, pool.take(REPLY_SAMPLES))

    for batch_size in sorted(set(plan.batch_sizes) | {chosen[0]}):
        ceiling = measure_model_ceiling(servable, pool.take(max(plan.model_ceiling_items, batch_size)),
                                        batch_size, plan.model_ceiling_s, ctx.torch_threads)
        say(f"[{workload.name}] model ceiling, batch {batch_size}: {ceiling.items_per_s:,.0f} items/s "
            f"({ceiling.batch_ms_p50:.2f} ms a batch, forward only)")
        result.model_ceiling.append(ceiling)

    pairs = plan.grid(*chosen)
    result.grid = run_grid(ctx, redis_url, workload, servable, pool, plan, chosen, pairs[:1])
    _kafka_ceiling(ctx, workload, pool, plan, result)
    result.naive = _plain_run(ctx, workload, "naive", pool.take(plan.naive_requests),
                              lambda t: commands.naive(ctx.bootstrap, t, workload.model, ctx.torch_threads),
                              plan.run_timeout_s)
    result.grid += run_grid(ctx, redis_url, workload, servable, pool, plan, chosen, pairs[1:])
    if "fast_path" in workload.checks:
        _confluent(ctx, redis_url, workload, servable, pool, plan, chosen, result)
    result.targets = evaluate(result, workload.checks, *chosen)
    result.seconds = time.monotonic() - started
    return result


def _kafka_ceiling(ctx: RunContext, workload: Workload, pool: RequestPool, plan: Plan,
                   result: WorkloadResult) -> None:
    reference = min(result.grid[0].latency, key=lambda r: abs(r.load - LATENCY_LOAD), default=None)
    latency: list[LatencyRun] = []

    def after_drain(topics: RunTopics, _run: ThroughputRun) -> None:
        if reference is not None:
            rate = reference.offered_per_s
            latency.append(open_loop(ctx.bootstrap, topics.requests, topics.replies,
                                     pool.take(max(10, round(rate * plan.open_loop_s))), rate, reference.load,
                                     plan.warmup_s, ctx.progress, stages=False, kafka_client=ctx.load_client))

    result.kafka_ceiling = _plain_run(ctx, workload, "kafka-ceiling", pool.take(plan.ceiling_requests),
                                      lambda t: commands.kafka_ceiling(ctx.bootstrap, t, result.reply_bytes),
                                      plan.run_timeout_s, after_drain)
    result.kafka_ceiling_latency = latency[0] if latency else None
    if latency:
        x = latency[0]
        say(f"  open loop at {x.achieved_per_s:,.0f}/s: p50 {x.p50_ms or 0:.0f} p95 {x.p95_ms or 0:.0f} "
            f"p99 {x.p99_ms or 0:.0f} ms (Kafka round trips alone)")


def _confluent(ctx: RunContext, redis_url: str, workload: Workload, servable: Servable, pool: RequestPool,
               plan: Plan, chosen: tuple[int, int], result: WorkloadResult) -> None:
    """The second transport side by side: its bare loop, streamscore on it (every load of the plan), and
    streamscore on it in exactly-once mode, one transaction per step (the default) and one per
    EXACTLY_ONCE_INTERVAL_MS."""
    result.confluent_ceiling = _plain_run(
        ctx, workload, "confluent-ceiling", pool.take(plan.ceiling_requests),
        lambda t: commands.confluent_ceiling(ctx.bootstrap, t, result.reply_bytes), plan.run_timeout_s)
    on_confluent = replace(ctx, worker_args=(*ctx.worker_args, "--kafka-client", "confluent"))
    longer = replace(plan, requests=plan.ceiling_requests)  # a faster contender needs more to be timed
    [result.confluent] = run_grid(on_confluent, redis_url, workload, servable, pool, longer, chosen, [chosen])
    exactly_once = replace(on_confluent, worker_args=(*on_confluent.worker_args, "--delivery", "exactly-once"))
    result.confluent_exactly_once = _exactly_once_run(exactly_once, redis_url, workload, pool, longer, chosen,
                                                      "confluent-exactly-once")
    spanning = replace(exactly_once, worker_args=(*exactly_once.worker_args,
                                                  "--commit-interval-ms", str(EXACTLY_ONCE_INTERVAL_MS)))
    result.confluent_exactly_once_interval = _exactly_once_run(
        spanning, redis_url, workload, pool, longer, chosen, f"confluent-exactly-once-{EXACTLY_ONCE_INTERVAL_MS}ms")


def _exactly_once_run(ctx: RunContext, redis_url: str, workload: Workload, pool: RequestPool, plan: Plan,
                      chosen: tuple[int, int], what: str) -> ThroughputRun:
    return _plain_run(ctx, workload, what, pool.take(plan.requests),
                      lambda t: commands.worker(ctx.bootstrap, redis_url, t, workload.model, *chosen,
                                                ctx.torch_threads, ctx.worker_args),
                      plan.run_timeout_s, from_worker=True)


def _plain_run(ctx: RunContext, workload: Workload, what: str, bodies: list[dict[str, object]],
               command: commands.CommandFor, timeout_s: float, after_drain: AfterDrain | None = None,
               from_worker: bool = False) -> ThroughputRun:
    say(f"[{workload.name}] {what}: {len(bodies):,} requests")
    run = closed_loop(ctx, f"{workload.name}-{what}", bodies, command, timeout_s, from_worker=from_worker,
                      after_drain=after_drain)
    rate = f"{run.per_s:,.0f} req/s" if run.per_s else "no throughput"
    cpu = f", {run.cpu_us_per_request:,.0f} us CPU a request" if run.cpu_us_per_request else ""
    say(f"  {rate} ({run.replies:,} replies in {run.seconds or 0:.1f} s{cpu})"
        + (f"  [{run.note}]" if run.note else ""))
    return run
