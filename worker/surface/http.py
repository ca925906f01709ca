"""The HTTP server of the surface: ``/metrics``, ``/healthz`` and ``/readyz`` on one port.

``HttpSurface.start`` binds the port (in the caller's thread, so that a port
in use is a start-up error) and serves from a daemon thread, one short-lived
thread per request. Those threads only read: the loop's WorkerStats (through
the metrics collector and the probes), the clock, and whether a stop was asked for. The
server starts before the model loads, so ``/healthz`` answers during a long
load while ``/readyz`` says not ready until the worker is warm and in its group.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import structlog
from prometheus_client.exposition import choose_encoder

from worker.core.clock import Clock
from worker.core.errors import ConfigError
from worker.core.stats import WorkerStats
from worker.surface.metrics import metrics_registry
from worker.surface.probes import Verdict, liveness, readiness

log = structlog.get_logger(__name__)

ANY_HOST = ""  # every address of the machine: see HttpSurface


class HttpSurface:
    """Serves the worker's metrics and probes from a thread of its own; see the module docstring."""

    def __init__(self, port: int, stats: WorkerStats, clock: Clock, liveness_timeout_s: float,
                 stopping: Callable[[], bool] = lambda: False, host: str = ANY_HOST) -> None:
        """``port`` 0 picks a free one (see ``port`` once started); ``stopping()`` says whether a stop was
        asked for (then not ready); it is called from the serving threads. ``host`` ANY_HOST: every address
        of the machine, IPv6 and IPv4 (IPv4 alone where the machine has no IPv6: a probe or a scrape of a pod on
        an IPv6 cluster reaches it either way)."""
        self._address = (host, port)
        self._stats = stats
        self._clock = clock
        self._timeout_s = liveness_timeout_s
        self._stopping = stopping
        self._registry = metrics_registry(stats)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port served on (once started)."""
        return self._server.server_address[1] if self._server else self._address[1]

    def start(self) -> None:
        """Bind and start serving; returns at once. Raises ConfigError when the port cannot be bound."""
        self._server = _bound(self._address)
        self._server.surface = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="streamscore-http", daemon=True)
        self._thread.start()
        log.info("http_serving", port=self.port, paths=["/metrics", "/healthz", "/readyz"])

    def close(self) -> None:
        """Stop serving and release the port; blocks until the serving thread has stopped."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def metrics(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition in the format the scraper accepts (Prometheus text, or OpenMetrics), and its type."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self._registry), content_type

    def healthz(self) -> Verdict:
        return liveness(self._stats, self._clock.monotonic(), self._timeout_s)

    def readyz(self) -> Verdict:
        return readiness(self._stats, self._clock.monotonic(), self._timeout_s, self._stopping())


def check_port_free(port: int) -> None:
    """Raise ConfigError, as ``HttpSurface.start`` would, when ``port`` cannot be bound on every address now
    (``--processes N`` checks each child's port before it starts any)."""
    _bound((ANY_HOST, port)).server_close()


def _bound(address: tuple[str, int]) -> _Server:
    """A server bound to ``address`` (ANY_HOST: IPv6 and IPv4, or IPv4 alone where the machine has no IPv6).
    Raises ConfigError naming the setting when the port cannot be bound."""
    host, port = address
    try:
        if host != ANY_HOST:
            return _Server(address)
        try:
            return _Server(("::", port), socket.AF_INET6)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE or socket.has_ipv6 and _ipv6_works():
                raise
            return _Server(("0.0.0.0", port))  # no IPv6 here
    except OSError as exc:
        raise ConfigError(f"cannot serve HTTP on port {port} ({exc}): choose another --http-port "
                          "(STREAMSCORE_HTTP_PORT)") from exc


def _ipv6_works() -> bool:
    """Whether this machine can open an IPv6 socket at all (a kernel or container may have IPv6 off)."""
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    except OSError:
        return False
    return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    surface: HttpSurface  # what it serves: set by HttpSurface.start once bound (a port's check serves nothing)

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily = socket.AF_INET) -> None:
        self.address_family = family
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:  # IPv4 too, as mapped addresses, whatever the system default
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    _head_only = False  # answering HEAD: the headers of GET's answer, no body

    def do_HEAD(self) -> None:  # noqa: N802 (the name http.server calls)
        """What GET answers, without its body (a load balancer's or uptime checker's probe)."""
        self._head_only = True
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        path = self.path.split("?", 1)[0]
        surface = self.server.surface
        if path == "/metrics":
            body, content_type = surface.metrics(self.headers.get("Accept"))
            self._reply(200, body, content_type)
        elif path in ("/healthz", "/readyz"):
            verdict = surface.healthz() if path == "/healthz" else surface.readyz()
            self._reply(200 if verdict.ok else 503, orjson.dumps(verdict.body()), "application/json")
        else:
            self._reply(404, orjson.dumps({"error": f"no such path {path!r}",
                                           "paths": ["/metrics", "/healthz", "/readyz"]}), "application/json")

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self._head_only:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is not news; failures show in the worker's own events
