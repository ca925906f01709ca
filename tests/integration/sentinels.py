"""A Redis primary, its replica and three Sentinels on loopback, for the failover tests: started from the
``redis-server`` that deploy/local/services.sh installs (Sentinel is its ``--sentinel`` mode), on free ports,
in a directory of their own; stopped, all of them, at the end. The Sentinels may want a password, and every
server may listen with TLS only (given the directory of deploy/local/services.sh's CA and server certificate)."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Callable
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
    def __init__(self, directory: Path, sentinel_password: str = "", tls: Path | None = None) -> None:
        """``sentinel_password``: the Sentinels' requirepass (none: they ask for none); ``tls``: the directory of
        ca.pem, server.pem and server.key, every server then listening with TLS only."""
        self._dir = directory
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self._sentinel_password = sentinel_password
        self._tls = tls
        self.data_ports = [free_port(), free_port()]  # the first starts as the primary
        self.sentinel_ports = [free_port() for _ in range(3)]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"{'rediss' if self._tls else 'redis'}+sentinel://{hosts}/{SERVICE}/0"

    def client(self, port: int) -> redis.Redis:
        """A client of the server on ``port`` (a Sentinel's with the Sentinels' password)."""
        options: dict[str, object] = {"socket_timeout": 1}
        if self._tls:
            options.update(ssl=True, ssl_ca_certs=str(self._tls / "ca.pem"))
        if port in self.sentinel_ports and self._sentinel_password:
            options["password"] = self._sentinel_password
        return redis.Redis(host="127.0.0.1", port=port, **options)  # type: ignore[arg-type]

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
        wait_until(lambda: synced(replica, self.client), 30, "the replica's first sync")
        for port in self.sentinel_ports:
            config = self._dir / f"sentinel-{port}.conf"  # a Sentinel rewrites its file: one each
            listen = "".join(f"{line}\n" for line in self._listening(port))
            asks = f"requirepass {self._sentinel_password}\nsentinel sentinel-pass {self._sentinel_password}\n" if (
                self._sentinel_password) else ""
            config.write_text(f"{listen}bind 127.0.0.1\ndir {self._dir}\n{asks}"
                              f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
                              f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                              f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n")
            self._spawn(port, ["redis-server", str(config), "--sentinel"])
        wait_until(lambda: self._replicas_seen() >= 1, 30, "the Sentinels to see the replica")

    def primary_port(self) -> int:
        """The data port the Sentinels name as the primary now."""
        for port in self.sentinel_ports:
            try:
                _, found = self.client(port).sentinel_get_master_addr_by_name(SERVICE)
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

    def _listening(self, port: int) -> list[str]:
        """The configuration lines that make a server listen on ``port`` (with TLS only, given ``tls``)."""
        if not self._tls:
            return [f"port {port}"]
        return ["port 0", f"tls-port {port}", f"tls-cert-file {self._tls / 'server.pem'}",
                f"tls-key-file {self._tls / 'server.key'}", f"tls-ca-cert-file {self._tls / 'ca.pem'}",
                "tls-auth-clients no", "tls-replication yes"]

    def _server(self, port: int, *extra: str) -> None:
        listening = [f"--{word}" if i == 0 else word for line in self._listening(port)
                     for i, word in enumerate(line.split(" "))]
        self._spawn(port, ["redis-server", *listening, "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", str(self._dir), *extra])
        wait_until(lambda: answers(port, self.client), 15, f"redis-server on :{port}")

    def _spawn(self, port: int, command: list[str]) -> None:
        log = (self._dir / f"{port}.log").open("wb")
        self._processes[port] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def _replicas_seen(self) -> int:
        try:
            return min(len(self.client(port).sentinel_slaves(SERVICE))
                       for port in self.sentinel_ports)
        except redis.RedisError:
            return 0



def plain_client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=1)


def synced(port: int, client: Callable[[int], redis.Redis] = plain_client) -> bool:
    """Whether the replica on ``port`` has its link to its primary up (its first sync done)."""
    try:
        return client(port).info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False


def answers(port: int, client: Callable[[int], redis.Redis] = plain_client) -> bool:
    """Whether a Redis server answers on ``port``."""
    try:
        return bool(client(port).ping())
    except redis.RedisError:
        return False
