"""The requests each phase of the fleet run sends: readable ids, and seeded made-up inputs. Pure."""

from __future__ import annotations

import random
from typing import Any

from examples.churn_tabular.build import synthetic_customers
from examples.churn_tabular.model import FEATURES
from examples.document_classifier.documents import LABELS, document

BEFORE, DURING, TEXT = "churn", "churn, deploy", "documents"  # the phases, in the order they are sent
_PREFIX = {BEFORE: "churn", DURING: "deploy", TEXT: "doc"}
_SEED = {BEFORE: 11, DURING: 12, TEXT: 13}  # not the training seeds: customers the models never saw


def request_ids(phase: str, count: int) -> dict[str, str]:
    """``count`` ids of ``phase`` (``churn-00000`` ...), each mapped to its phase. The same on every run: the
    canary's arm and the shadow's sample, picked by hashes of the id, are too."""
    return {f"{_PREFIX[phase]}-{n:05d}": phase for n in range(count)}


def document_kind(request_id: str) -> str:
    """The kind a documents request's text was written as (``doc-00005``: the sixth, a contract)."""
    return LABELS[int(request_id.rsplit("-", 1)[1]) % len(LABELS)]


def bodies(phase: str, ids: list[str]) -> list[dict[str, Any]]:
    """A request per id: a document's text (the four kinds in turn) or a customer's six fields."""
    if phase == TEXT:
        rng = random.Random(_SEED[phase])
        return [{"id": i, "inputs": document(document_kind(i), rng)} for i in ids]
    fields, _ = synthetic_customers(len(ids), seed=_SEED[phase])
    return [{"id": i, "inputs": {f: round(v, 2) for f, v in zip(FEATURES, row, strict=True)}}
            for i, row in zip(ids, fields.tolist(), strict=True)]
