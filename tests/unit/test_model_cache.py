"""The memory budget's choices (core/model_cache.py), what a model not loaded looks like to routing, and the
checks of the budget's settings."""

from __future__ import annotations

import pytest

from worker.core.batcher import Batcher
from worker.core.errors import ConfigError
from worker.core.messages import Position, Request
from worker.core.model_cache import ModelCache
from worker.core.model_table import ModelEntry, ModelTable
from worker.core.settings import Settings
from worker.core.stats import ServedModel
from worker.stream.served import LoadedEntry, ServedModels

MIB = 1024 * 1024


def everyone_idle(name: str) -> bool:
    return True


def test_the_least_recently_used_idle_models_go_first_and_only_as_many_as_needed():
    cache = ModelCache(max_models=3)
    for name in ("a", "b", "c"):
        cache.add(name, 0)
    cache.touch("a")  # b is now the least recently used
    assert cache.victims(everyone_idle, incoming=1) == (["b"], True)
    assert cache.victims(everyone_idle) == ([], True)  # those loaded fit as they are


def test_a_busy_or_pinned_model_is_never_chosen_and_then_the_room_is_not_there():
    cache = ModelCache(max_models=2, pinned=["a"])
    cache.add("a", 0)
    cache.add("b", 0)
    assert cache.victims(lambda name: name != "b", incoming=1) == ([], False)  # b busy, a pinned
    assert cache.victims(everyone_idle, incoming=1) == (["b"], True)


def test_bytes_count_against_their_budget_with_a_known_size_for_a_model_loaded_before():
    cache = ModelCache(max_bytes=100 * MIB)
    cache.add("big", 60 * MIB)
    cache.add("small", 30 * MIB)
    assert cache.victims(everyone_idle, incoming=1, incoming_bytes=5 * MIB) == ([], True)
    assert cache.victims(everyone_idle, incoming=1, incoming_bytes=20 * MIB) == (["big"], True)
    cache.remove("big")
    assert cache.size_of("big") == 60 * MIB and cache.loaded == ["small"]
    cache.add("small", 120 * MIB)  # a version that grew: over the budget on its own
    assert cache.victims(everyone_idle) == (["small"], True)


def test_a_model_larger_than_the_budget_beside_the_pinned_ones_is_too_large():
    cache = ModelCache(max_bytes=100 * MIB, pinned=["live"])
    cache.add("live", 70 * MIB)
    assert cache.too_large(40 * MIB) and not cache.too_large(30 * MIB)
    assert not ModelCache().too_large(10**12)  # no byte budget


class Runner:
    name = version = "r"
    read_plain = None

    def prepare(self, inputs):
        return inputs


def loaded(entry: ModelEntry) -> LoadedEntry:
    return LoadedEntry(entry, Runner(), "1", Batcher(4, 0.0), ServedModel(entry.name, entry.name, "1", "cpu", 0.0))


def test_a_model_not_loaded_routes_to_itself_and_is_told_apart_in_the_served_list():
    table = ModelTable((ModelEntry("a", (("model", "churn"),)), ModelEntry("b", (("model", "churn"),), version="7")))
    models = ServedModels(table, [], on_first_use=True)
    route = models.routes.pick("requests", "a", None, "id-1")
    assert route is not None and not route.loaded and route.entry == "a"
    assert models.routes.pick("requests", "a", "anything", "id-1") is route  # undeclared: checked once loaded
    assert models.routes.pick("requests", "b", "8", "id-1") is None  # declared: checked now
    assert models.routes.served() == "a (loaded on first use), b (7, loaded on first use)"
    assert models.routes.reply_names() == [] and models.batchers.default is None

    models.add(loaded(table.entries[0]))
    assert models.routes.pick("requests", "a", None, "id-1").loaded and models.batchers.default == "a"
    assert models.routes.reply_names() == [("a", "1")]


def test_a_model_holding_requests_or_scoring_is_not_idle_and_one_let_go_routes_as_not_loaded_again():
    entry = ModelEntry("a", (("model", "churn"),))
    models = ServedModels(ModelTable((entry,)), [], on_first_use=True)
    models.add(loaded(entry))
    assert models.idle("a", None) and not models.idle("a", scoring="a")
    route = models.routes.pick("requests", "a", None, "id")
    models.batchers.add_all([Request("id", [0.0], Position("requests", 0, 0), route=route)], 0.0, 0)
    assert not models.idle("a", None)
    models.batchers.next_batch(0.0, backlog=True)
    models.evict("a")
    assert not models.is_loaded("a") and not models.routes.pick("requests", "a", None, "id").loaded
    assert models.runners == {} and models.resident == {}


def test_a_budget_without_a_model_table_or_with_no_room_beside_the_pinned_models_stops_the_worker(tmp_path):
    with pytest.raises(ConfigError, match="max_loaded_models needs a configuration file"):
        Settings.from_values(max_loaded_models=2)
    config = tmp_path / "worker.toml"
    config.write_text('max_loaded_models = 2\n[models.live]\nmodel = "churn"\ncanary = "next"\ncanary_weight = 0.1\n'
                      '[models.next]\nmodel = "churn"\nversion = "2"\n[models.other]\nmodel = "churn"\n')
    with pytest.raises(ConfigError, match="max_loaded_models=2 is too few: the 2 models .* raise it to 3"):
        Settings.from_sources(None, {"STREAMSCORE_CONFIG": str(config)})


def test_a_new_version_of_a_model_let_go_meanwhile_is_not_switched_in():
    entry = ModelEntry("a", (("model", "churn"),))
    table = ModelTable((entry,))
    models = ServedModels(table, [], on_first_use=True)
    models.switch(table, [loaded(entry)])  # loaded by the reloads thread while the loop let "a" go
    assert not models.is_loaded("a") and models.runners == {}
