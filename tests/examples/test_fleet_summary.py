"""examples/fleet/summary.py on made-up replies: what it counts as missing, twice, misrouted; no services."""

from __future__ import annotations

from examples.fleet.summary import Versions, render, tally
from examples.fleet.traffic import BEFORE, DURING, TEXT, request_ids
from worker.core.routes import arm_point

VERSIONS = Versions({"churn": "old", "churn-next": "next", "churn-candidate": "cand", "documents": "docs"}, "new")


def answer(request_id: str, phase: str) -> dict:
    """The reply the worker should give: the canary's version where the id hash says, else the live one."""
    if phase == TEXT:
        return {"id": request_id, "status": "ok", "model": "documents", "model_version": "docs",
                "outputs": {"label": "invoice"}}
    live = "old" if phase == BEFORE else "new"
    version = "next" if arm_point(request_id) >= 0.9 else live
    return {"id": request_id, "status": "ok", "model": "churn", "model_version": version, "outputs": {}}


def test_every_request_answered_once_by_the_arm_its_id_picks_is_ok():
    sent = {**request_ids(BEFORE, 300), **request_ids(DURING, 100), **request_ids(TEXT, 8)}
    result = tally(sent, {i: answer(i, phase) for i, phase in sent.items()}, 0, VERSIONS, 0.1, 0.25)

    assert result.ok and result.answered == 408 and result.canary_misrouted == 0
    assert result.canary_replies == result.canary_expected > 0
    assert result.documents_right == 2  # doc-00000 and doc-00004 were written as invoices
    assert result.by_version[("churn", "new", DURING)] + result.by_version[("churn", "next", DURING)] == 100
    lines = "\n".join(render(result, VERSIONS, 0.1, 0.25, result.shadow_expected))
    assert "every one answered by the arm its id picks" in lines and "churn old -> new" in lines


def test_missing_twice_unknown_errors_and_the_wrong_arm_are_counted():
    sent = request_ids(BEFORE, 50)
    replies = {i: answer(i, BEFORE) for i in sent}
    del replies["churn-00001"]
    replies["churn-00002"] = {"id": "churn-00002", "status": "error", "error": {"code": "invalid_inputs"}}
    wrong = next(i for i in sent if arm_point(i) < 0.9 and i in replies and replies[i]["status"] == "ok")
    replies[wrong] = {**replies[wrong], "model_version": "next"}
    replies["someone-else"] = answer("someone-else", BEFORE)

    result = tally(sent, replies, 3, VERSIONS, 0.1, 0.25)

    assert not result.ok
    assert (result.missing, result.duplicates, result.strangers) == (["churn-00001"], 3, 1)
    assert result.errors == {"invalid_inputs": 1} and result.canary_misrouted == 1
