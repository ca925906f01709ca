"""``python -m bench.profile_worker``: where a worker's CPU time goes, per request.

Fills a fresh topic with requests, then runs the streaming worker in this
process under cProfile until every request is consumed, and prints the
functions with the most cumulative time, plus a summary by area (Kafka fetch,
reply sends, dedup, acks and commits, decoding, the model). cProfile's times
are wall times, and its overhead falls on Python code most: ``--stages``
instead runs without a profiler and gives the loop thread's own CPU
(``time.thread_time``) in each stage of a step (of the model's, its forward
pass), beside the CPU of the other threads (librdkafka's, the claim
helper's; on Linux each thread's, by name) and the garbage collector's time. ``--floor`` runs, in the same
way, the churn job written by hand a poll at a time
(bench/confluent_columnar.py) instead of the worker, and gives its main
thread's CPU by stage: the two tables side by side show where the worker
spends more than a columnar design's floor. Needs KAFKA_BOOTSTRAP_SERVERS and
REDIS_URL, like ``python -m bench``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import operator
import os
import pstats
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from bench import confluent_columnar as columnar
from bench.confluent_ceiling import closed, subscribed_clients
from bench.confluent_columnar import Laps
from bench.thread_cpu import ThreadCpu
from bench.topics import RunTopics, default_load_client, prefill
from bench.workloads import WORKLOADS
from worker.app import build_worker
from worker.core.clock import SystemClock
from worker.core.settings import Settings, add_flags
from worker.core.shutdown import StopRequest
from worker.dedup.redis_store import RedisDedupStore
from worker.models import load_model
from worker.stream.loop import Worker

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

# The stages of a step, each timed on the loop's thread around one call: (label, the worker's part, its method).
# The model runs inside submit_batch with the inline scorer (the CPU default).
STAGES = (
    ("poll (fetch, records)", "_source", "poll"),
    ("admit (track, decode, check, claim)", "_admission", "admit"),
    ("take the claimed (batch the fresh)", "_admission", "take_claimed"),
    ("submit a batch (the model)", "", "submit_batch"),
    ("answer a batch (encode, send)", "", "answer_scored"),
    ("settle (acks, done marks, commit)", "", "settle"),
    ("  of it, the acknowledgements", "_sink", "settle"),
    ("  of it, done marks and commit", "_parts.commits", "settle"),
)


FORWARD = "  of it, the model's forward pass"
FLOOR_LIMIT_S = 600.0  # --floor gives up after this long
COLLECTOR = "the garbage collector, any thread"


class StageClock:
    """The loop thread's CPU in each of STAGES, by wrapping the methods on the worker's own parts; of the model's
    stage, its module's forward pass (hooks on the module); and the wall time of the garbage collector's
    collections, on any thread (they hold the GIL), from the first step to the worker's close."""

    def __init__(self, worker: Worker) -> None:
        labels = [label for label, _, _ in STAGES]
        labels.insert(labels.index("submit a batch (the model)") + 1, FORWARD)
        self.seconds = dict.fromkeys(labels, 0.0)
        for label, part, method in STAGES:
            owner = operator.attrgetter(part)(worker) if part else worker
            setattr(owner, method, self._timed(label, getattr(owner, method)))
        for runner in getattr(worker._parts.scorer, "_runners", {}).values():
            module = getattr(runner, "_module", None)
            if isinstance(module, torch.nn.Module):
                module.register_forward_pre_hook(self._forward_began)
                module.register_forward_hook(self._forward_ended)
        self.collector_s = 0.0
        self._began = self._collection_began = 0.0
        gc.callbacks.append(self._collected)

    def _forward_began(self, _module: torch.nn.Module, _args: Any) -> None:
        self._began = time.thread_time()

    def _forward_ended(self, _module: torch.nn.Module, _args: Any, _output: Any) -> None:
        self.seconds[FORWARD] += time.thread_time() - self._began

    def _collected(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._collection_began = time.perf_counter()
        else:
            self.collector_s += time.perf_counter() - self._collection_began

    def _timed(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds[label] += time.thread_time() - began
        return timed


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
    parser.add_argument("--stages", action="store_true",
                        help="no profiler: the loop thread's CPU in each stage of a step, and the other threads'")
    parser.add_argument("--floor", action="store_true",
                        help="not the worker: the churn job by hand by columns (bench/confluent_columnar.py), its "
                             "main thread's CPU by stage")
    parser.add_argument("worker_args", nargs="*",
                        help="after --: settings for the worker, e.g. -- --max-batch-size 256. The worker runs on its "
                             "default Kafka client, kafka-python, unless they say otherwise: the figures set beside "
                             "--floor (and docs/benchmarks.md's) pass -- --kafka-client confluent --max-batch-size 64")
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make up`, then eval its env)",
              file=sys.stderr)
        return 2
    if args.floor:
        if args.workload != "churn" or args.worker_args:
            print("error: --floor runs the churn job by hand: no --workload other than churn, no worker settings",
                  file=sys.stderr)
            return 2
        floor_threads = ThreadCpu()
        _report_floor(args.requests, *floor_run(bootstrap, redis_url, args.requests, floor_threads))
        _report_threads(floor_threads, args.requests)
        return 0

    profiler = None if args.no_profile or args.stages else cProfile.Profile()
    clocks: list[StageClock] = []
    threads = ThreadCpu() if args.stages else None
    wall_s, cpu_s, loop_cpu_s = timed_run(bootstrap, args.workload, args.requests, args.worker_args, profiler,
                                          on_built=(lambda worker: clocks.append(StageClock(worker)))
                                          if args.stages else None, threads=threads)
    print(f"\n{args.requests:,} requests in {wall_s:.1f} s ({args.requests / wall_s:,.0f} req/s); "
          f"process CPU {cpu_s / args.requests * 1e6:.1f} µs per request (all threads)")
    if profiler is not None:
        _report(pstats.Stats(profiler), args.requests, args.top, args.sort)
    if clocks:
        _report_stages(clocks[0], args.requests, cpu_s, loop_cpu_s)
    if threads is not None:
        _report_threads(threads, args.requests)
    return 0


def timed_run(bootstrap: str, workload: str, requests: int, worker_args: list[str],
              profiler: cProfile.Profile | None = None,
              on_built: Callable[[Worker], None] | None = None,
              threads: ThreadCpu | None = None) -> tuple[float, float, float]:
    """Fill a fresh topic with ``requests``, then step a worker in this process until it answered them all.

    Returns (wall seconds, process CPU seconds, the loop thread's CPU seconds) of the stepping, profiled by
    ``profiler`` when given; ``on_built`` is shown the worker before its first step; ``threads`` takes each
    thread's CPU over the stepping.
    """
    topics = RunTopics.fresh(f"profile-{workload}")
    settings = _settings(workload, topics, worker_args)
    topics.create(bootstrap, partitions=4)
    try:
        prefill(bootstrap, topics.requests, WORKLOADS[workload].requests(requests), progress=False,
                kafka_client=default_load_client())
        worker = build_worker(settings, StopRequest(SystemClock()))
        if on_built is not None:
            on_built(worker)
        if threads is not None:
            threads.start()
        started, cpu_started, loop_started = time.perf_counter(), time.process_time(), time.thread_time()
        if profiler is not None:
            profiler.enable()
        while worker.stats.replied_ok < requests:
            worker.step()
        if profiler is not None:
            profiler.disable()
        wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
        loop_cpu_s = time.thread_time() - loop_started
        if threads is not None:
            threads.stop()
        worker.stop()
        worker.run()  # drains, commits and closes
    finally:
        topics.delete(bootstrap, settings.dedup.redis_url)
    return wall_s, cpu_s, loop_cpu_s


def floor_run(bootstrap: str, redis_url: str, requests: int,
              threads: ThreadCpu | None = None) -> tuple[float, float, float, dict[str, float]]:
    """Fill a fresh topic with ``requests`` churn requests, then run the columnar job's loop in this process
    until it answered them all. Returns wall seconds, process CPU seconds, the main thread's CPU seconds and its
    CPU seconds by stage; ``threads`` takes each thread's CPU over the loop."""
    topics = RunTopics.fresh("profile-floor")
    topics.create(bootstrap, partitions=4)
    try:
        prefill(bootstrap, topics.requests, WORKLOADS["churn"].requests(requests), progress=False,
                kafka_client=default_load_client())
        torch.set_num_threads(1)
        model = load_model("churn")
        store = RedisDedupStore(redis_url, topics.group, ttl_s=3600, lease_ms=300_000)
        consumer, producer = subscribed_clients(argparse.Namespace(
            bootstrap_servers=bootstrap, group=topics.group, requests_topic=topics.requests), "bench-floor")
        stop = threading.Event()
        give_up = threading.Timer(FLOOR_LIMIT_S, stop.set)  # a request that never comes would hold it for ever
        give_up.start()
        try:
            if threads is not None:
                threads.start()
            started, cpu_started, main_started = time.perf_counter(), time.process_time(), time.thread_time()
            laps = Laps()
            answered = columnar.run(consumer, producer, store, model, topics.replies, stop, until=requests,
                                    laps=laps)
            wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
            main_s = time.thread_time() - main_started
            if threads is not None:
                threads.stop()
        finally:
            give_up.cancel()
            closed(consumer, producer, store)
        if answered < requests:
            raise RuntimeError(f"the columnar job answered {answered:,} of {requests:,} requests in "
                               f"{FLOOR_LIMIT_S:.0f} s")
    finally:
        topics.delete(bootstrap, redis_url)
    return wall_s, cpu_s, main_s, laps.seconds


def _report_floor(requests: int, wall_s: float, cpu_s: float, main_s: float, stages: dict[str, float]) -> None:
    print(f"\n{requests:,} requests in {wall_s:.1f} s ({requests / wall_s:,.0f} req/s); "
          f"process CPU {cpu_s / requests * 1e6:.1f} µs per request (all threads)")
    print("\nCPU by stage, µs per request (the churn job by hand by columns, bench/confluent_columnar.py):")
    for label, seconds in stages.items():
        print(f"  {label:<40} {seconds / requests * 1e6:6.2f}")
    print(f"  {'the main thread, in all':<40} {main_s / requests * 1e6:6.2f}")
    print(f"  {'the other threads':<40} {(cpu_s - main_s) / requests * 1e6:6.2f}")


def _report_threads(threads: ThreadCpu, requests: int) -> None:
    """The other threads' CPU by thread (Linux only): librdkafka's, the claim helper's."""
    if threads.available:
        print(f"  {'of the other threads, by thread':<40}")
        print("\n".join(threads.report(requests)))


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


def _report_stages(clock: StageClock, requests: int, cpu_s: float, loop_cpu_s: float) -> None:
    print("\nCPU by stage, µs per request:")
    for label, seconds in clock.seconds.items():
        print(f"  {label:<40} {seconds / requests * 1e6:6.2f}")
    print(f"  {'the loop thread, in all':<40} {loop_cpu_s / requests * 1e6:6.2f}")
    print(f"  {'the other threads':<40} {(cpu_s - loop_cpu_s) / requests * 1e6:6.2f}")
    print(f"  {COLLECTOR:<40} {clock.collector_s / requests * 1e6:6.2f}")


if __name__ == "__main__":
    sys.exit(main())
