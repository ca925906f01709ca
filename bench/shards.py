"""score-file over a Parquet dataset: one process against the same dataset in shards run side by side.

``python -m bench.shards [--rows 200000] [--files 4] [--shards 2] [--repeats 3]``
writes a dataset of churn requests (``inputs`` as JSON text, seeded, in
``--files`` files of row groups of 10,000 rows) under ``--workdir``, then, in
turn for each repeat:

- ``one``: one ``score-file DIR OUT`` process, ``--torch-threads`` the
  machine's cores (its best on its own);
- ``sharded``: ``--shards`` processes ``score-file DIR OUT --shard I/N``
  started together, one torch thread each.

Each figure is the wall time from the start to the last process's exit
(start-up and the model's load included, as a scheduler sees it), and the
longest ``took_s`` of the processes' own summary lines (scoring alone), and
the CPU time of all the processes together. The
replies are counted after each run: every request answered once. A table on
stdout and ``results.json`` in ``--workdir``. Run on a machine of its own:
on shared cores the figures are only as good as the quiet around them.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from worker.core.samples import churn_inputs

ROW_GROUP = 10_000


def write_dataset(root: Path, rows: int, files: int, seed: int = 20261203) -> None:
    """``rows`` churn requests in ``files`` Parquet files under ``root``, row groups of ROW_GROUP rows."""
    rng = random.Random(seed)
    per_file = -(-rows // files)
    for index, start in enumerate(range(0, rows, per_file)):
        count = min(per_file, rows - start)
        table = pa.table({"id": [f"r{start + i}" for i in range(count)],
                          "inputs": [orjson.dumps(churn_inputs(rng)).decode() for _ in range(count)]})
        pq.write_table(table, root / f"part-{index:03d}.parquet", row_group_size=ROW_GROUP)


def score_file(source: Path, target: Path, torch_threads: int, shard: str | None) -> list[str]:
    command = [sys.executable, "-m", "worker", "score-file", str(source), str(target), "--model", "churn",
               "--torch-threads", str(torch_threads), "--log-format", "json", "--no-progress"]
    return command + (["--shard", shard] if shard else [])


def run_together(commands: list[list[str]]) -> dict[str, Any]:
    """Start ``commands`` at once; the wall time until the last exits, the longest summary ``took_s``, and the
    CPU time (user + system) of all of them together."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    processes = [subprocess.Popen(command, stderr=subprocess.PIPE) for command in commands]
    outputs = [process.communicate()[1] for process in processes]
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    took = []
    for process, stderr in zip(processes, outputs, strict=True):
        if process.returncode != 0:
            raise RuntimeError(f"exit {process.returncode}: {stderr.decode(errors='replace')[-2000:]}")
        lines = [orjson.loads(line) for line in stderr.splitlines()]
        took += [line["took_s"] for line in lines if line.get("event") == "file_scored"]
    return {"wall_s": round(wall_s, 2), "took_s": max(took), "cpu_s": round(cpu_s, 2)}


def replies_in(directory: Path) -> int:
    return sum(pq.ParquetFile(path).metadata.num_rows for path in directory.glob("part-*.parquet"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="where the dataset and replies go (default: a temporary one)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-shards-"))
    (workdir / "in").mkdir(parents=True, exist_ok=True)
    write_dataset(workdir / "in", args.rows, args.files)
    cores = os.cpu_count() or 1
    runs: dict[str, list[dict[str, Any]]] = {"one": [], "sharded": []}
    for _ in range(args.repeats):
        for name in runs:  # interleaved, so that a slow spell of the machine touches both
            out = workdir / f"out-{name}"
            shutil.rmtree(out, ignore_errors=True)
            commands = ([score_file(workdir / "in", out, cores, None)] if name == "one" else
                        [score_file(workdir / "in", out, 1, f"{i}/{args.shards}") for i in range(args.shards)])
            runs[name].append(run_together(commands))
            if replies_in(out) != args.rows:
                raise RuntimeError(f"{name}: {replies_in(out)} replies for {args.rows} requests")
    results = {"rows": args.rows, "files": args.files, "shards": args.shards, "cores": cores, "runs": runs,
               "load_average": os.getloadavg()}
    (workdir / "results.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(f"{args.rows} churn requests, {args.files} files, {cores} cores; each run: wall s (scoring alone s, "
          "CPU s of all processes)")
    for name, measured in runs.items():
        label = "one process" if name == "one" else f"{args.shards} shards at once"
        walls = ", ".join(f"{m['wall_s']:.1f} ({m['took_s']:.1f}, {m['cpu_s']:.1f})" for m in measured)
        print(f"  {label:<18} {walls}   median wall {statistics.median(m['wall_s'] for m in measured):.1f}")
    print(f"results: {workdir / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
