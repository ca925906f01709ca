"""Models loaded on first use under a memory budget (stream/residency.py), driven through the loop on fakes.

A request for a model not loaded waits for its load and is answered by it; past
the budget the least recently used idle model is let go (its memory with it;
that a busy one never is: tests/unit/test_model_cache.py); a deadline that passes during a load, a load that fails
and inputs the model refuses once loaded are each answered, never dropped.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time
import weakref

from tests.component.harness import INPUTS, Harness
from worker.core.batcher import Batcher
from worker.core.model_cache import ModelCache
from worker.core.model_table import ModelEntry, ModelTable
from worker.core.stats import ServedModel
from worker.models import load_model
from worker.models.runner import TorchRunner
from worker.stream.residency import LOAD_RETRY_S, ModelLoads
from worker.stream.served import LoadedEntry, ServedModels

IDS = itertools.count()
NAMES = ("a", "b", "c")
TABLE = ModelTable(tuple(ModelEntry(name, (("model", "churn"),), version=f"{name}1") for name in NAMES), "a",
                   "worker.toml")


class Loader:
    """Loads an entry as the churn model, batches of 4; ``fail`` names entries whose next load raises; ``gate``,
    when set, holds every load until it is set too."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: set[str] = set()
        self.gate: threading.Event | None = None
        self.modules: dict[str, weakref.ref] = {}

    def __call__(self, entry: ModelEntry) -> LoadedEntry:
        self.calls.append(entry.name)
        if self.gate is not None:
            self.gate.wait(10)
        if entry.name in self.fail:
            self.fail.discard(entry.name)
            raise RuntimeError("weights file truncated")
        runner = TorchRunner(load_model("churn"), "cpu", 4)
        self.modules[f"{entry.name}-{len(self.calls)}"] = weakref.ref(runner.model.module)
        return LoadedEntry(entry, runner, entry.version, Batcher(4, 0.0),
                           ServedModel(entry.name, entry.name, entry.version, "cpu", 0.01, runner.memory_bytes))


def harness(max_models: int = 2) -> tuple[Harness, ServedModels, Loader]:
    models = ServedModels(TABLE, [], on_first_use=True)
    loader = Loader()
    return Harness(models=models, loads=ModelLoads(ModelCache(max_models), loader, gc.collect)), models, loader


def until_replies(h: Harness, count: int, steps: int = 200) -> list[dict]:
    """Step (a load runs on its own thread: give it a moment between steps) until ``count`` replies are out."""
    for _ in range(steps):
        if len(h.replies()) >= count:
            break
        h.worker.step()
        time.sleep(0.005)
    return h.replies()


def ask(h: Harness, name: str, count: int = 1) -> None:
    for _ in range(count):
        h.source.produce({"id": f"{name}-{next(IDS)}", "model": name, "inputs": INPUTS})


def test_a_request_for_a_model_not_loaded_waits_for_its_load_and_is_answered_by_it():
    h, models, loader = harness()
    assert not models.is_loaded("a")
    ask(h, "a", 3)
    replies = until_replies(h, 3)
    assert [(r["status"], r["model"], r["model_version"]) for r in replies] == [("ok", "a", "a1")] * 3
    assert loader.calls == ["a"] and models.is_loaded("a")
    assert h.worker.stats.model_loads == {("a", "loaded"): 1}
    assert h.worker.stats.waiting_for_model == {}


def test_past_the_budget_the_least_recently_used_idle_model_is_let_go_with_its_memory():
    h, models, loader = harness(max_models=2)
    for name, answered in (("a", 1), ("b", 2), ("a", 3), ("c", 4)):  # a was used after b: b is let go for c
        ask(h, name)
        until_replies(h, answered)
    assert loader.calls == ["a", "b", "c"]
    assert sorted(models.live()) == ["a", "c"]
    assert h.worker.stats.model_loads == {("a", "loaded"): 1, ("b", "loaded"): 1, ("b", "let_go"): 1,
                                          ("c", "loaded"): 1}
    gc.collect()
    assert loader.modules["b-2"]() is None  # nothing holds the let-go model's module: its memory is free
    ask(h, "b")
    assert until_replies(h, 5)[-1]["model_version"] == "b1"
    assert loader.calls == ["a", "b", "c", "b"] and sorted(models.live()) == ["b", "c"]


def test_a_deadline_that_passes_during_the_load_is_answered_deadline_exceeded():
    h, models, loader = harness()
    loader.gate = threading.Event()
    h.source.produce({"id": "late", "model": "a", "inputs": INPUTS, "deadline_ms": h.clock.wall_ms() + 100})
    h.source.produce({"id": "patient", "model": "a", "inputs": INPUTS})
    h.steps(2)
    h.clock.advance(0.2)
    h.steps(1)
    assert [(r["id"], r["status"], r["error"]["code"]) for r in h.replies()] == [
        ("late", "expired", "deadline_exceeded")]
    loader.gate.set()
    replies = until_replies(h, 2)
    assert [(r["id"], r["status"]) for r in replies] == [("late", "expired"), ("patient", "ok")]


def test_a_load_that_fails_answers_model_unavailable_and_the_model_is_tried_again_later():
    h, models, loader = harness()
    loader.fail.add("b")
    ask(h, "b", 2)
    replies = until_replies(h, 2)
    assert {r["error"]["code"] for r in replies} == {"model_unavailable"}
    assert "weights file truncated" in replies[0]["error"]["message"]
    ask(h, "b")  # within LOAD_RETRY_S: answered at once, no second load
    assert until_replies(h, 3)[-1]["error"]["code"] == "model_unavailable" and loader.calls == ["b"]
    h.clock.advance(LOAD_RETRY_S + 1)
    ask(h, "b")
    assert until_replies(h, 4)[-1]["status"] == "ok" and loader.calls == ["b", "b"]
    assert h.worker.stats.model_loads == {("b", "failed"): 1, ("b", "loaded"): 1}


def test_inputs_and_versions_are_checked_by_the_model_once_it_is_loaded():
    h, models, loader = harness()
    h.source.produce({"id": "short", "model": "a", "inputs": [0.5] * 3})
    h.source.produce({"id": "other-version", "model": "a", "model_version": "a2", "inputs": INPUTS})
    h.source.produce({"id": "fine", "model": "a", "model_version": "a1", "inputs": INPUTS})
    replies = {r["id"]: r for r in until_replies(h, 3)}
    assert replies["fine"]["status"] == "ok"
    assert replies["short"]["error"]["code"] == "wrong_input_length"
    assert replies["other-version"]["error"]["code"] == "unknown_model"  # a1 is declared: refused at once
    assert loader.calls == ["a"]


def test_a_request_for_an_undeclared_version_of_a_model_not_loaded_is_checked_after_its_load():
    table = ModelTable((ModelEntry("x", (("model", "churn"),)),), "x", "worker.toml")  # no declared version
    models = ServedModels(table, [], on_first_use=True)
    loader = Loader()
    h = Harness(models=models, loads=ModelLoads(ModelCache(1), loader, gc.collect))
    h.source.produce({"id": "wrong", "model": "x", "model_version": "nope", "inputs": INPUTS})
    reply = until_replies(h, 1)[0]
    assert reply["error"]["code"] == "unknown_model" and "nope" in reply["error"]["message"]


def test_a_model_just_loaded_is_not_let_go_for_the_next_load_before_its_requests_are_batched():
    h, models, loader = harness(max_models=1)
    ask(h, "a", 2)
    ask(h, "b", 2)  # b waits while a loads; a's requests, prepared, must reach a's batcher before a can go
    replies = until_replies(h, 4)
    assert [(r["model"], r["status"]) for r in replies] == [("a", "ok")] * 2 + [("b", "ok")] * 2
    assert loader.calls == ["a", "b"]


def test_the_requests_waiting_of_a_partition_that_leaves_go_to_its_next_owner_unanswered_here():
    h, models, loader = harness()
    loader.gate = threading.Event()
    h.source.produce({"id": "leaves", "model": "a", "inputs": INPUTS}, partition=0)
    h.source.produce({"id": "stays", "model": "a", "inputs": INPUTS}, partition=1)
    h.steps(2)
    assert h.worker.stats.waiting_for_model == {"a": 2}
    h.source.revoked = {("requests", 0)}
    h.steps(1)
    assert h.worker.stats.waiting_for_model == {"a": 1} and h.worker.stats.handed_over == 1
    loader.gate.set()
    assert [r["id"] for r in until_replies(h, 1)] == ["stays"]


def test_a_request_held_behind_another_of_its_id_lets_other_models_go_for_that_ones_load():
    """The second copy of an id waits (held) for the first, which waits for its model's load, which needs the
    one model loaded let go: the held copy keeps only the model it names. It kept every model once, and the
    first copy waited for ever (until its claim's lease ran out: then both were scored)."""
    h, models, loader = harness(max_models=1)
    ask(h, "a")
    until_replies(h, 1)
    for _ in range(2):
        h.source.produce({"id": "twice", "model": "b", "inputs": INPUTS})
    replies = until_replies(h, 2)
    assert [(r["model"], r["status"]) for r in replies] == [("a", "ok"), ("b", "ok")] and replies[1]["id"] == "twice"
    assert loader.calls == ["a", "b"] and sorted(models.live()) == ["b"]
    h.steps(3)  # the held copy is asked again once the first one's done mark is written: a duplicate
    assert h.worker.stats.duplicates == 1 and len(h.replies()) == 2
