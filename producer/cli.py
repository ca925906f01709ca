"""``python -m producer``: send requests, collect replies, score one request, run the demo."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from producer.send import BadLine, SendSummary
from worker.core.errors import WorkerError
from worker.core.formats import Formats, add_format_flags
from worker.core.kafka_properties import KafkaProperties, add_property_flags
from worker.core.parser import Parser
from worker.core.security import KafkaSecurity, add_security_flags
from worker.core.settings import BatchingSettings, check_kafka_client
from worker.core.stdout import EXIT_READER_GONE, reader_gone
from worker.formats.reply_reader import ReplyReader
from worker.formats.requests import RequestEncode, request_encoder

if TYPE_CHECKING:
    from worker.core.timerange import TimeRange

DESCRIPTION = """\
streamscore producer: the client side. Sends scoring requests to a requests
topic, collects replies from a reply topic, scores a single request and waits
for its reply, or runs the whole demo. KAFKA_BOOTSTRAP_SERVERS (or
--bootstrap-servers) says where Kafka is; `make up` prints a local one.
"""

SEND_DESCRIPTION = """\
Send requests to TOPIC with a progress bar, then print a summary (sent,
failed, skipped, records per partition). Exit code 1 if any failed or was
skipped.

  JSONL    one request object per line: {"id": ..., "inputs": ...},
           optional "reply_to", "deadline_ms", "model" and "model_version"
  CSV      a header row; an "inputs" column holding JSON (a cell that is
           not JSON is taken as text), or else every column but id,
           reply_to, deadline_ms, model, model_version and the --key-field
           is a number of the input vector
  Parquet  a row a request, as score-file reads it: an "inputs" column
           (a string holds JSON, or else text, as in CSV; a list or struct
           is the inputs), or else every column but the request fields and
           the --key-field is one field of an "inputs" object; id,
           reply_to, model and model_version are strings, deadline_ms an
           integer

A request without an id gets a fresh one. A line or row that cannot be read
is skipped and listed, never sent. Or --synthetic MODEL --count N random valid
requests (for load tests, with --rate).

--model and --model-version name the served model that answers the requests
that name none themselves (a line's own model or model_version wins).
"""

COLLECT_DESCRIPTION = """\
Write the first reply per id of the reply topic TOPIC to OUT (JSONL): the
replies stamped in [--from-time, --until-time), else all of them from the
beginning, up to the end of the topic when collect started; with --idle-s,
then newer ones until none came for that long. Prints how many ok replies
each served model and version gave (a canary arm has a version of its own).

With --requests FILE (JSONL, CSV or Parquet with ids) or --requests-topic (over
[--requests-from-time, --requests-until-time), default all), also join
requests and replies by id into --report (JSON: answered, ok, error, expired,
missing ids, error codes); the exit code is then 1 if any request is missing.
Times are ISO 8601 (UTC unless an offset is given) or Unix epoch milliseconds.
"""


def _parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(prog="python -m producer", description=DESCRIPTION,
                                             formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
                        help="Kafka brokers (default: $KAFKA_BOOTSTRAP_SERVERS)")
    add_security_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)

    send = commands.add_parser(
        "send", help="send requests from a JSONL, CSV or Parquet file, or synthetic ones",
        description=SEND_DESCRIPTION,
        epilog="examples:\n  python -m producer send requests --file requests.jsonl --rate 500\n"
               "  python -m producer send requests --file customers.csv --key-field customer_id\n"
               "  python -m producer send requests --file features.parquet --model fraud\n"
               "  python -m producer send requests --synthetic churn --count 100000\n"
               "  python -m producer send requests --synthetic churn --count 1000 --model churn --model-version 2",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    send.add_argument("topic")
    source = send.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", type=Path, help="JSONL (.jsonl), CSV (.csv) or Parquet (.parquet) file of requests")
    source.add_argument("--synthetic", metavar="MODEL",
                        help="built-in model to make random inputs for (inputs only: --model says which served "
                             "model answers)")
    send.add_argument("--format", choices=("jsonl", "csv", "parquet"),
                      help="the file's format (default: by its suffix)")
    send.add_argument("--count", type=int, default=1000, help="synthetic requests to send (default: 1000)")
    send.add_argument("--rate", type=float, help="requests per second at most (default: as fast as possible)")
    keys = send.add_mutually_exclusive_group()
    keys.add_argument("--key", choices=("id", "none"), default="id",
                      help="record key: the request id (default), or none (the producer spreads records)")
    keys.add_argument("--no-key", dest="key", action="store_const", const="none", help="same as --key none")
    keys.add_argument("--key-field", metavar="FIELD",
                      help="key by this field (JSONL) or column (CSV): equal values share a partition, in order")
    send.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_model_flags(send)
    _add_kafka_client_flag(send)
    _add_format_flags(send, leave_out=("reply_format",))
    add_property_flags(send, PRODUCER_ROLES, from_file=False)

    collect = commands.add_parser(
        "collect", help="write the replies of a reply topic (or a time range of it) to JSONL, and a report",
        description=COLLECT_DESCRIPTION,
        epilog="examples:\n  python -m producer collect requests.replies replies.jsonl\n"
               "  python -m producer collect requests.backfill replies.jsonl --requests-topic requests \\\n"
               "      --requests-from-time 2026-11-29T00:00:00Z --requests-until-time 2026-11-30T00:00:00Z",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    collect.add_argument("topic")
    collect.add_argument("out", type=Path)
    collect.add_argument("--from-time", help="first reply timestamp to collect (inclusive)")
    collect.add_argument("--until-time", help="end of the replies' range (exclusive)")
    collect.add_argument("--idle-s", type=float, default=0.0,
                         help="after the end, keep reading until no reply came for this long (default: 0)")
    requests = collect.add_mutually_exclusive_group()
    requests.add_argument("--requests-topic", help="join with the requests of this topic")
    requests.add_argument("--requests", type=Path, metavar="FILE",
                          help="join with the requests of this JSONL, CSV or Parquet file (those with an id)")
    collect.add_argument("--requests-from-time", help="range of --requests-topic (inclusive; default: all)")
    collect.add_argument("--requests-until-time", help="range of --requests-topic (exclusive)")
    collect.add_argument("--max-record-bytes", type=int, default=BatchingSettings().max_record_bytes,
                         help="the worker's --max-record-bytes: a larger request is answered under its key, its "
                              "value unread (default: %(default)s)")
    collect.add_argument("--report", type=Path, help="where to write the join (default: OUT.report.json)")
    collect.add_argument("--no-progress", action="store_true", help="no progress bars")
    # the registry a worker run with --reply-format registered its reply schemas in
    add_format_flags(collect, leave_out=(*WORKER_ONLY_FORMATS, "request_format", "request_fields"))

    score = commands.add_parser(
        "score", help="send one request and print its reply",
        description="Send one request to REQUESTS_TOPIC and print its reply from REPLY_TOPIC (JSON, with the\n"
                    "model and model_version that answered); exit code 1 unless its status is ok.",
        epilog="examples:\n  python -m producer score requests requests.replies '[0.1, 0.2, ...]'\n"
               "  python -m producer score requests requests.replies '[0.1, 0.2, ...]' --model fraud",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    score.add_argument("requests_topic")
    score.add_argument("reply_topic")
    score.add_argument("inputs", help="the request's inputs as JSON, e.g. '[0.1, 0.2, ...]'")
    score.add_argument("--timeout-s", type=float, default=30.0,
                       help="how long to wait for the reply; then an error, exit code 1 (default: %(default)s)")
    score.add_argument("--read-committed", action="store_true",
                       help="read only replies of committed transactions (workers in --delivery exactly-once)")
    _add_model_flags(score)
    _add_kafka_client_flag(score)
    add_property_flags(score, PRODUCER_ROLES, from_file=False)
    _add_format_flags(score)

    topic = commands.add_parser("create-topic", help="create a topic")
    topic.add_argument("name")
    topic.add_argument("--partitions", type=_at_least_one, default=4, help="partitions of the topic (default 4)")
    topic.add_argument("--replication-factor", type=_at_least_one, default=1,
                       help="copies of each partition (default 1, the local single broker; 3 on a cluster such as "
                            "deploy/local/cluster.sh's)")

    demo = commands.add_parser("demo", help="the whole pipeline: topics, a worker, requests, replies, summary")
    demo.add_argument("--requests", type=int, default=20_000, help="requests to send (default: 20000)")
    demo.add_argument("--partitions", type=_at_least_one, default=4)
    demo.add_argument("--max-batch-size", type=int, default=64)
    demo.add_argument("--max-wait-ms", type=int, default=0,
                      help="the worker's max_wait_ms (default 0: no request waits for companions)")
    _add_kafka_client_flag(demo, " (the demo's worker's too)")
    return parser


PRODUCER_ROLES = "the producer of requests and the consumer of replies"
WORKER_ONLY_FORMATS = ("reply_schema_mode", "unknown_schema_retries")  # what a worker does with the registry


def _add_format_flags(command: argparse.ArgumentParser, leave_out: tuple[str, ...] = ()) -> None:
    """--request-format and the registry's settings (docs/formats.md), and the request schema to write with."""
    add_format_flags(command, leave_out=(*WORKER_ONLY_FORMATS, *leave_out))
    command.add_argument("--request-schema", type=Path, metavar="FILE",
                         help="avro, protobuf, json-schema: the request schema (an .avsc, a .proto whose first "
                              "message is the request, or a JSON Schema file; default: id, "
                              "inputs as an array of numbers, reply_to, deadline_ms, model, model_version), "
                              "registered under <topic>-value")
    command.add_argument("--no-register", action="store_true",
                         help="look the request schema up under <topic>-value instead of registering it "
                              "(read-only registry credentials)")


def _add_model_flags(command: argparse.ArgumentParser) -> None:
    """``--model`` and ``--model-version``: which of the models a worker serves answers (worker/core/routes.py)."""
    command.add_argument("--model", metavar="NAME",
                         help="the served model to answer (default: the worker's default model, or its requests "
                              "topic's); a model the worker does not serve is answered with an error reply, code "
                              "unknown_model, that lists the served ones")
    command.add_argument("--model-version", metavar="V",
                         help="that version of the model (or of the default); without it, a model split between a "
                              "live and a canary version answers with the arm a hash of the request id picks; a "
                              "version not served is answered unknown_model too")


def _encoder(args: argparse.Namespace, topic: str) -> RequestEncode:
    schema = args.request_schema.read_text(encoding="utf-8") if args.request_schema else None
    return request_encoder(Formats.from_sources(args), topic, schema, register=not args.no_register)


def _add_kafka_client_flag(command: argparse.ArgumentParser, whose: str = "") -> None:
    """``--kafka-client``, defaulting from STREAMSCORE_KAFKA_CLIENT as the worker's does; checked in ``main``."""
    command.add_argument("--kafka-client", metavar="{kafka-python,confluent}",
                         default=os.environ.get("STREAMSCORE_KAFKA_CLIENT") or "kafka-python",
                         help=f"the Kafka client library{whose}: kafka-python, or confluent (confluent-kafka: far "
                              "less CPU per record; the `confluent` extra) (default: $STREAMSCORE_KAFKA_CLIENT, "
                              "else kafka-python)")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.bootstrap_servers:
        print("error: KAFKA_BOOTSTRAP_SERVERS is not set: export it or pass --bootstrap-servers "
              "(`make up` starts a local broker and prints it)", file=sys.stderr)
        return 2
    try:
        args.security = KafkaSecurity.from_sources(args)
        if "kafka_client" in args:  # a default from the environment is not checked by argparse
            check_kafka_client(args.kafka_client, "kafka_client (--kafka-client, STREAMSCORE_KAFKA_CLIENT)")
        if args.command != "score":  # the client checks the connection itself
            from worker.kafka.preflight import check_kafka

            check_kafka(args.bootstrap_servers, args.security)
        code = int(_COMMANDS[args.command](args))
        sys.stdout.flush()  # here, not at the interpreter's exit: a reader gone is then seen here too
        return code
    except (LookupError, ValueError, OSError, WorkerError) as exc:
        if reader_gone(exc):  # score ... | head
            return EXIT_READER_GONE
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _send(args: argparse.Namespace) -> int:
    from producer.send import count_requests, missing_topics, requests_from_file, send_requests, synthetic_requests

    if missing_topics(args.bootstrap_servers, [args.topic], args.security):
        raise LookupError(f"topic {args.topic!r} does not exist; create it first "
                          f"(`python -m producer create-topic {args.topic}`)")
    if args.file:
        requests: Iterable[Any] = requests_from_file(args.file, args.format, args.key_field)
        total = count_requests(args.file, args.format)
    else:
        requests, total = synthetic_requests(args.synthetic, args.count), args.count
    summary = send_requests(args.bootstrap_servers, args.topic, requests, total=total, rate=args.rate,
                            keyed=args.key == "id", key_field=args.key_field, progress=not args.no_progress,
                            record_send_times=False, raise_on_failure=False, security=args.security,
                            kafka_client=args.kafka_client, encode=_encoder(args, args.topic), model=args.model,
                            model_version=args.model_version, properties=_properties(args))
    print(_send_summary(args.topic, summary), file=sys.stderr)
    return 0 if not summary.failed and not summary.skipped else 1


def _send_summary(topic: str, summary: SendSummary) -> str:
    spread = "  ".join(f"{p}: {n:,}" for p, n in sorted(summary.partitions.items())) or "none"
    lines = [f"sent {summary.sent:,} requests to {topic} in {summary.seconds:.1f} s ({summary.rate:,.0f}/s)",
             f"  partitions  {spread}",
             f"  failed      {summary.failed:,}" + (f"  (first: {summary.first_error})" if summary.first_error else ""),
             f"  skipped     {len(summary.skipped):,} unreadable lines"]
    lines += [f"    {bad.where}: {bad.reason}" for bad in summary.skipped[:10]]
    if len(summary.skipped) > 10:
        lines.append(f"    ... and {len(summary.skipped) - 10:,} more")
    return "\n".join(lines)


def _collect(args: argparse.Namespace) -> int:
    from producer.collect import TopicSpanReader, collect_replies, join_report, request_ids_from_records
    from producer.send import requests_from_file

    reader = TopicSpanReader(args.bootstrap_servers, args.topic, _time_range(args.from_time, args.until_time),
                             security=args.security)
    try:
        with args.out.open("wb") as out:
            tally = collect_replies(reader, out, args.idle_s, progress=not args.no_progress,
                                    read=ReplyReader.from_formats(Formats.from_sources(args)))
    finally:
        reader.close()
    print(f"wrote {len(tally.status):,} replies to {args.out} ({tally.duplicates:,} duplicates skipped, "
          f"{tally.unreadable:,} unreadable records)\nok replies by model and version: {tally.render_models()}",
          file=sys.stderr)
    if tally.first_unreadable:
        print(f"the first unreadable record: {tally.first_unreadable}", file=sys.stderr)
    if not (args.requests_topic or args.requests):
        return 0
    if args.requests:
        ids: Iterable[str | None] = (None if isinstance(r, BadLine) else r.get("id")
                                     for r in requests_from_file(args.requests, assign_ids=False))
        report = join_report(ids, tally)
    else:
        requests = TopicSpanReader(args.bootstrap_servers, args.requests_topic,
                                   _time_range(args.requests_from_time, args.requests_until_time),
                                   security=args.security)
        try:
            records = requests.records(progress=not args.no_progress, what="reading requests")
            report = join_report(request_ids_from_records(records, args.max_record_bytes), tally)
        finally:
            requests.close()
    report_path = args.report or args.out.with_name(args.out.name + ".report.json")
    report_path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(report.render() + f"\nreport: {report_path}", file=sys.stderr)
    return 1 if report.missing else 0


def _time_range(from_time: str | None, until_time: str | None) -> TimeRange | None:
    from worker.core.timerange import TimeRange, parse_time

    if from_time is None and until_time is None:
        return None
    return TimeRange(parse_time(from_time or "0", "--from-time"),
                     None if until_time is None else parse_time(until_time, "--until-time"))


def _score(args: argparse.Namespace) -> int:
    from producer.client import ReplyTimeout, ScoringClient

    formats = Formats.from_sources(args)
    schema = args.request_schema.read_text(encoding="utf-8") if args.request_schema else None
    inputs = _inputs(args.inputs)
    with ScoringClient(args.bootstrap_servers, args.requests_topic, args.reply_topic, security=args.security,
                       read_committed=args.read_committed, kafka_client=args.kafka_client, formats=formats,
                       request_schema=schema, properties=_properties(args)) as client:
        try:
            reply = client.score(inputs, timeout_s=args.timeout_s, model=args.model,
                                 model_version=args.model_version)
        except ReplyTimeout as exc:
            print(f"error: {exc} (a worker that just started may still be joining its group: raise --timeout-s)",
                  file=sys.stderr)
            return 1
    print(orjson.dumps(reply, option=orjson.OPT_INDENT_2).decode())
    return 0 if reply.get("status") == "ok" else 1


def _inputs(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"INPUTS is not JSON ({exc}): give the request's inputs as JSON, e.g. '[0.1, 0.2]' "
                         "or '{\"age\": 42}' (quoted for the shell)") from None


def _properties(args: argparse.Namespace) -> KafkaProperties:
    """The client properties of the flags and the environment (STREAMSCORE_KAFKA_PRODUCER_*, ..._CONSUMER_*)."""
    return KafkaProperties.from_sources(args, os.environ)


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse names the flag when it refuses one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _create_topic(args: argparse.Namespace) -> int:
    from producer.topics import create_topics, partition_count

    if create_topics(args.bootstrap_servers, {args.name: args.partitions}, security=args.security,
                     replication=args.replication_factor):
        print(f"{args.name}: created", file=sys.stderr)
        return 0
    has = partition_count(args.bootstrap_servers, args.name, args.security)
    differs = (f", not the {args.partitions} asked for: left as it is (Kafka only adds partitions, with "
               "kafka-topics.sh --alter, and adding them moves keys to other partitions)"
               if has != args.partitions else "")
    print(f"{args.name}: exists already, with {has} partition{'s' if has != 1 else ''}{differs}", file=sys.stderr)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from producer.demo import DemoConfig, run_demo

    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        print("error: REDIS_URL is not set (`make demo` starts a local Redis and sets it)", file=sys.stderr)
        return 2
    return run_demo(DemoConfig(args.bootstrap_servers, redis_url, args.security, args.requests, args.partitions,
                               max_batch_size=args.max_batch_size, max_wait_ms=args.max_wait_ms,
                               kafka_client=args.kafka_client))


_COMMANDS = {"send": _send, "collect": _collect, "score": _score, "create-topic": _create_topic, "demo": _demo}
