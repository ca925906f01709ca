import json
import os
import signal
import sys


def _stopped_while_importing(signum: int, _frame: object) -> None:
    """Until the worker installs its own handler, SIGTERM ends it at once (nothing was consumed yet), saying so:
    its default action would end it too, except in a process that is PID 1 (a container without an init), which
    the kernel spares the signals it has no handler for, so that a SIGTERM while torch was imported was lost."""
    code = 128 + signum
    asked = os.environ.get("STREAMSCORE_LOG_FORMAT", "auto")
    if "--log-format" in sys.argv[:-1]:
        asked = sys.argv[sys.argv.index("--log-format") + 1]
    if asked == "json" or (asked == "auto" and not sys.stderr.isatty()):
        line = json.dumps({"event": "stopped_while_starting", "signal": "SIGTERM", "exit_code": code,
                           "level": "warning",
                           "detail": "while importing, before the model loaded: nothing was consumed yet"}) + "\n"
    else:
        line = f"stopped_while_starting: SIGTERM while importing, nothing consumed yet (exit code {code})\n"
    os.write(2, line.encode())
    os._exit(code)


# Until the worker says what a reload does (worker/cli.py), SIGHUP's default action would end it: an early one
# (a supervisor's reload reaching a child still importing torch) is ignored.
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGTERM, _stopped_while_importing)

from worker.cli import main  # noqa: E402


def _stopped(signum: int, _frame: object) -> None:
    """Once imported, until a command installs its own: SIGTERM ends it as the default action would, with the
    finally blocks run (a consumer closed, Ray shut down), also as PID 1."""
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _stopped)
sys.exit(main())
