"""The tables of metrics in docs/operations.md (every one) and docs/fleet.md (the per-model ones), written from
what ``/metrics`` serves so that they cannot drift.

    python -m worker.surface.metrics_doc           # rewrite the tables in both pages
    python -m worker.surface.metrics_doc --check   # exit 1, changing nothing, if a table there is stale

One row per ``streamscore_*`` family of the HTTP surface's registry
(``metrics_registry``: the StatsCollector of worker/surface/metrics.py; the
process, platform and GC collectors are Prometheus' own and left out), in the
order collected: the name a scrape shows (a counter's with ``_total``), the
type (a histogram's bucket bounds too), the label names, and the help text.
Families are collected from a WorkerStats filled so that every family has a
sample (label names are read off the samples; a family with none is refused);
where a fresh WorkerStats already exports a label's values (``status`` of
``streamscore_replies``, say), they are listed. docs/fleet.md has the rows of
the families named PER_MODEL. Only the lines between a table's two markers are
written; the prose around them is edited by hand.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import Metric

from worker.core.stats import ServedModel, WorkerStats
from worker.doc_tables import escape, replace_between, write_or_check
from worker.surface.metrics import metrics_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
FLEET_DOC = DOC.with_name("fleet.md")
COMMAND = "python -m worker.surface.metrics_doc"
PREFIX = "streamscore_"
BEGIN = f"<!-- BEGIN metrics table: written by `{COMMAND}` from worker/surface/metrics.py; do not edit -->"
END = "<!-- END metrics table -->"
FLEET_BEGIN = f"<!-- BEGIN per-model metrics: written by `{COMMAND}` from worker/surface/metrics.py; do not edit -->"
FLEET_END = "<!-- END per-model metrics -->"
# docs/fleet.md's families, by how their names begin: per model entry, loads on first use, shadow scoring.
PER_MODEL = ("streamscore_model_", "streamscore_requests_waiting_for_model", "streamscore_shadow_")


@dataclass(frozen=True)
class Row:
    name: str  # as a scrape shows it: a counter's with _total
    type: str  # counter, gauge, histogram
    labels: tuple[str, ...]
    label_values: dict[str, tuple[str, ...]]  # the values a fresh WorkerStats exports, of the labels that have any
    buckets: tuple[str, ...]  # a histogram's bucket bounds, +Inf left out
    help: str


def every_family_stats() -> WorkerStats:
    """A WorkerStats with something in every part that a family reads only when there is data: the lag and the
    stopped partitions, error codes, a model served (loaded on first use, waiting, reloaded) and its shadow."""
    stats = WorkerStats()
    stats.lag = {("requests", 0): 0}
    stats.undecodable = {("requests", 0): "zstd"}
    stats.error_codes["model_error"] += 0
    stats.serve((ServedModel("churn", "churn", "1", "cpu", 0.0),), [("churn", "1")])
    stats.record_model_load("churn", "loaded")
    stats.waiting_for_model = {"churn": 0}
    stats.record_switch("churn")
    stats.shadow_names(["churn"])
    return stats


def families(stats: WorkerStats) -> list[Metric]:
    """The ``streamscore_*`` families the HTTP surface would serve for ``stats``, in the order collected."""
    return [family for family in metrics_registry(stats).collect() if family.name.startswith(PREFIX)]


def rows() -> list[Row]:
    """Every ``streamscore_*`` family, in the order collected. Raises ValueError for a family with no sample even
    in ``every_family_stats()`` (its label names cannot be read)."""
    fixed = {family.name: _label_values(family) for family in families(WorkerStats())}
    table = []
    for family in families(every_family_stats()):
        if not family.samples:
            raise ValueError(f"{family.name} has no sample: give every_family_stats() what it reads")
        labels = tuple(name for name in family.samples[0].labels if name != "le")
        buckets = tuple(_bound(s.labels["le"]) for s in family.samples
                        if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"
                        and all(s.labels[name] == family.samples[0].labels[name] for name in labels))
        name = f"{family.name}_total" if family.type == "counter" else family.name
        table.append(Row(name, family.type, labels, fixed.get(family.name, {}), buckets, family.documentation))
    return table


def render(per_model: bool = False) -> str:
    """The table, markers included: every family, or (``per_model``) docs/fleet.md's, those named PER_MODEL."""
    table = [r for r in rows() if r.name.startswith(PER_MODEL)] if per_model else rows()
    begin, end = (FLEET_BEGIN, FLEET_END) if per_model else (BEGIN, END)
    lines = [begin, "", "| metric | type | labels | what |", "|---|---|---|---|"]
    for r in table:
        kind = f"{r.type} (buckets {', '.join(r.buckets)})" if r.buckets else r.type
        labels = ", ".join(f"`{name}`" + (f": {', '.join(r.label_values[name])}" if name in r.label_values else "")
                           for name in r.labels)
        lines.append(f"| `{r.name}` | {kind} | {escape(labels)} | {escape(r.help)} |")
    return "\n".join([*lines, "", end])


def update(text: str) -> str:
    """``text`` with each table whose BEGIN marker it holds, the whole one or the per-model one, replaced by
    ``render``'s. Raises ValueError when it holds neither, or a BEGIN without its END."""
    tables = [(begin, end, per_model) for begin, end, per_model in ((BEGIN, END, False), (FLEET_BEGIN, FLEET_END, True))
              if begin in text]
    if not tables:
        raise ValueError(f"the page needs the two marker lines of a metrics table: {BEGIN!r} and then {END!r}, or "
                         f"{FLEET_BEGIN!r} and then {FLEET_END!r}")
    for begin, end, per_model in tables:
        text = replace_between(text, begin, end, render(per_model))
    return text


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, COMMAND, (DOC, FLEET_DOC), "the metrics tables", update)


def _label_values(family: Metric) -> dict[str, tuple[str, ...]]:
    """Each label's values over the family's samples, in order of first use (``le`` left out)."""
    values: dict[str, dict[str, None]] = {}
    for sample in family.samples:
        for name, value in sample.labels.items():
            if name != "le":
                values.setdefault(name, {})[value] = None
    return {name: tuple(seen) for name, seen in values.items()}


def _bound(le: str) -> str:
    """A bucket bound as people write it: ``1.0`` as 1, ``0.0025`` as is, ``1e-06`` as is."""
    return f"{float(le):g}"


if __name__ == "__main__":
    sys.exit(main())
