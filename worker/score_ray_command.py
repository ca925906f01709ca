"""``python -m worker score-ray``: a Parquet dataset scored on Ray Data, by worker.ray_data's ScoreBatches.

Checks the dataset and the settings before Ray starts, runs ``read_parquet``
-> ``map_batches(ScoreBatches)`` -> ``write_parquet`` into a directory beside
OUT, publishes it as OUT once every row is written and counted, and says in
one line how it went. Ray is imported only here, when the command runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import structlog

from worker.core.errors import ConfigError, WorkerError
from worker.core.settings import FILE_JOB_SECTIONS, Settings, add_flags
from worker.jobs.datasets import dataset_files, dataset_units
from worker.jobs.file_outputs import partial_path, this_process
from worker.jobs.table_scoring import DEAD_LETTER
from worker.logs import renders_json

LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray binds its servers to 127.0.0.1 only

SCORE_RAY_DESCRIPTION = """\
Score a Parquet dataset on Ray Data: the same rows in, the same replies out as
score-file, spread over --concurrency actors, each loading the model once. For
users who already run Ray (the optional extra: pip install 'streamscore[ray]').

IN is a .parquet file or a directory of them, as score-file reads it (at any
depth; names starting with . or _ skipped; no JSONL); every file needs a
string id column. OUT is a directory of Parquet files of reply rows (id,
status, outputs, error_code, error_message, model, model_version), one per
request row: Ray names the files, so compare or join by id. A row without a
usable id is not dropped: it keeps a row with status dead_letter, its id cell
as it was, and the error. OUT is written beside it (.OUT.partial-HOST-PID)
and put in OUT's place once every row is written: a run that fails leaves OUT
as it was.

Every worker setting flag works as in score-file (--model, --model-config,
--weights, --max-batch-size, --max-batch-tokens, --config, ...): they are read
here, checked before Ray starts, and sent to every actor.

  python -m worker score-ray /data/in /data/out --model churn --concurrency 4
  python -m worker score-ray /data/in /data/out --model churn --address auto

exit codes:
  0     every row answered, OUT written (a summary line says how)
  1, 2  a failure, 2 for a bad setting or file (one line names it): OUT left
        as it was
  130   stopped by Ctrl-C: OUT left as it was
"""


def add_score_ray_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``score-ray`` subcommand, its arguments and, as flags, the settings a file job reads (the model,
    batching and operations sections)."""
    ray = commands.add_parser(
        "score-ray", help="score a Parquet dataset on Ray Data, as score-file scores it (the ray extra)",
        description=SCORE_RAY_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    ray.add_argument("input", type=Path, metavar="IN", help="requests: a .parquet file or a directory of them")
    ray.add_argument("output", type=Path, metavar="OUT", help="replies: a directory of .parquet files (replaced whole)")
    ray.add_argument("--concurrency", type=int, default=1, metavar="N",
                     help="actors scoring at once, each with its own copy of the model (default: %(default)s)")
    ray.add_argument("--address", default="local", metavar="ADDRESS",
                     help="the Ray cluster: 'local' starts one on this machine, on loopback, for this run (with "
                          "the machine's cores as CPUs, or one more than the actors take if that is more); "
                          "'auto' joins the one running here (ray start); or HOST:PORT, ray://HOST:PORT "
                          "(default: %(default)s)")
    ray.add_argument("--chunk-rows", type=int, default=10_000, metavar="N",
                     help="rows per map_batches batch: the model batches (--max-batch-size) are cut within "
                          "each (default: %(default)s)")
    ray.add_argument("--actor-cpus", type=float, default=1.0, metavar="CPUS",
                     help="CPUs Ray reserves for each actor (default: %(default)s)")
    add_flags(ray, FILE_JOB_SECTIONS)


def run_score_ray(settings: Settings, args: argparse.Namespace) -> int:
    """Score ``args.input`` into the directory ``args.output`` on Ray; the exit code (0, or 130 on Ctrl-C).
    Raises ConfigError for a bad setting or file before Ray starts, WorkerError for a failed Ray job,
    OSError for file problems: the caller reports it. OUT is left as it was unless it returns 0."""
    files, rows = _check(args)
    staging = partial_path(args.output.resolve(), this_process())
    started = time.monotonic()
    try:
        took_s = _run_on_ray(settings, args, files, staging)
        counts = _statuses(staging)
        if sum(counts.values()) != rows:
            raise WorkerError(f"the Ray job wrote {sum(counts.values())} reply rows for {rows} request rows: "
                              "OUT not written")
        _publish(staging, args.output)
    except KeyboardInterrupt:
        shutil.rmtree(staging, ignore_errors=True)
        print(f"score-ray stopped by SIGINT: no output written, {args.output} left as it was", file=sys.stderr)
        return 130
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _report(rows, counts, took_s, time.monotonic() - started, args)
    return 0


def _report(rows: int, counts: Counter[str], took_s: float, wall_s: float, args: argparse.Namespace) -> None:
    """One line: the rows answered how, the scoring's time (Ray's read, score and write, actors' start and model
    loads included) and the whole run's (Ray's own start and stop too)."""
    if renders_json():
        structlog.get_logger("worker").info(
            "dataset_scored_on_ray", requests=rows, took_s=round(took_s, 3), wall_s=round(wall_s, 3),
            actors=args.concurrency, ok=counts["ok"], errors=counts["error"], expired=counts["expired"],
            dead_letters=counts[DEAD_LETTER], output=str(args.output))
        return
    print(f"scored {rows} requests in {took_s:.1f} s ({wall_s:.1f} s with Ray's start) on {args.concurrency} "
          f"actors -> {args.output}: ok {counts['ok']}, error {counts['error']}, expired {counts['expired']}, "
          f"dead-lettered {counts[DEAD_LETTER]} (rows of status dead_letter)", file=sys.stderr)


def _check(args: argparse.Namespace) -> tuple[list[str], int]:
    """The dataset's files, as paths, and its rows; ConfigError naming the flag or path that cannot do, or the
    extra that is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("score-ray runs on Ray Data, which is not installed: pip install 'streamscore[ray]' "
                          "(docs/install.md)")
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency {args.concurrency}: the number of actors must be at least 1")
    if args.chunk_rows < 1:
        raise ConfigError(f"--chunk-rows {args.chunk_rows}: must be at least 1")
    if args.actor_cpus <= 0:
        raise ConfigError(f"--actor-cpus {args.actor_cpus}: must be above 0")
    source, target = args.input, args.output
    if not source.exists():
        raise ConfigError(f"the input {source} does not exist")
    if source.is_file() and source.suffix.lower() != ".parquet":
        raise ConfigError(f"{source}: score-ray reads Parquet (.parquet) only; score a JSONL file with score-file")
    if target.exists() and not target.is_dir():
        raise ConfigError(f"the output {target} is a file: score-ray writes a directory of Parquet files")
    if source.is_dir() and target.resolve().is_relative_to(source.resolve()):
        raise ConfigError(f"the output {target} is inside the input {source}: write it to another directory")
    if not target.resolve().parent.is_dir():
        raise ConfigError(f"the output {target} cannot be created: no directory {target.parent}")
    units = dataset_units(source)  # every footer: a file without a string id column is refused now
    base = source.parent if source.is_file() else source
    files = [source.name] if source.is_file() else dataset_files(source)
    _check_one_schema(base, files)
    return [str(base / name) for name in files], sum(unit.rows for unit in units)


def _check_one_schema(base: Path, files: list[str]) -> None:
    """Ray Data reads a dataset as one table: its files' columns must merge into one schema (score-file reads each
    file alone, so it scores a dataset whose files differ). ConfigError naming the first file that does not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    merged = pq.read_schema(base / files[0])
    for name in files[1:]:
        try:
            merged = pa.unify_schemas([merged, pq.read_schema(base / name)], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ConfigError(f"{base / name}: its columns do not merge with those of the files before it ({exc}); "
                              "Ray Data reads a dataset as one table: write its files with one type for each "
                              "column, or score the dataset with score-file, which reads each file alone") from None


def _run_on_ray(settings: Settings, args: argparse.Namespace, files: list[str], staging: Path) -> float:
    """Score ``files`` into the directory ``staging``; the seconds the dataset took, Ray's start and stop not
    counted."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    if args.address == "local" or args.address.startswith(("127.0.0.1:", "localhost:")):
        # Ray's single-machine mode (read when ray is imported): every server on 127.0.0.1, none on the network;
        # a driver joining a head started so must see itself at 127.0.0.1 too.
        os.environ.setdefault(LOOPBACK_ONLY, "0")
    import ray

    from worker.ray_data import ScoreBatches, for_actors

    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if args.address == "local":
        # Logical CPUs: one beyond the actors', else on a small machine the actors hold every CPU and the
        # read tasks that feed them never start (Ray Data then waits for ever).
        needed = math.ceil(args.concurrency * args.actor_cpus) + 1
        options["num_cpus"] = max(os.cpu_count() or 1, needed)
    ray.init(address=args.address, **options)
    try:
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        dataset = ray.data.read_parquet(files)
        replies = dataset.map_batches(ScoreBatches, fn_constructor_kwargs={"settings": for_actors(settings)},
                                      concurrency=args.concurrency, batch_size=args.chunk_rows,
                                      batch_format="pyarrow", num_cpus=args.actor_cpus)
        started = time.monotonic()
        try:
            replies.write_parquet(str(staging))
        except ray.exceptions.RayError as exc:
            raise _reported(exc) from exc
        return time.monotonic() - started
    finally:
        ray.shutdown()


def _reported(exc: BaseException) -> WorkerError:
    """What to say of a failed Ray job: an actor's own WorkerError (a model that would not load: ConfigError,
    ModelError) as it was raised there, without Ray's wrapping; anything else as a WorkerError."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, WorkerError) and type(cause).__module__.startswith("worker."):
            return type(cause)(str(cause))
        cause = getattr(cause, "cause", None) or cause.__cause__
    lines = str(exc).strip().splitlines()
    return WorkerError(f"the Ray job failed: {lines[-1] if lines else type(exc).__name__}")


def _statuses(directory: Path) -> Counter[str]:
    """How many reply rows of each status the Parquet files under ``directory`` hold."""
    counts: Counter[str] = Counter()
    for path in sorted(directory.rglob("*.parquet")):
        counts.update(pq.read_table(path, columns=["status"]).column("status").to_pylist())
    return counts


def _publish(staging: Path, target: Path) -> None:
    """Put the directory ``staging`` in ``target``'s place; an old ``target`` goes only once the new one is in."""
    old = partial_path(target.resolve(), this_process() + ".old")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)
