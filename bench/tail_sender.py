"""The open-loop sender of ``bench.tail`` and ``bench.two_models``, in a process of its own.

``python -m bench.tail_sender --bootstrap-servers B --topic T --rate R --bodies IN.jsonl --out OUT.json``
sends every body of IN (one request body a line; a body's ``model``, if any,
names the model to answer it) on a fixed schedule, request i
at t0 + i/R, whatever the replies or the broker do (no coordinated omission:
a late send is sent at once and its latency counts from its planned time). It
writes OUT: the planned and the actual send time of each request id, in Unix
ms, and how far behind the schedule the sender fell. ``send_and_read`` runs
it from a benchmark and reads the replies meanwhile.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from bench.openloop import IDLE_TIMEOUT_S, LatencyReader
from bench.pauses import no_collector_pauses
from bench.security import env_security
from producer.send import RequestBody
from producer.transport import open_publisher
from worker.core.wire import encode_request


def send_and_read(bootstrap: str, requests_topic: str, reply_topic: str, bodies: list[RequestBody], rate: float,
                  files: Path, kafka_client: str, linger_ms: int = 0,
                  answers: bool = False) -> tuple[dict[str, Any], LatencyReader]:
    """Send ``bodies`` at ``rate`` from a sender process of this module's, and read the replies in this one
    until each body has its reply, or none came for IDLE_TIMEOUT_S after the sender finished. Blocks.

    ``files``: where the bodies and the sender's record go (``files``.bodies.jsonl, ``files``.sends.json).
    ``kafka_client``: the sender's and the reader's; ``answers``: as LatencyReader's. Returns the sender's
    record (planned_ms, sent_ms, max_behind_ms, failed) and the reader, closed. Raises RuntimeError if the
    sender wrote no record; it is stopped if this is interrupted.
    """
    bodies_path = files.with_name(files.name + ".bodies.jsonl")
    sends_path = files.with_name(files.name + ".sends.json")
    bodies_path.write_bytes(b"\n".join(orjson.dumps(b) for b in bodies))
    reader = LatencyReader(bootstrap, reply_topic, kafka_client, answers)
    sender = subprocess.Popen([sys.executable, "-m", "bench.tail_sender", "--bootstrap-servers", bootstrap,
                               "--topic", requests_topic, "--rate", str(rate), "--bodies", str(bodies_path),
                               "--out", str(sends_path), "--kafka-client", kafka_client,
                               "--linger-ms", str(linger_ms)])
    last_new = time.monotonic()
    try:
        with no_collector_pauses():  # a pause of this reader's would count as latency
            while sender.poll() is None or len(reader.received_ms) < len(bodies):
                if reader.poll():
                    last_new = time.monotonic()
                elif sender.poll() is not None and time.monotonic() - last_new > IDLE_TIMEOUT_S:
                    break
    finally:
        reader.close()
        if sender.poll() is None:
            sender.terminate()
            sender.wait()
    if not sends_path.exists():
        raise RuntimeError(f"the sender (exit code {sender.returncode}) wrote no record to {sends_path}")
    sends: dict[str, Any] = json.loads(sends_path.read_text())
    return sends, reader


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
            publisher.publish(args.topic, request_id.encode(),
                              encode_request(body["inputs"], request_id, model=body.get("model")), on_done)
    publisher.flush()
    publisher.close()
    args.out.write_text(json.dumps({"planned_ms": planned_ms, "sent_ms": sent_ms, "max_behind_ms": behind_ms,
                                    "failed": len(failed), "first_failure": failed[0] if failed else None}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
