"""A TCP gate in front of the schema registry, which a test closes and opens: an outage of the registry alone.

Open, it forwards each connection to the registry; closed, it accepts and
hangs up at once, as a registry that went away would (the caller sees the
connection reset). The registry itself stays up for the other tests, and
keeps its schemas (it stores them in memory).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class RegistryGate:
    def __init__(self, registry_url: str) -> None:
        parts = urlsplit(registry_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}"))
        self.is_open = True
        self.refused = 0  # connections hung up on while closed
        self._closing = False
        threading.Thread(target=self._accept, name="registry-gate", daemon=True).start()

    def close_gate(self) -> None:
        self.is_open = False

    def open_gate(self) -> None:
        self.is_open = True

    def stop(self) -> None:
        self._closing = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self.is_open:
                self.refused += 1
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()  # linger 0: a reset
                continue
            upstream = socket.create_connection(self._target, timeout=10)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
