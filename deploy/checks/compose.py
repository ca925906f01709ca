"""The compose stack: the compose-spec schema (vendored by check-jsonschema), the workers' environment as
worker settings, stop grace periods above the shutdown deadline, bind mounts, Prometheus targets."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from checks.common import Problems, worker_settings
from checks.image import image_env


def check_compose(directory: Path, dockerfile: Path, problems: Problems) -> str:
    compose = directory / "compose.yaml"
    schema = "vendor.compose-spec"
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(compose)],
                          capture_output=True, text=True)
    if done.returncode:
        problems += [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    spec = yaml.safe_load(compose.read_text())
    services = spec.get("services", {})
    image = image_env(dockerfile)
    workers = {name: s for name, s in services.items()
               if str(s.get("image", "")).startswith("streamscore:") and "entrypoint" not in s}
    if not workers:
        problems.append("no service runs the worker (image streamscore:*, no entrypoint override)")
    ports = set()
    for name, service in workers.items():
        env = _compose_env(service.get("environment", {}))
        settings = worker_settings(image | env, f"service {name}", problems)
        if settings is None:
            continue
        ports.add(settings.operations.http_port)
        grace = _seconds(service.get("stop_grace_period", "10s"))
        if grace <= settings.operations.shutdown_timeout_s:
            problems.append(f"service {name}: stop_grace_period {grace:g} s is not above "
                            f"STREAMSCORE_SHUTDOWN_TIMEOUT_S {settings.operations.shutdown_timeout_s:g} s")
    for name, service in services.items():
        build = service.get("build")
        if isinstance(build, dict):
            context = directory / build.get("context", ".")
            if not (context / build.get("dockerfile", "Dockerfile")).is_file():
                problems.append(f"service {name}: no {build.get('dockerfile', 'Dockerfile')} in context {context}")
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith(".") and not (directory / source).exists():
                problems.append(f"service {name}: bind mount source {source} does not exist")
    targets = _prometheus_targets(directory / "prometheus.yml")
    wanted = {f"{name}:{port}" for name in workers for port in ports}
    if targets != wanted:
        problems.append(f"prometheus.yml scrapes {sorted(targets)}, the workers serve {sorted(wanted)}")
    version = importlib.metadata.version("check-jsonschema")
    return f"{schema} (check-jsonschema {version}); worker env; build contexts, mounts; prometheus.yml targets"


def _compose_env(environment: dict[str, Any] | list[str]) -> dict[str, str]:
    if isinstance(environment, list):
        return dict(item.split("=", 1) for item in environment)
    return {k: "" if v is None else str(v) for k, v in environment.items()}


def _seconds(duration: str | int) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", str(duration))
    return sum(float(n) * units[u] for n, u in parts) if parts else float(duration)


def _prometheus_targets(path: Path) -> set[str]:
    config = yaml.safe_load(path.read_text())
    return {target for job in config.get("scrape_configs", []) for static in job.get("static_configs", [])
            for target in static.get("targets", [])}
