"""``python -m producer``: send requests, collect replies, score one request, run the demo."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

DESCRIPTION = """\
streamscore producer: the client side. Sends scoring requests to a requests
topic, collects replies from a reply topic, scores a single request and waits
for its reply, or runs the whole demo. KAFKA_BOOTSTRAP_SERVERS (or
--bootstrap-servers) says where Kafka is; `make up` prints a local one.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m producer", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
                        help="Kafka brokers (default: $KAFKA_BOOTSTRAP_SERVERS)")
    commands = parser.add_subparsers(dest="command", required=True)

    send = commands.add_parser("send", help="send requests from a JSONL file or synthetic ones",
                               description="Send requests to TOPIC: each line of FILE is a request object "
                                           "({\"id\": ..., \"inputs\": ...}; a missing id is generated), or "
                                           "--synthetic MODEL --count N valid random requests.")
    send.add_argument("topic")
    source = send.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", type=Path, help="JSONL file of requests")
    source.add_argument("--synthetic", metavar="MODEL", help="built-in model to make random inputs for")
    send.add_argument("--count", type=int, default=1000, help="synthetic requests to send (default: 1000)")
    send.add_argument("--rate", type=float, help="requests per second at most (default: as fast as possible)")
    send.add_argument("--no-key", action="store_true", help="send without a key (round-robin partitions)")

    collect = commands.add_parser("collect", help="write the replies of a reply topic to JSONL",
                                  description="Read TOPIC from its beginning until nothing new arrives for "
                                              "--idle-s seconds, and write the first reply per id to OUT.")
    collect.add_argument("topic")
    collect.add_argument("out", type=Path)
    collect.add_argument("--idle-s", type=float, default=5.0, help="stop after this long without new replies")

    score = commands.add_parser("score", help="send one request and print its reply")
    score.add_argument("requests_topic")
    score.add_argument("reply_topic")
    score.add_argument("inputs", help="the request's inputs as JSON, e.g. '[0.1, 0.2, ...]'")
    score.add_argument("--timeout-s", type=float, default=30.0)

    topic = commands.add_parser("create-topic", help="create a topic (replication factor 1)")
    topic.add_argument("name")
    topic.add_argument("--partitions", type=int, default=4)

    demo = commands.add_parser("demo", help="the whole pipeline: topics, a worker, requests, replies, summary")
    demo.add_argument("--requests", type=int, default=20_000, help="requests to send (default: 20000)")
    demo.add_argument("--partitions", type=int, default=4)
    demo.add_argument("--max-batch-size", type=int, default=64)
    demo.add_argument("--max-wait-ms", type=int, default=10)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.bootstrap_servers:
        print("error: KAFKA_BOOTSTRAP_SERVERS is not set: export it or pass --bootstrap-servers "
              "(`make up` starts a local broker and prints it)", file=sys.stderr)
        return 2
    try:
        return int(_COMMANDS[args.command](args))
    except (LookupError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _send(args: argparse.Namespace) -> int:
    from producer.send import requests_from_jsonl, send_requests, synthetic_requests

    requests = requests_from_jsonl(args.file) if args.file else synthetic_requests(args.synthetic, args.count)
    total = None if args.file else args.count
    summary = send_requests(args.bootstrap_servers, args.topic, requests, total=total, rate=args.rate,
                            keyed=not args.no_key)
    print(f"sent {summary.sent} requests to {args.topic} in {summary.seconds:.1f} s "
          f"({summary.rate:,.0f}/s)", file=sys.stderr)
    return 0


def _collect(args: argparse.Namespace) -> int:
    from producer.collect import ReplyCollector

    collector = ReplyCollector(args.bootstrap_servers, args.topic)
    try:
        while collector.poll(timeout_s=args.idle_s):
            pass
        with args.out.open("wb") as out:
            count = collector.write_jsonl(out)
    finally:
        collector.close()
    print(f"wrote {count} replies ({collector.collection.duplicates} duplicates skipped) to {args.out}",
          file=sys.stderr)
    return 0


def _score(args: argparse.Namespace) -> int:
    from producer.client import ScoringClient

    with ScoringClient(args.bootstrap_servers, args.requests_topic, args.reply_topic) as client:
        reply = client.score(orjson.loads(args.inputs), timeout_s=args.timeout_s)
    print(orjson.dumps(reply, option=orjson.OPT_INDENT_2).decode())
    return 0 if reply.get("status") == "ok" else 1


def _create_topic(args: argparse.Namespace) -> int:
    from producer.topics import create_topics

    created = create_topics(args.bootstrap_servers, {args.name: args.partitions})
    print(f"{args.name}: {'created' if created else 'exists already'}", file=sys.stderr)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from producer.demo import DemoConfig, run_demo

    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        print("error: REDIS_URL is not set (`make demo` starts a local Redis and sets it)", file=sys.stderr)
        return 2
    return run_demo(DemoConfig(args.bootstrap_servers, redis_url, args.requests, args.partitions,
                               max_batch_size=args.max_batch_size, max_wait_ms=args.max_wait_ms))


_COMMANDS = {"send": _send, "collect": _collect, "score": _score, "create-topic": _create_topic, "demo": _demo}
