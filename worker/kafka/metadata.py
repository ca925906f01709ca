"""Waiting for a topic in the broker's metadata, and what a missing requests topic is called: both clients'.

A topic created a moment ago may not be in the broker's metadata yet, so a
lookup is asked again for a while before the topic counts as missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


def missing_requests_topic(topic: str) -> LookupError:
    return LookupError(f"requests topic {topic!r} does not exist on the broker; create it first "
                       f"(e.g. `python -m producer create-topic {topic} --partitions 4`)")
