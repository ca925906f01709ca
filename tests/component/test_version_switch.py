"""A new version switched in between two steps: what was batched before goes to the old version, what comes
after to the new one, each reply says which answered, and the old version is let go once it holds nothing."""

from __future__ import annotations

from structlog.testing import capture_logs

from tests.component.harness import INPUTS, Harness
from worker.core.batcher import Batcher
from worker.core.model_table import ModelEntry, ModelTable
from worker.core.stats import ServedModel
from worker.models import load_model
from worker.models.runner import TorchRunner
from worker.stream.reloads import Plan
from worker.stream.served import LoadedEntry, ServedModels

ENTRY = ModelEntry("churn", (("model", "churn"),))
TABLE = ModelTable((ENTRY,), "churn", "worker.toml")


def version(name: str, batch_size: int = 4, wait_s: float = 0.0) -> LoadedEntry:
    runner = TorchRunner(load_model("churn"), "cpu", batch_size)
    return LoadedEntry(ENTRY, runner, name, Batcher(batch_size, wait_s), ServedModel("churn", "churn", name, "cpu", 0))


class HeldPlans:
    """Reloads (stream/reloads.py) whose plan is ready when the test says so."""

    def __init__(self) -> None:
        self.ready: list[Plan] = []
        self.closed = False

    def take(self) -> Plan | None:
        return self.ready.pop(0) if self.ready else None

    def reload(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def harness(wait_s: float = 0.0) -> tuple[Harness, HeldPlans, ServedModels]:
    plans = HeldPlans()
    models = ServedModels(TABLE, [version("a", wait_s=wait_s)])
    return Harness(models=models, reloads=plans, wait_to_fill=wait_s > 0), plans, models


def versions(h: Harness) -> dict[str, str]:
    return {reply["id"]: reply["model_version"] for reply in h.replies()}


def test_requests_after_the_switch_are_answered_by_the_new_version_and_the_old_one_is_let_go():
    h, plans, models = harness()
    for i in range(3):
        h.source.produce({"id": f"before-{i}", "inputs": INPUTS})
    h.steps(2)
    plans.ready.append(Plan(TABLE, (version("b"),)))
    for i in range(3):
        h.source.produce({"id": f"after-{i}", "inputs": INPUTS})
    h.steps(3)
    assert versions(h) == {**{f"before-{i}": "a" for i in range(3)}, **{f"after-{i}": "b" for i in range(3)}}
    assert set(models.runners) == {"churn@1"}  # the old version held nothing more: let go
    assert h.worker.stats.reloads == {("churn", "switched"): 1}
    assert [(m.entry, m.version) for m in h.worker.stats.models] == [("churn@1", "b")]


def test_what_the_old_version_holds_at_the_switch_is_still_its_own_to_answer():
    h, plans, models = harness(wait_s=1.0)  # batches wait a second to fill
    for i in range(3):
        h.source.produce({"id": f"held-{i}", "inputs": INPUTS})
    h.steps(1)  # polled and batched for "a", not scored
    plans.ready.append(Plan(TABLE, (version("b", wait_s=1.0),)))
    h.source.produce({"id": "new-0", "inputs": INPUTS})
    h.steps(1)  # switched first, then polled: "new-0" goes to "b"
    assert set(models.runners) == {"churn", "churn@1"}  # the old one still holds requests
    h.clock.advance(1.5)
    h.steps(3)
    assert versions(h) == {"held-0": "a", "held-1": "a", "held-2": "a", "new-0": "b"}
    assert set(models.runners) == {"churn@1"}


def test_an_error_reply_names_the_model_and_version_serving_when_it_is_made():
    """The wire contract: model and model_version are the model the request was routed to and the version that
    answered; before a routed model refused it, or after a switch, they named the version served at start."""
    h, plans, _ = harness()
    plans.ready.append(Plan(TABLE, (version("b"),)))
    h.steps(1)
    h.source.produce({"id": "short", "inputs": [1.0, 2.0]})  # refused by the model's prepare: routed
    h.source.produce({"id": "unknown", "model": "nope", "inputs": INPUTS})  # routed nowhere: the default's
    h.steps(2)
    assert versions(h) == {"short": "b", "unknown": "b"}


def test_a_plan_the_routes_refuse_leaves_everything_as_it_was():
    h, plans, models = harness()
    canary_table = ModelTable((ModelEntry("churn", (("model", "churn"),), canary="next", canary_weight=0.5),
                               ModelEntry("next", (("model", "churn"),))), "churn", "worker.toml")
    same = LoadedEntry(canary_table.entries[1], version("a").runner, "a", Batcher(4, 0.0),
                       ServedModel("next", "next", "a", "cpu", 0))
    plans.ready.append(Plan(canary_table, (same,)))  # the canary's version is the live one's: refused
    h.source.produce({"id": "r", "inputs": INPUTS})
    h.steps(2)
    assert versions(h) == {"r": "a"} and set(models.runners) == {"churn"}


def test_a_canary_declaring_other_inputs_is_refused_and_everything_stays_as_it_was():
    """A canary's share of a model's requests is sent as the model's clients send them: one of another width
    would refuse them (a newcomer's run: 84 of 300 valid requests answered wrong_input_length)."""
    h, plans, models = harness()
    canary_table = ModelTable((ModelEntry("churn", (("model", "churn"),), canary="narrow", canary_weight=0.5),
                               ModelEntry("narrow", (("model", "churn"),))), "churn", "worker.toml")
    narrow = LoadedEntry(canary_table.entries[1], version("b").runner, "b", Batcher(4, 0.0),
                         ServedModel("narrow", "narrow", "b", "cpu", 0), contract={"inputs": {"length": 6}})
    with capture_logs() as logs:
        plans.ready.append(Plan(canary_table, (narrow,)))
        h.source.produce({"id": "r", "inputs": INPUTS})
        h.steps(2)
    assert versions(h) == {"r": "a"} and set(models.runners) == {"churn"}
    refused = [line for line in logs if line["event"] == "model_reload_refused"]
    assert "cannot take [models.narrow] as its canary: their declared inputs and outputs differ" in (
        refused[0]["reason"])


def test_with_several_models_a_poll_comes_between_two_batches_of_one_model():
    heavy, light = (ModelEntry(name, (("model", "churn"),)) for name in ("heavy", "light"))
    table = ModelTable((heavy, light), "heavy", "worker.toml")
    models = ServedModels(table, [
        LoadedEntry(entry, TorchRunner(load_model("churn"), "cpu", 4), "1", Batcher(4, 0.0),
                    ServedModel(entry.name, entry.name, "1", "cpu", 0)) for entry in (heavy, light)])
    h = Harness(models=models, reloads=HeldPlans())
    for i in range(8):  # two full heavy batches in one poll
        h.source.produce({"id": f"heavy-{i}", "model": "heavy", "inputs": INPUTS})
    h.steps(1)  # the first heavy batch scored, inline
    h.source.produce({"id": "light", "model": "light", "inputs": INPUTS})
    h.steps(4)
    order = [reply["id"] for reply in h.replies()]
    assert order.index("light") < order.index("heavy-4"), order  # its turn before the second heavy batch
