"""The comparison itself: pairs of answers in, a report out. Pure (no I/O), single-threaded.

``compare(pairs)`` reads every pair once and keeps, per model: the versions
and statuses seen, each numeric field's differences (candidate - live, 8
bytes a leaf: ``--max-records`` bounds them), each label field's confusion
counts, the compute-time differences, and the ``worst`` disagreements. A
pair where either side failed is compared by status only.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from worker.compare.leaves import Leaf, leaves, probability
from worker.compare.pairs import Pair

THRESHOLD = 0.5  # a probability at or above it is the positive label
HISTOGRAM_BINS = 40
# How a pair's outputs disagree, worst first: the rank of its kind, then its largest numeric difference.
RANKS = {"label": 2, "structure": 2, "number": 1}


@dataclass(frozen=True)
class Histogram:
    edges: list[float]  # len(counts) + 1 bin edges, from 0 to the largest |difference|
    counts: list[int]


@dataclass(frozen=True)
class NumericField:
    """A regression output's |candidate - live| over every pair (and list element) where both had it."""

    field: str
    compared: int
    p50: float
    p90: float
    p99: float
    max: float
    mean: float
    bias: float  # the mean of candidate - live, signed: a candidate that reads high or low on average
    histogram: Histogram


@dataclass(frozen=True)
class LabelField:
    """A classification output: how often the candidate's label is the live one, and what it gives instead."""

    field: str
    compared: int
    agreed: int
    confusion: dict[str, dict[str, int]]  # live label -> candidate label -> pairs

    @property
    def agreement(self) -> float:
        return self.agreed / self.compared if self.compared else 1.0


@dataclass(frozen=True)
class Latency:
    """compute_ms of the pairs whose both sides have one; differences are candidate - live."""

    pairs: int
    live_median_ms: float
    candidate_median_ms: float
    difference_median_ms: float
    difference_p99_ms: float


@dataclass(frozen=True)
class Disagreement:
    id: str
    kind: str  # "status", "label", "structure" (a leaf on one side only, or a number against a label), "number"
    where: str  # the path of the leaf that differs (of the largest difference for "number"); "" for "status"
    difference: float | None  # the pair's largest |candidate - live| of a numeric leaf; None without one
    live: dict[str, object]  # {"status", "outputs"} or {"status", "error"}
    candidate: dict[str, object]


@dataclass(frozen=True)
class ModelReport:
    model: str
    pairs: int
    live_versions: dict[str, int]
    candidate_versions: dict[str, int]
    statuses: dict[str, int]  # "live/candidate" ("ok/error") -> pairs
    live_errors: dict[str, int]  # error code -> pairs
    candidate_errors: dict[str, int]
    numeric: list[NumericField]
    labels: list[LabelField]
    thresholded: LabelField | None  # when every ok/ok pair's outputs are one number in [0, 1]
    gaps: dict[str, dict[str, int]]  # field -> "only_live" | "only_candidate" | "number_vs_label" -> leaves
    latency: Latency | None
    worst: list[Disagreement]  # of the ok/ok pairs: label and structure mismatches first, then by difference
    status_mismatches: list[Disagreement]  # the first pairs answered ok on one side only, as many as worst


@dataclass(frozen=True)
class ComparisonReport:
    pairs: int
    models: list[ModelReport]  # by model name


def compare(pairs: Iterable[Pair], worst: int = 10) -> ComparisonReport:
    """Compare every pair; keep the ``worst`` disagreements per model. Consumes ``pairs`` once."""
    tallies: dict[str, _ModelTally] = {}
    count = 0
    for pair in pairs:
        tally = tallies.get(pair.model)
        if tally is None:
            tally = tallies[pair.model] = _ModelTally(pair.model, worst)
        tally.add(pair)
        count += 1
    return ComparisonReport(count, [tallies[name].report() for name in sorted(tallies)])


class _ModelTally:
    """What one model's pairs add up to so far."""

    def __init__(self, model: str, worst: int) -> None:
        self.model, self.worst_kept, self.pairs = model, worst, 0
        self.live_versions: Counter[str] = Counter()
        self.candidate_versions: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.live_errors: Counter[str] = Counter()
        self.candidate_errors: Counter[str] = Counter()
        self.differences: dict[str, array[float]] = {}
        self.labels: dict[str, Counter[tuple[str, str]]] = {}
        self.gaps: dict[str, Counter[str]] = {}
        self.probability: str | None = None  # the field, while every ok/ok pair is one probability
        self.probability_held = True
        self.thresholded: Counter[tuple[str, str]] = Counter()
        self.compute_ms = (array("d"), array("d"))  # live, candidate
        self.worst: list[tuple[int, float, int, Disagreement]] = []  # a min-heap: the least bad on top
        self.status_mismatches: list[Disagreement] = []

    def add(self, pair: Pair) -> None:
        live, candidate = pair.live, pair.candidate
        self.pairs += 1
        self.live_versions[str(live.version)] += 1
        self.candidate_versions[str(candidate.version)] += 1
        self.statuses[f"{live.status}/{candidate.status}"] += 1
        for side, errors in ((live, self.live_errors), (candidate, self.candidate_errors)):
            if not side.ok:
                errors[side.error_code or side.status] += 1
        if live.compute_ms is not None and candidate.compute_ms is not None:
            self.compute_ms[0].append(live.compute_ms)
            self.compute_ms[1].append(candidate.compute_ms)
        if live.ok and candidate.ok:
            kind, where, difference = self._outputs(leaves(live.outputs), leaves(candidate.outputs))
            if kind is not None:
                self._keep(Disagreement(pair.id, kind, where, difference, live.shown(), candidate.shown()))
        elif live.ok != candidate.ok and len(self.status_mismatches) < self.worst_kept:
            self.status_mismatches.append(Disagreement(pair.id, "status", "", None, live.shown(), candidate.shown()))

    def _outputs(self, live: dict[str, Leaf], candidate: dict[str, Leaf]) -> tuple[str | None, str, float | None]:
        """Tally every leaf; how the pair disagrees (kind None: not at all), where, and its largest difference."""
        kind: str | None = None
        where, largest, worst_path = "", None, ""
        either = {**live, **{path: leaf for path, leaf in candidate.items() if path not in live}}
        for path, leaf in either.items():
            one, other, field = live.get(path), candidate.get(path), leaf.field
            if one is None or other is None or one.numeric != other.numeric:
                gap = "only_candidate" if one is None else "only_live" if other is None else "number_vs_label"
                self.gaps.setdefault(field, Counter())[gap] += 1
                kind, where = (kind, where) if kind else ("structure", path)
            elif isinstance(one.value, float) and isinstance(other.value, float):
                difference = other.value - one.value
                self.differences.setdefault(field, array("d")).append(difference)
                if largest is None or abs(difference) > largest:
                    largest, worst_path = abs(difference), path
            else:
                self.labels.setdefault(field, Counter())[(str(one.value), str(other.value))] += 1
                if one.value != other.value and kind is None:
                    kind, where = "label", path
        self._threshold(probability(live), probability(candidate))
        if kind is None and largest:
            kind, where = "number", worst_path
        return kind, where, largest

    def _threshold(self, live: Leaf | None, candidate: Leaf | None) -> None:
        if live is None or candidate is None or live.path != candidate.path or self.probability not in (
                None, live.field):
            self.probability_held = False
            return
        self.probability = live.field
        self.thresholded[(_positive(live), _positive(candidate))] += 1

    def _keep(self, disagreement: Disagreement) -> None:
        if self.worst_kept <= 0:
            return
        entry = (RANKS[disagreement.kind], disagreement.difference or 0.0, -self.pairs, disagreement)
        if len(self.worst) < self.worst_kept:
            heapq.heappush(self.worst, entry)
        elif entry[:3] > self.worst[0][:3]:
            heapq.heapreplace(self.worst, entry)

    def report(self) -> ModelReport:
        thresholded = None
        if self.probability_held and self.probability is not None:
            thresholded = _label_field(f"{self.probability} >= {THRESHOLD}", self.thresholded)
        return ModelReport(
            self.model, self.pairs, dict(self.live_versions), dict(self.candidate_versions), dict(self.statuses),
            dict(self.live_errors), dict(self.candidate_errors),
            [_numeric_field(name, np.frombuffer(values)) for name, values in self.differences.items()],
            [_label_field(name, counts) for name, counts in self.labels.items()], thresholded,
            {name: dict(counts) for name, counts in self.gaps.items()}, self._latency(),
            [entry[3] for entry in sorted(self.worst, key=lambda entry: entry[:3], reverse=True)],
            self.status_mismatches)

    def _latency(self) -> Latency | None:
        live, candidate = (np.frombuffer(times) for times in self.compute_ms)
        if not len(live):
            return None
        differences = candidate - live
        return Latency(len(live), float(np.median(live)), float(np.median(candidate)),
                       float(np.median(differences)), float(np.percentile(differences, 99)))


def _positive(leaf: Leaf) -> str:
    return "true" if float(leaf.value) >= THRESHOLD else "false"


def _numeric_field(name: str, differences: np.ndarray) -> NumericField:
    spread = np.abs(differences)
    with np.errstate(invalid="ignore"):  # interpolating towards an infinite difference: nan, read as infinite
        p50, p90, p99 = (float(q) for q in np.nan_to_num(np.percentile(spread, [50, 90, 99]), nan=np.inf))
    top = float(spread.max())
    finite = spread[np.isfinite(spread)]  # two numbers near the float limit can differ by infinity
    edge = float(finite.max()) if len(finite) else 0.0
    counts, edges = np.histogram(finite, bins=HISTOGRAM_BINS, range=(0.0, edge if edge > 0 else 1.0))
    return NumericField(name, len(spread), p50, p90, p99, top, float(spread.mean()), float(differences.mean()),
                        Histogram([float(edge) for edge in edges], [int(count) for count in counts]))


def _label_field(name: str, counts: Counter[tuple[str, str]]) -> LabelField:
    confusion: dict[str, dict[str, int]] = {}
    for (live, candidate), count in sorted(counts.items()):
        confusion.setdefault(live, {})[candidate] = count
    agreed = sum(count for (live, candidate), count in counts.items() if live == candidate)
    return LabelField(name, sum(counts.values()), agreed, confusion)
