"""Stopping and starting the broker and Redis that deploy/local/services.sh runs.

The script finds its services by the same environment variables it was
started with (KAFKA_PORT, REDIS_PORT, STREAMSCORE_STATE_DIR, ...), so a
scenario can only stop what ``services.sh env`` names: the servers behind
KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be those.
"""

from __future__ import annotations

import subprocess
import time

from tests.integration.kit import REPO

SCRIPT = REPO / "deploy" / "local" / "services.sh"


class LocalServices:
    def __init__(self, bootstrap: str, redis_url: str, variant: str = "") -> None:
        self.bootstrap = bootstrap
        self.redis_url = redis_url
        self._variant = variant  # "" for the plaintext endpoints, or --secure / --mtls

    def not_controllable(self) -> str | None:
        """Why this broker and Redis cannot be stopped and started here, or None if they can."""
        exported = dict(line.removeprefix("export ").split("=", 1)
                        for line in self._script("env", self._variant).splitlines() if "=" in line)
        if (exported.get("KAFKA_BOOTSTRAP_SERVERS"), exported.get("REDIS_URL")) != (self.bootstrap, self.redis_url):
            return (f"KAFKA_BOOTSTRAP_SERVERS={self.bootstrap} / REDIS_URL={self.redis_url} are not the services "
                    f"deploy/local/services.sh runs with this environment ({exported})")
        status = self._script("status")
        if sum(status.count(f"{name}: running (pid") for name in ("Kafka", "Redis")) != 2:
            return f"deploy/local/services.sh does not run both services: {status.strip()}"
        return None

    def stop_kafka(self) -> float:
        return self._timed("stop-kafka")

    def start_kafka(self) -> float:
        return self._timed("start-kafka")

    def stop_redis(self) -> float:
        return self._timed("stop-redis")

    def start_redis(self) -> float:
        return self._timed("start-redis")

    def _timed(self, command: str) -> float:
        started = time.monotonic()
        self._script(command)
        return time.monotonic() - started

    def _script(self, *command: str) -> str:
        done = subprocess.run([str(SCRIPT), *filter(None, command)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"services.sh {command} exited {done.returncode}:\n{done.stderr}")
        return done.stdout
