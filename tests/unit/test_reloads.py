"""Reloads: what a SIGHUP or a changed file loads, what is refused, and that a refusal keeps the old version."""

from __future__ import annotations

import os
import time

from structlog.testing import capture_logs

from worker.core.batcher import Batcher
from worker.core.model_table import read_config_file
from worker.core.stats import ServedModel, WorkerStats
from worker.stream.reloads import Reloads
from worker.stream.served import LoadedEntry


class Runner:
    read_plain = None  # no plain reader (worker/core/routes.py)

    def __init__(self, name: str, version: str) -> None:
        self.name, self.version = name, version

    def prepare(self, inputs):
        return inputs

    def run(self, items):
        return []


def loaded(entry, version: str) -> LoadedEntry:
    return LoadedEntry(entry, Runner(entry.name, version), version, Batcher(4, 0.0),
                       ServedModel(entry.name, entry.name, version, "cpu", 0.0))


class Loader:
    """Loads each entry as the next version number; ``fail`` names entries whose load raises."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: set[str] = set()

    def __call__(self, entry) -> LoadedEntry:
        self.calls.append(entry.name)
        if entry.name in self.fail:
            raise RuntimeError("broken file")
        return loaded(entry, f"v{len(self.calls) + 1}")


def setup(tmp_path, text: str, check=lambda old, new: None):
    (tmp_path / "net.pt").write_bytes(b"one")
    path = tmp_path / "worker.toml"
    path.write_text(text)
    table = read_config_file(str(path)).models
    live = {entry.name: loaded(entry, "v1" if n == 0 else f"v1.{n}") for n, entry in enumerate(table.entries)}
    load, stats = Loader(), WorkerStats()
    return Reloads(table, lambda: live, load, check, stats, watch_s=0.0), load, stats, path


def plan_after(reloads: Reloads, act) -> object:
    """Run one round of the reload thread's work in this thread: act, then plan."""
    act()
    reloads._plan(reread=reloads._asked.is_set())
    reloads._asked.clear()
    return reloads.take()


ONE = "[models.net]\nmodel = 'net.pt'\n"


def test_nothing_changed_nothing_loaded(tmp_path):
    reloads, load, _, _ = setup(tmp_path, ONE)
    assert plan_after(reloads, reloads.reload) is None and load.calls == []


def test_a_changed_file_loads_that_model_again(tmp_path):
    reloads, load, _, _ = setup(tmp_path, ONE)

    def rewrite():
        time.sleep(0.01)
        (tmp_path / "net.pt").write_bytes(b"two!")

    plan = plan_after(reloads, rewrite)
    assert load.calls == ["net"] and [new.version for new in plan.loaded] == ["v2"]
    assert plan_after(reloads, lambda: None) is None  # once only


def test_a_sighup_reads_the_file_again_new_models_and_weights_included(tmp_path):
    reloads, load, _, path = setup(tmp_path, ONE)
    path.write_text(ONE + "canary = 'next'\ncanary_weight = 0.2\n[models.next]\nmodel = 'churn'\nversion = '9'\n")
    plan = plan_after(reloads, reloads.reload)
    assert load.calls == ["next"]  # new; net's own keys changed only in its routing (its canary)
    assert [e.name for e in plan.table.entries] == ["net", "next"] and plan.table.entries[0].canary_weight == 0.2


def test_a_canary_weight_changed_or_dropped_switches_the_table_in_and_loads_nothing(tmp_path):
    canary = "canary = 'next'\ncanary_weight = {}\n[models.next]\nmodel = 'churn'\nversion = '9'\n"
    reloads, load, stats, path = setup(tmp_path, ONE + canary.format(0.2),
                                       check=lambda old, new: "its version is the serving one's")
    path.write_text(ONE + canary.format(0.6))
    plan = plan_after(reloads, reloads.reload)
    assert load.calls == [] and plan.loaded == () and plan.table.entries[0].canary_weight == 0.6
    path.write_text(ONE)
    plan = plan_after(reloads, reloads.reload)
    assert load.calls == [] and [e.name for e in plan.table.entries] == ["net"] and not plan.table.entries[0].canary
    assert stats.reloads == {}  # nothing refused


def test_a_version_that_fails_to_load_or_its_check_is_refused_and_counted(tmp_path):
    reloads, load, stats, _ = setup(tmp_path, ONE, check=lambda old, new: "its version is the serving one's")
    os.utime(tmp_path / "net.pt", ns=(1, 1))
    assert plan_after(reloads, lambda: None) is None  # nothing to switch to
    assert stats.reloads == {("net", "refused"): 1}
    load.fail.add("net")
    assert plan_after(reloads, reloads.reload) is None and load.calls == ["net", "net"]  # a SIGHUP tries again
    assert stats.reloads == {("net", "refused"): 2}


def test_the_serving_version_put_back_after_a_refusal_loads_nothing_and_refuses_nothing(tmp_path):
    """Changes are told against what serves: a file put back is what serves, not a change from what was refused."""
    reloads, load, stats, path = setup(tmp_path, ONE)
    load.fail.add("net")
    path.write_text("[models.net]\nmodel = 'missing.pt'\n")
    assert plan_after(reloads, reloads.reload) is None and stats.reloads == {("net", "refused"): 1}
    path.write_text(ONE)
    assert plan_after(reloads, reloads.reload) is None
    assert plan_after(reloads, reloads.reload) is None  # nor on any later SIGHUP
    assert load.calls == ["net"] and stats.reloads == {("net", "refused"): 1}


def test_a_watched_file_put_back_after_a_refusal_loads_nothing_and_a_refused_one_is_not_retried(tmp_path):
    reloads, load, stats, _ = setup(tmp_path, ONE)
    model = tmp_path / "net.pt"
    serving = model.stat()
    load.fail.add("net")
    model.write_bytes(b"truncated")
    os.utime(model, ns=(serving.st_atime_ns, serving.st_mtime_ns + 10**9))
    assert plan_after(reloads, lambda: None) is None and load.calls == ["net"]
    assert plan_after(reloads, lambda: None) is None and load.calls == ["net"]  # refused as it is: not again
    model.write_bytes(b"one")
    os.utime(model, ns=(serving.st_atime_ns, serving.st_mtime_ns))
    assert plan_after(reloads, lambda: None) is None
    assert load.calls == ["net"] and stats.reloads == {("net", "refused"): 1}


def test_a_file_written_again_as_it_serves_loads_nothing_new_and_refuses_nothing(tmp_path):
    """A put-back by cp, an editor or a ConfigMap writes a new mtime: the version made of its content is the one
    serving, so nothing switches and nothing counts as refused."""
    (tmp_path / "net.pt").write_bytes(b"one")
    path = tmp_path / "worker.toml"
    path.write_text(ONE)
    table = read_config_file(str(path)).models
    live = {"net": loaded(table.entries[0], "one")}
    calls = []

    def by_content(entry):
        calls.append(entry.name)
        return loaded(entry, (tmp_path / "net.pt").read_bytes().decode())

    stats = WorkerStats()
    reloads = Reloads(table, lambda: live, by_content, lambda old, new: "its version is the serving one's", stats,
                      watch_s=0.0)
    time.sleep(0.01)
    (tmp_path / "net.pt").write_bytes(b"one")  # the same bytes, a new mtime
    with capture_logs() as logs:
        assert plan_after(reloads, lambda: None) is None
        assert plan_after(reloads, reloads.reload) is None
    assert calls == ["net"] and stats.reloads == {}
    assert [e["event"] for e in logs if e["event"].startswith("model_")] == ["model_reloading", "model_unchanged"]


def test_a_table_the_routes_refuse_is_not_taken_for_served(tmp_path):
    """A canary declaring other inputs is refused before the switch, so that the next SIGHUP tries it again and
    the next change of the live model's file does not carry the refused canary along."""
    reloads, load, stats, path = setup(tmp_path, ONE)
    real_load = load.__call__

    def narrow(entry):
        new = real_load(entry)
        return LoadedEntry(new.entry, new.runner, new.version, new.batcher, new.info, contract={"length": 6})

    reloads._load = narrow
    path.write_text(ONE + "canary = 'next'\ncanary_weight = 0.2\n[models.next]\nmodel = 'churn'\n")
    with capture_logs() as logs:
        assert plan_after(reloads, reloads.reload) is None
        assert plan_after(reloads, reloads.reload) is None  # tried again, refused again
    refused = [e for e in logs if e["event"] == "model_reload_refused"]
    assert len(refused) == 2 and "declared inputs and outputs differ" in refused[0]["reason"]
    assert [e.name for e in reloads._table.entries] == ["net"]


def test_a_new_model_that_does_not_load_keeps_the_old_table_whole(tmp_path):
    reloads, load, _, path = setup(tmp_path, ONE)
    load.fail.add("broken")
    path.write_text(ONE + "default_model = 'broken'\n[models.broken]\nmodel = 'churn'\n")
    assert plan_after(reloads, reloads.reload) is None


def test_a_file_that_is_no_longer_valid_toml_is_refused(tmp_path):
    reloads, load, _, path = setup(tmp_path, ONE)
    path.write_text("[models.net\n")
    assert plan_after(reloads, reloads.reload) is None and load.calls == []


def test_under_a_memory_budget_only_a_model_loaded_now_is_loaded_again(tmp_path):
    (tmp_path / "net.pt").write_bytes(b"one")
    (tmp_path / "other.pt").write_bytes(b"one")
    path = tmp_path / "worker.toml"
    path.write_text(ONE + "[models.other]\nmodel = 'other.pt'\n")
    table = read_config_file(str(path)).models
    resident = {"net": loaded(table.entries[0], "v1")}  # other is not loaded: it loads on first use
    load = Loader()
    reloads = Reloads(table, lambda: resident, load, lambda old, new: None, WorkerStats(), watch_s=0.0,
                      on_first_use=True)

    def rewrite_both():
        time.sleep(0.01)
        (tmp_path / "net.pt").write_bytes(b"two!")
        (tmp_path / "other.pt").write_bytes(b"two!")

    plan = plan_after(reloads, rewrite_both)
    assert load.calls == ["net"] and [new.name for new in plan.loaded] == ["net"]
    assert plan_after(reloads, lambda: None) is None  # other's new file is read at its next load, not now


def test_a_change_a_reload_does_not_apply_is_logged_once_with_its_keys(tmp_path):
    shadowed = "shadow = 'twin'\nshadow_fraction = {}\n[models.twin]\nmodel = 'churn'\nversion = '9'\n"
    reloads, _, _, path = setup(tmp_path, "max_batch_size = 8\n" + ONE + shadowed.format(0.1))
    path.write_text("max_batch_size = 16\n" + ONE + shadowed.format(0.5))
    with capture_logs() as logs:
        plan_after(reloads, reloads.reload)
        plan_after(reloads, reloads.reload)  # read again, unchanged since: nothing more to say
    left = [entry for entry in logs if entry["event"] == "settings_left_until_restart"]
    assert [entry["keys"] for entry in left] == [["max_batch_size", "models.net.shadow"]]


def test_a_topic_or_batching_changed_by_sighup_loads_nothing_keeps_the_topic_served_and_is_logged(tmp_path):
    """The worker subscribes to its topics at start, and a model's batcher is built with it."""
    reloads, load, stats, path = setup(tmp_path, ONE + "topic = 'net-requests'\nmax_batch_size = 8\n",
                                       check=lambda old, new: "its version is the serving one's")
    path.write_text(ONE + "topic = 'other-requests'\nmax_batch_size = 16\ncanary = 'next'\ncanary_weight = 0.5\n"
                    "[models.next]\nmodel = 'churn'\nversion = '9'\n")
    with capture_logs() as logs:
        plan = plan_after(reloads, reloads.reload)
    assert load.calls == ["next"] and stats.reloads == {}
    net = plan.table.entries[0]
    assert (net.topic, net.canary_weight) == ("net-requests", 0.5)  # the canary switches; the topic stays
    left = [entry["keys"] for entry in logs if entry["event"] == "settings_left_until_restart"]
    assert left == [["models.net.topic", "models.net.batching"]]
