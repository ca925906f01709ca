"""The open-loop sender of ``bench.tail``, in a process of its own.

``python -m bench.tail_sender --bootstrap-servers B --topic T --rate R --bodies IN.jsonl --out OUT.json``
sends every body of IN (one request body a line) on a fixed schedule, request i
at t0 + i/R, whatever the replies or the broker do (no coordinated omission:
a late send is sent at once and its latency counts from its planned time). It
writes OUT: the planned and the actual send time of each request id, in Unix
ms, and how far behind the schedule the sender fell.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.pauses import no_collector_pauses
from bench.security import env_security
from producer.transport import open_publisher
from worker.core.wire import encode_request


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tail_sender", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--bodies", type=Path, required=True, help="request bodies, one JSON object a line")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kafka-client", default="confluent")
    parser.add_argument("--linger-ms", type=int, default=0, help="the sender's producer linger (default 0)")
    args = parser.parse_args(argv)
    bodies = [json.loads(line) for line in args.bodies.read_text().splitlines() if line]
    publisher = open_publisher(args.kafka_client, args.bootstrap_servers, env_security(), linger_ms=args.linger_ms)
    failed: list[str] = []

    def on_done(_partition: int | None, error: BaseException | None) -> None:
        if error is not None:
            failed.append(f"{type(error).__name__}: {error}")

    publisher.prepare(args.topic, 10.0)
    planned_ms: dict[str, float] = {}
    sent_ms: dict[str, float] = {}
    behind_ms = 0.0
    t0 = time.time() + 0.2  # a moment to settle in
    with no_collector_pauses():  # a pause of the sender's would put it behind its schedule
        for i, body in enumerate(bodies):
            planned = t0 + i / args.rate
            wait = planned - time.time()
            if wait > 0:
                publisher.serve()
                time.sleep(max(0.0, planned - time.time()))
            now = time.time()
            behind_ms = max(behind_ms, (now - planned) * 1000)
            request_id = str(body["id"])
            planned_ms[request_id], sent_ms[request_id] = planned * 1000, now * 1000
            publisher.publish(args.topic, request_id.encode(), encode_request(body["inputs"], request_id), on_done)
    publisher.flush()
    publisher.close()
    args.out.write_text(json.dumps({"planned_ms": planned_ms, "sent_ms": sent_ms, "max_behind_ms": behind_ms,
                                    "failed": len(failed), "first_failure": failed[0] if failed else None}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
