"""structlog set-up: JSON lines in production, readable lines on a terminal, for every log record.

structlog's own events and the standard library's log records (kafka-python,
redis, Python warnings: anything that logs through ``logging``) go through
the same renderer to stderr, one write() per line, each with the fields put on
every line (a worker's ``client_id``). So with JSON every line of
stderr is one JSON object (an uncaught exception too: its traceback becomes
a field), and processes sharing a log file (--processes) never interleave
within a line. kafka-python is chatty at INFO (every connection, every group
step): its loggers log from WARNING up unless the level is debug. A reader of
stderr that goes away (a closed pipe) loses the lines from then on, and only
them: the worker goes on, and leaves its group when it stops.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from types import TracebackType
from typing import TextIO

import structlog
from structlog.typing import EventDict

CHATTY_LOGGERS = ("kafka",)
# kafka-python's loggers that write, at debug, each request and response whole and the bytes on the wire: the SASL
# exchange among them (PLAIN's password in clear, SCRAM's proof)
WIRE_LOGGERS = ("kafka.protocol.parser", "kafka.net.connection")

_installed: logging.Handler | None = None  # our handler on the root logger, replaced by each configure
_json = False


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """Send every log record to stderr; ``fmt`` is auto (console on a terminal, else json), json or console."""
    global _installed, _json
    _json = not (sys.stderr.isatty() if fmt == "auto" else fmt == "console")
    stream = LogStream(sys.stderr)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if _json else structlog.dev.ConsoleRenderer()
    )
    stamp: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_every_line_fields,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    levelno = logging.getLevelName(level.upper())
    structlog.configure(
        processors=[*stamp, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(levelno),
        # One write() per line: processes sharing a log file (--processes) never interleave within a line.
        logger_factory=structlog.WriteLoggerFactory(stream),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream)  # also one write() per record (msg + terminator)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*stamp, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    ))
    root = logging.getLogger()
    if _installed is not None:
        root.removeHandler(_installed)
    root.addHandler(handler)
    root.setLevel(levelno)
    _installed = handler
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(levelno if level == "debug" else max(levelno, logging.WARNING))
    for name in WIRE_LOGGERS:
        wire = logging.getLogger(name)
        if not any(isinstance(f, NoCredentials) for f in wire.filters):
            wire.addFilter(NoCredentials())
    logging.captureWarnings(True)  # warnings.warn() (torch's, for one) as log records, not bare lines
    if _json:
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_thread_crash


class NoCredentials(logging.Filter):
    """Writes a line of kafka-python's wire loggers with the bytes sent or received, and a SASL request or
    response, shown by their size and kind only: the credentials go in them (PLAIN's password in clear)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(_unshown(arg) for arg in record.args):
            record.args = tuple(_shown_without_contents(arg) for arg in record.args)
        return True


def _unshown(arg: object) -> bool:
    return isinstance(arg, (bytes, bytearray, memoryview)) or "Sasl" in type(arg).__name__


def _shown_without_contents(arg: object) -> object:
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return f"<{len(arg)} bytes, not shown>"
    return f"<{type(arg).__name__}, not shown>" if "Sasl" in type(arg).__name__ else arg


def on_every_line(**fields: str) -> None:
    """Put ``fields`` on every log line from now on, whichever thread logs it (a worker's ``client_id``: with
    ``--processes N`` the children share one stderr, and their lines would be told apart by nothing else)."""
    _every_line.update(fields)


_every_line: dict[str, str] = {}


def _add_every_line_fields(_logger: object, _name: str, event: EventDict) -> EventDict:
    for key, value in _every_line.items():
        event.setdefault(key, value)
    return event


class LogStream:
    """stderr for the log lines, until a line cannot be written there (its reader went away: a closed pipe,
    ``worker ... 2>&1 | head``, a log shipper restarted; a terminal hung up; a full disk): from then on the lines
    go nowhere, stderr itself too, and the worker goes on. A failed write would otherwise raise from whatever
    logged, at start between joining the group and the loop that leaves it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as exc:
            self._lost(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            self._lost(exc)

    def _lost(self, error: Exception) -> None:
        """Raises ``error`` unless it says the stream is gone (a ValueError other than a closed file's: a bug)."""
        if isinstance(error, ValueError) and not getattr(self._stream, "closed", False):
            raise error
        nowhere = open(os.devnull, "w")  # noqa: SIM115 (open for the life of the process)
        if sys.stderr is self._stream:  # tracebacks and bare prints to stderr would fail the same way
            sys.stderr = nowhere
        self._stream = nowhere


def renders_json() -> bool:
    """True when logs are JSON lines: then a command's own messages to stderr are log lines too."""
    return _json


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    structlog.get_logger("worker").critical("uncaught_exception", exc_info=(kind, value, tb))


def _log_thread_crash(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    structlog.get_logger("worker").error("thread_crashed", thread=args.thread.name if args.thread else None,
                                         exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
