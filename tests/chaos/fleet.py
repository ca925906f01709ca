"""Worker processes of one consumer group, run as a deployment would run them.

A ``Fleet`` has numbered slots, each holding one worker process at a time. A
scenario adds slots (scale up), stops them with SIGTERM (scale down), or kills
the process in a slot with SIGKILL, after which a new one starts in the slot
at once. A supervisor thread restarts any process that exits on its own
(e.g. exit 1 on a delivery failure) and records it: a real deployment
restarts a dead worker too. Every process writes its own JSON log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tests.integration.kit import REPO, STARTED, Topics, WorkerProcess, wait_until

# The last line of a traceback ("kafka.errors.KafkaTimeoutError: ..."), the CLI's "error: ..." line, or their
# JSON forms (the workers log JSON lines: worker_failed, uncaught_exception).
ERROR_LINE = re.compile(r'^(?:[\w.]+(?:Error|Exception): .*|error: .*'
                        r'|\{.*"event": "(?:worker_failed|uncaught_exception)".*)$', re.MULTILINE)
# Variables of deploy/local/services.sh: the worker refuses unknown STREAMSCORE_* variables.
SERVICE_SCRIPT_ENV = ("STREAMSCORE_STATE_DIR", "STREAMSCORE_CACHE_DIR")


@dataclass(frozen=True)
class Exit:
    """How one worker process ended: ``killed`` (SIGKILL), ``crashed`` (on its own) or ``stopped`` (SIGTERM)."""

    slot: int
    pid: int
    how: str
    code: int | None  # None: did not exit within the stop timeout, then killed
    at: float  # wall time, s
    log_path: Path


class Fleet:
    """Thread-safe. Use as a context manager: leaving it kills whatever still runs."""

    def __init__(self, bootstrap: str, redis_url: str, topics: Topics, log_dir: Path, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, name: str = "w") -> None:
        self._bootstrap = bootstrap
        self._redis_url = redis_url
        self._topics = topics
        self._log_dir = log_dir
        self._args = args
        self._env = env or {}
        self._name = name
        self._lock = threading.Lock()
        self._slots: dict[int, WorkerProcess] = {}
        self._next_slot = 0
        self._generation = 0
        self.processes: list[WorkerProcess] = []  # every process ever started, for its log
        self.exits: list[Exit] = []
        self.final_stop_at: float | None = None  # wall time of stop_all's SIGTERMs
        self._closing = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, name="chaos-supervisor", daemon=True)

    def __enter__(self) -> Fleet:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._supervisor.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._closing.set()
        self._supervisor.join()
        with self._lock:
            leftovers, self._slots = list(self._slots.items()), {}
        for slot, worker in leftovers:
            worker.process.kill()
            self._record(slot, worker, "killed", worker.process.wait(timeout=30))

    def add(self) -> int:
        """Start a worker in a new slot; returns the slot."""
        with self._lock:
            slot, self._next_slot = self._next_slot, self._next_slot + 1
            self._slots[slot] = self._spawn(slot)
        return slot

    def live(self) -> list[int]:
        with self._lock:
            return sorted(self._slots)

    def kill(self, slot: int) -> None:
        """SIGKILL the slot's process and start a new one in its place."""
        with self._lock:
            worker = self._slots[slot]
            worker.process.kill()
            self._record(slot, worker, "killed", worker.process.wait(timeout=30))
            self._slots[slot] = self._spawn(slot)

    def stop(self, slot: int, timeout_s: float = 60) -> int | None:
        """SIGTERM the slot's process and retire the slot; returns its exit code (None: it hung)."""
        return self.stop_many([slot], timeout_s)[slot]

    def stop_many(self, slots: list[int], timeout_s: float = 60) -> dict[int, int | None]:
        """SIGTERM the slots' processes all at once, as a deployment scaled in does, and retire the slots."""
        with self._lock:
            workers = {slot: self._slots.pop(slot) for slot in slots}
        for worker in workers.values():
            worker.process.send_signal(signal.SIGTERM)
        return {slot: self._wait_stopped(slot, worker, timeout_s) for slot, worker in workers.items()}

    def stop_all(self, timeout_s: float = 60) -> dict[int, int | None]:
        self.final_stop_at = time.time()
        return self.stop_many(self.live(), timeout_s)

    def wait_assigned(self, slot: int, timeout_s: float = 90) -> None:
        """Wait until the slot's current process owns partitions (it joined the group)."""
        def owns_partitions() -> bool:
            with self._lock:
                worker = self._slots.get(slot)
            return worker is not None and any(e.get("event") == "partitions_assigned" and e["partitions"]
                                              for e in worker.events())
        wait_until(owns_partitions, timeout_s, f"worker slot {slot} to own partitions", interval_s=0.2)

    def crash_reasons(self) -> list[str]:
        """For each process that exited on its own: its exit code and the last error its log names."""
        reasons = []
        for exit in self.exits:
            if exit.how == "crashed":
                errors = ERROR_LINE.findall(exit.log_path.read_text(errors="replace"))
                reasons.append(f"exit {exit.code}: {errors[-1].strip()[:160] if errors else 'no error logged'}")
        return reasons

    def wait_started(self, timeout_s: float = 90) -> None:
        """Wait until the process in every slot logged ``worker_started`` (it handles SIGTERM by then)."""
        def all_started() -> bool:
            with self._lock:
                workers = list(self._slots.values())
            return all(any(e.get("event") == "worker_started" for e in w.events()) for w in workers)
        wait_until(all_started, timeout_s, "every worker to start", interval_s=0.2)

    def restarts(self) -> int:
        return sum(1 for e in self.exits if e.how == "crashed")

    def events(self) -> Counter[str]:
        """How often each log event occurred, over every process this fleet started."""
        counts: Counter[str] = Counter()
        for worker in self.processes:
            for event in worker.events():
                counts[event.get("event", "?")] += 1
            if "Traceback (most recent call last)" in worker.log():
                counts["(traceback)"] += 1
        return counts

    def assignments_under_load(self, load_started: float) -> int:
        """``partitions_assigned`` events logged from ``load_started`` until the final stop (one per member per
        rebalance): a member still draining after SIGTERM takes over what one that left already gave up, and
        that is the stop, not a rebalance under load."""
        until = self.final_stop_at if self.final_stop_at is not None else float("inf")
        return sum(1 for worker in self.processes for event in worker.events()
                   if event.get("event") == "partitions_assigned"
                   and load_started <= datetime.fromisoformat(event["timestamp"]).timestamp() < until)

    def stopped_counters(self) -> Counter[str]:
        """The sum of the ``worker_stopped`` counters (processes that were SIGKILLed log none)."""
        total: Counter[str] = Counter()
        for worker in self.processes:
            for event in worker.events():
                if event.get("event") == "worker_stopped":
                    total.update({k: v for k, v in event.items() if isinstance(v, int) and not isinstance(v, bool)})
        return total

    def _wait_stopped(self, slot: int, worker: WorkerProcess, timeout_s: float) -> int | None:
        try:
            code: int | None = worker.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait(timeout=30)
            code = None
        self._record(slot, worker, "stopped", code)
        return code

    def _supervise(self) -> None:
        while not self._closing.wait(0.5):
            with self._lock:
                for slot, worker in list(self._slots.items()):
                    code = worker.process.poll()
                    if code is not None:
                        self._record(slot, worker, "crashed", code)
                        self._slots[slot] = self._spawn(slot)

    def _record(self, slot: int, worker: WorkerProcess, how: str, code: int | None) -> None:
        self.exits.append(Exit(slot, worker.process.pid, how, code, time.time(), worker.log_path))

    def _spawn(self, slot: int) -> WorkerProcess:
        self._generation += 1
        client_id = f"{self._name}{slot}-g{self._generation}"
        log_path = self._log_dir / f"{client_id}.log"
        env = {k: v for k, v in os.environ.items() if k not in SERVICE_SCRIPT_ENV}
        env.update(self._env, KAFKA_BOOTSTRAP_SERVERS=self._bootstrap, REDIS_URL=self._redis_url,
                   PYTHONPATH=str(REPO))
        t = self._topics
        command = [sys.executable, "-m", "worker", "run", "--requests-topic", t.requests, "--reply-topic", t.replies,
                   "--dead-letter-topic", t.dlq, "--group", f"{t.requests}.group", "--dedup-namespace", t.requests,
                   "--client-id", client_id, "--log-format", "json", "--stats-interval-s", "0",
                   "--torch-threads", "1", *self._args]
        if "exactly-once" in self._args:  # one transactional id per slot: a restart fences its killed predecessor
            command += ["--transactional-id", f"{t.requests}.{self._name}{slot}"]
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(command, env=env, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT)
        STARTED.append(process)
        worker = WorkerProcess(process, log_path)
        self.processes.append(worker)
        return worker
