"""Waiting for a topic in the broker's metadata, and what a missing requests topic is called: both clients'.

A topic created a moment ago may not be in the broker's metadata yet, so a
lookup is asked again for a while before the topic counts as missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import TypeVar

X = TypeVar("X")

METADATA_RETRY_S = 0.2


def wait_for(lookup: Callable[[], X | None], wait_s: float, missing: Callable[[], Exception]) -> X:
    """What ``lookup()`` finds (anything but None), asking again every METADATA_RETRY_S for up to ``wait_s``.
    Blocks as long as that and each lookup do; raises ``missing()`` then."""
    deadline = time.monotonic() + wait_s
    while True:
        found = lookup()
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            raise missing()
        time.sleep(METADATA_RETRY_S)


def wait_for_partitions(partitions_for: Callable[[str], Collection[int] | None], topics: dict[str, int],
                        wait_s: float) -> dict[str, list[int]]:
    """Each topic's partitions, once the client's metadata (``partitions_for(topic)``: None or empty when it has
    none) shows at least the wanted count of each, waiting up to ``wait_s``. Raises LookupError naming the topics
    still missing then."""
    def found() -> dict[str, list[int]]:
        return {name: sorted(partitions_for(name) or ()) for name in topics}

    def missing(partitions: dict[str, list[int]]) -> list[str]:
        return sorted(name for name, count in topics.items() if len(partitions[name]) < count)

    def complete() -> dict[str, list[int]] | None:
        partitions = found()
        return None if missing(partitions) else partitions

    return wait_for(complete, wait_s, lambda: LookupError(", ".join(missing(found()))))


def missing_requests_topic(topic: str) -> LookupError:
    return LookupError(f"requests topic {topic!r} does not exist on the broker; create it first "
                       f"(e.g. `python -m producer create-topic {topic} --partitions 4`)")
