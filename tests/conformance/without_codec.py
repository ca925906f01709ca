"""The worker as it runs where kafka-python's library for one codec is not installed.

    python -m tests.conformance.without_codec snappy run --requests-topic ...

kafka-python looks its codec libraries up when it decodes a batch (``kafka.codec.has_snappy()``); this says
"not installed" for the one named, then runs ``python -m worker`` with the rest of the arguments. The broker,
the batches and the client are the real ones: only the library is missing, as it was before streamscore
installed kafka-python's codec extras.
"""

from __future__ import annotations

import runpy
import sys

import kafka.codec

if __name__ == "__main__":
    codec = sys.argv.pop(1)
    if not hasattr(kafka.codec, f"has_{codec}"):
        raise SystemExit(f"kafka-python has no codec named {codec!r}")
    setattr(kafka.codec, f"has_{codec}", lambda: False)
    sys.argv[0] = "worker"
    runpy.run_module("worker", run_name="__main__", alter_sys=True)
