"""``python -m bench.tail``: where the tail comes from, streamscore against the bare loops, open loop.

For every rate, repeat and contender (interleaved, so that the machine's
drift spreads over all of them): fresh topics, the contender started and
given its partitions, then a sender in a process of its own
(bench/tail_sender.py) sends at a fixed rate for ``--seconds`` after
``--warmup-s``, and this process reads the replies. Latency is counted from
each request's planned send time (no coordinated omission) and from its
actual send; for streamscore, each reply's headers split it into queue wait,
batch wait and compute, and the reply's own create time gives its way to the
reader. CPU per reply is the contender's CPU over the run over its replies.

Contenders: ``bare-confluent`` (bench/confluent_ceiling.py: consume, reply,
flush, commit asynchronously), ``bare-kafka-python`` (bench/kafka_ceiling.py),
``streamscore-confluent`` and ``streamscore-kafka-python`` (the worker under
bench/gc_probe.py, which times every garbage collection), and
the variants that show what each change of the worker's latency did:
``-wait-10`` (``--max-wait-ms 10``: a batch waits for companions while they
keep arriving), ``-gc-unfrozen`` (the worker's frozen start-up heap unfrozen
when the loop starts) and ``-before`` (both, and ``--wait-to-fill``: the
worker as it was before those changes, a 10 ms wait even for an idle model).
Writes results.json, results.md, tail.png and timeline.png (every request's
latency against its send time, one panel per contender) under ``--out``.
Needs KAFKA_BOOTSTRAP_SERVERS and REDIS_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
import orjson  # noqa: E402

from bench import commands, machine  # noqa: E402
from bench.contender import ContenderProcess  # noqa: E402
from bench.openloop import STAGE_HEADERS, LatencyReader  # noqa: E402
from bench.results import percentile  # noqa: E402
from bench.runs import say  # noqa: E402
from bench.tail_sender import send_and_read  # noqa: E402
from bench.topics import RunTopics  # noqa: E402
from bench.workloads import WORKLOADS, RequestPool, load_or_skip, reply_size  # noqa: E402


@dataclass(frozen=True)
class Variant:
    """One streamscore contender's worker batching and garbage collection (the "before" of a change)."""

    wait_ms: int | None = None  # the worker's --max-wait-ms; None: this run's --max-wait-ms
    wait_to_fill: bool = False  # the worker's --wait-to-fill
    unfreeze: bool = False  # bench/gc_probe.py --unfreeze


VARIANTS: dict[str, Variant] = {
    "streamscore-confluent": Variant(),
    "streamscore-confluent-wait-10": Variant(wait_ms=10),
    "streamscore-confluent-gc-unfrozen": Variant(unfreeze=True),
    "streamscore-confluent-before": Variant(wait_ms=10, wait_to_fill=True, unfreeze=True),
    "streamscore-kafka-python": Variant(),
}
CONTENDERS = ("bare-confluent", *[name for name in VARIANTS if "confluent" in name], "bare-kafka-python",
              "streamscore-kafka-python")
STAGES = (*STAGE_HEADERS, "reply_to_reader")


@dataclass
class Row:
    contender: str
    rate: float
    repeat: int
    sent: int = 0
    answered: int = 0
    max_behind_ms: float = 0.0
    planned_ms: dict[str, float | None] = field(default_factory=dict)  # p50, p99, max from the planned send
    sent_ms: dict[str, float | None] = field(default_factory=dict)  # p50, p99 from the actual send
    stages_p50_ms: dict[str, float | None] = field(default_factory=dict)
    stages_p99_ms: dict[str, float | None] = field(default_factory=dict)
    cpu_us_per_reply: float | None = None
    gc_pauses: dict[str, object] | None = None
    exit_code: int | None = None
    log: str = ""
    timeline: str = ""  # every answered request's planned send and latency (bench/tail.py write_timeline)


def command(name: str, ctx: argparse.Namespace, redis_url: str, topics: RunTopics, reply_bytes: int) -> list[str]:
    if name == "bare-confluent":
        return commands.confluent_ceiling(ctx.bootstrap, topics, reply_bytes)
    if name == "bare-kafka-python":
        return commands.kafka_ceiling(ctx.bootstrap, topics, reply_bytes)
    client = "kafka-python" if name.endswith("kafka-python") else "confluent"
    variant = VARIANTS[name]
    wait_ms = ctx.max_wait_ms if variant.wait_ms is None else variant.wait_ms
    worker = commands.worker(ctx.bootstrap, redis_url, topics, WORKLOADS[ctx.workload].model, ctx.batch_size,
                             wait_ms, 1, ("--kafka-client", client), wait_to_fill=variant.wait_to_fill)
    probe = [sys.executable, "-m", "bench.gc_probe", *(["--unfreeze"] if variant.unfreeze else []), "--"]
    return [*probe, *worker[3:]]  # worker[:3] is `python -m worker`


def run_one(name: str, rate: float, repeat: int, args: argparse.Namespace, redis_url: str, pool: RequestPool,
            reply_bytes: int) -> Row:
    row = Row(name, rate, repeat)
    label = f"tail-{name}-{int(rate)}-{repeat}"
    topics = RunTopics.fresh(label)
    topics.create(args.bootstrap, 4)
    process = ContenderProcess(label, command(name, args, redis_url, topics, reply_bytes),
                               args.out / "logs" / f"{label}.log")
    row.log = str(process.log_path)
    try:
        if not process.wait_assigned(180.0):
            say(f"{label}: never got its partitions (log: {process.log_path})")
            return row
        bodies = pool.take(round(rate * (args.warmup_s + args.seconds)))
        cpu_before = process.cpu_s()
        sends, reader = send_and_read(args.bootstrap, topics.requests, topics.replies, bodies, rate,
                                      args.out / "logs" / label, args.load_client, args.sender_linger_ms)
        cpu_after = process.cpu_s()
    finally:
        row.exit_code = process.stop()
        topics.delete(args.bootstrap, redis_url)
    _figures(row, sends, reader, args.warmup_s, cpu_before, cpu_after)
    row.timeline = str(args.out / "logs" / f"{label}.timeline.json")
    write_timeline(Path(row.timeline), sends, reader)
    row.gc_pauses = _gc_pauses(process.log_path)
    return row


def _figures(row: Row, sends: dict[str, object], reader: LatencyReader, warmup_s: float,
             cpu_before: float | None, cpu_after: float | None) -> None:
    planned: dict[str, float] = sends["planned_ms"]  # type: ignore[assignment]
    sent: dict[str, float] = sends["sent_ms"]  # type: ignore[assignment]
    row.sent, row.max_behind_ms = len(planned), float(sends["max_behind_ms"])  # type: ignore[arg-type]
    row.answered = sum(1 for i in planned if i in reader.received_ms)
    start = min(planned.values()) + warmup_s * 1000
    measured = [i for i, at in planned.items() if at >= start and i in reader.received_ms]
    from_planned = sorted(reader.received_ms[i] - planned[i] for i in measured)
    from_sent = sorted(reader.received_ms[i] - sent[i] for i in measured)
    row.planned_ms = {"p50": percentile(from_planned, 50), "p99": percentile(from_planned, 99),
                      "max": from_planned[-1] if from_planned else None}
    row.sent_ms = {"p50": percentile(from_sent, 50), "p99": percentile(from_sent, 99)}
    if row.contender.startswith("streamscore"):  # the bare loops' headers only have the right size
        for pct, into in ((50, row.stages_p50_ms), (99, row.stages_p99_ms)):
            for stage in STAGES:
                into[stage] = percentile(sorted(reader.stages[i][stage] for i in measured
                                                if stage in reader.stages.get(i, {})), pct)
    if cpu_before is not None and cpu_after is not None and row.answered:
        row.cpu_us_per_reply = (cpu_after - cpu_before) * 1e6 / row.answered


def write_timeline(path: Path, sends: dict[str, object], reader: LatencyReader) -> None:
    """Each answered request, in the order planned: seconds from the first planned send, latency from the planned
    send in ms, its stages when the reply had them, and the model that answered when the reader kept the replies'
    answers: where a tail is a few stalls, this shows when."""
    planned: dict[str, float] = sends["planned_ms"]  # type: ignore[assignment]
    start = min(planned.values())
    points = [[round((at - start) / 1000, 4), round(reader.received_ms[i] - at, 2), reader.stages.get(i),
               *([reader.answers[i][1]] if i in reader.answers else [])]
              for i, at in sorted(planned.items(), key=lambda item: item[1]) if i in reader.received_ms]
    path.write_bytes(orjson.dumps(points))


def timeline_plot(rows: list[Row], path: Path) -> None:
    """Latency against send time, one panel per contender (its first repeat at each rate): stalls stand out as
    spikes shared by every request sent at that moment."""
    firsts = {(r.contender, r.rate): r for r in reversed(rows) if r.timeline}
    if not firsts:
        return
    fig, axes = plt.subplots(len(firsts), 1, figsize=(9, 1.9 * len(firsts)), sharex=True, squeeze=False)
    for ax, ((name, rate), row) in zip(axes[:, 0], sorted(firsts.items()), strict=True):
        points = orjson.loads(Path(row.timeline).read_bytes())
        ax.plot([p[0] for p in points], [max(p[1], 0.1) for p in points], ",", color="tab:blue")
        ax.set_yscale("log")
        ax.set_ylim(0.5, 5000)
        ax.set_title(f"{name} at {rate:,.0f} req/s", fontsize=8)
        ax.set_ylabel("ms", fontsize=8)
    axes[-1, 0].set_xlabel("seconds from the first planned send")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _gc_pauses(log_path: Path) -> dict[str, object] | None:
    for line in reversed(log_path.read_bytes().splitlines()):
        if b'"gc_pauses"' in line:
            summary: dict[str, object] = orjson.loads(line)
            return summary
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tail", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help="comma-separated, of: " + ", ".join(CONTENDERS))
    parser.add_argument("--rates", default="2000", help="requests per second, comma-separated (default 2000)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15.0, help="measured, after the warm-up (default 15)")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--workload", default="churn", choices=sorted(WORKLOADS))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-wait-ms", type=int, default=0, help="streamscore's (default 0, the worker's own)")
    parser.add_argument("--load-client", default="confluent", help="the sender's and the reader's Kafka client")
    parser.add_argument("--sender-linger-ms", type=int, default=0,
                        help="the sender's producer linger: 0 sends each request in a produce request of its own")
    parser.add_argument("--out", type=Path, default=Path("bench/results/tail"))
    args = parser.parse_args(argv)
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("error: KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (`make up`, then eval its output)",
              file=sys.stderr)
        return 2
    names = [n for n in args.contenders.split(",") if n]
    unknown = sorted(set(names) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contenders {unknown}; choose from {', '.join(CONTENDERS)}")
    args.bootstrap = bootstrap
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    workload = WORKLOADS[args.workload]
    servable, note = load_or_skip(workload)
    if servable is None:
        print(f"error: {note}", file=sys.stderr)
        return 2
    pool = RequestPool(workload, 5_000)
    reply_bytes = reply_size(servable, pool.take(32))
    rows = []
    for repeat in range(args.repeats):
        for rate in (float(r) for r in args.rates.split(",")):
            for name in names:
                row = run_one(name, rate, repeat, args, redis_url, pool, reply_bytes)
                rows.append(row)
                say(f"{name} at {rate:,.0f}/s (repeat {repeat + 1}): p50 {row.planned_ms.get('p50') or 0:.1f} "
                    f"p99 {row.planned_ms.get('p99') or 0:.1f} ms from the planned send, "
                    f"{row.answered}/{row.sent} answered, CPU {row.cpu_us_per_reply or 0:.0f} us a reply")
    meta = {"command": shlex.join(["python", "-m", "bench.tail", *(argv if argv is not None else sys.argv[1:])]),
            "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine.describe(),
            "batch_size": args.batch_size, "max_wait_ms": args.max_wait_ms, "load_client": args.load_client,
            "sender_linger_ms": args.sender_linger_ms}
    (args.out / "results.json").write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2))
    table = markdown(meta, rows)
    (args.out / "results.md").write_text(table)
    plot(rows, args.out / "tail.png")
    timeline_plot(rows, args.out / "timeline.png")
    print(table)
    return 0


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(meta: dict[str, object], rows: list[Row]) -> str:
    lines = [f"Command: `{meta['command']}` ({meta['started_at']}); batch {meta['batch_size']}, wait "
             f"{meta['max_wait_ms']} ms; sender linger {meta.get('sender_linger_ms', 0)} ms; latency = reply read - "
             "planned send (and - actual send); stages are p50 / p99 from the reply's headers; one row per run.", "",
             "| contender | rate | p50 / p99 / max ms (planned) | p50 / p99 ms (sent) | queue wait | batch wait "
             "| compute | reply to reader | CPU µs a reply | gc pauses (gen2 count, p99 / max ms) | answered |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        stages = [f"{_ms(r.stages_p50_ms.get(s))} / {_ms(r.stages_p99_ms.get(s))}" if r.stages_p50_ms else "-"
                  for s in STAGES]
        gen2 = r.gc_pauses.get("gen2") if r.gc_pauses else None
        gc_cell = (f"{gen2['count']}, {_ms(gen2['p99_ms'])} / {_ms(gen2['max_ms'])}"
                   if isinstance(gen2, dict) else "-")
        lines.append(f"| {r.contender} | {r.rate:,.0f} | {_ms(r.planned_ms.get('p50'))} / "
                     f"{_ms(r.planned_ms.get('p99'))} / {_ms(r.planned_ms.get('max'))} | {_ms(r.sent_ms.get('p50'))}"
                     f" / {_ms(r.sent_ms.get('p99'))} | " + " | ".join(stages) +
                     f" | {_ms(r.cpu_us_per_reply)} | {gc_cell} | {r.answered}/{r.sent} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], path: Path) -> None:
    rates = sorted({r.rate for r in rows})
    names = list(dict.fromkeys(r.contender for r in rows))
    fig, axes = plt.subplots(1, len(rates), figsize=(5.5 * len(rates), 4.5), squeeze=False)
    for ax, rate in zip(axes[0], rates, strict=True):
        for i, name in enumerate(names):
            p99s = [r.planned_ms.get("p99") for r in rows if r.rate == rate and r.contender == name]
            p50s = [r.planned_ms.get("p50") for r in rows if r.rate == rate and r.contender == name]
            ax.scatter([i] * len(p99s), [p or 0 for p in p99s], marker="o", color="tab:red",
                       label="p99" if i == 0 else None)
            ax.scatter([i] * len(p50s), [p or 0 for p in p50s], marker="x", color="tab:blue",
                       label="p50" if i == 0 else None)
        ax.set_xticks(range(len(names)), names, rotation=25, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms, reply read - planned send")
        ax.set_title(f"{rate:,.0f} req/s, each repeat a point")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
