"""score-file over a Parquet dataset: one process against the same dataset in shards run side by side.

``python -m bench.shards [--rows 200000] [--files 4] [--shards 2] [--repeats 3]``
writes a dataset of churn requests (``inputs`` as JSON text, seeded, in
``--files`` files of row groups of 10,000 rows) under ``--workdir``, then, in
turn for each repeat:

- ``one``: one ``score-file DIR OUT`` process, ``--torch-threads`` the
  machine's cores (its best on its own);
- ``sharded``: ``--shards`` processes ``score-file DIR OUT --shard I/N``
  started together, one torch thread each;
- ``ray``: ``score-ray DIR OUT --concurrency N`` (N = ``--shards``) on a
  local Ray it starts and stops itself, on loopback (start-up included);
- ``ray-warm``: the same command on a Ray head started once, before the
  repeats, on loopback (``ray start --head``): the cluster's start is left
  out, the driver's and the actors' (each loads the model) are not.
  ``--no-ray`` leaves both out (the ``ray`` extra not installed).

Each figure is the wall time from the start to the last process's exit
(start-up and the model's load included, as a scheduler sees it), and the
longest ``took_s`` of the processes' own summary lines (scoring alone; for
Ray the dataset's read, scoring and write, its actors' start included), and
the CPU time of all the processes together (for ``ray``, Ray's own processes
too: this process adopts and reaps them as a subreaper; for ``ray-warm``,
the driver's and the head's process tree's, read from /proc). The
replies are counted after each run: every request answered once. A table on
stdout and ``results.json`` in ``--workdir``. Run on a machine of its own:
on shared cores the figures are only as good as the quiet around them.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def score_ray(source: Path, target: Path, actors: int, address: str) -> list[str]:
    return [sys.executable, "-m", "worker", "score-ray", str(source), str(target), "--model", "churn",
            "--concurrency", str(actors), "--address", address, "--log-format", "json"]


def run_together(commands: list[list[str]], env: dict[str, str] | None = None, tree: int | None = None,
                 keep: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Start ``commands`` at once; the wall time until the last exits, the longest summary ``took_s``, and the
    CPU time (user + system) of all of them together, their descendants' once reaped, and of the process
    the process ``tree`` (a pid: it and its descendants) meanwhile; ``keep``: children that run on (a Ray head)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree_before = tree_cpu_s(tree)
    started = time.perf_counter()
    processes = [subprocess.Popen(command, stderr=subprocess.PIPE, env=env) for command in commands]
    outputs = [process.communicate()[1] for process in processes]
    wall_s = time.perf_counter() - started
    reap_orphans(keep)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime + tree_cpu_s(tree) - tree_before
    took = []
    for process, stderr in zip(processes, outputs, strict=True):
        if process.returncode != 0:
            raise RuntimeError(f"exit {process.returncode}: {stderr.decode(errors='replace')[-2000:]}")
        lines = [orjson.loads(line) for line in stderr.splitlines() if line.startswith(b"{")]
        took += [line["took_s"] for line in lines if line.get("event") in ("file_scored", "dataset_scored_on_ray")]
    return {"wall_s": round(wall_s, 2), "took_s": max(took), "cpu_s": round(cpu_s, 2)}


def adopt_orphans() -> None:
    """Become a child subreaper (Linux): the processes a run leaves to outlive their parent (Ray's workers)
    become this process's children, so that reaping them counts their CPU time in RUSAGE_CHILDREN."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans(keep: frozenset[int] = frozenset(), timeout_s: float = 30.0) -> None:
    """Reap every child that exited, and wait up to ``timeout_s`` for the other children but ``keep`` (a Ray
    head that runs on) to exit: the orphans a run left, adopted."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        running = [pid for pid, (parent, state) in processes().items()
                   if parent == os.getpid() and pid not in keep and state != "Z"]
        if not running or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def processes() -> dict[int, tuple[int, str]]:
    """Every process of this machine (Linux /proc): its parent and its state."""
    found = {}
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.isdigit():
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                found[int(entry)] = (int(fields[1]), fields[0])
    return found


def tree_cpu_s(root: int | None) -> float:
    """The CPU seconds of the process ``root`` and its descendants, children they reaped included (/proc)."""
    if root is None:
        return 0.0
    parents = {pid: parent for pid, (parent, _) in processes().items()}
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree, grew = tree | more, bool(more)
    total = 0
    for pid in tree:
        with contextlib.suppress(OSError, ValueError, IndexError):  # one that exits meanwhile
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def ray_head(cpus: int, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A Ray head on 127.0.0.1 (``ray start --head --block``) for the ``ray-warm`` runs: its address and the pid
    of the ``ray start`` process; stopped by signalling that process, which stops what it started."""
    with socket_port() as port:
        pass
    command = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())", "start",
               "--head", "--block", "--port", str(port), "--num-cpus", str(cpus), "--include-dashboard=false",
               "--disable-usage-stats"]
    head = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any(Path(f"/proc/{pid}/comm").read_text().strip() == "raylet"
                      for pid, (parent, _) in processes().items() if parent == head.pid):
            if head.poll() is not None or time.monotonic() > deadline:
                said = head.stderr.read()[-2000:].decode(errors="replace") if head.stderr else ""
                raise RuntimeError(f"the Ray head did not start: {said}")
            time.sleep(0.5)
        time.sleep(2)  # its agents settle; a driver that joins too early waits for them anyway
        yield f"127.0.0.1:{port}", head.pid
    finally:
        head.terminate()
        head.wait(timeout=60)
        reap_orphans(timeout_s=10)


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


def replies_in(directory: Path) -> int:
    """The reply rows under ``directory``: score-file's parts, or score-ray's files (whatever Ray names them)."""
    return sum(pq.ParquetFile(path).metadata.num_rows for path in directory.glob("*.parquet"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="where the dataset and replies go (default: a temporary one)")
    parser.add_argument("--no-ray", action="store_true", help="no Ray contenders (the ray extra not installed)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-shards-"))
    (workdir / "in").mkdir(parents=True, exist_ok=True)
    write_dataset(workdir / "in", args.rows, args.files)
    cores = os.cpu_count() or 1
    names = ["one", "sharded"] + ([] if args.no_ray else ["ray", "ray-warm"])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    # Loopback only; token authentication asked for by name, else a driver joining the head would not send one.
    env = os.environ | {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                        "RAY_AUTH_MODE": "token"}
    adopt_orphans()
    with contextlib.ExitStack() as stack:
        head = None if args.no_ray else stack.enter_context(ray_head(max(cores, args.shards + 1), env))
        for _ in range(args.repeats):
            for name in runs:  # interleaved, so that a slow spell of the machine touches every contender
                out = workdir / f"out-{name}"
                shutil.rmtree(out, ignore_errors=True)
                tree = None
                if name == "one":
                    commands = [score_file(workdir / "in", out, cores, None)]
                elif name == "sharded":
                    commands = [score_file(workdir / "in", out, 1, f"{i}/{args.shards}") for i in range(args.shards)]
                else:
                    address, tree = ("local", None) if name == "ray" or head is None else head
                    commands = [score_ray(workdir / "in", out, args.shards, address)]
                keep = frozenset() if head is None else frozenset({head[1]})
                runs[name].append(run_together(commands, env, tree, keep))
                if replies_in(out) != args.rows:
                    raise RuntimeError(f"{name}: {replies_in(out)} replies for {args.rows} requests")
    results = {"rows": args.rows, "files": args.files, "shards": args.shards, "cores": cores, "runs": runs,
               "load_average": os.getloadavg()}
    (workdir / "results.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(f"{args.rows} churn requests, {args.files} files, {cores} cores; each run: wall s (scoring alone s, "
          "CPU s of all processes)")
    labels = {"one": "one process", "sharded": f"{args.shards} shards at once", "ray": f"Ray, {args.shards} actors",
              "ray-warm": f"Ray up, {args.shards} actors"}
    for name, measured in runs.items():
        walls = ", ".join(f"{m['wall_s']:.1f} ({m['took_s']:.1f}, {m['cpu_s']:.1f})" for m in measured)
        print(f"  {labels[name]:<18} {walls}   median wall {statistics.median(m['wall_s'] for m in measured):.1f}")
    print(f"results: {workdir / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
