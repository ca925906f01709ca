import os
import signal
import sys

# Until the worker says what a reload does (worker/cli.py), SIGHUP's default action would end it: an early one
# (a supervisor's reload reaching a child still importing torch) is ignored.
signal.signal(signal.SIGHUP, signal.SIG_IGN)
# Until the worker installs its own handler, SIGTERM ends it at once (nothing was consumed): its default action
# would do the same, except in a process that is PID 1 (a container without an init), which the kernel spares
# the signals it has no handler for, so that a SIGTERM while torch was imported was lost.
signal.signal(signal.SIGTERM, lambda signum, _frame: os._exit(128 + signum))

from worker.cli import main  # noqa: E402

sys.exit(main())
