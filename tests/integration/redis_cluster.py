"""A three-primary Redis Cluster on loopback, for the dedup store's scale-out tests: ``redis-server
--cluster-enabled yes`` three times on free ports, joined by ``redis-cli --cluster create`` (both from the Redis
that deploy/local/services.sh installs), in a directory of its own; all stopped at the end."""

from __future__ import annotations

import random
import socket
import subprocess
from pathlib import Path

import redis

from tests.integration.kit import wait_until
from tests.integration.sentinels import answers


class LocalCluster:
    def __init__(self, directory: Path, primaries: int = 3) -> None:
        self._dir = directory
        self.ports: list[int] = []
        while len(self.ports) < primaries:
            port = cluster_port()
            if port not in self.ports:
                self.ports.append(port)
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports[:2])  # it learns the rest

    def start(self) -> LocalCluster:
        """Every server started and ready; those started are stopped again if one is not."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        for port in self.ports:
            log = (self._dir / f"cluster-{port}.log").open("wb")
            self._processes.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(self._dir / f"nodes-{port}.conf"), "--save", "", "--appendonly", "no",
                 "--dir", str(self._dir)], stdout=log, stderr=subprocess.STDOUT))
        for port in self.ports:
            wait_until(lambda port=port: answers(port), 15, f"redis-server on :{port}")
        subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.ports),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60)
        wait_until(lambda: all(_state(port) == "ok" for port in self.ports), 30, "the cluster's state ok")

    def keys_per_node(self, pattern: str) -> list[int]:
        return [sum(1 for _ in redis.Redis(port=port).scan_iter(match=pattern, count=1000)) for port in self.ports]

    def stop(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def cluster_port() -> int:
    """A free port whose cluster bus port (10,000 above it, so at most 65,535) is free too."""
    while True:
        port = random.randint(21_000, 55_000)
        try:
            for candidate in (port, port + 10_000):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


def _state(port: int) -> str:
    try:
        return str(redis.Redis(port=port, socket_timeout=1).cluster("info").get("cluster_state"))
    except redis.RedisError:
        return ""

