"""The machine a run happened on, for the report: CPU, cores, memory, load, library versions."""

from __future__ import annotations

import os
import platform
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
