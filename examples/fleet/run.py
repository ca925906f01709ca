"""A team's model fleet in one worker, end to end on local Kafka and Redis; see DESCRIPTION (``--help``)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import orjson
from kafka import KafkaConsumer, TopicPartition
from tqdm import tqdm

from examples.fleet.build import BUILD, LIVE_SEED, NEXT_SEED, build_all, deploy
from examples.fleet.summary import Versions, render, tally
from examples.fleet.traffic import BEFORE, DURING, TEXT, bodies, request_ids
from examples.fleet.worker_process import Event, WorkerExited, WorkerProcess, worker_env
from producer.collect import ReplyCollector, TopicSpanReader, collect_replies
from producer.send import send_requests
from producer.topics import create_topics
from worker.core.model_table import ModelEntry, read_config_file
from worker.core.routes import arm_point
from worker.kafka.kafka_python.connection import client_config
from worker.stream.shadow import sampled_point

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CONFIG = HERE / "worker.toml"
START_TIMEOUT_S = 180  # imports, four models loaded and warmed, the group joined: well under a minute on 2 cores
SWITCH_TIMEOUT_S = 60
SHADOW_IDLE_S = 10

DESCRIPTION = """\
A team's model fleet served by one streamscore worker, end to end on local Kafka and Redis
(KAFKA_BOOTSTRAP_SERVERS and REDIS_URL: `make up` starts them and prints both; `make fleet` does it all).

examples/fleet/worker.toml declares four models: churn (the churn_tabular example, seed 0), its canary
churn-next (seed 1) answering 10% of churn's requests, its shadow churn-candidate (seed 2) scoring 25% of
them off the record, and documents (the document_classifier example: MiniLM and a trained head). This:
  1. builds the weights (seeded; once, into examples/fleet/build/) and makes seed 0 churn's served file;
  2. creates fresh topics (requests, replies, dlq, shadow) named fleet-<time>-<pid>.*;
  3. starts `python -m worker run --config examples/fleet/worker.toml ...`, its JSON log to build/;
  4. sends --text-requests documents requests (naming the model) and --requests churn requests (naming
     none: the default model), and waits for their replies;
  5. sends --deploy-requests more churn requests over --deploy-seconds and, a quarter of the way in,
     replaces churn's weights file with seed 3's (a temporary file, then a rename), waits for the worker's
     model_version_switched, and for every reply;
  6. waits for the shadow records, stops the worker (SIGTERM: exit 0 expected), reads the reply topic
     whole into build/replies-<run>.jsonl, and prints the replies by model and version, the canary's
     share, the switch, and the exactly-once counts (missing and answered twice: 0 expected);
  7. runs `python -m worker compare --shadow-topic ... --plot build/compare.png` and prints its report.
Nothing is deleted: the topics, the worker's log, the replies and the plot stay, and are listed at the end.

At the default size it takes about 25 seconds on two CPU cores (a few of them the worker's start, 8 the
deploy's sending); --requests 200 --text-requests 20 about 20. The first run builds the weights too (seconds).
Exit codes: 0 every request answered exactly once and the worker stopped cleanly; 1 a request missing,
answered twice or with an error, the switch not seen, compare failing, or the worker exiting unexpectedly
(the tail of its log is printed); 2 the services not given.
"""


@dataclass(frozen=True)
class Topics:
    requests: str
    replies: str
    dead_letters: str
    shadow: str

    @classmethod
    def fresh(cls, prefix: str) -> Topics:
        return cls(f"{prefix}.requests", f"{prefix}.replies", f"{prefix}.dlq", f"{prefix}.requests.shadow")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.fleet.run", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000, help="churn requests before the deploy (%(default)s)")
    parser.add_argument("--text-requests", type=int, default=400, help="documents requests (%(default)s)")
    parser.add_argument("--deploy-requests", type=int, help="churn requests during the deploy (half --requests)")
    parser.add_argument("--deploy-seconds", type=float, default=8.0,
                        help="how long they take to send (%(default)s): churn's file is replaced a quarter in")
    parser.add_argument("--partitions", type=int, default=4, help="of the requests topic (%(default)s)")
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        unset = " and ".join(name for name, value in (("KAFKA_BOOTSTRAP_SERVERS", bootstrap),
                                                       ("REDIS_URL", redis_url)) if not value)
        print(f"error: {unset} not set. Start local Kafka and Redis with `make up` and export the lines it prints "
              "(or run `make fleet`, which does both)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so that the finally blocks stop the worker
    return run(args, bootstrap, redis_url)


def run(args: argparse.Namespace, bootstrap: str, redis_url: str) -> int:
    started = time.monotonic()
    churn = read_config_file(str(CONFIG)).models.entry("churn")
    built = build_all(BUILD)
    deploy(BUILD, LIVE_SEED)
    say(f"weights in {_shown(BUILD)}: built {', '.join(built) or 'none (all there)'}; churn serves seed {LIVE_SEED}")
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    topics = Topics.fresh(f"fleet-{run_id}")
    create_topics(bootstrap, {topics.requests: args.partitions, topics.replies: args.partitions,
                              topics.dead_letters: 1, topics.shadow: args.partitions})
    say(f"topics: {topics.requests} -> {topics.replies}, shadow {topics.shadow}")
    sent = {**request_ids(BEFORE, args.requests), **request_ids(TEXT, args.text_requests),
            **request_ids(DURING, args.requests // 2 if args.deploy_requests is None else args.deploy_requests)}
    flags = ["--config", str(CONFIG.relative_to(REPO)), "--requests-topic", topics.requests, "--reply-topic",
             topics.replies, "--dead-letter-topic", topics.dead_letters, "--shadow-topic", topics.shadow,
             "--group", f"fleet-{run_id}", "--dedup-namespace", f"fleet-{run_id}"]
    worker = WorkerProcess(flags, BUILD / f"worker-{run_id}.log", REPO, worker_env(bootstrap, redis_url))
    say(f"worker started (pid {worker.process.pid}), log: {_shown(worker.log_path)}")
    collector = ReplyCollector(bootstrap, topics.replies)
    try:
        versions = _serve(args, bootstrap, topics, worker, collector, sent)
        expected = sum(1 for i, phase in sent.items() if phase != TEXT and sampled_point(i) < churn.shadow_fraction
                       and arm_point(i) < 1.0 - churn.canary_weight)  # the live arm's requests only
        shadowed = _wait_shadow(bootstrap, topics.shadow, expected, worker)
        worker.check_alive()
    except (WorkerExited, TimeoutError) as exc:
        say(f"FAILED: {exc}\n--- the worker's log, last lines ---\n{worker.tail()}")
        say(f"worker stopped: exit code {worker.stop()}")
        return 1
    except BaseException:  # Ctrl-C, SIGTERM, a send failing: the worker must not outlive this process
        worker.stop()
        raise
    finally:
        collector.close()
    exit_code = worker.stop()
    say(f"worker stopped: exit code {exit_code}")
    code = _report(bootstrap, topics, run_id, churn, sent, versions, shadowed, worker, exit_code)
    say(f"took {time.monotonic() - started:.0f} s")
    return code


def _report(bootstrap: str, topics: Topics, run_id: str, churn: ModelEntry, sent: dict[str, str],
            versions: Versions, shadowed: int, worker: WorkerProcess, exit_code: int) -> int:
    """Steps 6 and 7, after the worker stopped: the reply topic read whole, the summary, compare; the exit code."""
    replies_path = BUILD / f"replies-{run_id}.jsonl"
    replies, duplicates = _read_replies(bootstrap, topics.replies, replies_path)
    result = tally(sent, replies, duplicates, versions, churn.canary_weight, churn.shadow_fraction)
    print("\n".join(["", "streamscore fleet summary", f"  config: {_shown(CONFIG)}", "",
                     *render(result, versions, churn.canary_weight, churn.shadow_fraction, shadowed)]))
    compared = _compare(bootstrap, topics.shadow, BUILD / "compare.png")
    files = [worker.log_path, replies_path, BUILD / "compare.png"]
    print(f"\nfiles (nothing deleted): {', '.join(_shown(path) for path in files)}; the weights in {_shown(BUILD)}; "
          f"the topics fleet-{run_id}.* on the broker")
    failed = not result.ok or not versions.switched or exit_code != 0 or compared != 0
    if exit_code != 0:
        print(f"worker exit code {exit_code}; the last lines of its log:\n{worker.tail()}")
    print("result: " + ("OK: every request answered exactly once; the canary, the switch and the shadow as shown"
                        if not failed else "FAILED: see above"))
    return 1 if failed else 0


def _serve(args: argparse.Namespace, bootstrap: str, topics: Topics, worker: WorkerProcess,
           collector: ReplyCollector, sent: dict[str, str]) -> Versions:
    """Steps 3 to 5: the worker ready, the requests sent and answered, the deploy switched in."""
    say("waiting for the worker to load its four models and join its group ...")
    worker.wait_for_event(lambda e: e.get("event") == "partitions_assigned", START_TIMEOUT_S, "partitions_assigned")
    loaded: dict[str, str] = {}
    for event in worker.events():
        if event.get("event") == "model_loaded":
            loaded.setdefault(str(event["model"]), str(event["version"]))
    say("serving: " + ", ".join(f"{name} {version}" for name, version in loaded.items()))
    before = [i for i, phase in sent.items() if phase in (BEFORE, TEXT)]
    _send(bootstrap, topics.requests, sent, TEXT, model="documents")
    _send(bootstrap, topics.requests, sent, BEFORE, model=None)
    _wait_replies(collector, set(before), worker, "replies before the deploy")
    during = [i for i, phase in sent.items() if phase == DURING]
    sender = _Sender(lambda: _send(bootstrap, topics.requests, sent, DURING, model=None,
                                   rate=len(during) / args.deploy_seconds))
    _wait_replies(collector, set(during), worker, "replies, deploy a quarter of the way in", len(during) // 4)
    deploy(BUILD, NEXT_SEED)
    replaced_at = time.time()
    say(f"deployed: churn's weights file is now seed {NEXT_SEED}'s; waiting for the worker to switch ...")
    switched = worker.wait_for_event(_switched, SWITCH_TIMEOUT_S, "model_version_switched for churn",
                                     between=collector.poll)
    after_s = datetime.fromisoformat(str(switched["timestamp"])).timestamp() - replaced_at
    say(f"switched: churn {loaded.get('churn')} -> {switched['version']}, {after_s:.1f} s after the file was "
        "replaced (model_watch_s = 1, then the new file loaded and checked)")
    sender.join()
    _wait_replies(collector, set(sent), worker, "every reply")
    return Versions(loaded, str(switched["version"]))


def _switched(event: Event) -> bool:
    return event.get("event") == "model_version_switched" and event.get("model") == "churn"


class _Sender(threading.Thread):
    """Sends on a thread of its own (the main one watches replies meanwhile); join() raises what it raised."""

    def __init__(self, send: Callable[[], object]) -> None:
        super().__init__(name="fleet-sender", daemon=True)
        self._send = send
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._send()
        except BaseException as exc:  # handed to join(): the main thread reports it
            self._error = exc

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        if self._error is not None:
            raise self._error


def _send(bootstrap: str, topic: str, sent: dict[str, str], phase: str, model: str | None,
          rate: float | None = None) -> None:
    requests = bodies(phase, [i for i, p in sent.items() if p == phase])
    summary = send_requests(bootstrap, topic, requests, total=len(requests), rate=rate, model=model,
                            progress=rate is None and sys.stderr.isatty())
    say(f"sent {summary.sent:,} {phase} requests" + (f" naming model {model!r}" if model else " naming no model")
        + f" in {summary.seconds:.1f} s")


def _wait_replies(collector: ReplyCollector, ids: set[str], worker: WorkerProcess, what: str,
                  enough: int | None = None) -> None:
    """Until ``enough`` of ``ids`` (default: all) are answered. Raises WorkerExited, or TimeoutError when
    nothing new came for a minute."""
    wanted = len(ids) if enough is None else enough

    def answered() -> int:
        return len(ids & collector.collection.replies.keys())

    bar = tqdm(total=wanted, unit="reply", desc=what, disable=not sys.stderr.isatty())
    last_new = last_said = time.monotonic()
    while (count := answered()) < wanted:
        worker.check_alive()
        if collector.poll():
            bar.update(min(wanted, answered()) - bar.n)
            last_new = time.monotonic()
        if time.monotonic() - last_new > 60:
            raise TimeoutError(f"{what}: {count:,} of {wanted:,}, nothing new for 60 s")
        if not bar.disable or time.monotonic() - last_said < 5:
            continue
        say(f"  {what}: {count:,} of {wanted:,}")
        last_said = time.monotonic()
    bar.close()
    say(f"{what}: {answered():,} of {len(ids):,}")


def _wait_shadow(bootstrap: str, topic: str, expected: int, worker: WorkerProcess) -> int:
    """Records on the shadow topic once ``expected`` are there, or none came for SHADOW_IDLE_S."""
    consumer = KafkaConsumer(**client_config(bootstrap), group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        count, last, last_growth = 0, -1, time.monotonic()
        while count < expected and time.monotonic() - last_growth < SHADOW_IDLE_S:
            worker.check_alive()
            count = sum(consumer.end_offsets(partitions).values())
            if count != last:
                last, last_growth = count, time.monotonic()
            time.sleep(0.5)
    finally:
        consumer.close()
    say(f"shadow records: {count:,} (the id hash samples {expected:,})")
    return count


def _read_replies(bootstrap: str, topic: str, out: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """The reply topic whole, after the worker stopped: the first reply per id (also written to ``out``), and
    how many replies came after an id's first."""
    reader = TopicSpanReader(bootstrap, topic)
    try:
        with out.open("wb") as sink:
            counted = collect_replies(reader, sink)
    finally:
        reader.close()
    replies = {str(reply["id"]): reply for reply in map(orjson.loads, out.read_bytes().splitlines())}
    return replies, counted.duplicates


def _compare(bootstrap: str, shadow: str, plot: Path) -> int:
    say(f"\n$ python -m worker compare --shadow-topic {shadow} --plot {_shown(plot)}")
    done = subprocess.run([sys.executable, "-m", "worker", "compare", "--shadow-topic", shadow, "--plot", _shown(plot),
                           "--no-progress"], cwd=REPO, env=dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap),
                          stdout=subprocess.PIPE, text=True)
    print(done.stdout, end="", flush=True)
    if done.returncode:
        say(f"compare exited with code {done.returncode}")
    return done.returncode


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _exit_on_sigterm(signum: int, frame: object) -> NoReturn:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
