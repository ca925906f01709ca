"""``python -m worker``: the streaming worker, ``score-file`` for offline jobs, ``backfill`` for a time range."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

import structlog
import torch

from worker.app import build_backfill, build_worker, start_broker_watch, start_surface
from worker.compare.command import add_compare_parser, run_compare
from worker.core.clock import SystemClock
from worker.core.errors import ConfigError, ModelError, ServiceUnavailable, WorkerError
from worker.core.parser import Parser
from worker.core.sections import SETTINGS
from worker.core.settings import Settings, add_flags, require_services
from worker.core.shutdown import StopRequest
from worker.core.stats import WorkerStats
from worker.core.stdout import EXIT_READER_GONE, reader_gone
from worker.core.transactional_ids import stopped_cleanly
from worker.inspect_model import add_inspect_parser, run_inspect
from worker.jobs.backfill import add_backfill_parser, run_backfill
from worker.logs import configure_logging, on_every_line, renders_json
from worker.models.runner import pick_device
from worker.score_file_command import add_score_file_parser, run_score_file
from worker.score_ray_command import add_score_ray_parser, run_score_ray
from worker.signals import exit_if_signalled_while_starting, stop_on_signals
from worker.supervisor import child_commands, supervise
from worker.surface.http import check_port_free

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
  python -m worker score-file dataset/ replies/ --shard 3/8 --model churn
  python -m worker score-ray dataset/ replies/ --model churn --concurrency 4   # on Ray Data (the ray extra)
  python -m worker inspect-model --model my_model.pt2
  python -m worker backfill --requests-topic requests --reply-topic requests.backfill \\
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

COMMANDS = ("run", "score-file", "score-ray", "backfill", "inspect-model", "compare")
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_SETTING = 2
EXIT_UNFINISHED = 4  # 3 is the backfill's EXIT_INTERRUPTED


def _parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(prog="python -m worker", description=DESCRIPTION, epilog=EPILOG,
                                              formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    run = commands.add_parser("run", help="consume, score and reply until stopped (the default)",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(run)
    add_score_file_parser(commands)
    add_score_ray_parser(commands)
    add_backfill_parser(commands)
    add_inspect_parser(commands)
    add_compare_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _command(argv)
        sys.stdout.flush()  # here, not at the interpreter's exit: a reader gone is then seen here too
        return code
    except BrokenPipeError as exc:  # a report printed after its reader went away (compare ... | head)
        if reader_gone(exc):
            return EXIT_READER_GONE
        raise


def _command(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
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
        if args.command in ("score-file", "score-ray"):
            _warn_of_flags_ignored(args, FILE_JOBS_IGNORE, FILE_JOBS_REASON)
        if args.command == "score-file":  # one model: of a configuration file's, the one --model names
            return run_score_file(settings.only_model(args.model), args)
        if args.command == "score-ray":
            return run_score_ray(settings.only_model(args.model), args)
        if args.command == "backfill":
            _warn_of_flags_ignored(args, BACKFILL_IGNORES, "a backfill serves no HTTP surface: its progress bar "
                                   "and summary say how it goes, its exit code how it ended")
            args.no_progress = args.no_progress or renders_json()  # JSON logs: stderr carries JSON lines only
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


# Operations settings a file job takes as flags (their section's others, the logs', it uses) and does nothing with.
FILE_JOBS_IGNORE = ("processes", "shutdown_timeout_s", "stats_interval_s", "otel", "http_port", "liveness_timeout_s")
FILE_JOBS_REASON = ("a file job runs in one process, serves no HTTP surface and stops at the end of its input, a "
                    "signal stopping it between batches; these flags are the streaming worker's (for a job in "
                    "parallel: --shard I/N, or score-ray --concurrency)")
BACKFILL_IGNORES = ("http_port", "liveness_timeout_s")  # its --processes is refused; the others hold


def _warn_of_flags_ignored(args: argparse.Namespace, names: tuple[str, ...], reason: str) -> None:
    given = [s.flag for s in SETTINGS if s.name in names and getattr(args, s.key, None) is not None]
    if given:
        structlog.get_logger("worker").warning("flags_ignored", command=args.command, flags=given, reason=reason)


def _fail(exc: Exception) -> int:
    """Say why the command stops, in one line, and return its exit code: with JSON logs a log line
    (``worker_failed``, so that stderr stays JSON lines only), else ``error: ...`` for a person; nothing when
    standard output's reader went away (``inspect-model ... | head``)."""
    if reader_gone(exc):
        return EXIT_READER_GONE
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
    on_every_line(client_id=settings.kafka.client_id)  # which member said it, by the name the group lists it by
    stop_requested = StopRequest(SystemClock())
    stop_on_signals(stop_requested)
    reloads_while_starting: list[int] = []  # noted only: a handler that logs can deadlock on the logger's lock
    signal.signal(signal.SIGHUP, lambda signum, _frame: reloads_while_starting.append(signum))
    stats = WorkerStats()
    surface = start_surface(settings.operations, stats, stop_requested.is_set)  # answers /healthz while the model loads
    broker_watch = start_broker_watch(settings, stats)
    try:
        with exit_if_signalled_while_starting():
            worker = build_worker(settings, stop_requested, stats)
        log.info("worker_started", settings=repr(settings))
        signal.signal(signal.SIGHUP, lambda _signum, _frame: worker.reload())  # new model versions: docs/fleet.md
        if reloads_while_starting:
            log.warning("reload_ignored", signals=len(reloads_while_starting),
                        reason="came while the worker started: the models were loaded from the configuration as "
                               "it was then; send SIGHUP again to read it now")
        unfinished = worker.run()
    finally:
        if broker_watch is not None:
            broker_watch.close()
        if surface is not None:
            surface.close()
    if not unfinished:
        stopped_cleanly()  # exactly-once: no transaction left open under this worker's transactional id
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
    for index in range(operations.processes if operations.http_port else 0):
        try:
            check_port_free(operations.http_port + index)
        except ConfigError as exc:
            raise ConfigError(f"--processes {operations.processes}: process {index} serves on --http-port "
                              f"{operations.http_port} + {index}; {exc}") from None
    commands = child_commands(argv, operations.processes, settings.kafka.client_id, device,
                              torch.cuda.device_count(), settings.delivery.transactional_id, operations.http_port,
                              settings.kafka.group_instance_id)
    return supervise(commands)


