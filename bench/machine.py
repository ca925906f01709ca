"""The machine a run happened on, for the report: CPU, cores, memory, load, library versions; how busy it was."""

from __future__ import annotations

import os
import platform
import resource
from pathlib import Path
from typing import Any

import kafka
import torch


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_ticks() -> tuple[int, int] | None:
    """Busy and total CPU ticks of the whole machine since boot (every process, every core), from /proc/stat;
    None where there is none. Two samples give how busy the machine was between them (``busy_share``)."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    ticks = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time that was busy between two ``cpu_ticks`` samples (1.0: every core)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def own_cpu_s() -> float:
    """CPU seconds (user + system) of this process and of its children waited for so far: between two samples,
    this process's and that of the children that ended and were waited for in between."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _confluent_versions() -> str:
    """confluent-kafka's version and the librdkafka it bundles, or why there is none."""
    try:
        import confluent_kafka
    except ImportError:
        return "not installed"
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def describe() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": memory_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "kafka_python": kafka.__version__,
        "confluent_kafka": _confluent_versions(),
        "load_average_at_start": load_average(),
    }
