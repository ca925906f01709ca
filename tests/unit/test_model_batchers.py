"""One batcher per model: a batch never mixes models, and no model's backlog starves another's ready batch."""

from worker.core.batch_wait import ArrivalRate, LatencyTarget
from worker.core.batcher import Batcher
from worker.core.messages import Position, Request
from worker.core.model_batchers import ModelBatchers
from worker.core.routes import Route

HEAVY, LIGHT = (Route(name, name, "1", lambda inputs: inputs) for name in ("heavy", "light"))


def request(route, offset):
    return Request(f"{route.entry}-{offset}", None, Position("requests", 0, offset), route=route)


def batchers(heavy_size=4, light_size=4, wait_s=0.0):
    return ModelBatchers({"heavy": Batcher(heavy_size, wait_s), "light": Batcher(light_size, wait_s)}, "heavy")


def test_a_batch_holds_one_model_only():
    models = batchers()
    for offset in range(6):
        models.add_all([request(HEAVY if offset % 2 else LIGHT, offset)], 0.0, 0)
    taken = [models.next_batch(0.0) for _ in range(3)]
    assert [entry for entry, _ in taken[:2]] == ["heavy", "light"] and taken[2] is None
    for entry, batch in taken[:2]:
        assert {r.route.entry for r in batch} == {entry}


def test_add_all_queues_each_run_in_its_own_model_in_order_and_returns_what_never_fits():
    cost = {"heavy-0": 3, "heavy-1": 9, "heavy-2": 2, "light-3": 1, "heavy-4": 4}
    models = ModelBatchers({"heavy": Batcher(4, 0.0, cost=lambda r: cost[r.id], max_batch_cost=8),
                            "light": Batcher(4, 0.0)}, "heavy")
    polled = [request(HEAVY, 0), request(HEAVY, 1), request(HEAVY, 2), request(LIGHT, 3), request(HEAVY, 4)]
    assert [r.id for r in models.add_all(polled, 0.0, 0)] == ["heavy-1"]
    assert models.pending_by_entry() == {"heavy": 3, "light": 1}
    assert [r.id for r in models.flush()[1]] == ["heavy-0", "heavy-2"]  # 3 + 2 + 4 is over the budget of 8
    assert [r.id for r in models.flush()[1]] == ["light-3"]
    assert [r.id for r in models.flush()[1]] == ["heavy-4"]


def test_a_latency_target_counts_the_arrivals_of_the_requests_queued_not_of_those_refused_for_their_cost():
    target = LatencyTarget(0.05)
    models = ModelBatchers({"heavy": Batcher(4, 0.0, cost=lambda r: 9 if r.id == "heavy-1" else 1, max_batch_cost=8,
                                             wait=target)}, "heavy")
    refused = models.add_all([request(HEAVY, 0), request(HEAVY, 1), request(HEAVY, 2)], 10.0, 0)
    assert [r.id for r in refused] == ["heavy-1"]
    counted = ArrivalRate()
    for _ in range(2):
        counted.arrived(10.0)
    assert target.rate.per_s() == counted.per_s()


def test_a_ready_light_batch_waits_for_at_most_one_heavy_batch_however_deep_the_heavy_backlog():
    models = batchers()
    for offset in range(400):  # 100 full heavy batches in line
        models.add_all([request(HEAVY, offset)], 0.0, 0)
    assert models.next_batch(0.0)[0] == "heavy"
    models.add_all([request(LIGHT, 1000)], 0.0, 0)
    order = [models.next_batch(0.0)[0] for _ in range(3)]
    assert order == ["light", "heavy", "heavy"]


def test_round_robin_alternates_while_both_have_ready_batches():
    models = batchers()
    for offset in range(16):
        models.add_all([request(HEAVY, offset)], 0.0, 0)
        models.add_all([request(LIGHT, 100 + offset)], 0.0, 0)
    assert [models.next_batch(0.0)[0] for _ in range(8)] == ["heavy", "light"] * 4
    assert models.next_batch(0.0) is None and models.pending == 0


def test_each_model_waits_by_its_own_limits():
    models = ModelBatchers({"heavy": Batcher(8, 0.010), "light": Batcher(8, 0.002)}, "heavy")
    models.add_all([request(HEAVY, 0)], 0.0, 0)
    models.add_all([request(LIGHT, 1)], 0.0, 0)
    assert models.deadline() == 0.002
    assert models.next_batch(0.003)[0] == "light"
    assert models.next_batch(0.003) is None
    assert models.next_batch(0.011)[0] == "heavy"


def test_a_request_without_a_route_goes_to_the_default_and_flush_takes_what_is_not_ready():
    models = ModelBatchers({"heavy": Batcher(8, 10.0), "light": Batcher(8, 10.0)}, "heavy")
    models.add_all([Request("plain", None, Position("requests", 0, 0))], 0.0, 0)
    models.add_all([request(LIGHT, 1)], 0.0, 0)
    assert models.pending_by_entry() == {"heavy": 1, "light": 1}
    assert models.next_batch(0.0) is None
    assert sorted(models.flush()[0] for _ in range(2)) == ["heavy", "light"]
    assert models.flush() is None


def test_remove_if_reaches_every_model():
    models = batchers()
    for offset in range(4):
        models.add_all([request(HEAVY if offset % 2 else LIGHT, offset)], 0.0, 0)
    removed = models.remove_if(lambda r: r.position.offset >= 2)
    assert sorted(r.position.offset for r in removed) == [2, 3] and models.pending == 2
