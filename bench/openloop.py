"""Latency under load: send at a fixed rate while the worker runs, stamp each reply as it arrives.

The sender (producer/send.py with ``rate=``, on the run's load client) runs on a thread of this
process and the reader on the calling thread, so send and receive times come
from one clock. The sender keeps to its schedule whatever the replies do (an
open loop); if this machine cannot send that fast, the achieved rate says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from tqdm import tqdm

from bench.pauses import no_collector_pauses
from bench.results import LatencyRun, percentile
from bench.security import env_security
from producer.send import RequestBody, SendSummary, send_requests
from producer.transport import open_reply_reader
from worker.core.wire import H_BATCH_SIZE, H_BATCH_WAIT, H_COMPUTE, H_QUEUE_WAIT, decode_reply

IDLE_TIMEOUT_S = 15.0  # after the last send, give up on replies that stop coming for this long
# Where a request's time goes, from the reply's headers; "reply_to_reader" is received - reply CreateTime.
STAGE_HEADERS = {"queue_wait": H_QUEUE_WAIT, "batch_wait": H_BATCH_WAIT, "compute": H_COMPUTE}


@dataclass
class _Sender:
    summary: SendSummary | None = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class LatencyReader:
    """Reads a reply topic from its current end, on ``kafka_client``; stamps each reply's id with the wall time
    its poll returned. ``answers``: also decode each reply's value and keep its status and model (off by
    default: the bare loops' replies are not JSON, and decoding costs the reader time)."""

    def __init__(self, bootstrap: str, topic: str, kafka_client: str, answers: bool = False) -> None:
        self._replies = open_reply_reader(kafka_client, bootstrap, env_security())
        self._replies.follow_from_end(topic, self._replies.partitions(topic))  # before anything is sent
        self.received_ms: dict[str, float] = {}
        self.batch_sizes: dict[str, int] = {}
        self.stages: dict[str, dict[str, float]] = {}  # id -> where its time went, from the reply's headers
        self._decode = answers
        self.answers: dict[str, tuple[str, str]] = {}  # id -> the reply's status and model, when ``answers``

    def poll(self) -> int:
        polled = self._replies.poll(0.1)
        now_ms = time.time_ns() / 1e6
        new = 0
        for record in polled:
            request_id = (record.key or b"").decode(errors="replace")
            if request_id not in self.received_ms:
                self.received_ms[request_id] = now_ms
                headers = dict(record.headers)
                self.batch_sizes[request_id] = int(headers.get(H_BATCH_SIZE) or 0)
                self.stages[request_id] = _stages(headers, now_ms - record.timestamp_ms)
                if self._decode:
                    self.answers[request_id] = _answer(record.value)
                new += 1
        return new

    def close(self) -> None:
        self._replies.close()


def _answer(value: bytes | None) -> tuple[str, str]:
    try:
        reply = decode_reply(value or b"")
    except ValueError:
        return "undecodable", ""
    return str(reply.get("status", "")), str(reply.get("model", ""))


def _stages(headers: dict[str, bytes], reply_transit_ms: float) -> dict[str, float]:
    stages = {name: float(headers[header]) for name, header in STAGE_HEADERS.items() if header in headers}
    stages["reply_to_reader"] = reply_transit_ms
    return stages


def open_loop(bootstrap: str, requests_topic: str, reply_topic: str, bodies: list[RequestBody], rate: float,
              load: float, warmup_s: float, progress: bool, stages: bool = True,
              kafka_client: str = "kafka-python") -> LatencyRun:
    """Send ``bodies`` at ``rate`` per second and wait for their replies. Blocks; raises if sending fails.

    ``stages``: break the latency down by the worker's reply headers (off for
    the Kafka ceiling loop, whose headers only have the right size).
    ``kafka_client``: the sender's and the reader's.
    """
    reader = LatencyReader(bootstrap, reply_topic, kafka_client)
    sender = _Sender()

    def send() -> None:
        try:
            sender.summary = send_requests(bootstrap, requests_topic, bodies, rate=rate, progress=False,
                                           security=env_security(), kafka_client=kafka_client)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            sender.error = exc
        finally:
            sender.done.set()

    bar = tqdm(total=len(bodies), unit="reply", desc=f"  open loop {rate:,.0f}/s", disable=not progress, leave=False)
    last_new = time.monotonic()
    try:
        with no_collector_pauses():  # a pause of this process's would count as latency (bench/pauses.py)
            threading.Thread(target=send, name="bench-sender", daemon=True).start()
            while not (sender.done.is_set() and len(reader.received_ms) >= len(bodies)):
                new = reader.poll()
                bar.update(new)
                if new or not sender.done.is_set():
                    last_new = time.monotonic()
                elif time.monotonic() - last_new > IDLE_TIMEOUT_S:
                    break
    finally:
        bar.close()
        reader.close()
    if sender.error is not None or sender.summary is None:
        raise RuntimeError(f"sending at {rate:.0f}/s failed: {sender.error}")
    if not stages:
        reader.stages.clear()
        reader.batch_sizes.clear()
    return latency_run(sender.summary.sent_at_ms, sender.summary.sent_at_ms, reader, rate, load, warmup_s)


def latency_run(sent_ms: Mapping[str, float], from_ms: Mapping[str, float], reader: LatencyReader, rate: float,
                load: float, warmup_s: float) -> LatencyRun:
    """The figures of one open-loop run: each request's latency is reply read - ``from_ms`` (its actual send, or
    its planned one: bench/tail_sender.py), after the first ``warmup_s`` of sends."""
    start_ms = min(sent_ms.values())
    measured_ids = [i for i, at in sent_ms.items() if at >= start_ms + warmup_s * 1000]
    answered = [i for i in measured_ids if i in reader.received_ms]
    latencies = sorted(reader.received_ms[i] - from_ms[i] for i in answered)
    sizes = [reader.batch_sizes[i] for i in answered if reader.batch_sizes.get(i)]
    span_s = (max(sent_ms.values()) - start_ms) / 1000
    return LatencyRun(
        load=load, offered_per_s=rate, achieved_per_s=(len(sent_ms) - 1) / span_s if span_s > 0 else 0.0,
        sent=len(sent_ms), measured=len(answered),
        missing=sum(1 for i in sent_ms if i not in reader.received_ms),
        p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), p99_ms=percentile(latencies, 99),
        max_ms=latencies[-1] if latencies else None,
        mean_batch_size=sum(sizes) / len(sizes) if sizes else None,
        stages_p50_ms=_stage_percentiles(reader, answered, 50), stages_p99_ms=_stage_percentiles(reader, answered, 99),
    )


def _stage_percentiles(reader: LatencyReader, ids: list[str], pct: float) -> dict[str, float | None]:
    names = [*STAGE_HEADERS, "reply_to_reader"]
    if not reader.stages:
        return {}
    return {name: percentile(sorted(reader.stages[i][name] for i in ids if name in reader.stages.get(i, {})), pct)
            for name in names}
