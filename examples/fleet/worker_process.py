"""The fleet's worker as a child process: started with its JSON log in a file, watched, read, stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Event = dict[str, Any]


class WorkerExited(RuntimeError):
    """The worker ended before it was asked to (its log says why)."""


class WorkerProcess:
    def __init__(self, args: list[str], log_path: Path, cwd: Path, env: dict[str, str]) -> None:
        """Start ``python -m worker run ARGS`` in ``cwd``, its stdout and stderr (JSON log lines) to ``log_path``."""
        self.log_path = log_path
        with log_path.open("wb") as log_file:
            self.process = subprocess.Popen([sys.executable, "-m", "worker", "run", *args, "--log-format", "json"],
                                            cwd=cwd, env=env, stdout=log_file, stderr=subprocess.STDOUT)

    def events(self) -> list[Event]:
        """The log's JSON lines so far (other lines, e.g. a traceback's, left out)."""
        found = []
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line being written
        return found

    def check_alive(self) -> None:
        """Raises WorkerExited when the worker is no longer running."""
        code = self.process.poll()
        if code is not None:
            raise WorkerExited(f"the worker exited with code {code} before it was stopped")

    def wait_for_event(self, matches: Callable[[Event], bool], timeout_s: float, what: str,
                       between: Callable[[], Any] | None = None) -> Event:
        """The first logged event ``matches`` accepts, waiting up to ``timeout_s``; ``between`` runs between
        looks (it should block a moment: a poll), else they are 0.2 s apart. Raises WorkerExited, or
        TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = next((event for event in self.events() if matches(event)), None)
            if found is not None:
                return found
            self.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} in the worker's log after {timeout_s:.0f} s ({self.log_path})")
            if between is None:
                time.sleep(0.2)
            else:
                between()

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, then wait for the exit code (SIGKILL after ``timeout_s``: then -9)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def tail(self, lines: int = 25) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:])


def worker_env(bootstrap_servers: str, redis_url: str) -> dict[str, str]:
    """This process's environment (PYTHONPATH included: the worker runs this checkout's code) and the services."""
    return dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap_servers, REDIS_URL=redis_url)
