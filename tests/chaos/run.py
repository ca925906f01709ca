"""One chaos scenario from start to tally: topics, workers, load, faults, drain, stop, count, check."""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from producer.topics import create_topics
from tests.chaos.fleet import Fleet
from tests.chaos.load import Load
from tests.chaos.local_services import LocalServices
from tests.chaos.steps import LiveReplies, StepFigures, measure_steps
from tests.chaos.tally import ReplyReader, Tally, count
from tests.integration.kit import Topics, wait_until
from worker.core.security import KafkaSecurity

CRASH_WINDOW_MS = 5_000  # acknowledged reply -> done mark takes milliseconds; 5 s allows for a loaded machine
# The workers' session timeout. For the group a broker outage lasts until every member's session has been
# renewed or expired after the broker is back: until then a member may still answer for a partition the group
# has already moved (it learns so at its next poll).
SESSION_TIMEOUT_MS = 6_000


@dataclass(frozen=True)
class Size:
    """How long and how hard a scenario runs."""

    name: str
    rate: float  # requests per second, for the whole scenario
    calm_s: float  # load before the first fault and after the last
    kills: int  # a: SIGKILLs
    kill_gap_s: tuple[float, float]  # a: random time between kills
    phase_s: float  # b: time at each group size
    outages: int  # c, d: stop/start cycles
    outage_s: float  # c, d: how long the service stays down
    stalls: int  # e: batches slower than max.poll.interval.ms
    stall_s: float  # e: how slow
    drain_s: float  # after the load stops, the longest wait for every reply


@dataclass
class Context:
    """What a scenario's fault injection works with while the load runs."""

    fleet: Fleet
    services: LocalServices
    size: Size
    rng: random.Random
    stall_trigger: Path
    timeline: list[tuple[float, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a fault that did not happen as planned
    broker_outages: list[tuple[float, float]] = field(default_factory=list)  # c: (stopped, back), wall clock
    steps: list[tuple[float, str]] = field(default_factory=list)  # (wall time, name): see tests/chaos/steps.py
    verbose: bool = False

    def note(self, what: str) -> None:
        self.timeline.append((time.time(), what))
        if self.verbose:
            print(f"  {time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)

    def step(self, name: str) -> None:
        """Begin a step, measured apart (its longest gap, its latency) until the next one or the load's end."""
        self.steps.append((time.time(), name))
        self.note(f"step: {name}")

    def hold(self, seconds: float) -> None:
        """Let the load run for a while (the scenario's timing, not a wait for a condition)."""
        time.sleep(seconds)


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    promise: str  # what the worker promises here, as the checks read it
    inject: Callable[[Context], str] | None  # breaks things while the load runs; returns what it did
    workers: int = 2
    partitions: int = 4  # of the requests and replies topics
    worker_args: tuple[str, ...] = ()
    worker_env: dict[str, str] = field(default_factory=dict)
    duplicates_allowed: str = "none"  # "none", or "crash window": only duplicates a worker death explains
    restarts_allowed: bool = False  # may workers exit on their own (to be restarted)?
    rebalances_allowed: bool = True  # may the group rebalance once the load runs?
    needs_local_services: bool = False
    not_built: str = ""  # why it cannot run yet
    step_gap_bound_s: float | None = None  # the longest gap a step may show; None: measured, not bounded


@dataclass
class ScenarioResult:
    key: str
    title: str
    size: str
    status: str  # "pass", "FAIL" or "not run"
    promise: str = ""
    kafka_client: str = "kafka-python"  # the workers'
    problems: list[str] = field(default_factory=list)
    faults: str = ""
    tally: Tally | None = None
    kills: int = 0
    restarts: int = 0
    crash_reasons: list[str] = field(default_factory=list)  # why each restarted worker had exited
    rebalances: int = 0  # partitions_assigned events from the load's start to the final stop (one per member)
    stop_codes: list[int | None] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    load_started: float = 0.0  # wall time
    log_dir: str = ""
    timeline: list[tuple[float, str]] = field(default_factory=list)
    steps: list[StepFigures] = field(default_factory=list)
    exits: list[dict[str, Any]] = field(default_factory=list)


def run_scenario(scenario: Scenario, size: Size, bootstrap: str, redis_url: str, out_dir: Path,
                 seed: int = 0, verbose: bool = False, secure_env: dict[str, str] | None = None,
                 kafka_client: str = "kafka-python", replication: int = 1) -> ScenarioResult:
    """``secure_env``: the variables of a secured way in (``services.sh env --secure``), given to the workers
    and read by the harness's own clients; the services to stop and start are then the secured ones.
    ``kafka_client``: the workers' Kafka client library (--kafka-client). ``replication``: the replication
    factor of the scenario's topics (3 on the three-broker cluster)."""
    result = ScenarioResult(scenario.key, scenario.title, size.name, "not run", scenario.promise, kafka_client)
    secure_env = secure_env or {}
    security = KafkaSecurity.from_sources(None, secure_env)
    services = LocalServices(bootstrap, redis_url, "--secure" if secure_env else "")
    reason = scenario.not_built or (scenario.needs_local_services and services.not_controllable())
    if scenario.inject is None or reason:
        result.problems = [str(reason or "nothing to inject")]
        return result
    started = time.monotonic()
    topics = _create_topics(bootstrap, scenario.key, scenario.partitions, security, replication)
    log_dir = out_dir / f"{scenario.key}-{topics.requests}"
    result.log_dir = str(log_dir)
    env = {**secure_env, **scenario.worker_env, "CHAOS_STALL_TRIGGER": str(log_dir / "stall-trigger"),
           "CHAOS_STALL_S": str(size.stall_s)}  # read by tests.chaos.slow_model only
    worker_args = ("--kafka-client", kafka_client, *scenario.worker_args)
    with Fleet(bootstrap, redis_url, topics, log_dir, worker_args, env, name=f"{scenario.key}-w") as fleet:
        context = Context(fleet, services, size, random.Random(seed), log_dir / "stall-trigger", verbose=verbose)
        result.tally, result.stop_codes = _drive(scenario, context, bootstrap, security, topics, result)
    _describe_fleet(result, fleet)
    result.timeline = context.timeline
    result.seconds = time.monotonic() - started
    result.problems = context.problems + check(scenario, result)
    result.status = "FAIL" if result.problems else "pass"
    if not result.problems:  # a failed run's topics stay, to be read
        topics.delete(bootstrap, security)
    return result


def _describe_fleet(result: ScenarioResult, fleet: Fleet) -> None:
    result.kills = sum(1 for e in fleet.exits if e.how == "killed")
    result.restarts = fleet.restarts()
    result.crash_reasons = fleet.crash_reasons()
    result.rebalances = fleet.assignments_under_load(result.load_started)
    result.exits = [{"slot": e.slot, "pid": e.pid, "how": e.how, "code": e.code, "at": e.at, "log": str(e.log_path)}
                    for e in fleet.exits]
    result.counters = dict(fleet.stopped_counters())
    result.events = dict(fleet.events())


def _drive(scenario: Scenario, context: Context, bootstrap: str, security: KafkaSecurity, topics: Topics,
           result: ScenarioResult) -> tuple[Tally, list[int | None]]:
    fleet = context.fleet
    for _ in range(scenario.workers):
        fleet.add()
    for slot in fleet.live():
        fleet.wait_assigned(slot)
    load = Load(bootstrap, topics.requests, context.size.rate, prefix=scenario.key, seed=context.rng.randrange(1 << 30),
                security=security)
    with LiveReplies(bootstrap, topics.replies, security) as live:
        load.start()
        result.load_started = time.time()
        context.note(f"load started at {context.size.rate:g}/s with {scenario.workers} worker(s)")
        context.step(f"{scenario.workers} worker{'s' if scenario.workers > 1 else ''}")
        try:
            if scenario.inject is not None:
                result.faults = scenario.inject(context)
        finally:
            sent = load.stop()
            load_stopped = time.time()
            context.note(f"load stopped: {len(sent.acked)} acknowledged, {len(sent.failed)} failed")
        reader = ReplyReader(bootstrap, topics.replies, security)
        try:
            _wait_answered(reader, sent.acked, context)
            result.steps = measure_steps(context.steps, load_stopped, live.stop(),
                                         {request_id: sent.sent_at[request_id] for request_id in sent.acked})
            # A worker restarted a moment ago may still be importing torch, before its SIGTERM
            # handler exists; the final stop is meant to check a running worker's clean exit.
            fleet.wait_started()
            stop_codes = list(fleet.stop_all().values())
            context.note(f"workers stopped with exit codes {stop_codes}")
            reader.read_to_end()
        finally:
            reader.close()
    # A broker outage disrupts the replies in flight during it: an ack may come only after the group
    # moved the partition, and the new owner answers the record again (docs/guarantees.md).
    disruptions_ms = [(int(e.at * 1000), int(e.at * 1000)) for e in fleet.exits if e.how in ("killed", "crashed")]
    disruptions_ms += [(int(stopped * 1000), int(back * 1000) + SESSION_TIMEOUT_MS)
                       for stopped, back in context.broker_outages]
    return count(sent.acked, sent.failed, reader.replies, disruptions_ms, CRASH_WINDOW_MS), stop_codes


def _wait_answered(reader: ReplyReader, acked: set[str], context: Context) -> None:
    def all_answered() -> bool:
        reader.read(0.5)
        return acked <= reader.answered

    try:
        wait_until(all_answered, context.size.drain_s, "every request to be answered", interval_s=0)
        context.note("every acknowledged request answered")
    except AssertionError:
        context.note(f"{len(acked - reader.answered)} requests unanswered after {context.size.drain_s:g} s")


def check(scenario: Scenario, result: ScenarioResult) -> list[str]:
    """What broke the scenario's promise; empty when it held."""
    tally = result.tally
    if tally is None:
        return ["nothing was counted"]
    problems = []
    if tally.lost:
        problems.append(f"{tally.lost} request IDs lost (e.g. {', '.join(tally.lost_ids[:3])})")
    if tally.from_two_records:
        problems.append(f"{tally.from_two_records} IDs answered from two different records")
    if scenario.duplicates_allowed == "none" and tally.duplicate_replies:
        problems.append(f"{tally.duplicate_replies} duplicate replies where none may occur "
                        f"(e.g. {', '.join(tally.duplicate_ids[:3])})")
    elif tally.outside_window:
        problems.append(f"{tally.outside_window} duplicate replies not explained by a worker death or broker stop "
                        f"(e.g. {', '.join(tally.unexplained_duplicate_ids[:3])})")
    if result.restarts and not scenario.restarts_allowed:
        problems.append(f"{result.restarts} worker(s) exited on their own and were restarted")
    crashes = [reason for reason in result.crash_reasons if '"uncaught_exception"' in reason]
    if crashes:  # an exit the worker chose says why; a traceback means an error it failed to handle
        problems.append(f"{len(crashes)} worker(s) died of an uncaught exception")
    if result.rebalances and not scenario.rebalances_allowed:
        problems.append(f"the group rebalanced ({result.rebalances} partitions_assigned events under load)")
    bound = scenario.step_gap_bound_s
    problems += [f"step {step.step}: partition {step.gap_partition} went {step.longest_gap_s:.1f} s without a reply "
                 f"(the bound is {bound:g} s)" for step in result.steps if bound is not None
                 and step.longest_gap_s > bound]
    bad_stops = [code for code in result.stop_codes if code != 0]
    if bad_stops:
        problems.append(f"workers did not stop cleanly on SIGTERM: exit codes {bad_stops} (None: hung, killed)")
    return problems


def _create_topics(bootstrap: str, key: str, partitions: int, security: KafkaSecurity, replication: int) -> Topics:
    base = f"chaos-{key}-{uuid.uuid4().hex[:8]}"
    topics = Topics(f"{base}.requests", f"{base}.replies", f"{base}.dlq")
    create_topics(bootstrap, {topics.requests: partitions, topics.replies: partitions, topics.dlq: 1},
                  security=security, replication=replication)
    return topics
