"""One batcher per model: a batch never mixes models, and no model's backlog starves another's ready batch."""

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
        models.add(request(HEAVY if offset % 2 else LIGHT, offset), 0.0, 0)
    taken = [models.next_batch(0.0) for _ in range(3)]
    assert [entry for entry, _ in taken[:2]] == ["heavy", "light"] and taken[2] is None
    for entry, batch in taken[:2]:
        assert {r.route.entry for r in batch} == {entry}


def test_a_ready_light_batch_waits_for_at_most_one_heavy_batch_however_deep_the_heavy_backlog():
    models = batchers()
    for offset in range(400):  # 100 full heavy batches in line
        models.add(request(HEAVY, offset), 0.0, 0)
    assert models.next_batch(0.0)[0] == "heavy"
    models.add(request(LIGHT, 1000), 0.0, 0)
    order = [models.next_batch(0.0)[0] for _ in range(3)]
    assert order == ["light", "heavy", "heavy"]


def test_round_robin_alternates_while_both_have_ready_batches():
    models = batchers()
    for offset in range(16):
        models.add(request(HEAVY, offset), 0.0, 0)
        models.add(request(LIGHT, 100 + offset), 0.0, 0)
    assert [models.next_batch(0.0)[0] for _ in range(8)] == ["heavy", "light"] * 4
    assert models.next_batch(0.0) is None and models.pending == 0


def test_each_model_waits_by_its_own_limits():
    models = ModelBatchers({"heavy": Batcher(8, 0.010), "light": Batcher(8, 0.002)}, "heavy")
    models.add(request(HEAVY, 0), 0.0, 0)
    models.add(request(LIGHT, 1), 0.0, 0)
    assert models.deadline() == 0.002
    assert models.next_batch(0.003)[0] == "light"
    assert models.next_batch(0.003) is None
    assert models.next_batch(0.011)[0] == "heavy"


def test_a_request_without_a_route_goes_to_the_default_and_flush_takes_what_is_not_ready():
    models = ModelBatchers({"heavy": Batcher(8, 10.0), "light": Batcher(8, 10.0)}, "heavy")
    models.add(Request("plain", None, Position("requests", 0, 0)), 0.0, 0)
    models.add(request(LIGHT, 1), 0.0, 0)
    assert models.pending_by_entry() == {"heavy": 1, "light": 1}
    assert models.next_batch(0.0) is None
    assert sorted(models.flush()[0] for _ in range(2)) == ["heavy", "light"]
    assert models.flush() is None


def test_remove_if_reaches_every_model():
    models = batchers()
    for offset in range(4):
        models.add(request(HEAVY if offset % 2 else LIGHT, offset), 0.0, 0)
    removed = models.remove_if(lambda r: r.position.offset >= 2)
    assert sorted(r.position.offset for r in removed) == [2, 3] and models.pending == 2
