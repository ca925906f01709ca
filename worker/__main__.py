import signal
import sys

# Until the worker says what a reload does (worker/cli.py), SIGHUP's default action would end it: an early one
# (a supervisor's reload reaching a child still importing torch) is ignored.
signal.signal(signal.SIGHUP, signal.SIG_IGN)

from worker.cli import main  # noqa: E402

sys.exit(main())
