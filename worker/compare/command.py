"""``python -m worker compare``: flags, inputs, the report printed, exit codes. The comparison is report.py's.

kafka-python and matplotlib load only when a topic is read or a plot drawn,
so that ``python -m worker`` keeps loading no Kafka client until one is chosen.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from worker.compare.pairs import ReadTally
from worker.compare.read import Record, file_records, joined_pairs, shadow_pairs
from worker.compare.render import as_json, as_text
from worker.compare.report import ComparisonReport, compare
from worker.core.errors import ConfigError, ServiceUnavailable
from worker.core.security import KafkaSecurity, add_security_flags

EXIT_OK, EXIT_NO_TOPIC, EXIT_BAD_ARGUMENTS, EXIT_INTERRUPTED = 0, 1, 2, 130

DESCRIPTION = """\
Compare a candidate model's answers with the live model's, request by request, and print a report.

It reads either a shadow topic (--shadow-topic), whose records each hold one request's live and
candidate answers:
  {"id": "r1", "model": "churn",
   "live":      {"version": "mlp16", "status": "ok", "outputs": {"churn_probability": 0.73}, "compute_ms": 1.2},
   "candidate": {"version": "next", "status": "ok", "outputs": {"churn_probability": 0.70}, "compute_ms": 2.5}}
or two reply topics (--live-topic, --candidate-topic: wire-contract replies, compute time from the compute-ms
header) joined by id: ids answered on one side only are counted, not compared. --input FILE.jsonl reads shadow
records from a file instead (one a line), without Kafka.

Topics are read with a consumer in no group (no offsets committed, nobody's moved): every partition from its
beginning to its end offset when compare started, then it stops. The first record of an id is compared.

The report, per model: versions and statuses seen (a pair where either side failed is compared by status
only); for each numeric output field (list elements pooled: embedding[*]), the p50, p90, p99, max and mean of
|candidate - live|, and the bias (mean of candidate - live); for each label field (strings, bools, integers
named like a label), the agreement rate and a confusion table, live labels down, candidate across; when the
outputs are one number in [0, 1] (a probability), also the agreement of the labels it gives thresholded at 0.5;
candidate - live compute_ms (median, p99); the worst disagreements of outputs by id, with both answers (label
mismatches and outputs of another shape first, then the largest differences); and the first pairs answered ok
on one side only. --json prints it all as one JSON object (with the histograms' bins); the text goes to stdout,
the progress bar and messages to stderr.
"""

EPILOG = """\
examples:
  python -m worker compare --shadow-topic requests.shadow
  python -m worker compare --live-topic replies --candidate-topic replies.candidate --worst 20 --plot diff.png
  python -m worker compare --input shadow.jsonl --json > report.json

exit codes:
  0  report printed (also when answers disagree: read the report, or its --json)
  1  a topic does not exist (the message says how to create it)
  2  bad arguments (the message names the flag), no broker answering, an unreadable --input
  130  interrupted (Ctrl-C): no report
"""


def add_compare_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("compare", help="report how a candidate model's answers differ from the live ones",
                                 description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_argument_group("what to read (one of)")
    source.add_argument("--shadow-topic", metavar="TOPIC", help="a shadow topic: live and candidate answers per record")
    source.add_argument("--live-topic", metavar="TOPIC", help="the live model's reply topic (with --candidate-topic)")
    source.add_argument("--candidate-topic", metavar="TOPIC", help="the candidate's reply topic (with --live-topic)")
    source.add_argument("--input", type=Path, metavar="FILE.jsonl", help="shadow records, one JSON object a line")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                        help="Kafka brokers (default: KAFKA_BOOTSTRAP_SERVERS)")
    parser.add_argument("--from-beginning", action="store_true", default=True,
                        help="read each topic from its beginning to its end offsets at start (the default, and "
                             "so far the only way)")
    parser.add_argument("--max-records", type=int, metavar="N",
                        help="read at most N records (of each topic, with two; the report says it stopped short)")
    parser.add_argument("--worst", type=int, default=10, metavar="N",
                        help="list the N worst disagreements of each model (default: %(default)s; 0: none)")
    parser.add_argument("--plot", type=Path, metavar="PATH.png",
                        help="also draw the differences' histograms (log y, quantiles marked) and the label "
                             "confusion heatmaps into PATH.png")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it goes to stderr)")
    add_security_flags(parser)


@dataclass(frozen=True)
class _Topics:
    """The topics to read (checked flags), and how to reach them."""

    bootstrap_servers: str
    security: KafkaSecurity
    topics: tuple[tuple[str, str], ...]  # (flag, topic): the shadow topic, or the live and the candidate topics


def run_compare(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    """Read, compare, print; returns the exit code. Messages go to stderr, the report to stdout."""
    try:
        plan = _plan(args, os.environ if environ is None else environ)
        tally, report = _read_and_compare(plan, args)
        if args.plot is not None:
            _plot(report, args.plot)
    except (ConfigError, ServiceUnavailable) as exc:
        return _fail(exc, EXIT_BAD_ARGUMENTS)
    except LookupError as exc:
        return _fail(exc, EXIT_NO_TOPIC)
    except OSError as exc:
        return _fail(ConfigError(f"{exc.filename}: {exc.strerror}"), EXIT_BAD_ARGUMENTS)
    except KeyboardInterrupt:
        print("compare: interrupted, no report", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(as_json(report, tally).decode() if args.json else as_text(report, tally))
    return EXIT_OK


def _plan(args: argparse.Namespace, environ: Mapping[str, str]) -> Path | _Topics:
    """The --input file, or the topics to read. Raises ConfigError naming the flag at fault."""
    sources = [name for name, given in (("--shadow-topic", args.shadow_topic), ("--input", args.input),
                                        ("--live-topic/--candidate-topic", args.live_topic or args.candidate_topic))
               if given]
    if len(sources) != 1:
        raise ConfigError("give one of --shadow-topic, --live-topic with --candidate-topic, or --input; got "
                          + (" and ".join(sources) or "none"))
    if bool(args.live_topic) != bool(args.candidate_topic):
        raise ConfigError("--live-topic and --candidate-topic go together: give both")
    if args.max_records is not None and args.max_records < 1:
        raise ConfigError(f"--max-records must be at least 1, got {args.max_records}")
    if args.worst < 0:
        raise ConfigError(f"--worst must be 0 or more, got {args.worst}")
    if args.plot is not None:
        _check_plot(args.plot)
    if args.input is not None:
        if not args.input.is_file():
            raise ConfigError(f"--input {str(args.input)!r}: no such file")
        return Path(args.input)
    bootstrap = args.bootstrap_servers or environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        raise ConfigError("reading a topic needs --bootstrap-servers (or KAFKA_BOOTSTRAP_SERVERS)")
    topics = ((("--shadow-topic", args.shadow_topic),) if args.shadow_topic else
              (("--live-topic", args.live_topic), ("--candidate-topic", args.candidate_topic)))
    return _Topics(bootstrap, KafkaSecurity.from_sources(args, environ), topics)


def _check_plot(path: Path) -> None:
    """Before reading anything: the plot could not be drawn after. Raises ConfigError naming --plot."""
    if path.suffix.lower() != ".png":
        raise ConfigError(f"--plot writes a PNG: name a .png file, got {str(path)!r}")
    if not path.parent.is_dir():
        raise ConfigError(f"--plot {str(path)!r}: no such directory {str(path.parent)!r}")
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("--plot needs matplotlib: pip install matplotlib (or this project's bench extra)")


def _read_and_compare(plan: Path | _Topics, args: argparse.Namespace) -> tuple[ReadTally, ComparisonReport]:
    """Raises LookupError when a topic does not exist, ServiceUnavailable when no broker answers."""
    if isinstance(plan, Path):
        tally = ReadTally(f"file {plan}")
        return tally, compare(shadow_pairs(file_records(plan, tally, args.max_records), tally), args.worst)
    from worker.compare.topics import TopicReader, open_consumer  # kafka-python loads here, for a topic only

    with contextlib.ExitStack() as consumers:
        readers = []
        for flag, topic in plan.topics:  # every topic looked up, and its end offsets taken, before reading any
            consumer = open_consumer(plan.bootstrap_servers, plan.security)
            consumers.callback(consumer.close)
            readers.append(TopicReader(consumer, topic, flag))
        progress = not args.no_progress

        def records(reader: TopicReader, tally: ReadTally) -> Iterator[Record]:
            return reader.records(tally, args.max_records, progress)

        if len(readers) == 1:
            tally = ReadTally(f"shadow topic {readers[0].topic}")
            pairs = shadow_pairs(records(readers[0], tally), tally)
        else:
            live, candidate = readers
            tally = ReadTally(f"reply topics {live.topic} (live) and {candidate.topic} (candidate)")
            pairs = joined_pairs(records(live, tally), records(candidate, tally), tally)
        return tally, compare(pairs, args.worst)


def _plot(report: ComparisonReport, path: Path) -> None:
    from worker.compare.plot import write_plot  # matplotlib loads here, for --plot only

    panels = write_plot(report, path)
    print(f"compare: {path}: {panels} panels" if panels else f"compare: nothing to plot, {path} not written",
          file=sys.stderr)


def _fail(exc: Exception, code: int) -> int:
    print(f"compare: error: {exc}", file=sys.stderr)
    return code
