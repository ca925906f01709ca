"""The batch file job's outputs: never the input, and published whole or not at all.

``score-file same.jsonl same.jsonl`` must not cost the user the input. Paths
are compared as files, not as strings: another spelling of the path, a
symlink or a hard link to the input is the input all the same.

Each output is written under a partial name beside its final path,
``.<name>.partial-<host>-<pid>`` (hidden, and in the same directory so that
the rename is atomic; the host too because shards of one job on several
machines, or a shard run again elsewhere, share the directory, and in a
container the pid alone is 1 in every one), and renamed onto the final path
only once the run is complete. A run that stops early, asked to or by an error, removes its
partial files and leaves what was at the final paths as it was; only a run
killed outright (SIGKILL, a crash of the interpreter) leaves a partial file
behind, named for what it is.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path

from worker.core.errors import ConfigError


def refuse_the_input_as_output(source: Path, outputs: Mapping[str, Path]) -> None:
    """ConfigError naming both when one of ``outputs`` (each path keyed by what it is, path included)
    is the file ``source``."""
    for what, path in outputs.items():
        if same_file(source, path):
            raise ConfigError(f"{what} is the input {source}: the requests would be replaced by their "
                              "replies; write them to another path")


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: one inode when both exist, else the same path once resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet), or cannot be looked at: compare where the paths lead
        return a.resolve() == b.resolve()


def partial_path(final: Path, writer: str) -> Path:
    """Where ``writer`` (a process, see ``this_process``) writes ``final`` until it is complete:
    ``.<name>.partial-<writer>`` beside it. Pure."""
    return final.with_name(f".{final.name}.partial-{writer}")


def this_process() -> str:
    """This process among those of every machine that may write into a shared directory: ``<host>-<pid>``."""
    return f"{socket.gethostname()}-{os.getpid()}"


class StagedFile:
    """One output, written at ``partial`` and renamed onto ``final`` by ``publish``.

    Through a symlink, the file the link names is replaced and the link kept.
    Creates nothing itself: the caller writes ``partial``. Not thread-safe.
    """

    def __init__(self, final: Path, writer: str | None = None) -> None:
        self.final = Path(os.path.realpath(final))
        self.partial = partial_path(self.final, writer or this_process())

    def publish(self) -> None:
        """Rename the partial file onto the final path, atomically, with the mode of a file it replaces."""
        if self.final.exists():
            shutil.copymode(self.final, self.partial)
        os.replace(self.partial, self.final)

    def discard(self) -> None:
        """Remove the partial file, if any, and leave the final path as it was."""
        self.partial.unlink(missing_ok=True)

    def withdraw(self) -> None:
        """Remove both: this run has nothing to put there, and an earlier run's file would pass for its own."""
        self.discard()
        self.final.unlink(missing_ok=True)
