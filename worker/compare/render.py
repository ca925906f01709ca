"""A comparison report as text for a person, or as one JSON object for a program. Pure."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson

from worker.compare.pairs import ReadTally
from worker.compare.report import ComparisonReport, Disagreement, LabelField, ModelReport, NumericField

CORNER = "live \\ candidate"
SHOWN_CHARS = 160  # of an answer's JSON in the text report's worst list; --json gives them whole


def as_json(report: ComparisonReport, tally: ReadTally) -> bytes:
    """``{"read": {...}, "pairs": N, "models": [...]}``: every field of the report and of the tally."""
    return orjson.dumps({"read": asdict(tally), **asdict(report)}, option=orjson.OPT_INDENT_2)


def as_text(report: ComparisonReport, tally: ReadTally) -> str:
    lines = _read_lines(tally)
    if not report.models:
        lines.append("no pairs to compare")
    for model in report.models:
        lines += ["", *_model_lines(model)]
    return "\n".join(lines)


def _read_lines(tally: ReadTally) -> list[str]:
    lines = [f"read {tally.records:,} records of {tally.source}"
             + (f": stopped early, {tally.stopped}" if tally.stopped else "")]
    if tally.unreadable:
        lines.append(f"  {tally.unreadable:,} unreadable, skipped; the first: " + "; ".join(tally.unreadable_examples))
    if tally.repeated:
        lines.append(f"  {tally.repeated:,} records of an id already read, skipped: the first of each was compared")
    if tally.same_version:
        lines.append(f"  {tally.same_version:,} pairs answered by one version on both sides (a shadow of the "
                     "version serving, left running after a promotion), not compared")
    for side, count in (("live", tally.only_live), ("candidate", tally.only_candidate)):
        if count:
            examples = ", ".join(tally.only_examples.get(side, []))
            lines.append(f"  {count:,} ids answered on the {side} side only, not compared (e.g. {examples})")
    return lines


def _model_lines(model: ModelReport) -> list[str]:
    lines = [f"model {model.model}: {model.pairs:,} pairs; live {_counts(model.live_versions)}; "
             f"candidate {_counts(model.candidate_versions)}",
             f"  status live/candidate: {_counts(model.statuses)}"]
    for side, errors in (("live", model.live_errors), ("candidate", model.candidate_errors)):
        if errors:
            lines.append(f"  {side} errors: {_counts(errors)}")
    if model.numeric:
        lines += ["  numeric outputs, |candidate - live|:", *_numeric_table(model.numeric)]
    for label in model.labels:
        lines += [f"  label {label.field}: {_agreement(label)}", *_confusion(label)]
    if model.thresholded is not None:
        lines += [f"  thresholded at 0.5 (the label is {model.thresholded.field}): {_agreement(model.thresholded)}",
                  *_confusion(model.thresholded)]
    for name, gaps in model.gaps.items():
        lines.append(f"  {name}: leaves not compared: {_counts(gaps)}")
    latency = model.latency
    if latency is not None:
        lines.append(f"  compute_ms, candidate - live ({latency.pairs:,} pairs with both): median "
                     f"{latency.difference_median_ms:+.2f} ms, p99 {latency.difference_p99_ms:+.2f} ms "
                     f"(median live {latency.live_median_ms:.2f} ms, candidate {latency.candidate_median_ms:.2f} ms)")
    else:
        lines.append("  compute_ms: not known on both sides of any pair")
    if model.worst:
        lines.append(f"  worst {len(model.worst)} disagreements of outputs:")
    lines += [line for case in model.worst for line in _case(case)]
    if model.status_mismatches:
        lines.append(f"  first {len(model.status_mismatches)} answered ok on one side only:")
    lines += [line for case in model.status_mismatches for line in _case(case)]
    return lines


def _case(case: Disagreement) -> list[str]:
    difference = "" if case.difference is None else f"largest |difference| {case.difference:.4g}"
    what = {"status": f"live {case.live['status']}, candidate {case.candidate['status']}",
            "label": f"another label at {case.where}", "structure": f"another shape at {case.where}",
            "number": f"at {case.where}"}[case.kind]
    if case.kind in ("label", "structure") and difference:
        what += f", {difference}"
    elif case.kind == "number":
        what = f"{difference} {what}"
    return [f"    {case.id}: {what}", f"      live      {_shown(case.live)}",
            f"      candidate {_shown(case.candidate)}"]


def _numeric_table(fields: list[NumericField]) -> list[str]:
    width = max(len("field"), *(len(f.field) for f in fields))
    header = f"    {'field':<{width}} {'leaves':>9}" + "".join(f" {name:>9}" for name in ("p50", "p90", "p99", "max",
                                                                                     "mean")) + f" {'bias':>10}"
    rows = [f"    {f.field:<{width}} {f.compared:>9,} {f.p50:>9.3g} {f.p90:>9.3g} {f.p99:>9.3g} {f.max:>9.3g} "
            f"{f.mean:>9.3g} {f.bias:>+10.3g}" for f in fields]
    return [header, *rows]


def _agreement(label: LabelField) -> str:
    return f"agreement {label.agreement:.2%} ({label.agreed:,} of {label.compared:,})"


def _confusion(label: LabelField, most: int = 12) -> list[str]:
    """The confusion table, live labels down, candidate labels across; at most ``most`` of each, the most
    frequent (the JSON report has them all)."""
    live = sorted(label.confusion, key=lambda name: -sum(label.confusion[name].values()))[:most]
    totals: dict[str, int] = {}
    for row in label.confusion.values():
        for name, count in row.items():
            totals[name] = totals.get(name, 0) + count
    candidate = sorted(totals, key=lambda name: -totals[name])[:most]
    first = max(len(CORNER), *(len(name) for name in live))
    widths = [max(len(name), len(f"{max(totals[name], 1):,}")) for name in candidate]
    lines = ["    " + f"{CORNER:<{first}}" + "".join(f"  {n:>{w}}" for n, w in zip(candidate, widths,
                                                                                              strict=True))]
    for name in live:
        row = label.confusion[name]
        lines.append(f"    {name:<{first}}" + "".join(f"  {row.get(n, 0):>{w},}" for n, w in zip(candidate, widths,
                                                                                                 strict=True)))
    return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in sorted(counts.items(), key=lambda item: -item[1]))


def _shown(answer: dict[str, Any]) -> str:
    text = orjson.dumps(answer.get("outputs", answer.get("error"))).decode()
    if answer.get("status") != "ok":
        text = f"{answer.get('status')} {text}"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."
