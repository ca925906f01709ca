"""Routes: a request's model by its name, its topic or the default; canary arms by a hash of its id."""

from collections import Counter

import pytest

from worker.core.routes import Arm, Route, Routes, arm_point


def route(entry, model=None, version="1"):
    return Route(entry, model or entry, version, lambda inputs: inputs)


CHURN, CHURN_NEXT, FRAUD = route("churn"), route("churn-next", "churn", "2"), route("fraud", version="7")
ROUTES = Routes({"churn": [Arm(CHURN, 0.9), Arm(CHURN_NEXT, 0.1)], "fraud": [Arm(FRAUD, 1.0)]}, "churn",
                {"fraud-requests": "fraud"})


def test_a_request_gets_the_model_it_names_else_its_topics_else_the_default():
    assert ROUTES.pick("requests", "fraud", None, "a") == FRAUD
    assert ROUTES.pick("fraud-requests", None, None, "a") == FRAUD
    assert ROUTES.pick("fraud-requests", "churn", "1", "a") == CHURN  # a name given wins over the topic's
    assert ROUTES.pick("requests", None, "1", "a") == CHURN


def test_an_unknown_name_or_version_has_no_route_and_the_served_ones_are_listed():
    assert ROUTES.pick("requests", "text", None, "a") is None
    assert ROUTES.pick("requests", "fraud", "8", "a") is None
    assert ROUTES.served() == "churn (1, 2), fraud (7)"
    assert ROUTES.reply_names() == [("churn", "1"), ("churn", "2"), ("fraud", "7")]


def test_a_named_version_picks_its_arm_whatever_the_id():
    assert {ROUTES.pick("requests", "churn", "2", f"id-{i}") for i in range(50)} == {CHURN_NEXT}


def test_the_canary_gets_its_share_and_an_id_always_lands_on_the_same_arm():
    ids = [f"request-{i}" for i in range(20_000)]
    arms = Counter(ROUTES.pick("requests", None, None, i).entry for i in ids)
    assert 0.08 < arms["churn-next"] / len(ids) < 0.12
    assert all(ROUTES.pick("requests", None, None, i) == ROUTES.pick("requests", "churn", None, i) for i in ids[:500])


def test_the_arm_point_is_the_same_on_every_worker_and_every_run():
    # blake2b, not Python's salted hash(): a change here would move requests between arms after a restart
    assert (arm_point("request-1"), arm_point("")) == (0.9785382927311853, 0.8931675160897388)


def test_weights_must_sum_to_one_and_defaults_must_be_served():
    with pytest.raises(ValueError, match="summing to 1"):
        Routes({"churn": [Arm(CHURN, 0.5)]}, "churn")
    with pytest.raises(ValueError, match="not served"):
        Routes({"churn": [Arm(CHURN, 1.0)]}, "fraud")
    with pytest.raises(ValueError, match="not served"):
        Routes({"churn": [Arm(CHURN, 1.0)]}, "churn", {"t": "fraud"})
