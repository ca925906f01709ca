"""``--plot``: the report as one PNG, a panel per field of each model (matplotlib, Agg: files only, no display).

A numeric field: the histogram of its |candidate - live|, the y axis
log-scaled (the tail is what matters), p50, p90 and p99 marked. A label field
(and a thresholded probability): its confusion table as a heatmap.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

from worker.compare.report import ComparisonReport, LabelField, NumericField  # noqa: E402

MAX_PANELS = 24  # the first ones, in the report's order
MAX_LABELS = 20  # of a heatmap's axis: the most frequent


def write_plot(report: ComparisonReport, path: Path) -> int:
    """Write the PNG; returns how many panels it has (0: nothing to plot, no file written).

    Raises OSError when the file cannot be written.
    """
    panels: list[tuple[str, NumericField | LabelField]] = []
    for found in report.models:
        panels += [(found.model, field) for field in found.numeric]
        panels += [(found.model, field) for field in found.labels]
        panels += [(found.model, found.thresholded)] if found.thresholded is not None else []
    panels = panels[:MAX_PANELS]
    if not panels:
        return 0
    columns = min(len(panels), 3)
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4.2 * rows), squeeze=False)
    for axis, (model, field) in zip(axes.flat, panels, strict=False):
        if isinstance(field, NumericField):
            _histogram(axis, model, field)
        else:
            _heatmap(axis, model, field)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return len(panels)


def _histogram(axis: Any, model: str, field: NumericField) -> None:
    edges, counts = field.histogram.edges, field.histogram.counts
    axis.bar(edges[:-1], counts, width=[b - a for a, b in zip(edges, edges[1:], strict=False)], align="edge",
             color="tab:blue", alpha=0.8)
    axis.set_yscale("log")
    for name, value, style in (("p50", field.p50, ":"), ("p90", field.p90, "--"), ("p99", field.p99, "-.")):
        axis.axvline(value, color="tab:red", linestyle=style, label=f"{name} {value:.3g}")
    axis.set_title(f"{model}: {field.field}", fontsize=10)
    axis.set_xlabel(f"|candidate - live| ({field.compared:,} leaves, max {field.max:.3g})")
    axis.set_ylabel("leaves (log)")
    axis.legend(fontsize=8)


def _heatmap(axis: Any, model: str, field: LabelField) -> None:
    totals: dict[str, int] = {}
    for live, counts in field.confusion.items():
        for candidate, count in counts.items():
            totals[live] = totals.get(live, 0) + count
            totals[candidate] = totals.get(candidate, 0) + count
    labels = sorted(totals, key=lambda name: -totals[name])[:MAX_LABELS]
    cells = [[field.confusion.get(live, {}).get(candidate, 0) for candidate in labels] for live in labels]
    darkest = max(max(values) for values in cells)
    # A scale from 0, not from the smallest cell: a table of one cell (every pair agreed on one label) would
    # otherwise be drawn in the scale's palest colour, under white text.
    axis.imshow(cells, cmap="Blues", vmin=0, vmax=max(darkest, 1))
    axis.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    axis.set_yticks(range(len(labels)), labels, fontsize=8)
    if len(labels) <= 10:
        for row, values in enumerate(cells):
            for column, count in enumerate(values):
                axis.text(column, row, f"{count:,}", ha="center", va="center", fontsize=8,
                          color="white" if count > darkest / 2 else "black")
    axis.set_title(f"{model}: {field.field} (agreement {field.agreement:.1%})", fontsize=10)
    axis.set_xlabel("candidate")
    axis.set_ylabel("live")
