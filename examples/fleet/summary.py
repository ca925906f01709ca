"""What the fleet run's replies say: who answered what, the canary's share, the switch, exactly once. Pure.

The canary's arm and the shadow's sample are picked by hashes of the request
id (worker/core/routes.py, worker/stream/shadow.py), so the share each should
get is known here, id by id, before any reply arrives: the summary compares
what landed with that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from examples.fleet.traffic import BEFORE, DURING, TEXT, document_kind
from worker.core.routes import arm_point
from worker.stream.shadow import sampled_point


@dataclass(frozen=True)
class Versions:
    """The versions the worker logged: each model entry's at start, and churn's after the deploy ('' if none)."""

    loaded: Mapping[str, str]  # entry name -> version (model_loaded)
    switched: str = ""  # churn's version after model_version_switched

    def label(self, model: str, version: str) -> str:
        """What answered: ``churn-next (canary)``, ``churn after the deploy`` ..."""
        if model == "churn" and version == self.switched:
            return "churn, the deployed file"
        named = [name for name, loaded in self.loaded.items() if loaded == version]
        if model == "churn" and "churn-next" in named:
            return "churn-next, the canary"
        if model == "churn" and "churn" in named:
            return "churn, the file at start"
        return ", ".join(named) or "?"


@dataclass
class FleetTally:
    """Every request sent, by phase, joined with its first reply."""

    sent: int = 0
    answered: int = 0
    missing: list[str] = field(default_factory=list)
    duplicates: int = 0  # replies after the first for an id
    strangers: int = 0  # replies to ids not sent by this run
    errors: Counter[str] = field(default_factory=Counter)  # error code -> replies
    by_version: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (model, version, phase) -> replies
    churn_replies: int = 0
    canary_replies: int = 0
    canary_expected: int = 0  # churn requests whose id hash falls in the canary's share
    canary_misrouted: int = 0  # replies by the other arm than the id hash says
    shadow_expected: int = 0  # churn requests of the live arm whose id hash falls in the shadow's sample
    documents_replies: int = 0
    documents_right: int = 0  # documents labelled as the kind they were written as

    @property
    def ok(self) -> bool:
        return not self.missing and not self.duplicates and not self.strangers and not self.errors


def tally(sent: Mapping[str, str], replies: Mapping[str, Mapping[str, Any]], duplicates: int, versions: Versions,
          canary_weight: float, shadow_fraction: float) -> FleetTally:
    """``sent``: request id -> phase; ``replies``: request id -> its first reply; ``duplicates``: the others."""
    result = FleetTally(sent=len(sent), duplicates=duplicates)
    result.strangers = sum(1 for request_id in replies if request_id not in sent)
    canary_version = versions.loaded.get("churn-next", "")
    for request_id, phase in sent.items():
        reply = replies.get(request_id)
        churn = phase != TEXT
        if churn:
            in_canary = arm_point(request_id) >= 1.0 - canary_weight  # the live arm comes first
            result.canary_expected += in_canary
            result.shadow_expected += not in_canary and sampled_point(request_id) < shadow_fraction
        if reply is None:
            result.missing.append(request_id)
            continue
        result.answered += 1
        if reply.get("status") != "ok":
            error = reply.get("error")
            result.errors[str(error.get("code") if isinstance(error, dict) else reply.get("status"))] += 1
            continue
        model, version = str(reply.get("model")), str(reply.get("model_version"))
        result.by_version[(model, version, phase)] += 1
        if not churn:
            result.documents_replies += 1
            outputs = reply.get("outputs")
            result.documents_right += isinstance(outputs, dict) and outputs.get("label") == document_kind(request_id)
        else:
            result.churn_replies += 1
            result.canary_replies += version == canary_version
            result.canary_misrouted += (version == canary_version) != in_canary
    return result


def render(result: FleetTally, versions: Versions, canary_weight: float, shadow_fraction: float,
           shadow_records: int) -> list[str]:
    """The summary's lines: the replies by model, version and phase, the canary, the switch, the shadow, and the
    exactly-once counts."""
    phases = (BEFORE, DURING, TEXT)
    rows = sorted({(model, version) for model, version, _ in result.by_version})
    lines = ["replies by model and version (ok replies; columns: the phase the requests were sent in)",
             f"  {'model':<10} {'version':<38} {'before':>7} {'deploy':>7} {'docs':>6} {'total':>7}  answered by"]
    for model, version in rows:
        counts = [result.by_version[(model, version, phase)] for phase in phases]
        lines.append(f"  {model:<10} {version:<38} {counts[0]:>7,} {counts[1]:>7,} {counts[2]:>6,} "
                     f"{sum(counts):>7,}  {versions.label(model, version)}")
    share = result.canary_replies / result.churn_replies if result.churn_replies else 0.0
    lines += [
        "",
        f"canary        churn-next answered {result.canary_replies:,} of {result.churn_replies:,} churn replies "
        f"({share:.1%}; canary_weight {canary_weight}); the id hash puts {result.canary_expected:,} there: "
        + ("every one answered by the arm its id picks" if not result.canary_misrouted
           else f"{result.canary_misrouted:,} answered by the other arm"),
        "switch        " + _switch_line(result, versions),
        f"documents     {result.documents_right:,} of {result.documents_replies:,} labelled as the kind they were "
        "written as (invoice, contract, letter, report in turn)",
        f"shadow        {shadow_records:,} pairs on the shadow topic; the id hash samples {result.shadow_expected:,} "
        f"churn requests at shadow_fraction {shadow_fraction} (a full queue drops samples, a stop what is queued)",
        "",
        "exactly once",
        f"  requests sent       {result.sent:,}",
        f"  answered            {result.answered:,}",
        f"  missing             {len(result.missing):,}" + (f"  (e.g. {', '.join(result.missing[:3])})"
                                                            if result.missing else ""),
        f"  answered twice      {result.duplicates:,}  (replies after an id's first)",
        f"  unknown ids         {result.strangers:,}  (replies to requests this run did not send)",
        f"  error replies       {sum(result.errors.values()):,}"
        + (f"  ({', '.join(f'{code}: {n}' for code, n in sorted(result.errors.items()))})" if result.errors else ""),
    ]
    return lines


def _switch_line(result: FleetTally, versions: Versions) -> str:
    if not versions.switched:
        return "churn's new file was not switched in (no model_version_switched in the worker's log)"
    old, new = versions.loaded.get("churn", "?"), versions.switched
    during_old = result.by_version[("churn", old, DURING)]
    during_new = result.by_version[("churn", new, DURING)]
    return (f"churn {old} -> {new} without a restart; of the requests sent during the deploy, {during_old:,} "
            f"answered by the file at start, {during_new:,} by the deployed one (and the canary's share of them)")
