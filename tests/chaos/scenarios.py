"""The chaos scenarios: what each one breaks while the load runs, and what it promises.

Every scenario promises that no request ID the broker acknowledged goes
unanswered. Duplicate replies are allowed only where docs/guarantees.md documents
them: a worker that dies after the broker acknowledged a reply and before the
ID's done mark was written re-scores it on redelivery (scenarios a and c), and
so does a broker that stops while a reply's acknowledgement is outstanding, if
the group moves the partition before the ack arrives (scenario c).
Scenario f kills workers as a does, in exactly-once mode: the replies are read
with isolation_level=read_committed (as in every scenario), and none may be a
duplicate. Scenario h scales the group 1 -> 4 -> 8 -> 2 -> 1 under load and
bounds each step's longest gap in a partition's replies. Scenario g stops Redis as d does, in exactly-once mode.
Workers run with ``--session-timeout-ms 6000`` so that a dead worker's
partitions move in seconds rather than 45 s. In d, ``--max-poll-interval-ms``
is shorter than the Redis outage: a worker that stopped polling while Redis is
away would be dropped from the group. d and e keep it at the session timeout,
not below: librdkafka refuses a poll interval shorter than the session
timeout, and the broker a session timeout under 6 s (group.min.session.timeout.ms).
"""

from __future__ import annotations

import time

from tests.chaos.run import SESSION_TIMEOUT_MS, Context, Scenario, Size

SESSION = ("--session-timeout-ms", str(SESSION_TIMEOUT_MS))
STEP_GAP_BOUND_S = 10.0  # h: issue #38's bound on any partition's wait for a reply during a scaling step

SIZES = {
    "small": Size("small", rate=150, calm_s=4, kills=5, kill_gap_s=(2, 5), phase_s=6, outages=1, outage_s=8,
                  stalls=1, stall_s=10, drain_s=90),
    "full": Size("full", rate=300, calm_s=10, kills=12, kill_gap_s=(3, 10), phase_s=20, outages=3, outage_s=12,
                 stalls=3, stall_s=12, drain_s=240),
}


def kill_workers(ctx: Context) -> str:
    """a. SIGKILL a random worker at random moments; each starts again at once.

    The next kill comes a random while after the restarted worker owns
    partitions again, so that every kill hits a worker at work.
    """
    ctx.hold(ctx.size.calm_s)
    for number in range(ctx.size.kills):
        ctx.hold(ctx.rng.uniform(*ctx.size.kill_gap_s))
        slot = ctx.rng.choice(ctx.fleet.live())
        ctx.fleet.kill(slot)
        ctx.note(f"kill {number + 1}: SIGKILL worker slot {slot}, restarted")
        ctx.fleet.wait_assigned(slot)
        ctx.note(f"kill {number + 1}: the new worker in slot {slot} owns partitions")
    ctx.hold(ctx.size.calm_s)
    return f"{ctx.size.kills} SIGKILLs"


def scale_out_and_in(ctx: Context) -> str:
    """b. One worker, then two, then three in the group; then back to one by SIGTERM."""
    ctx.hold(ctx.size.phase_s)
    for _ in range(2):
        slot = ctx.fleet.add()
        ctx.fleet.wait_assigned(slot)
        ctx.note(f"scaled out: slot {slot} owns partitions, {len(ctx.fleet.live())} workers")
        ctx.hold(ctx.size.phase_s)
    for slot in sorted(ctx.fleet.live(), reverse=True)[:2]:
        code = ctx.fleet.stop(slot)
        ctx.note(f"scaled in: slot {slot} stopped with exit code {code}, {len(ctx.fleet.live())} workers")
        ctx.hold(ctx.size.phase_s)
    return "1 -> 2 -> 3 -> 2 -> 1 workers"


SCALING_STEPS = (4, 8, 2, 1)  # h: the group sizes after each step, from one worker


def scale_through_steps(ctx: Context) -> str:
    """h. 1 -> 4 -> 8 -> 2 -> 1 workers, each change made at once, as KEDA makes it.

    A scale-out starts its workers together and the step waits until each owns
    partitions; a scale-in SIGTERMs its workers together. Each step is measured
    apart (tests/chaos/steps.py): the longest a partition went unanswered, and
    the latency of the requests sent meanwhile.
    """
    ctx.hold(ctx.size.phase_s)
    for target in SCALING_STEPS:
        live = ctx.fleet.live()
        ctx.step(f"{len(live)} -> {target}")
        if target > len(live):
            added = [ctx.fleet.add() for _ in range(target - len(live))]
            for slot in added:
                ctx.fleet.wait_assigned(slot)
            ctx.note(f"scaled out: slots {added} own partitions")
        else:
            codes = ctx.fleet.stop_many(live[target:])
            ctx.note(f"scaled in: slots {sorted(codes)} stopped with exit codes {sorted(codes.values(), key=str)}")
            ctx.problems += [f"scale-in: worker slot {slot} exited {code} on SIGTERM (None: hung)"
                             for slot, code in codes.items() if code != 0]
        ctx.hold(ctx.size.phase_s)
    return " -> ".join(map(str, (1, *SCALING_STEPS))) + " workers, each step at once"


def restart_broker(ctx: Context) -> str:
    """c. Stop the broker (SIGTERM, a clean shutdown) and start it again."""
    ctx.hold(ctx.size.calm_s)
    for number in range(ctx.size.outages):
        stopped = time.time()
        took = ctx.services.stop_kafka()
        ctx.note(f"broker outage {number + 1}: stopped in {took:.1f} s")
        try:
            ctx.hold(ctx.size.outage_s)
        finally:
            took = ctx.services.start_kafka()
            ctx.broker_outages.append((stopped, time.time()))
            ctx.note(f"broker outage {number + 1}: started again in {took:.1f} s")
        ctx.hold(ctx.size.calm_s)
    return f"{ctx.size.outages} broker stop(s) of {ctx.size.outage_s:g} s + restart"


def restart_redis(ctx: Context) -> str:
    """d. Stop Redis and start it again (empty: it runs without persistence)."""
    ctx.hold(ctx.size.calm_s)
    for number in range(ctx.size.outages):
        ctx.services.stop_redis()
        ctx.note(f"Redis outage {number + 1}: stopped")
        try:
            ctx.hold(ctx.size.outage_s)
        finally:
            ctx.services.start_redis()
            ctx.note(f"Redis outage {number + 1}: started again")
        ctx.hold(ctx.size.calm_s)
    return f"{ctx.size.outages} Redis stop(s) of {ctx.size.outage_s:g} s + restart"


def stall_a_batch(ctx: Context) -> str:
    """e. One worker's batch sleeps past max.poll.interval.ms; the group moves its partitions meanwhile."""
    ctx.hold(ctx.size.calm_s)
    for number in range(ctx.size.stalls):
        ctx.stall_trigger.touch()
        ctx.note(f"stall {number + 1}: triggered ({ctx.size.stall_s:g} s in one batch)")
        ctx.hold(ctx.size.stall_s + ctx.size.calm_s)
        if ctx.stall_trigger.exists():
            ctx.stall_trigger.unlink()
            ctx.problems.append(f"stall {number + 1}: no worker took the trigger (no batch was scored)")
    return f"{ctx.size.stalls} batch(es) stalled {ctx.size.stall_s:g} s (max.poll.interval.ms {SESSION_TIMEOUT_MS})"


SCENARIOS = {
    "a": Scenario("a", "SIGKILL workers", "no loss; duplicates only in the crash window", kill_workers,
                  worker_args=(*SESSION,), duplicates_allowed="crash window"),
    "b": Scenario("b", "scale 1 -> 3 -> 1", "no loss, no duplicate (clean SIGTERM scale-in)", scale_out_and_in,
                  workers=1, worker_args=(*SESSION,)),
    "c": Scenario("c", "broker stop/start", "no loss; duplicates only in the window of a worker death or broker stop",
                  restart_broker, worker_args=(*SESSION,), duplicates_allowed="crash window",
                  restarts_allowed=True, needs_local_services=True),
    "d": Scenario("d", "Redis stop/start", "no loss, no duplicate, no restart, no rebalance: pause and resume",
                  restart_redis, worker_args=(*SESSION, "--max-poll-interval-ms", str(SESSION_TIMEOUT_MS)),
                  needs_local_services=True,
                  rebalances_allowed=False),
    "e": Scenario("e", "batch > max.poll.interval", "no loss, no duplicate from the late batch or commit",
                  stall_a_batch, worker_args=(*SESSION, "--max-poll-interval-ms", str(SESSION_TIMEOUT_MS),
                                              "--model", "tests.chaos.slow_model:stalling_linear",
                                              # inline for good: auto would move the model to a thread after the
                                              # first stall, and the later ones would not outlive the interval
                                              "--model-thread", "off")),
    "h": Scenario("h", "scale 1 -> 4 -> 8 -> 2 -> 1", "no loss, no duplicate, every step's longest gap bounded",
                  scale_through_steps, workers=1, partitions=8, worker_args=(*SESSION,),
                  step_gap_bound_s=STEP_GAP_BOUND_S),
    # Transactions span 100 ms of steps: a kill's rebalance finds the survivors' transactions open.
    "f": Scenario("f", "SIGKILL workers, exactly-once", "no loss, no duplicate seen by a read_committed reader",
                  kill_workers, worker_args=(*SESSION, "--delivery", "exactly-once", "--commit-interval-ms", "100")),
    # d in exactly-once mode: done marks of committed transactions must survive an outage at any moment.
    "g": Scenario("g", "Redis stop/start, exactly-once", "no loss, no duplicate seen by a read_committed reader, "
                  "no restart, no rebalance: pause and resume", restart_redis,
                  worker_args=(*SESSION, "--max-poll-interval-ms", str(SESSION_TIMEOUT_MS),
                               "--delivery", "exactly-once", "--commit-interval-ms", "100"),
                  needs_local_services=True, rebalances_allowed=False),
}
