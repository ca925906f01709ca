"""The batch file job's outputs: never the input.

``score-file same.jsonl same.jsonl`` must not cost the user the input. Paths
are compared as files, not as strings: another spelling of the path, a
symlink or a hard link to the input is the input all the same.
"""

from __future__ import annotations

import os
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
