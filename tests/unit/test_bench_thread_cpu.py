"""bench/thread_cpu.py: each thread's CPU between two moments, by name (Linux's per-thread statistics)."""

from __future__ import annotations

import threading
import time

import pytest

from bench.thread_cpu import ThreadCpu


@pytest.mark.skipif(not ThreadCpu.available, reason="no /proc/self/task here (not Linux)")
def test_a_busy_thread_is_reported_under_its_name_and_an_idle_one_is_not():
    done = threading.Event()

    def spin() -> None:
        spins = 0
        while not done.is_set():
            spins += 1

    threads = ThreadCpu()
    threads.start()
    busy = threading.Thread(target=spin, name="busy-helper")
    idle = threading.Thread(target=done.wait, name="idle-helper")
    busy.start(), idle.start()
    time.sleep(0.2)
    threads.stop()  # both still running: their names are Python's
    done.set()
    busy.join(), idle.join()
    assert threads.seconds["busy-helper"] > 0.02
    assert threads.seconds.get("idle-helper", 0.0) < 0.01
    lines = threads.report(requests=1000)
    assert lines[0].split()[0] == "busy-helper" and not any("MainThread" in line for line in lines)
