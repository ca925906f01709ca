"""Each exactly-once worker's transactional id: unique among the workers running, the same across a restart.

Two producers with one transactional id fence each other: each one's start
aborts the other's open transaction, and a worker replaces a fenced producer,
whose start fences the other again. Two workers started by hand with the old
default id, ``<group>.<client-id>``, did that 28 times in ten seconds.

The default id names the host too, ``<group>.<client-id>.<host>``: pods,
containers and machines differ by their host name. Workers on one host take
slots: the first running takes the id itself, the next ``<id>.1``, and so on,
each holding a lock file in the temporary directory while its process runs.
The file names the process holding it, until a worker that drained and
committed all it held marks it ``stopped`` (``stopped_cleanly``). A worker
starting takes first a free slot whose last holder died without that mark (a
killed worker's, whose producer may have left a transaction open: the new
producer's start aborts it), else the lowest free one. So a killed worker
started again takes its own slot back even where a rolling change freed a
lower one meanwhile (a newcomer's run, 2026-12-07: the killed worker came back
under the stopped one's slot, and its own open transaction held read_committed
readers until the broker's transaction timeout). An id the user gives is used
as it is: one that a running worker on this host holds already stops the
worker at start.
Locks are per process: workers built one after another in one process (tests)
hold the same slot.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
from pathlib import Path

from worker.core.errors import ConfigError

try:
    import fcntl
except ImportError:  # not a POSIX system: no locks, every worker takes the id itself
    fcntl = None  # type: ignore[assignment]

SLOTS = 64  # workers of one default id on one host
_HELD: dict[Path, int] = {}  # the lock files this process holds, and their descriptors (open while it runs)


def own_transactional_id(group: str, client_id: str, host: str | None = None) -> str:
    """The default id of a worker of ``group`` with ``client_id`` on ``host`` (default: this one)."""
    return f"{group}.{client_id}.{host or socket.gethostname()}"


def hold(transactional_id: str, *, given: bool, directory: Path | None = None, slots: int = SLOTS) -> str:
    """The id this worker uses, held until its process exits: ``transactional_id`` itself when no other
    process on this host holds it; for a default (not ``given``) id, else the first of ``<id>.1``,
    ``<id>.2``, ... that none holds. Raises ConfigError naming the setting when a given id is held, or
    every slot of a default one."""
    directory = directory or Path(tempfile.gettempdir())
    candidates = [(candidate, directory / f"streamscore-txn-{hashlib.sha256(candidate.encode()).hexdigest()[:20]}.lock")
                  for candidate in (transactional_id if slot == 0 else f"{transactional_id}.{slot}"
                                    for slot in range(1 if given else slots))]
    for candidate, path in candidates:  # first a slot whose holder died: its open transaction is fenced by taking it
        if path.exists() and _locked(path, abandoned_only=True):
            return candidate
    for candidate, path in candidates:
        if _locked(path):
            return candidate
    if given:
        raise ConfigError(f"another worker on this host runs with transactional_id {transactional_id!r}: two "
                          "producers with one transactional id fence each other. Give each worker its own "
                          "--transactional-id, or unset it (the default is unique to each running worker)")
    raise ConfigError(f"{slots} workers on this host already run with the default transactional id "
                      f"{transactional_id!r} or its numbered slots; set --transactional-id or --client-id")


def stopped_cleanly() -> None:
    """Mark the slots this process holds as left with nothing open (its worker drained and committed all it
    held): a worker started later takes one only when no killed worker's slot is free."""
    for descriptor in _HELD.values():
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, STOPPED, 0)


STOPPED = b"stopped\n"


def _locked(path: Path, abandoned_only: bool = False) -> bool:
    """Whether this process holds the lock file now (taking it if no other process does; ``abandoned_only``:
    only if its last holder died holding it, the file naming a process and not marked stopped)."""
    if path in _HELD or fcntl is None:
        return True
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process holds it
        os.close(descriptor)
        return False
    if abandoned_only and not os.pread(descriptor, 32, 0).strip().isdigit():
        os.close(descriptor)  # free, but left cleanly (or never held): not the one to fence
        return False
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()}\n".encode())  # for whoever looks: which process holds it
    _HELD[path] = descriptor
    return True
