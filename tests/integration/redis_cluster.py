"""A three-primary Redis Cluster on loopback, for the dedup store's scale-out tests: ``redis-server
--cluster-enabled yes`` on free ports, joined by ``redis-cli --cluster create`` (both from the Redis that
deploy/local/services.sh installs), in a directory of its own; all stopped at the end. With ``replicas=1`` each
primary has a replica, and a primary killed is failed over to its replica (``kill_primary``, ``wait_failover``).
Given ``tls`` (the directory of deploy/local/services.sh's CA and server certificate), every node listens, and
the nodes speak to each other, with TLS only."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
from pathlib import Path

import redis

from tests.integration.kit import wait_until
from tests.integration.sentinels import answers, synced

# A node silent this long is failing, for the others (Redis's default: 15 s); its replica then takes over.
NODE_TIMEOUT_MS = 2000


class LocalCluster:
    def __init__(self, directory: Path, primaries: int = 3, replicas: int = 0, tls: Path | None = None,
                 password: str = "") -> None:
        """``password``: every node's requirepass (none: they ask for none)."""
        self._dir = directory
        self._replicas = replicas
        self._tls = tls
        self._password = password
        self.ports: list[int] = []
        while len(self.ports) < primaries * (1 + replicas):
            port = cluster_port()
            if port not in self.ports:
                self.ports.append(port)
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        scheme = "rediss+cluster" if self._tls else "redis+cluster"
        return f"{scheme}://" + ",".join(f"127.0.0.1:{port}" for port in self.ports[:2])  # it learns the rest

    def client(self, port: int) -> redis.Redis:
        """A client of the node on ``port``."""
        options: dict[str, object] = {"ssl": True, "ssl_ca_certs": str(self._tls / "ca.pem")} if self._tls else {}
        if self._password:
            options["password"] = self._password
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, **options)  # type: ignore[arg-type]

    def _auth(self) -> list[str]:
        return ["--requirepass", self._password, "--masterauth", self._password] if self._password else []

    def _listening(self, port: int) -> list[str]:
        if not self._tls:
            return ["--port", str(port)]
        # The bus port is 10,000 above the plaintext port by default: with that at 0, it is set. A node shows the
        # bus a client certificate (the server's is for servers only), which the others check.
        return ["--port", "0", "--cluster-port", str(port + 10_000), "--tls-port", str(port),
                "--tls-cert-file", str(self._tls / "server.pem"), "--tls-key-file", str(self._tls / "server.key"),
                "--tls-client-cert-file", str(self._tls / "client.pem"),
                "--tls-client-key-file", str(self._tls / "client.key"), "--tls-ca-cert-file", str(self._tls / "ca.pem"),
                "--tls-auth-clients", "no", "--tls-replication", "yes", "--tls-cluster", "yes"]

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
            self._processes[port] = subprocess.Popen(
                ["redis-server", *self._listening(port), *self._auth(), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes",
                 "--cluster-config-file", str(self._dir / f"nodes-{port}.conf"), "--save", "", "--appendonly", "no",
                 "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--repl-diskless-sync-delay", "0",
                 "--dir", str(self._dir)], stdout=log, stderr=subprocess.STDOUT)
        for port in self.ports:
            wait_until(lambda port=port: answers(port, self.client), 15, f"redis-server on :{port}")
        tls = ["--tls", "--cacert", str(self._tls / "ca.pem")] if self._tls else []
        password = ["-a", self._password, "--no-auth-warning"] if self._password else []
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        subprocess.run(["redis-cli", *tls, *password, "--cluster", "create", *nodes,
                        "--cluster-replicas", str(self._replicas), "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        wait_until(lambda: all(self._state(port) == "ok" for port in self.ports), 30, "the cluster's state ok")
        if self._replicas:
            wait_until(lambda: all(synced(port, self.client) for port in self.replica_ports()), 30,
                       "the replicas' first sync")

    def primary_ports(self) -> list[int]:
        return [port for port in self._running() if self._role(port) == "master"]

    def replica_ports(self) -> list[int]:
        return [port for port in self._running() if self._role(port) == "slave"]

    def kill_primary(self) -> tuple[int, int]:
        """SIGKILL the first primary (its writes not yet replicated die with it): its port, and its replica's."""
        port = self.primary_ports()[0]
        heir = next(replica for replica in self.replica_ports() if self._primary_of(replica) == port)
        self._processes[port].send_signal(signal.SIGKILL)
        self._processes[port].wait(10)
        return port, heir

    def wait_failover(self, heir: int, timeout_s: float = 60) -> None:
        """Until the replica on ``heir`` is a primary and the cluster's state is ok again."""
        wait_until(lambda: self._role(heir) == "master" and all(self._state(port) == "ok" for port in self._running()),
                   timeout_s, f"the replica on :{heir} promoted")

    def _running(self) -> list[int]:
        return [port for port in self.ports if self._processes[port].poll() is None]

    def keys_per_node(self, pattern: str) -> list[int]:
        """How many keys match on each primary still running."""
        return [sum(1 for _ in self.client(port).scan_iter(match=pattern, count=1000))
                for port in self.primary_ports()]

    def _state(self, port: int) -> str:
        try:
            return str(self.client(port).cluster("info").get("cluster_state"))
        except redis.RedisError:
            return ""

    def _role(self, port: int) -> str:
        try:
            return str(self.client(port).info("replication").get("role"))
        except redis.RedisError:
            return ""

    def _primary_of(self, port: int) -> int:
        return int(self.client(port).info("replication").get("master_port", 0))

    def stop(self) -> None:
        for process in self._processes.values():
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



