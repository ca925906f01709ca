"""``python -m bench.profile_worker``: where a worker's CPU time goes, per request.

Fills a fresh topic with requests, then runs the streaming worker in this
process under cProfile until every request is consumed, and prints the
functions with the most cumulative time, plus a summary by area (Kafka fetch,
reply sends, dedup, acks and commits, decoding, the model). Needs
KAFKA_BOOTSTRAP_SERVERS and REDIS_URL, like ``python -m bench``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

from bench.topics import RunTopics, default_load_client, prefill
from bench.workloads import WORKLOADS
from worker.app import build_worker
from worker.core.clock import SystemClock
from worker.core.settings import Settings, add_flags
from worker.core.shutdown import StopRequest

# Functions whose cumulative time is one area of the worker's work, in the loop's order.
AREAS = {
    "poll (Kafka fetch)": "source.py:poll",
    "decode and check": "json_requests.py:decode",
    "dedup claim": "dedup_gate.py:claim",
    "model": "runner.py:run",
    "answer (encode and send)": "replies.py:_answer_in_one_pass",
    "of it, reply send (Kafka client)": "sends.py:send",
    "wait for acks": "sends.py:settle",
    "dedup done marks": "dedup_gate.py:complete",
    "offset commit": "source.py:commit_async",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_worker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="churn", choices=sorted(WORKLOADS))
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--top", type=int, default=25, help="functions to list (default 25)")
    parser.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime"),
                        help="list by time inside and below each function, or inside it only (default cumulative)")
    parser.add_argument("--no-profile", action="store_true",
                        help="time the run without cProfile (whose overhead slows Python code most)")
    parser.add_argument("worker_args", nargs="*",
                        help="after --: settings for the worker, e.g. -- --max-batch-size 256")
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make up`, then eval its env)",
              file=sys.stderr)
        return 2

    profiler = None if args.no_profile else cProfile.Profile()
    wall_s, cpu_s = timed_run(bootstrap, args.workload, args.requests, args.worker_args, profiler)
    print(f"\n{args.requests:,} requests in {wall_s:.1f} s ({args.requests / wall_s:,.0f} req/s); "
          f"process CPU {cpu_s / args.requests * 1e6:.0f} µs per request (all threads)")
    if profiler is not None:
        _report(pstats.Stats(profiler), args.requests, args.top, args.sort)
    return 0


def timed_run(bootstrap: str, workload: str, requests: int, worker_args: list[str],
              profiler: cProfile.Profile | None = None) -> tuple[float, float]:
    """Fill a fresh topic with ``requests``, then step a worker in this process until it answered them all.

    Returns (wall seconds, process CPU seconds) of the stepping, profiled by ``profiler`` when given.
    """
    topics = RunTopics.fresh(f"profile-{workload}")
    topics.create(bootstrap, partitions=4)
    try:
        prefill(bootstrap, topics.requests, WORKLOADS[workload].requests(requests), progress=False,
                kafka_client=default_load_client())
        worker = build_worker(_settings(workload, topics, worker_args), StopRequest(SystemClock()))
        started, cpu_started = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        while worker.stats.replied_ok < requests:
            worker.step()
        if profiler is not None:
            profiler.disable()
        wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
        worker.stop()
        worker.run()  # drains, commits and closes
    finally:
        topics.delete(bootstrap)
    return wall_s, cpu_s


def _settings(workload: str, topics: RunTopics, worker_args: list[str]) -> Settings:

    flags = argparse.ArgumentParser()
    add_flags(flags)
    given = flags.parse_args(["--model", WORKLOADS[workload].model, "--requests-topic", topics.requests,
                              "--reply-topic", topics.replies, "--dead-letter-topic", topics.dlq,
                              "--group", topics.group, "--dedup-namespace", topics.group,
                              "--log-format", "json", "--stats-interval-s", "0", "--torch-threads", "1",
                              *worker_args])
    return Settings.from_sources(given)


def _report(stats: pstats.Stats, requests: int, top: int, sort: str) -> None:
    print("\nmain-thread time by area (cumulative, µs per request):")
    table = stats.stats  # type: ignore[attr-defined]
    for area, where in AREAS.items():
        file_part, function = where.split(":")
        total = sum(entry[3] for (path, _line, name), entry in table.items()
                    if path.endswith(file_part) and name == function)
        print(f"  {area:<28} {total / requests * 1e6:8.1f}")
    print()
    stats.sort_stats(sort).print_stats(top)


if __name__ == "__main__":
    sys.exit(main())
