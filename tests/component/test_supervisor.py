"""The --processes supervisor over real child processes (tiny Python scripts, not the worker): restart,
give-up, and SIGTERM and SIGHUP forwarded."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.integration.kit import REPO, wait_until
from worker.core.restarts import RestartLimits
from worker.supervisor import EXIT_GAVE_UP, Supervisor

# argv[1]: a folder. The first run exits 1; the next ones note their pid and run until SIGTERM (then exit 0), noting
# each SIGHUP.
CRASH_ONCE = """
import os, signal, sys, time
folder = sys.argv[1]
if not os.path.exists(os.path.join(folder, "crashed")):
    open(os.path.join(folder, "crashed"), "w").close()
    sys.exit(1)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.signal(signal.SIGHUP, lambda *_: open(os.path.join(folder, f"reloaded.{os.getpid()}"), "w").close())
open(os.path.join(folder, f"running.{os.getpid()}"), "w").close()
while True:
    time.sleep(0.02)
"""
ALWAYS_CRASH = "import sys; sys.exit(3)"
QUICK = RestartLimits(first_backoff_s=0.05, max_backoff_s=0.2, fast_failure_s=5.0, max_fast_failures=3)


def crash_once(folder: Path) -> list[str]:
    folder.mkdir()
    return [sys.executable, "-c", CRASH_ONCE, str(folder)]


def running(folder: Path) -> list[int]:
    return [int(path.suffix[1:]) for path in folder.glob("running.*")]


class Counted:
    """subprocess.Popen, counting starts per command."""

    def __init__(self) -> None:
        self.starts: dict[str, int] = {}
        self.processes: list[subprocess.Popen] = []

    def __call__(self, command: list[str]) -> subprocess.Popen:
        self.starts[command[-1]] = self.starts.get(command[-1], 0) + 1
        self.processes.append(subprocess.Popen(command))
        return self.processes[-1]


def run_in_thread(supervisor: Supervisor) -> tuple[threading.Thread, list[int]]:
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(supervisor.run()), daemon=True)
    thread.start()
    return thread, result


def test_children_that_crash_are_restarted_and_then_stopped_cleanly(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    spawn = Counted()
    supervisor = Supervisor([crash_once(first), crash_once(second)], QUICK, spawn=spawn, poll_s=0.02)
    thread, result = run_in_thread(supervisor)
    try:
        wait_until(lambda: running(first) and running(second), 30, "both children to run again after a crash")
        assert spawn.starts == {str(first): 2, str(second): 2}
    finally:
        supervisor.stop(signal.SIGTERM)
        thread.join(30)
    assert result == [0]
    assert all(process.poll() == 0 for process in spawn.processes[-2:])


def test_a_child_that_keeps_failing_fast_makes_the_supervisor_give_up_and_stop_the_others(tmp_path):
    steady = tmp_path / "steady"
    spawn = Counted()
    supervisor = Supervisor([[sys.executable, "-c", ALWAYS_CRASH], crash_once(steady)], QUICK, spawn=spawn,
                            poll_s=0.02)
    thread, result = run_in_thread(supervisor)
    thread.join(60)
    assert result == [EXIT_GAVE_UP] and supervisor.gave_up
    assert spawn.starts[ALWAYS_CRASH] == QUICK.max_fast_failures
    assert all(process.poll() is not None for process in spawn.processes)  # nothing left running


def test_sighup_then_sigterm_to_the_supervisor_are_forwarded_to_every_child(tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    commands = [crash_once(folder) for folder in folders]
    for folder in folders:
        (folder / "crashed").touch()  # no crash: run at once
    script = f"import sys; from worker.supervisor import supervise; sys.exit(supervise({commands!r}))"
    supervisor = subprocess.Popen([sys.executable, "-c", script], cwd=REPO,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        wait_until(lambda: all(running(folder) for folder in folders), 30, "both children to run")
        supervisor.send_signal(signal.SIGHUP)  # a reload: each child is told, nothing stops
        wait_until(lambda: all(list(folder.glob("reloaded.*")) for folder in folders), 30, "both children to reload")
        assert supervisor.poll() is None
        assert [[p.name for p in folder.glob("reloaded.*")] for folder in folders] == \
            [[f"reloaded.{pid}" for pid in running(folder)] for folder in folders]
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(30) == 0
        for folder in folders:
            (pid,) = running(folder)
            assert not Path(f"/proc/{pid}").exists()  # stopped, and reaped by the supervisor
    finally:
        supervisor.kill()
