"""``python -m tests.chaos``: run the chaos scenarios and print a table per scenario, then a summary.

Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL (``make chaos`` starts the local
services and sets them). Scenarios c and d stop and start the services, so
they run only against deploy/local/services.sh's own. Exit code 0 when every
scenario that ran kept its promise, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.chaos.local_services import SCRIPT
from tests.chaos.report import scenario_block, summary_table, write_json
from tests.chaos.run import run_scenario
from tests.chaos.scenarios import SCENARIOS, SIZES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="scenarios to run, e.g. a,c (default: all)")
    parser.add_argument("--out", type=Path, help="results.json and worker logs (default: a new folder in /tmp)")
    parser.add_argument("--seed", type=int, default=20261130, help="random moments of kills")
    parser.add_argument("--kafka-client", default="kafka-python,confluent",
                        help="the workers' Kafka client libraries, a table each (default: both)")
    parser.add_argument("--secure", action="store_true",
                        help="over the local services' secured endpoints (Kafka SASL_SSL, Redis TLS): "
                             "deploy/local/services.sh env --secure")
    args = parser.parse_args(argv)
    keys = [key.strip() for key in args.only.split(",") if key.strip()]
    unknown = [key for key in keys if key not in SCENARIOS]
    secure_env = _secure_env() if args.secure else {}
    bootstrap = secure_env.get("KAFKA_BOOTSTRAP_SERVERS") or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    redis_url = secure_env.get("REDIS_URL") or os.environ.get("REDIS_URL")
    if unknown or not bootstrap or not redis_url:
        parser.error(f"unknown scenarios {unknown} (known: {', '.join(SCENARIOS)})" if unknown else
                     "set KAFKA_BOOTSTRAP_SERVERS and REDIS_URL (eval \"$(deploy/local/services.sh up)\"), "
                     "or run `make chaos`")
    out = args.out or Path(f"/tmp/streamscore-chaos-{time.strftime('%Y%m%d-%H%M%S')}")
    results = []
    for client in [name.strip() for name in args.kafka_client.split(",") if name.strip()]:
        for key in keys:
            print(f"chaos: scenario {key}. {SCENARIOS[key].title} ({args.size}, {client})", file=sys.stderr,
                  flush=True)
            result = run_scenario(SCENARIOS[key], SIZES[args.size], bootstrap, redis_url, out / client, args.seed,
                                  verbose=True, secure_env=secure_env, kafka_client=client)
            print(scenario_block(result), flush=True)
            results.append(result)
            write_json(results, out / "results.json")
        print(f"workers on {client}:")
        print(summary_table([r for r in results if r.kafka_client == client]))
    print(f"results: {out / 'results.json'}")
    return 1 if any(r.status == "FAIL" for r in results) else 0


def _secure_env() -> dict[str, str]:
    printed = subprocess.run([str(SCRIPT), "env", "--secure"], capture_output=True, text=True, check=True).stdout
    return dict(line.removeprefix("export ").split("=", 1) for line in printed.splitlines() if "=" in line)


if __name__ == "__main__":
    sys.exit(main())
