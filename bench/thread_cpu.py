"""Each thread's CPU in this process between two moments, by name: librdkafka's threads (``rdk:broker1``, one
each for the consumer and the producer, summed), the worker's helpers (``dedup-claim_0``), the main thread.

``time.process_time`` gives the process's CPU and ``time.thread_time`` the calling thread's; what the other
threads spent, and which thread spent it, is read from Linux's per-thread scheduler statistics
(``/proc/self/task/<tid>/schedstat``: nanoseconds on a CPU). Elsewhere ``available`` is False and nothing is
reported.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

TASKS = Path("/proc/self/task")


def _snapshot() -> dict[int, tuple[str, int]]:
    """Per thread id: its OS name and its nanoseconds on a CPU so far."""
    threads: dict[int, tuple[str, int]] = {}
    for tid in os.listdir(TASKS):
        try:
            name = (TASKS / tid / "comm").read_text().strip()
            on_cpu_ns = int((TASKS / tid / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        threads[int(tid)] = (name, on_cpu_ns)
    return threads


class ThreadCpu:
    """``start()``, then ``stop()``: ``seconds`` holds each thread name's CPU seconds in between (threads that
    started meanwhile counted from 0, threads that ended meanwhile left out)."""

    available = TASKS.is_dir()

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started: dict[int, tuple[str, int]] = {}

    def start(self) -> None:
        self._started = _snapshot() if self.available else {}

    def stop(self) -> None:
        if not self.available:
            return
        python_names = {t.native_id: t.name for t in threading.enumerate()}  # Python's names, where it has them
        self.seconds = {}
        for tid, (name, on_cpu_ns) in _snapshot().items():
            began_ns = self._started.get(tid, (name, 0))[1]
            key = python_names.get(tid) or name
            self.seconds[key] = self.seconds.get(key, 0.0) + (on_cpu_ns - began_ns) / 1e9

    def report(self, requests: int, leave_out: str = "MainThread") -> list[str]:
        """Lines of µs a request per thread name, most first, ``leave_out`` (the thread timed by stage) left out."""
        most_first = sorted(self.seconds.items(), key=lambda named: -named[1])
        return [f"    {name:<38} {seconds / requests * 1e6:6.2f}" for name, seconds in most_first
                if name != leave_out and seconds / requests * 1e6 >= 0.01]
