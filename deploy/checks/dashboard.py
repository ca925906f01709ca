"""The Grafana dashboard: every PromQL expression names series the worker exports, with labels they have.

The exported series come from the worker's own collector (worker/surface/metrics.py), the source of truth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checks.common import Problems
from worker.core.stats import ServedModel, WorkerStats
from worker.surface.metrics import StatsCollector

# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}
# Labels whose values the worker fixes (the others, such as topic, come from the data).
CLOSED_LABELS = {"status", "stage", "reason"}
# The questions the dashboard exists to answer (issue "Operate it"): each must keep a panel.
REQUIRED_PANELS = ("Replies by status", "Consumer lag by partition", "All stages: p50 / p95 / p99", "Batch size",
                   "Paused consumption", "Rebalances")


def exported_series() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Every series name the worker's collector exports with its label names, and the values of CLOSED_LABELS.

    From the collector itself (worker/surface/metrics.py), fed stats in which
    every labelled family has a sample: a partition's lag and a loaded model.
    """
    stats = WorkerStats()
    stats.lag = {("requests", 0): 0}
    stats.serve((ServedModel("entry", "model", "version", "cpu", 1.0),), [("model", "version")])
    stats.record_batch(1, 0.001, "entry")
    series: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}
    for family in StatsCollector(stats).collect():
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
            for label, value in sample.labels.items():
                if label in CLOSED_LABELS:
                    values.setdefault(label, set()).add(value)
    return series, values


def check_dashboard(path: Path, problems: Problems) -> str:
    dashboard = json.loads(path.read_text())
    series, values = exported_series()
    exprs = list(_exprs(dashboard))
    for expr in exprs:
        problems += [f"{expr!r}: {p}" for p in check_promql(expr, series, values)]
    titles = {p.get("title") for p in _panels(dashboard)}
    for required in REQUIRED_PANELS:
        if required not in titles:
            problems.append(f"no panel titled {required!r}")
    ids = [p.get("id") for p in _panels(dashboard)]
    if len(ids) != len(set(ids)):
        problems.append("panel ids are not unique")
    return f"{len(exprs)} PromQL expressions against the {len(series)} series of worker/surface/metrics.py"


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def _exprs(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if variable.get("type") == "query":
            yield query["query"] if isinstance(query, dict) else query


def check_promql(expr: str, series: dict[str, set[str]], values: dict[str, set[str]]) -> Problems:
    """Names and labels in one expression: streamscore_* names must be exported series (a histogram by its
    _bucket, _sum or _count), label matchers and by/without labels must exist on the series used."""
    problems: Problems = []
    if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
        problems.append("unbalanced brackets")
    names = set(re.findall(r"\bstreamscore_\w+", expr))
    for name in sorted(names - set(series)):
        problems.append(f"{name} is not exported by the worker")
    labels = TARGET_LABELS.union(*(series.get(n, set()) for n in names))
    for name, matchers in re.findall(r"\b(streamscore_\w+)\s*\{([^}]*)\}", expr):
        for label, op, value in re.findall(r"(\w+)\s*(=~|!~|!=|=)\s*\"([^\"]*)\"", matchers):
            if label not in series.get(name, set()) | TARGET_LABELS:
                problems.append(f"{name} has no label {label}")
            elif op == "=" and label in values and value not in values[label]:
                problems.append(f"{label}={value!r}: the worker exports {sorted(values[label])}")
    for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        for label in (g.strip() for g in grouping.split(",") if g.strip()):
            if label not in labels:
                problems.append(f"groups by {label}, a label none of {sorted(names)} has")
    return problems
