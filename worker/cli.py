"""``python -m worker``: the streaming worker, ``score-file`` for offline jobs, ``backfill`` for a time range."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import structlog
import torch

from worker.app import build_runner, build_worker
from worker.core.errors import ConfigError, ModelError, ServiceUnavailable, WorkerError
from worker.core.settings import Settings, add_flags, require_services
from worker.inspect_model import add_inspect_parser, run_inspect
from worker.jobs.backfill import add_backfill_parser, run_backfill
from worker.jobs.batch_file import score_file
from worker.logs import configure_logging
from worker.signals import stop_on_signals
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
  python -m worker score-file requests.jsonl replies.jsonl --model churn
  python -m worker score-file requests.parquet replies.parquet --model churn
  python -m worker inspect-model --model my_model.pt2
  python -m worker backfill --requests-topic requests --reply-topic requests.backfill \
      --from-time 2026-11-29T00:00:00Z --until-time 2026-11-30T00:00:00Z

exit codes: 0 stopped cleanly (SIGTERM/SIGINT), 1 delivery or runtime failure,
2 bad setting or missing service (the message names it).
"""

SCORE_FILE_DESCRIPTION = """\
Score every request in IN and write the reply the streaming worker would send
to OUT, in input order. Requests without a usable id go to
OUT.deadletter.jsonl. Each file's format follows its suffix, any of the four
combinations:

  .jsonl, .ndjson  one request (wire format) per line; one reply per line.
  .parquet         requests: one per row, columns id (string), inputs and
                   optional deadline_ms. A string inputs column is JSON text;
                   without an inputs column, the other columns become the
                   inputs object ({"tenure": 3, "plan_price": 19.9}).
                   replies: columns id, status, outputs (JSON text),
                   error_code, error_message, model, model_version.

Both stream: memory holds one batch and --chunk-rows rows, whatever the size.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m worker", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="{run,score-file,backfill,inspect-model}")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("run", "score-file", "backfill", "inspect-model", "-h", "--help"):
        argv = ["run", *argv]
    args = _parser().parse_args(argv)
    log = structlog.get_logger("worker")
    try:
        settings = Settings.from_sources(args)
        configure_logging(settings.log_format, settings.log_level)
        if args.command == "score-file":
            return _score_file(settings, args)
        if args.command == "backfill":
            return run_backfill(args)
        if args.command == "inspect-model":
            return run_inspect(settings, args.json)
        if settings.processes > 1:
            require_services(settings)  # one clear message here rather than one per child
            return _run_processes(settings, argv[1:])
        return _run(settings, log)
    except WorkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (ConfigError, ModelError, ServiceUnavailable)) else 1
    except (LookupError, ConnectionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(settings: Settings, log: structlog.typing.FilteringBoundLogger) -> int:
    stop_requested = threading.Event()
    stop_on_signals(stop_requested)
    worker = build_worker(settings, stop_requested)
    log.info("worker_started", settings=repr(settings))
    worker.run()
    return 0


def _run_processes(settings: Settings, argv: list[str]) -> int:
    commands = child_commands(argv, settings.processes, settings.client_id, settings.device,
                              torch.cuda.device_count(), settings.transactional_id)
    return supervise(commands)


def _score_file(settings: Settings, args: argparse.Namespace) -> int:
    runner = build_runner(settings)
    started = time.monotonic()
    summary = score_file(runner, args.input, args.output, settings, progress=not args.no_progress,
                         chunk_rows=args.chunk_rows)
    took = time.monotonic() - started
    print(f"scored {summary.lines} requests in {took:.1f} s: {summary.ok} ok, {summary.errors} errors, "
          f"{summary.dead_letters} dead letters -> {args.output}", file=sys.stderr)
    return 0
