"""streamscore over a grid of batch sizes and wait limits.

Each point is one worker process: first a closed-loop run over a pre-filled
topic (throughput), then, with the same worker idle and its backlog gone,
open-loop runs at fractions of that throughput (latency). The chosen
configuration gets every load of the plan; the other points one.
"""

from __future__ import annotations

from functools import partial

from bench import commands
from bench.model_ceiling import measure_model_ceiling
from bench.openloop import open_loop
from bench.plan import Plan
from bench.results import GridPoint, ThroughputRun
from bench.runs import RunContext, closed_loop, say
from bench.topics import RunTopics
from bench.workloads import RequestPool, Workload
from worker.models import Servable

# A worker that stalls or dies gets one more try on fresh topics; the failed try stays in the results
# (``failed_attempts``) and makes the run exit 1, since it is a bug in the worker, not noise.
ATTEMPTS_AFTER_A_STALL = 1


def run_grid(ctx: RunContext, redis_url: str, workload: Workload, servable: Servable, pool: RequestPool,
             plan: Plan, chosen: tuple[int, int], pairs: list[tuple[int, int]]) -> list[GridPoint]:
    """One worker per (batch size, wait) pair, in order; the chosen pair gets every load of the plan.

    Each point's model ceiling is measured again just before its worker
    starts, so that the two figures it is compared with are seconds apart.
    """
    points = []
    for batch_size, wait_ms in pairs:
        loads = plan.loads if (batch_size, wait_ms) == chosen else (plan.grid_load,)
        point = GridPoint(batch_size, wait_ms, ThroughputRun("streamscore", 0, 0, None, None, False))
        point.model_ceiling = measure_model_ceiling(servable, pool.take(max(plan.model_ceiling_items, batch_size)),
                                                    batch_size, plan.model_ceiling_s, ctx.torch_threads)
        say(f"[{workload.name}] streamscore batch {batch_size}, wait {wait_ms} ms: "
            f"{plan.requests:,} requests, then open loop at {', '.join(f'{x:.0%}' for x in loads)} "
            f"(model ceiling now: {point.model_ceiling.items_per_s:,.0f} items/s)")
        command = partial(_worker_command, ctx, redis_url, workload.model, batch_size, wait_ms)
        after = partial(_open_loops, ctx, pool, plan, loads, point)
        for attempt in range(1 + ATTEMPTS_AFTER_A_STALL):
            label = f"{workload.name}-b{batch_size}-w{wait_ms}" + (f"-retry{attempt}" if attempt else "")
            point.throughput = closed_loop(ctx, label, pool.take(plan.requests), command, plan.run_timeout_s,
                                           from_worker=True, after_drain=after)
            say(f"  {_summary(point)}")
            if point.throughput.per_s is not None or attempt == ATTEMPTS_AFTER_A_STALL:
                break
            point.failed_attempts.append(point.throughput.note)
        points.append(point)
    return points


def _worker_command(ctx: RunContext, redis_url: str, model: str, batch_size: int, wait_ms: int,
                    topics: RunTopics) -> list[str]:
    return commands.worker(ctx.bootstrap, redis_url, topics, model, batch_size, wait_ms, ctx.torch_threads,
                           ctx.worker_args)


def _open_loops(ctx: RunContext, pool: RequestPool, plan: Plan, loads: tuple[float, ...], point: GridPoint,
                topics: RunTopics, run: ThroughputRun) -> None:
    if not run.per_s:
        return
    for load in loads:
        rate = load * run.per_s
        bodies = pool.take(max(10, round(rate * plan.open_loop_s)))
        point.latency.append(open_loop(ctx.bootstrap, topics.requests, topics.replies, bodies, rate, load,
                                       plan.warmup_s, ctx.progress, kafka_client=ctx.load_client))


def _summary(point: GridPoint) -> str:
    t = point.throughput
    text = f"{t.per_s:,.0f} req/s closed loop" if t.per_s else "no throughput"
    if t.cpu_us_per_request:
        text += f" ({t.cpu_us_per_request:,.0f} us CPU a request)"
    for lat in point.latency:
        text += (f"; {lat.load:.0%} load ({lat.achieved_per_s:,.0f}/s): p50 {_ms(lat.p50_ms)} p95 {_ms(lat.p95_ms)}"
                 f" p99 {_ms(lat.p99_ms)} ms")
    return text + (f"  [{t.note}]" if t.note else "")


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"
