"""A command whose standard output is read by a reader that goes away (``... | head``).

Writing to a pipe whose reader has closed it raises BrokenPipeError: the
command then stops quietly, as one killed by SIGPIPE would, instead of
printing ``error: [Errno 32] Broken pipe`` as if something had gone wrong.
"""

from __future__ import annotations

import os
import sys

EXIT_READER_GONE = 141  # what a shell reports for a command killed by SIGPIPE (128 + 13)


def reader_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says that standard output's reader went away: a BrokenPipeError that reached a command's
    top (the clients' sockets do not raise one that far: redis-py raises ConnectionError, the Kafka clients
    reconnect; and stderr's log lines are lost quietly, worker/logs.py). If so, standard output is pointed at
    /dev/null, so that the interpreter's own flush at exit writes nothing and says nothing."""
    if not isinstance(exc, BrokenPipeError):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return True
