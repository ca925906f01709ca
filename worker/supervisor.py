"""``--processes N``: N workers of the same group on one host, kept running and stopped together.

Each child is a full worker process (its own consumer, model and producer; one
per GPU or per core) with its own client id, and on CUDA its own device. A
child that exits on its own (a crash, kill -9, the OOM killer) is started
again after a capped backoff (core/restarts.py); its partitions go to the
others meanwhile, and come back when it rejoins. After repeated fast failures
of one child the supervisor gives up: it stops the others and exits 1, so
that whoever runs it (Kubernetes, systemd) sees the failure. SIGTERM/SIGINT
is forwarded to every child, once, and the supervisor waits for them all;
SIGHUP is forwarded to every child running (a reload: docs/fleet.md).
Exit code: 1 after giving up; else 0 if every child stopped cleanly, else the
first non-zero one.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Protocol

import structlog

from worker.core.restarts import DEFAULT_LIMITS, GiveUp, RestartLimits, RestartPolicy

log = structlog.get_logger(__name__)


def child_commands(argv: list[str], processes: int, client_id: str, device: str,
                   cuda_devices: int, transactional_id: str = "", http_port: int = 0,
                   group_instance_id: str = "") -> list[list[str]]:
    """The command line of each child: the parent's, with --processes 1 and its own identity (and,
    with an ``http_port``, its own port: child i serves on http_port + i). A ``transactional_id`` the user
    gave becomes ``<id>-<i>``; without one, each child makes its own default (worker/core/transactional_ids.py).
    A ``group_instance_id`` becomes ``<id>-<i>`` too: two members of one static id fence each other."""
    commands = []
    for index in range(processes):
        extra = ["--processes", "1", "--client-id", f"{client_id}-{index}"]
        if transactional_id:
            extra += ["--transactional-id", f"{transactional_id}-{index}"]
        if group_instance_id:
            extra += ["--group-instance-id", f"{group_instance_id}-{index}"]
        if device in ("auto", "cuda") and cuda_devices > 1:
            extra += ["--device", f"cuda:{index % cuda_devices}"]
        if http_port:
            extra += ["--http-port", str(http_port + index)]
        commands.append([sys.executable, "-m", "worker", "run", *argv, *extra])
    return commands


class Process(Protocol):
    """What the supervisor needs of a child process (subprocess.Popen has it)."""

    pid: int

    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...


EXIT_GAVE_UP = 1


class _Child:
    def __init__(self, index: int, command: list[str], limits: RestartLimits) -> None:
        self.index = index
        self.command = command
        self.policy = RestartPolicy(limits)
        self.process: Process | None = None
        self.started_at = 0.0
        self.restart_at: float | None = None
        self.exit_code: int | None = None
        self.signalled = False


class Supervisor:
    """Runs the children, restarts the ones that die, stops them all on ``stop``.

    ``spawn``, ``clock`` and ``sleep`` are injectable, so that tests run in
    milliseconds. ``run`` blocks; ``stop`` is safe from a signal handler or
    another thread.
    """

    def __init__(self, commands: list[list[str]], limits: RestartLimits = DEFAULT_LIMITS, *,
                 spawn: Callable[[list[str]], Process] = subprocess.Popen,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 poll_s: float = 0.2) -> None:
        self._children = [_Child(index, command, limits) for index, command in enumerate(commands)]
        self._spawn, self._clock, self._sleep, self._poll_s = spawn, clock, sleep, poll_s
        self._stop_signal: int | None = None
        self._reload_asked = False
        # stop() against the loop starting a child; reentrant: a signal handler runs on the loop's thread
        self._lock = threading.RLock()
        self.gave_up = False

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Forward ``signum`` to every child (once each) and start no more."""
        with self._lock:
            if self._stop_signal is None:
                self._stop_signal = signum
            self._signal_children()

    def reload(self) -> None:
        """Forward SIGHUP to every child running, soon (each re-reads its configuration file: docs/fleet.md). Safe
        from a signal handler: the loop forwards it, and says so (a handler that logs can deadlock)."""
        self._reload_asked = True

    def _forward_reload(self) -> None:
        self._reload_asked = False
        with self._lock:
            if self._stop_signal is not None:  # stopping: a draining child has nothing to reload
                return
            pids = []
            for child in self._children:
                if child.process is not None and child.process.poll() is None:
                    child.process.send_signal(signal.SIGHUP)
                    pids.append(child.process.pid)
        log.info("reload_forwarded", pids=pids)

    def run(self) -> int:
        """Start the children and keep them running until ``stop`` or giving up; then wait for them all.
        Returns the exit code described in the module docstring."""
        with self._lock:
            for child in self._children:
                if self._stop_signal is None:
                    self._start(child, self._clock())
        log.info("processes_started", pids=[c.process.pid for c in self._children if c.process is not None])
        while self._stop_signal is None and not self.gave_up:
            if self._reload_asked:
                self._forward_reload()
            self._tend(self._clock())
            self._sleep(self._poll_s)
        with self._lock:
            if self._stop_signal is None:
                self._stop_signal = signal.SIGTERM  # gave up: stop the others
            self._signal_children()
        while any(self._reap(child) for child in self._children):
            self._sleep(self._poll_s)
        codes = [child.exit_code for child in self._children]
        log.info("processes_stopped", exit_codes=codes, gave_up=self.gave_up)
        if self.gave_up:
            return EXIT_GAVE_UP
        failed = next((code for code in codes if code), 0)
        return failed if failed is not None and 0 <= failed < 256 else EXIT_GAVE_UP

    def _tend(self, now: float) -> None:
        """Note the children that exited, and start again the ones whose backoff is over."""
        for child in self._children:
            if child.process is not None and not self._reap(child):
                decision = child.policy.on_exit(child.started_at, now)
                ran_s = round(now - child.started_at, 3)
                if isinstance(decision, GiveUp):
                    log.error("processes_giving_up", index=child.index, exit_code=child.exit_code, ran_s=ran_s,
                              fast_failures=decision.fast_failures, action="stopping the others")
                    self.gave_up = True
                    return
                log.warning("process_exited", index=child.index, exit_code=child.exit_code, ran_s=ran_s,
                            restart_in_s=decision.delay_s)
                child.restart_at = decision.at
            elif child.process is None and child.restart_at is not None and now >= child.restart_at:
                with self._lock:
                    if self._stop_signal is None:
                        self._start(child, now)

    def _start(self, child: _Child, now: float) -> None:
        restart = child.restart_at is not None
        process = self._spawn(child.command)
        child.process, child.started_at = process, now
        child.restart_at, child.exit_code, child.signalled = None, None, False
        if restart:
            log.info("process_restarted", index=child.index, pid=process.pid)

    def _reap(self, child: _Child) -> bool:
        """True while the child runs; once it exited, its code is kept and its process dropped."""
        if child.process is None:
            return False
        code = child.process.poll()
        if code is None:
            return True
        child.process, child.exit_code = None, code
        return False

    def _signal_children(self) -> None:
        for child in self._children:
            if child.process is not None and not child.signalled and child.process.poll() is None:
                child.process.send_signal(self._stop_signal or signal.SIGTERM)
                child.signalled = True


def supervise(commands: list[list[str]], limits: RestartLimits = DEFAULT_LIMITS) -> int:
    """Run the children under a Supervisor, SIGTERM/SIGINT stopping them all, SIGHUP reloading each; blocks.
    Main thread only.
    Returns the exit code described in the module docstring."""
    supervisor = Supervisor(commands, limits)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        supervisor.stop(signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda _signum, _frame: supervisor.reload())
    try:
        return supervisor.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
