"""``python -m worker``: the streaming worker, ``score-file`` for offline jobs, ``backfill`` for a time range."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import structlog
import torch

from worker.app import build_backfill, build_runner, build_worker, start_surface
from worker.compare.command import add_compare_parser, run_compare
from worker.core.clock import SystemClock
from worker.core.errors import ConfigError, ModelError, ServiceUnavailable, WorkerError
from worker.core.settings import Settings, add_flags, require_services
from worker.core.shutdown import StopRequest
from worker.core.stats import WorkerStats
from worker.inspect_model import add_inspect_parser, run_inspect
from worker.jobs.backfill import add_backfill_parser, run_backfill
from worker.jobs.batch_file import FileSummary, ScoringStopped, check_files, dead_letter_path, score_file
from worker.logs import configure_logging, renders_json
from worker.models.runner import pick_device
from worker.signals import exit_if_signalled_while_starting, stop_on_signals
from worker.supervisor import child_commands, supervise

DESCRIPTION = """\
streamscore worker: consumes scoring requests from a Kafka topic, micro-batches
them (until --max-batch-size requests or --max-wait-ms), runs a PyTorch model,
and publishes one reply per request, keyed by its id, to the reply topic.
Redis remembers answered ids so that retries and replays are not scored twice.

Every flag can also be set by an environment variable (shown in capitals);
flags win. KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set: `make up`
starts local ones and prints them.
"""

EPILOG = """\
examples:
  python -m worker --requests-topic requests --model churn
  python -m worker --requests-topic requests --max-batch-size 128 --max-wait-ms 5
  python -m worker --requests-topic requests --config worker.toml   # several models: docs/fleet.md
  python -m worker compare --shadow-topic requests.shadow            # a shadow candidate against the live one
  python -m worker score-file requests.jsonl replies.jsonl --model churn
  python -m worker score-file requests.parquet replies.parquet --model churn
  python -m worker inspect-model --model my_model.pt2
  python -m worker backfill --requests-topic requests --reply-topic requests.backfill \
      --from-time 2026-11-29T00:00:00Z --until-time 2026-11-30T00:00:00Z

exit codes:
  0  stopped cleanly (SIGTERM/SIGINT): everything consumed was answered and committed
  143, 130  stopped by SIGTERM, SIGINT while starting (services checked, model loaded and
     warmed up): nothing was consumed yet, and the start was cut short at once
  1  delivery or runtime failure; with --processes N, children kept failing fast and
     the supervisor gave up
  2  bad setting or missing service (the message names it)
  3  backfill: stopped before the time range was done (run it again to go on)
  4  stopped with records unfinished, most often because the drain did not end
     within --shutdown-timeout-s: they were left uncommitted, and are consumed
     again (the worker_stopped log line says how many: unfinished=N)
"""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_SETTING = 2
EXIT_UNFINISHED = 4  # 3 is the backfill's EXIT_INTERRUPTED

SCORE_FILE_DESCRIPTION = """\
Score every request in IN and write the reply the streaming worker would send
to OUT, in input order. Requests without a usable id go to
OUT.deadletter.jsonl. Each file's format follows its suffix, any of the four
combinations:

  .jsonl, .ndjson  one request (wire format) per line; one reply per line.
  .parquet         requests: one per row, columns id (string, required),
                   inputs and optional deadline_ms. A string inputs column
                   is JSON text; without an inputs column, the other columns
                   become the inputs object ({"tenure": 3, "plan_price": 19.9}).
                   replies: columns id, status, outputs (JSON text),
                   error_code, error_message, model, model_version.

Answers are the stream's: a request whose deadline_ms has passed when its
batch is scored is answered expired (deadline_exceeded); one over
--max-record-bytes is answered record_too_large when its id can be read.

Both stream: memory holds one batch and --chunk-rows rows, whatever the size.
OUT must not be IN (nor a link to it). OUT is written beside it
(.OUT.partial-PID) and renamed onto it once every request is answered: a run
that stops early leaves OUT as it was.

exit codes:
  0         every request answered, OUT written (a summary line says how)
  1, 2      a failure, 2 for a bad setting or file (one line names it):
            no output written
  130, 143  stopped by SIGINT (Ctrl-C) or SIGTERM, between batches: no output
            written, one line says how far it got
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m worker", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="{run,score-file,backfill,inspect-model,compare}")
    run = commands.add_parser("run", help="consume, score and reply until stopped (the default)",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(run)
    offline = commands.add_parser(
        "score-file", help="score a JSONL or Parquet file of requests into a file of replies (no Kafka, no Redis)",
        description=SCORE_FILE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    offline.add_argument("input", type=Path, metavar="IN", help="requests: .jsonl (or .ndjson) or .parquet")
    offline.add_argument("output", type=Path, metavar="OUT", help="replies: .jsonl (or .ndjson) or .parquet")
    offline.add_argument("--no-progress", action="store_true", help="no progress bar")
    offline.add_argument("--chunk-rows", type=int, default=10_000, metavar="N",
                         help="Parquet rows read, and written as one row group, at a time; bounds memory "
                              "(default: %(default)s)")
    add_flags(offline)
    add_backfill_parser(commands)
    add_inspect_parser(commands)
    add_compare_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("run", "score-file", "backfill", "inspect-model", "compare", "-h", "--help"):
        argv = ["run", *argv]
    args = _parser().parse_args(argv)
    if args.command == "compare":  # reads topics or a file, loads no model: none of the worker's settings
        return run_compare(args)
    log = structlog.get_logger("worker")
    try:
        settings = Settings.from_sources(args)
    except WorkerError as exc:
        configure_logging(_format_asked(args))  # the settings are unusable: report in the format asked for
        return _fail(exc)
    configure_logging(settings.operations.log_format, settings.operations.log_level)
    try:
        if args.command == "score-file":  # one model: of a configuration file's, the one --model names
            return _score_file(settings.only_model(args.model), args)
        if args.command == "backfill":
            return run_backfill(args, build_backfill)
        if args.command == "inspect-model":
            with exit_if_signalled_while_starting():  # all of it is the model's load and warmup
                return run_inspect(settings.only_model(args.model), args.json)
        if settings.operations.processes > 1:
            require_services(settings)  # one clear message here rather than one per child
            return _run_processes(settings, argv[1:])
        return _run(settings, log)
    except (WorkerError, LookupError, ConnectionError, OSError) as exc:
        return _fail(exc)


def _fail(exc: Exception) -> int:
    """Say why the command stops, in one line, and return its exit code: with JSON logs a log line
    (``worker_failed``, so that stderr stays JSON lines only), else ``error: ...`` for a person."""
    runtime = isinstance(exc, WorkerError) and not isinstance(exc, (ConfigError, ModelError, ServiceUnavailable))
    code = EXIT_FAILED if runtime else EXIT_BAD_SETTING
    if renders_json():
        structlog.get_logger("worker").error("worker_failed", error=str(exc), error_type=type(exc).__name__,
                                             exit_code=code)
    else:
        print(f"error: {exc}", file=sys.stderr)
    return code


def _format_asked(args: argparse.Namespace) -> str:
    """The log format of the flag or the environment, when the settings as a whole could not be read."""
    asked = getattr(args, "log_format", None) or os.environ.get("STREAMSCORE_LOG_FORMAT", "auto")
    return asked if asked in ("auto", "json", "console") else "auto"


def _run(settings: Settings, log: structlog.typing.FilteringBoundLogger) -> int:
    stop_requested = StopRequest(SystemClock())
    stop_on_signals(stop_requested)
    stats = WorkerStats()
    surface = start_surface(settings.operations, stats, stop_requested.is_set)  # answers /healthz while the model loads
    try:
        with exit_if_signalled_while_starting():
            worker = build_worker(settings, stop_requested, stats)
        log.info("worker_started", settings=repr(settings))
        signal.signal(signal.SIGHUP, lambda _signum, _frame: worker.reload())  # new model versions: docs/models.md
        unfinished = worker.run()
    finally:
        if surface is not None:
            surface.close()
    if not unfinished:
        return EXIT_OK
    _exit_now_if_threads_linger(EXIT_UNFINISHED, log)
    return EXIT_UNFINISHED


def _exit_now_if_threads_linger(code: int, log: structlog.typing.FilteringBoundLogger) -> None:
    """After a drain cut by the deadline, a model batch may still run on its thread, and the
    interpreter would wait for it at exit: exit at once instead (everything else is closed, and
    that batch's records were not committed)."""
    lingering = [thread.name for thread in threading.enumerate()
                 if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()]
    if lingering:
        log.warning("exiting_without_waiting", threads=lingering, exit_code=code)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _run_processes(settings: Settings, argv: list[str]) -> int:
    operations, device = settings.operations, settings.model.device
    pick_device(device)  # one clear message here rather than a child failing again and again
    commands = child_commands(argv, operations.processes, settings.kafka.client_id, device,
                              torch.cuda.device_count(), settings.delivery.transactional_id, operations.http_port)
    return supervise(commands)


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


def _score_file(settings: Settings, args: argparse.Namespace) -> int:
    stop = _StopSignal()  # before the model loads: a stop asked for meanwhile is a clean one too
    try:
        check_files(args.input, args.output, args.chunk_rows)  # refused in a second, not after the model loads
        with exit_if_signalled_while_starting():  # a stop during the model's load or warmup: at once (143/130)
            runner = build_runner(settings)
        started = time.monotonic()
        # With JSON logs, stderr carries JSON lines only: no progress bar, and the summary is a log line.
        summary = score_file(runner, args.input, args.output, settings.batching,
                             progress=not args.no_progress and not renders_json(), chunk_rows=args.chunk_rows,
                             stop=stop.is_set)
    except ScoringStopped as stopped:
        return _report_stopped(stopped.summary, stop.signum or signal.SIGINT, args.output)
    except KeyboardInterrupt:  # a second Ctrl-C
        return _report_stopped(None, signal.SIGINT, args.output)
    finally:
        stop.restore()
    _report_scored(summary, time.monotonic() - started, args.output)
    return EXIT_OK


def _report_scored(summary: FileSummary, took_s: float, output: Path) -> None:
    """Say in one line how many requests were answered how, and where the replies and dead letters are."""
    dead = dead_letter_path(output) if summary.dead_letters else None
    if renders_json():
        structlog.get_logger("worker").info("file_scored", requests=summary.lines, took_s=round(took_s, 3),
                                            ok=summary.ok, errors=summary.errors, expired=summary.expired,
                                            dead_letters=summary.dead_letters, output=str(output),
                                            dead_letter_file=None if dead is None else str(dead))
        return
    where = "" if dead is None else f" (in {dead})"
    print(f"scored {summary.lines} requests in {took_s:.1f} s -> {output}: ok {summary.ok}, error {summary.errors}, "
          f"expired {summary.expired}, dead-lettered {summary.dead_letters}{where}", file=sys.stderr)


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
