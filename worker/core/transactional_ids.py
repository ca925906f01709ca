"""Each exactly-once worker's transactional id: unique among the workers running, the same across a restart.

Two producers with one transactional id fence each other: each one's start
aborts the other's open transaction, and a worker replaces a fenced producer,
whose start fences the other again. Two workers started by hand with the old
default id, ``<group>.<client-id>``, did that 28 times in ten seconds.

The default id names the host too, ``<group>.<client-id>.<host>``: pods,
containers and machines differ by their host name. Workers on one host take
slots: the first running takes the id itself, the next ``<id>.1``, and so on,
each holding a lock file in the temporary directory while its process runs. A
restarted worker takes the lowest free slot again (its own, unless another
worker took it meanwhile), so its producer's start aborts what its killed
predecessor left open. An id the user gives is used as it is: one that a
running worker on this host holds already stops the worker at start.
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
    for slot in range(1 if given else slots):
        candidate = transactional_id if slot == 0 else f"{transactional_id}.{slot}"
        if _locked(directory / f"streamscore-txn-{hashlib.sha256(candidate.encode()).hexdigest()[:20]}.lock"):
            return candidate
    if given:
        raise ConfigError(f"another worker on this host runs with transactional_id {transactional_id!r}: two "
                          "producers with one transactional id fence each other. Give each worker its own "
                          "--transactional-id, or unset it (the default is unique to each running worker)")
    raise ConfigError(f"{slots} workers on this host already run with the default transactional id "
                      f"{transactional_id!r} or its numbered slots; set --transactional-id or --client-id")


def _locked(path: Path) -> bool:
    """Whether this process holds the lock file now (taking it if no other process does)."""
    if path in _HELD or fcntl is None:
        return True
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process holds it
        os.close(descriptor)
        return False
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()}\n".encode())  # for whoever looks: which process holds it
    _HELD[path] = descriptor
    return True
