"""Plain-text tables of chaos results, and the same as JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.chaos.run import ScenarioResult

# Log events every run has; the rest (rebalances, deferred commits, Redis failures, ...) are shown.
ROUTINE_EVENTS = {"worker_started", "stop_requested", "worker_stopped", "partitions_assigned"}
COUNTERS = ("consumed", "replied_ok", "duplicates", "batches")


def scenario_block(result: ScenarioResult) -> str:
    """One scenario: what was done to it and what landed."""
    head = f"{result.key}. {result.title} ({result.size}, workers on {result.kafka_client}): {result.status}"
    if result.tally is None:
        return f"{head}\n   {result.problems[0] if result.problems else ''}\n"
    t = result.tally
    stops = ", ".join("hung" if c is None else str(c) for c in result.stop_codes)
    counters = ", ".join(f"{name} {result.counters.get(name, 0)}" for name in COUNTERS)
    events = ", ".join(f"{name} {count}" for name, count in sorted(result.events.items())
                       if name not in ROUTINE_EVENTS) or "none"
    rows = [
        ("promise", result.promise),
        ("faults", result.faults),
        ("requests sent", f"{t.sent}  (acknowledged by the broker; {t.send_failed} sends failed)"),
        ("IDs answered", str(t.answered)),
        ("duplicate replies", f"{t.duplicate_replies}  (in the crash window {t.in_crash_window}, at most "
                              f"{t.crash_gap_ms_max} ms before a death or broker stop; outside it {t.outside_window})"),
        ("IDs scored twice", str(t.scored_twice)),
        ("lost", str(t.lost) + (f"  e.g. {', '.join(t.lost_ids[:5])}" if t.lost else "")),
        ("kills / restarts", f"{result.kills} / {result.restarts}  (restarts: workers that exited on their own)"),
        *(("why it exited", reason) for reason in result.crash_reasons),
        ("rebalances", f"{result.rebalances}  (partitions_assigned events under load)"),
        ("final SIGTERM exits", stops),
        ("worker counters", f"{counters}  (clean stops only)"),
        ("log events", events),
        ("took", f"{result.seconds:.0f} s; logs in {result.log_dir}"),
    ]
    rows += [("PROBLEM", problem) for problem in result.problems]
    width = max(len(name) for name, _ in rows)
    steps = [f"   {line}" for line in steps_table(result).splitlines()]
    return "\n".join([head, *(f"   {name:<{width}}  {value}" for name, value in rows), *steps]) + "\n"


def steps_table(result: ScenarioResult) -> str:
    """Each step's figures (tests/chaos/steps.py) as a Markdown table; empty when nothing was measured."""
    if not result.steps:
        return ""
    lines = ["| step | s | requests | longest gap | p50 | p99 | worst |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {s.step} | {s.seconds:.0f} | {s.sent} | {s.longest_gap_s:.2f} s (p{s.gap_partition}) | "
              f"{s.p50_ms:.0f} ms | {s.p99_ms:.0f} ms | {s.max_ms:.0f} ms |" for s in result.steps]
    return "\n".join(lines) + "\n"


def summary_table(results: list[ScenarioResult]) -> str:
    """One row per scenario."""
    header = ("scenario", "sent", "answered", "dup replies", "scored twice", "lost", "kills", "restarts", "result")
    rows: list[tuple[str, ...]] = [header]
    for r in results:
        t = r.tally
        if t is None:
            reason = r.problems[0] if r.problems else ""
            rows.append((f"{r.key}. {r.title}", *["-"] * 7, f"not run: {reason}"))
            continue
        rows.append((f"{r.key}. {r.title}", str(t.sent), str(t.answered), str(t.duplicate_replies),
                     str(t.scored_twice), str(t.lost), str(r.kills), str(r.restarts), r.status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:-1], widths[1:], strict=True)]
        lines.append("  ".join([*cells, row[-1]]))
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines) + "\n"


def write_json(results: list[ScenarioResult], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = [dataclasses.asdict(r) | {"tally_outside_window": r.tally.outside_window if r.tally else None}
            for r in results]
    path.write_text(json.dumps(data, indent=2, default=str))
