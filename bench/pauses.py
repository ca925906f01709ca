"""Keep the harness's own garbage collector out of what it measures.

The processes that send and stamp requests (bench/tail.py's reader, bench/openloop.py's sender thread and reader,
bench/tail_sender.py) import torch and hold tens of thousands of objects: a full collection there paused them
for about 100-200 ms, and every reply stamped after such a pause showed it as latency, on every contender alike
(docs/benchmarks.md, "Where the tail comes from").
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_collector_pauses() -> Iterator[None]:
    """Freeze what is alive, then run the block with the collector off (a measured run lasts seconds: the
    garbage it leaves is collected after it)."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
