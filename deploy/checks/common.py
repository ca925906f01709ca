"""What the checks share: the worker's settings as the worker parses them, and tools installed with packages."""

from __future__ import annotations

import argparse
import importlib.metadata
from pathlib import Path

from worker.core.errors import ConfigError
from worker.core.settings import Settings, require_services

Problems = list[str]


def worker_settings(env: dict[str, str], where: str, problems: Problems, args: argparse.Namespace | None = None,
                    services: bool = True) -> Settings | None:
    """The worker's settings from this environment (and command line ``args``), parsed by the worker's own
    code, with Kafka and Redis named unless ``services`` is false (score-file needs neither); None (a
    problem) if refused."""
    try:
        settings = Settings.from_sources(args, environ=env)
        if services:
            require_services(settings)
    except ConfigError as exc:
        problems.append(f"{where}: the worker would refuse to start: {exc}")
        return None
    return settings


def tool(distribution: str, executable: str) -> Path:
    """An executable installed by a Python package (found through the package's RECORD of files)."""
    files = importlib.metadata.distribution(distribution).files or []
    for file in files:
        if file.name == executable:
            return Path(str(importlib.metadata.distribution(distribution).locate_file(file))).resolve()
    raise FileNotFoundError(f"{distribution} installs no {executable}: run `make venv`")
