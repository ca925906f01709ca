"""A Redis primary, its replica and three Sentinels on loopback, for the failover tests: started from the
``redis-server`` that deploy/local/services.sh installs (Sentinel is its ``--sentinel`` mode), on free ports,
in a directory of their own; stopped, all of them, at the end."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import redis

from tests.integration.kit import wait_until

SERVICE = "streamscore"
DOWN_AFTER_MS = 1000  # a primary silent this long is down, for each Sentinel
FAILOVER_TIMEOUT_MS = 5000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SentinelSet:
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self.data_ports = [free_port(), free_port()]  # the first starts as the primary
        self.sentinel_ports = [free_port() for _ in range(3)]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> SentinelSet:
        """Every server started and ready; those started are stopped again if one is not."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        primary, replica = self.data_ports
        self._server(primary, "--repl-diskless-sync-delay", "0")  # default 5 s: the first sync would wait that long
        self._server(replica, "--replicaof", "127.0.0.1", str(primary))
        wait_until(lambda: synced(replica), 30, "the replica's first sync")
        for port in self.sentinel_ports:
            config = self._dir / f"sentinel-{port}.conf"  # a Sentinel rewrites its file: one each
            config.write_text(f"port {port}\nbind 127.0.0.1\ndir {self._dir}\n"
                              f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
                              f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                              f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n")
            self._spawn(port, ["redis-server", str(config), "--sentinel"])
        wait_until(lambda: self._replicas_seen() >= 1, 30, "the Sentinels to see the replica")

    def primary_port(self) -> int:
        """The data port the Sentinels name as the primary now."""
        for port in self.sentinel_ports:
            try:
                _, found = redis.Redis(port=port, socket_timeout=1).sentinel_get_master_addr_by_name(SERVICE)
                return int(found)
            except (redis.RedisError, TypeError):
                continue
        raise AssertionError("no Sentinel answers")

    def kill_primary(self) -> int:
        """SIGKILL the primary; returns its port."""
        port = self.primary_port()
        self._processes[port].send_signal(signal.SIGKILL)
        self._processes[port].wait(10)
        return port

    def wait_failover(self, old_port: int, timeout_s: float = 60.0) -> int:
        """Wait until the Sentinels name another primary; returns its port. A failover attempt that fails is
        tried again only after twice FAILOVER_TIMEOUT_MS: on 2 busy cores one CI rehearsal saw no new primary
        within 30 s (the worker is not involved: the Sentinels elect)."""
        wait_until(lambda: self.primary_port() != old_port, timeout_s, "the failover")
        return self.primary_port()

    def stop(self) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)

    def _server(self, port: int, *extra: str) -> None:
        self._spawn(port, ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", str(self._dir), *extra])
        wait_until(lambda: answers(port), 15, f"redis-server on :{port}")

    def _spawn(self, port: int, command: list[str]) -> None:
        log = (self._dir / f"{port}.log").open("wb")
        self._processes[port] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def _replicas_seen(self) -> int:
        try:
            return min(len(redis.Redis(port=port, socket_timeout=1).sentinel_slaves(SERVICE))
                       for port in self.sentinel_ports)
        except redis.RedisError:
            return 0



def synced(port: int) -> bool:
    """Whether the replica on ``port`` has its link to its primary up (its first sync done)."""
    try:
        return redis.Redis(port=port, socket_timeout=1).info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False


def answers(port: int) -> bool:
    """Whether a Redis server answers on ``port``."""
    try:
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    except redis.RedisError:
        return False
