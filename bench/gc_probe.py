"""Run the worker with Python's garbage collector watched, and optionally tuned: a tail-latency experiment.

``python -m bench.gc_probe [--unfreeze] [--threshold G0,G1,G2] -- run --requests-topic ...`` runs
``python -m worker`` with the arguments after ``--``. Every collection's pause is
timed (``gc.callbacks``); at exit one JSON line, event ``gc_pauses``, gives the
count, p50, p99, max and total pause per generation, of the collections made
once the loop ran (start-up's, imports and model load, are left out). The worker
freezes its start-up heap and raises the first generation's threshold
(worker/app.py ``tune_collector``); ``--unfreeze``: undo the freeze when the
loop starts, so that full collections walk torch's and the model's objects
again (the "before" of that change). ``--threshold``: ``gc.set_threshold``
when the loop starts, in place of the worker's (700,10,10: Python's own, the
"before" of the threshold). Nothing here changes the worker's code: the bench
measures what each would change (bench/tail.py).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import runpy
import sys
import time
from typing import Any

import orjson

_started: list[float] = [0.0]
_pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
_loop_running: list[bool] = [False]


def _watch(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    elif _loop_running[0]:
        _pauses[info["generation"]].append((time.perf_counter() - _started[0]) * 1000)


def _report() -> None:
    summary: dict[str, Any] = {"event": "gc_pauses", "frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
    for generation, pauses in _pauses.items():
        ordered = sorted(pauses)
        summary[f"gen{generation}"] = {
            "count": len(ordered), "total_ms": round(sum(ordered), 1),
            "p50_ms": round(ordered[len(ordered) // 2], 3) if ordered else None,
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3) if ordered else None,
            "max_ms": round(ordered[-1], 3) if ordered else None}
    sys.stderr.write(orjson.dumps(summary).decode() + "\n")


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m bench.gc_probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unfreeze", action="store_true")
    parser.add_argument("--threshold", help="G0,G1,G2 for gc.set_threshold")
    args = parser.parse_args(argv[:split])
    from worker.stream.loop import Worker

    run = Worker.run

    def watched_run(self: Worker) -> int:
        if args.unfreeze:
            gc.unfreeze()
        if args.threshold:
            gc.set_threshold(*(int(x) for x in args.threshold.split(",")))
        _loop_running[0] = True
        return run(self)

    Worker.run = watched_run  # type: ignore[method-assign]
    gc.callbacks.append(_watch)
    atexit.register(_report)
    sys.argv = ["worker", *argv[split + 1:]]
    runpy.run_module("worker", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
