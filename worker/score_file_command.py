"""``python -m worker score-file``: the batch file job's command line (worker.jobs.batch_file does the work).

Checks the files before the model loads, scores with a progress bar (none
with JSON logs), and says in one line how it went: how many requests were
answered how, or how far it got when a signal stopped it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import structlog

from worker.core.settings import FILE_JOB_SECTIONS, Settings, add_flags
from worker.jobs.batch_file import FileSummary, ScoringStopped, check_files, dead_letter_path, score_file
from worker.jobs.batch_shards import ShardPlan, describe, log_fields, other_shardings, plan_shard, score_shard
from worker.jobs.shards import Shard, parse_shard
from worker.logs import renders_json
from worker.signals import exit_if_signalled_while_starting

EXIT_OK = 0

SCORE_FILE_DESCRIPTION = """\
Score every request in IN and write the reply the streaming worker would send
to OUT, in input order. Requests without a usable id go to
OUT.deadletter.jsonl. Each file's format follows its suffix, any of the four
combinations:

  .jsonl, .ndjson  one request (wire format) per line (blank lines are
                   skipped); one reply per line.
  .parquet         requests: one per row, columns id (string, required),
                   inputs and optional deadline_ms, reply_to, model,
                   model_version. A string inputs column is JSON text;
                   without an inputs column, the other columns become the
                   inputs object ({"tenure": 3, "plan_price": 19.9}).
                   replies: columns id, status, outputs (JSON text),
                   error_code, error_message, model, model_version.

Answers are the stream's: a request whose deadline_ms has passed when its
batch is scored is answered expired (deadline_exceeded); one over
--max-record-bytes is answered record_too_large when its id can be read.

Both stream: memory holds one batch and --chunk-rows rows, whatever the size.
OUT must not be IN (nor a link to it). OUT is written beside it
(.OUT.partial-HOST-PID) and renamed onto it once every request is answered: a run
that stops early leaves OUT as it was.

A dataset, scored on one machine or in shards on several: IN a directory of
.parquet files (at any depth; names starting with . or _ skipped; no JSONL),
OUT a directory (created if missing). --shard I/N scores shard I (from 0) of N:
the dataset's row groups, in order of file path then row group, cut into N
consecutive runs of about equal rows (each row group goes to the run holding
its middle row), so that every row group is scored by exactly one shard and
the same on every machine. Shard I writes OUT/part-0000I-of-0000N.parquet (and
its .deadletter.jsonl), replies in the dataset's order: the parts in order
are one run's replies. A rerun replaces its part; an empty shard writes an
empty part. Without --shard a directory IN is --shard 0/1; a single .parquet
IN with --shard is cut at its row groups. Eight machines, one command each:

  python -m worker score-file /data/in /data/out --shard 0/8 --model churn
  ...
  python -m worker score-file /data/in /data/out --shard 7/8 --model churn

exit codes:
  0         every request answered, OUT written (a summary line says how)
  1, 2      a failure, 2 for a bad setting or file (one line names it):
            no output written
  130, 143  stopped by SIGINT (Ctrl-C) or SIGTERM, between batches: no output
            written, one line says how far it got
"""


def add_score_file_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``score-file`` subcommand, its arguments and, as flags, the settings a file job reads (the model,
    batching and operations sections)."""
    offline = commands.add_parser(
        "score-file", help="score a JSONL or Parquet file of requests into a file of replies (no Kafka, no Redis)",
        description=SCORE_FILE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    offline.add_argument("input", type=Path, metavar="IN",
                         help="requests: .jsonl (or .ndjson) or .parquet, or a directory of .parquet files")
    offline.add_argument("output", type=Path, metavar="OUT",
                         help="replies: .jsonl (or .ndjson) or .parquet; a directory of parts for a directory "
                              "IN or with --shard")
    offline.add_argument("--shard", metavar="I/N",
                         help="score shard I (0 to N-1) of N of a Parquet IN into OUT/part-0000I-of-0000N.parquet "
                              "(five digits each; default for a directory IN: 0/1)")
    offline.add_argument("--no-progress", action="store_true", help="no progress bar")
    offline.add_argument("--chunk-rows", type=int, default=10_000, metavar="N",
                         help="Parquet rows read, and written as one row group, at a time; bounds memory "
                              "(default: %(default)s)")
    add_flags(offline, FILE_JOB_SECTIONS)


class _StopSignal:
    """SIGINT or SIGTERM asks score-file to stop between batches; the first one sets the exit code (128 + it).

    A second Ctrl-C raises KeyboardInterrupt at once, wherever the job is (its
    partial files are removed all the same). ``restore`` puts back the
    handlers found. Main thread only.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._found = {signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}

    def is_set(self) -> bool:
        return self.signum is not None

    def restore(self) -> None:
        for signum, handler in self._found.items():
            if handler is not None:
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_score_file(settings: Settings, args: argparse.Namespace) -> int:
    """Score ``args.input`` into ``args.output``; the exit code (0, or 128 + the signal that stopped it).
    Raises what the job raises for a bad setting or file (WorkerError, OSError): the caller reports it."""
    stop = _StopSignal()  # before the model loads: a stop asked for meanwhile is a clean one too
    output = args.output
    try:
        # Refused in a second, not after the model loads.
        plan = _plan_shard(args)
        if plan is None:
            check_files(args.input, args.output, args.chunk_rows)
        else:
            output = plan.part
        # Imported here: deploy/check.py parses a Job's arguments with this module's parser, without torch.
        from worker.app import build_one_model

        with exit_if_signalled_while_starting():  # a stop during the model's load or warmup: at once (143/130)
            runner = build_one_model(settings)
        started = time.monotonic()
        # With JSON logs, stderr carries JSON lines only: no progress bar, and the summary is a log line.
        progress = not args.no_progress and not renders_json()
        if plan is None:
            summary = score_file(runner, args.input, args.output, settings.batching, progress=progress,
                                 chunk_rows=args.chunk_rows, stop=stop.is_set)
        else:
            summary = score_shard(runner, plan, settings.batching, progress=progress, chunk_rows=args.chunk_rows,
                                  stop=stop.is_set)
    except ScoringStopped as stopped:
        return _report_stopped(stopped.summary, stop.signum or signal.SIGINT, output)
    except KeyboardInterrupt:  # a second Ctrl-C
        return _report_stopped(None, signal.SIGINT, output)
    finally:
        stop.restore()
    _report_scored(summary, time.monotonic() - started, output, plan)
    return EXIT_OK


def _plan_shard(args: argparse.Namespace) -> ShardPlan | None:
    """The shard to score, or None for one file scored whole (no --shard, IN not a directory)."""
    if args.shard is None and not args.input.is_dir():
        return None
    shard = Shard(0, 1) if args.shard is None else parse_shard(args.shard)
    return plan_shard(args.input, args.output, shard, args.chunk_rows)


def _report_scored(summary: FileSummary, took_s: float, output: Path, plan: ShardPlan | None) -> None:
    """Say in one line how many requests were answered how, and where the replies and dead letters are; for a
    shard, which rows of the dataset it held first, and in a line of its own any part of another sharding
    left in its directory."""
    dead = dead_letter_path(output) if summary.dead_letters else None
    others = [] if plan is None else other_shardings(plan)
    if renders_json():
        log = structlog.get_logger("worker")
        log.info("file_scored", requests=summary.lines, took_s=round(took_s, 3), ok=summary.ok, errors=summary.errors,
                 expired=summary.expired, dead_letters=summary.dead_letters, output=str(output),
                 dead_letter_file=None if dead is None else str(dead), **({} if plan is None else log_fields(plan)))
        if others:
            log.warning("parts_of_other_shardings", directory=str(output.parent), parts=others)
        return
    shard = "" if plan is None else describe(plan) + ": "
    where = "" if dead is None else f" (in {dead})"
    print(f"{shard}scored {summary.lines} requests in {took_s:.1f} s -> {output}: ok {summary.ok}, "
          f"error {summary.errors}, expired {summary.expired}, dead-lettered {summary.dead_letters}{where}",
          file=sys.stderr)
    if others:
        print(f"warning: {output.parent} also holds {len(others)} part(s) of another number of shards "
              f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): remove them before reading the "
              "directory as one table", file=sys.stderr)


def _report_stopped(summary: FileSummary | None, signum: int, output: Path) -> int:
    """Say in one line how far score-file got before ``signum`` stopped it (``summary`` None: at once, by a
    second Ctrl-C), and that nothing was written; return 128 + ``signum``, the shell's code for it."""
    code, name = 128 + signum, signal.Signals(signum).name
    kept = "left as it was" if output.exists() else "not created"
    if renders_json():
        far = {} if summary is None else {"read": summary.read, "total": summary.total, "answered": summary.lines}
        structlog.get_logger("worker").warning("file_scoring_stopped", signal=name, **far, output=str(output),
                                               output_written=False, exit_code=code)
    elif summary is None:
        print(f"score-file stopped at once by a second {name}: no output written, {output} {kept}", file=sys.stderr)
    else:
        of = "" if summary.total is None else f" of {summary.total}"
        print(f"score-file stopped by {name} after reading {summary.read}{of} requests ({summary.lines} answered): "
              f"no output written, {output} {kept}", file=sys.stderr)
    return code
