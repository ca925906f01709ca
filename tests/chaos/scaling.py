"""Scenario h (scale 1 -> 4 -> 8 -> 2 -> 1 under load) on every client, group protocol and delivery.

    python -m tests.chaos.scaling [--runs 5] [--size full] [--table docs/chaos/scaling-DATE.md]

On the three-broker cluster (``eval "$(deploy/local/cluster.sh up)"``, its bootstrap in
KAFKA_BOOTSTRAP_SERVERS) add ``--replication 3``.

Each combination runs ``--runs`` times. A run passes when no request is lost,
none is answered twice (read_committed), every worker stops cleanly and no
step leaves a partition without a reply longer than the bound
(tests/chaos/scenarios.py, STEP_GAP_BOUND_S). The table gives, for each
step, the median and the worst of the runs' longest gaps and p99 latencies
(tests/chaos/steps.py says how they are measured). ``consumer`` is the
KIP-848 group protocol; a client that does not speak it is left out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tests.chaos.report import scenario_block, write_json
from tests.chaos.run import ScenarioResult, run_scenario
from tests.chaos.scenarios import SCENARIOS, SESSION, SIZES, STEP_GAP_BOUND_S
from worker.core.clients import CLIENTS

PROTOCOLS = {  # the group protocol's worker flags
    "range": (*SESSION, "--assignor", "range"),
    "cooperative-sticky": (*SESSION, "--assignor", "cooperative-sticky"),
    "consumer": ("--kafka-group-protocol", "consumer"),  # KIP-848: the broker assigns, no session flag
}
DELIVERIES = {
    "at-least-once": (),
    "exactly-once": ("--delivery", "exactly-once", "--commit-interval-ms", "100"),
}


@dataclass(frozen=True)
class Combination:
    client: str
    protocol: str
    delivery: str

    @property
    def name(self) -> str:
        return f"{self.client}, {self.protocol}, {self.delivery}"


def combinations(clients: list[str], protocols: list[str], deliveries: list[str]) -> list[Combination]:
    """Every combination the client speaks (only some speak the consumer protocol)."""
    return [Combination(client, protocol, delivery) for client in clients for protocol in protocols
            for delivery in deliveries
            if protocol != "consumer" or "consumer" in CLIENTS[client].group_protocols]


def run(combination: Combination, size: str, bootstrap: str, redis_url: str, out: Path, seed: int,
        replication: int) -> ScenarioResult:
    scenario = replace(SCENARIOS["h"], worker_args=(*PROTOCOLS[combination.protocol],
                                                    *DELIVERIES[combination.delivery]))
    folder = out / combination.client / combination.protocol / combination.delivery
    return run_scenario(scenario, SIZES[size], bootstrap, redis_url, folder, seed, verbose=True,
                        kafka_client=combination.client, replication=replication)


def markdown(runs: dict[Combination, list[ScenarioResult]], command: str, bootstrap: str) -> str:
    """The summary table (medians and worst over the runs, by step) and each run's own figures."""
    brokers = len(bootstrap.split(","))
    lines = [f"# Scaling under load: 1 -> 4 -> 8 -> 2 -> 1 workers ({time.strftime('%Y-%m-%d')})", "",
             f"`{command}`, on {brokers} broker{'s' if brokers > 1 else ''} ({bootstrap})", "",
             "Longest gap: the longest one request partition went without a reply arriving "
             "(read_committed), counted in the step that holds most of the wait; p99: the latency of the requests sent "
             f"in the step (tests/chaos/steps.py). Bound on every step's gap: {STEP_GAP_BOUND_S:g} s.", "",
             "| client | protocol | delivery | runs passed | lost | duplicates | step | longest gap, median | "
             "worst | p99, median | worst |", "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for combination, results in runs.items():
        passed = sum(r.status == "pass" for r in results)
        lost = sum(r.tally.lost for r in results if r.tally)
        duplicates = sum(r.tally.duplicate_replies for r in results if r.tally)
        for index, step in enumerate(results[0].steps):
            of_step = [r.steps[index] for r in results if len(r.steps) > index]
            gaps = [s.longest_gap_s for s in of_step]
            p99s = [s.p99_ms for s in of_step]
            head = (f"{combination.client} | {combination.protocol} | {combination.delivery} | "
                    f"{passed} of {len(results)} | {lost} | {duplicates}") if index == 0 else " |  |  |  |  | "
            lines.append(f"| {head} | {step.step} | {statistics.median(gaps):.2f} s | {max(gaps):.2f} s | "
                         f"{statistics.median(p99s):.0f} ms | {max(p99s):.0f} ms |")
    lines += ["", "## Each run", ""]
    for combination, results in runs.items():
        for number, result in enumerate(results, 1):
            lines += [f"### {combination.name}, run {number}: {result.status}", "", "```",
                      scenario_block(result).rstrip(), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each combination (default: 5)")
    parser.add_argument("--size", choices=sorted(SIZES), default="full",
                        help="small: 6 s at each group size, 150 requests/s; full: 20 s, 300/s")
    parser.add_argument("--kafka-client", default=",".join(CLIENTS), help="the workers' clients (default: all)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help=f"of {', '.join(PROTOCOLS)}")
    parser.add_argument("--deliveries", default=",".join(DELIVERIES), help=f"of {', '.join(DELIVERIES)}")
    parser.add_argument("--out", type=Path, help="worker logs and results.json (default: a new folder in /tmp)")
    parser.add_argument("--table", type=Path, help="write the Markdown tables here too")
    parser.add_argument("--seed", type=int, default=20261204)
    parser.add_argument("--replication", type=int, default=1,
                        help="replication factor of the topics (default: 1; 3 on the three-broker cluster)")
    args = parser.parse_args(argv)
    chosen = {name: [v.strip() for v in value.split(",") if v.strip()] for name, value in
              (("client", args.kafka_client), ("protocol", args.protocols), ("delivery", args.deliveries))}
    known = {"client": CLIENTS, "protocol": PROTOCOLS, "delivery": DELIVERIES}
    unknown = [f"{kind} {value!r}" for kind, values in chosen.items() for value in values if value not in known[kind]]
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if unknown or not bootstrap or not redis_url or args.runs < 1:
        parser.error(f"unknown {', '.join(unknown)}" if unknown else "--runs must be at least 1" if args.runs < 1
                     else "set KAFKA_BOOTSTRAP_SERVERS and REDIS_URL (eval \"$(deploy/local/services.sh up)\")")
    out = args.out or Path(f"/tmp/streamscore-scaling-{time.strftime('%Y%m%d-%H%M%S')}")
    runs: dict[Combination, list[ScenarioResult]] = {}
    for combination in combinations(chosen["client"], chosen["protocol"], chosen["delivery"]):
        for number in range(args.runs):
            print(f"scaling: {combination.name}, run {number + 1} of {args.runs} ({args.size})", file=sys.stderr,
                  flush=True)
            result = run(combination, args.size, bootstrap, redis_url, out / f"run{number + 1}", args.seed + number,
                         args.replication)
            print(scenario_block(result), flush=True)
            runs.setdefault(combination, []).append(result)
            write_json([r for results in runs.values() for r in results], out / "results.json")
    table = markdown(runs, "python -m tests.chaos.scaling " + " ".join(argv if argv is not None else sys.argv[1:]),
                     bootstrap)
    print(table.split("\n## Each run")[0])
    if args.table:
        args.table.write_text(table)
    print(f"results: {out / 'results.json'}")
    return 1 if any(r.status != "pass" for results in runs.values() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
