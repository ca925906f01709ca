"""``--processes N``: N workers of the same group on one host, started and stopped together.

Each child is a full worker process (its own consumer, model and producer; one
per GPU or per core) with its own client id, and on CUDA its own device. The
supervisor forwards SIGTERM/SIGINT to every child; if one child exits on its
own, the others are stopped too, so the group never runs short-handed without
anyone noticing. Exit code: 0 if every child stopped cleanly, else the first
non-zero one.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from types import FrameType

import structlog

log = structlog.get_logger(__name__)


def child_commands(argv: list[str], processes: int, client_id: str, device: str,
                   cuda_devices: int, transactional_id: str = "") -> list[list[str]]:
    """The command line of each child: the parent's, with --processes 1 and its own identity."""
    commands = []
    for index in range(processes):
        extra = ["--processes", "1", "--client-id", f"{client_id}-{index}"]
        if transactional_id:
            extra += ["--transactional-id", f"{transactional_id}-{index}"]
        if device in ("auto", "cuda") and cuda_devices > 1:
            extra += ["--device", f"cuda:{index % cuda_devices}"]
        commands.append([sys.executable, "-m", "worker", "run", *argv, *extra])
    return commands


def supervise(commands: list[list[str]], poll_s: float = 0.2) -> int:
    """Run the children until all exit; blocks. Returns the exit code described above."""
    children = [subprocess.Popen(command) for command in commands]
    log.info("processes_started", pids=[child.pid for child in children])
    stopping = False

    def stop_all(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)
    first_failure = 0
    while any(child.poll() is None for child in children):
        for child in children:
            code = child.poll()
            if code is not None and code != 0 and not first_failure:
                first_failure = code
            if code is not None and not stopping:
                log.error("process_exited", pid=child.pid, exit_code=code, action="stopping the others")
                stop_all(signal.SIGTERM, None)
        time.sleep(poll_s)
    codes = [child.returncode for child in children]
    log.info("processes_stopped", exit_codes=codes)
    return first_failure or next((code for code in codes if code), 0)
