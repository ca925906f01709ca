"""A consumer under test, run as its own process, and its closed-loop throughput.

Every contender (the Kafka ceiling loop, the naive loop, the streamscore
worker) runs as a subprocess with its output in a log file, and logs a
``partitions_assigned`` JSON line when its consumer gets its partitions: the
moment a closed-loop run is timed from.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
from tqdm import tqdm

from bench.replies import ReplyCounter, ReplyRecord
from bench.results import ThroughputRun

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.1
TIME_LIMIT = "time limit"  # how a run cut short on purpose is reported (its partial figures stand)
STALL_S = 20.0  # a consumer that sends no reply for this long is stuck (a minilm batch takes ~1-3 s)
ASSIGNED_POLL_S = 0.02  # short: the CPU figure is sampled right after the assignment is seen


class ContenderProcess:
    """Starts ``command`` in the repository root, output to ``log_path``. Not thread-safe."""

    def __init__(self, label: str, command: list[str], log_path: Path) -> None:
        self.label = label
        self.log_path = log_path
        # The worker refuses STREAMSCORE_* variables it does not know (services.sh has some), and every
        # setting it needs is passed as a flag, so none is passed on.
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("wb")
        self._popen = subprocess.Popen(command, cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.exit_code: int | None = None

    @property
    def running(self) -> bool:
        return self._popen.poll() is None

    def assigned_times(self) -> list[float]:
        """Unix times of the process's ``partitions_assigned`` log lines so far."""
        times = []
        for line in self.log_path.read_bytes().splitlines():
            if b"partitions_assigned" not in line:
                continue
            try:
                event = orjson.loads(line)
                stamp = datetime.datetime.fromisoformat(event["timestamp"])
            except (orjson.JSONDecodeError, KeyError, ValueError, TypeError):
                continue
            if event.get("event") == "partitions_assigned":
                times.append(stamp.timestamp())
        return times

    def wait_assigned(self, timeout_s: float) -> bool:
        """Wait until the consumer has partitions; False if the process died or the time ran out."""
        deadline = time.monotonic() + timeout_s
        while not self.assigned_times():
            if not self.running or time.monotonic() > deadline:
                return False
            time.sleep(ASSIGNED_POLL_S)
        return True

    def cpu_s(self) -> float | None:
        """CPU seconds (user + system, all threads) the process has used so far; None once it is gone."""
        return _cpu_s(Path(f"/proc/{self._popen.pid}/stat"))

    def main_thread_cpu_s(self) -> float | None:
        """CPU seconds its main thread has used so far (a Python program's own loop, where it has one; the Kafka
        clients' C threads and any helper thread are the rest); None once it is gone."""
        return _cpu_s(Path(f"/proc/{self._popen.pid}/task/{self._popen.pid}/stat"))

    def memory_mib(self, which: str = "VmHWM") -> float | None:
        """The process's resident memory in MiB: its peak so far (VmHWM), or now (VmRSS); None once it is gone."""
        try:
            status = Path(f"/proc/{self._popen.pid}/status").read_text()
        except OSError:
            return None
        kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith(f"{which}:")), None)
        return None if kib is None else kib / 1024

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, wait for a clean exit (SIGKILL after ``timeout_s``); the exit code."""
        if self.running:
            self._popen.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self.exit_code = self._popen.wait()
        self._log.close()
        return self.exit_code


def wait_for_replies(process: ContenderProcess, bootstrap: str, reply_topic: str, expected: int,
                     timeout_s: float, progress: bool) -> str | None:
    """Block until the reply topic holds ``expected`` records; None then, else why it stopped waiting:
    the process exited, no reply came for STALL_S seconds, or ``timeout_s`` passed.

    Only end offsets are polled, so waiting costs the process under test nothing.
    """
    counter = ReplyCounter(bootstrap, reply_topic)
    bar = tqdm(total=expected, unit="reply", desc=f"  {process.label}", disable=not progress, leave=False)
    deadline = time.monotonic() + timeout_s
    last, last_change = -1, time.monotonic()
    try:
        while True:
            count = counter.count()
            bar.update(min(count, expected) - bar.n)
            if count >= expected:
                return None
            now = time.monotonic()
            if count != last:
                last, last_change = count, now
            if not process.running:
                return f"the process exited after {count:,} of {expected:,} replies"
            if now - last_change > STALL_S:
                return f"stalled: no reply for {STALL_S:.0f} s after {count:,} of {expected:,}"
            if now > deadline:
                return f"{TIME_LIMIT}: {count:,} of {expected:,} replies in {timeout_s:.0f} s"
            time.sleep(POLL_S)
    finally:
        bar.close()
        counter.close()


@dataclass(frozen=True)
class CpuSample:
    wall_s: float
    cpu_s: float | None
    main_thread_cpu_s: float | None = None

    @classmethod
    def of(cls, process: ContenderProcess) -> CpuSample:
        return cls(time.time(), process.cpu_s(), process.main_thread_cpu_s())


def cpu_per_request(replies: list[ReplyRecord], ids: set[str], before: CpuSample, after: CpuSample,
                    main_thread: bool = False) -> float | None:
    """Microseconds of the contender's CPU (``main_thread``: its main thread's only) per reply it sent between
    the two samples."""
    first, last = ((before.main_thread_cpu_s, after.main_thread_cpu_s) if main_thread
                   else (before.cpu_s, after.cpu_s))
    if first is None or last is None:
        return None
    sent = {r.id for r in replies if r.id in ids and before.wall_s * 1000 < r.created_ms <= after.wall_s * 1000}
    return (last - first) / len(sent) * 1e6 if sent else None


def _cpu_s(stat: Path) -> float | None:
    """User + system CPU seconds from a /proc stat file (a process's or one thread's); None once it is gone."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(contender: str, replies: list[ReplyRecord], ids: set[str], assigned: list[float],
               from_worker: bool) -> ThroughputRun:
    """The closed-loop figures from the replies to ``ids``; see results.DEFINITIONS["throughput"]."""
    first: dict[str, ReplyRecord] = {}
    for reply in sorted((r for r in replies if r.id in ids), key=lambda r: r.created_ms):
        first.setdefault(reply.id, reply)
    matched = sum(1 for r in replies if r.id in ids)
    run = ThroughputRun(contender, len(ids), len(first), None, None, len(first) == len(ids),
                        dict(Counter(r.status for r in first.values())), matched - len(first))
    if not first or not assigned:
        run.note = "no replies" if not first else "no partitions_assigned line in the log"
        return run
    first_reply_s = min(r.created_ms for r in first.values()) / 1000
    start = max((t for t in assigned if t <= first_reply_s + 0.001), default=min(assigned))
    run.seconds = max(r.created_ms for r in first.values()) / 1000 - start
    run.per_s = len(first) / run.seconds if run.seconds > 0 else None
    if from_worker:
        computes = sorted(r.compute_ms for r in first.values() if r.compute_ms is not None)
        sizes = [r.batch_size for r in first.values() if r.batch_size]
        run.compute_ms_p50 = computes[len(computes) // 2] if computes else None
        run.mean_batch_size = sum(sizes) / len(sizes) if sizes else None
    return run
