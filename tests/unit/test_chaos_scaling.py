"""The scaling table (tests/chaos/scaling.py): which combinations run, and what the table says of where it ran."""

from __future__ import annotations

from tests.chaos.run import ScenarioResult
from tests.chaos.scaling import Combination, combinations, markdown
from tests.chaos.steps import StepFigures
from worker.core.clients import CLIENTS


def _result(gaps: list[float]) -> ScenarioResult:
    steps = [StepFigures(f"step {i}", 6.0, 900, gap, 0, 5.0, 20.0 + i, 30.0, 0) for i, gap in enumerate(gaps)]
    return ScenarioResult("h", "scale", "small", "pass", steps=steps)


def test_the_consumer_protocol_runs_only_on_clients_that_speak_it() -> None:
    chosen = combinations(list(CLIENTS), ["range", "consumer"], ["at-least-once"])
    assert {c.client for c in chosen if c.protocol == "range"} == set(CLIENTS)
    assert {c.client for c in chosen if c.protocol == "consumer"} == {
        name for name, client in CLIENTS.items() if "consumer" in client.group_protocols}


def test_the_table_names_the_brokers_and_gives_median_and_worst_by_step() -> None:
    runs = {Combination("confluent", "range", "exactly-once"): [_result([0.4, 3.0]), _result([0.6, 9.0]),
                                                                  _result([0.5, 4.0])]}
    table = markdown(runs, "python -m tests.chaos.scaling --replication 3", "h1:1,h2:2,h3:3")
    assert "on 3 brokers (h1:1,h2:2,h3:3)" in table
    rows = [line for line in table.splitlines() if line.startswith("| confluent") or line.startswith("|  |")]
    assert "| 3 of 3 | 0 | 0 | step 0 | 0.50 s | 0.60 s |" in rows[0]
    assert "| step 1 | 4.00 s | 9.00 s |" in rows[1]
    assert "on 1 broker (h1:1)" in markdown(runs, "python -m tests.chaos.scaling", "h1:1")
