"""New model versions without a restart: loaded and checked on a thread of their own, switched in by the loop.

Two things start a reload. ``SIGHUP`` (``reload()``) re-reads the configuration
file: an entry that is new or whose model or version keys changed is loaded
again, one that is gone stops taking requests, and a changed canary
(``canary``, ``canary_weight``) or ``default_model`` takes effect with nothing
loaded (the file's other settings, and a model's shadow, topic and batching,
need a restart: a change to them is logged, ``settings_left_until_restart``,
and left). And every ``watch_s`` seconds the files an entry is made of (its
``.pt2``/TorchScript file, ``model_config``, ``weights``) are looked at: an
entry whose file changed is loaded again.
Under a memory budget only the models loaded now are loaded again: one not
loaded reads its new files at its next load on first use (stream/residency.py).

A new version is loaded, warmed up and checked (``check``: its declared inputs
and outputs are the old one's, a sample batch scores, its version differs) off
the loop's thread; a version that fails is refused with a log line and a
metric, and the old one keeps serving. What passed waits in ``take()`` for the
loop, which switches it in between two steps (stream/served.py).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

import structlog

from worker.core.errors import ConfigError, WorkerError
from worker.core.model_table import (
    BATCHING_KEYS,
    FILE_SUFFIXES,
    MODEL_KEYS,
    ConfigFile,
    ModelEntry,
    ModelTable,
    read_config_file,
)
from worker.core.stats import WorkerStats
from worker.stream.served import LoadedEntry, ServedModels, routes_refusal

log = structlog.get_logger(__name__)

Stamp = tuple[tuple[str, int, int], ...]  # (path, mtime_ns, size) of each file an entry is made of


class Unchanged(Enum):
    UNCHANGED = "unchanged"


UNCHANGED = Unchanged.UNCHANGED  # a reload whose files hold the version serving


@dataclass(frozen=True)
class Plan:
    """What to serve from now on: the table, and the versions loaded for it (the others stay as they are)."""

    table: ModelTable
    loaded: tuple[LoadedEntry, ...]


class Reloads:
    def __init__(self, table: ModelTable, resident: Callable[[], Mapping[str, LoadedEntry]],
                 load: Callable[[ModelEntry], LoadedEntry], check: Callable[[LoadedEntry, LoadedEntry], str | None],
                 stats: WorkerStats, watch_s: float, on_first_use: bool = False) -> None:
        """``table``: as served now, read from its ``source`` file; ``resident``: each loaded model's version
        serving now (safe to call from this thread); ``load`` loads and warms an entry (raising what loading
        raises), ``check`` says why a new version may not replace an old one (None: it may); ``watch_s``: how
        often the entries' files are looked at (0: never); ``on_first_use``: models not pinned load on first use
        (a memory budget), so only those loaded now are loaded again."""
        self._table = table
        self._file = _read_or(table)  # what a change is told against: the file as the worker started with it
        self._resident = resident
        self._on_first_use = on_first_use
        self._stamps = {name: stamp(entry) for name, entry in _entries(table).items()}
        self._load, self._check, self._stats, self._watch_s = load, check, stats, watch_s
        self._asked = threading.Event()
        self._closed = threading.Event()
        self._plans: queue.SimpleQueue[Plan] = queue.SimpleQueue()
        # What was refused of each model, as it was then (its keys and files): not tried again until it changes,
        # or a SIGHUP asks
        self._refused: dict[str, tuple[tuple[object, ...], Stamp]] = {}
        self._thread = threading.Thread(target=self._run, name="streamscore-reloads", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def reload(self) -> None:
        """Re-read the configuration file soon (SIGHUP). Safe from a signal handler."""
        self._asked.set()

    def take(self) -> Plan | None:
        """The next plan to switch to, if one is ready. Never blocks."""
        try:
            return self._plans.get_nowait()
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop looking; a load under way finishes on its daemon thread and is dropped."""
        self._closed.set()
        self._asked.set()

    def _run(self) -> None:
        while not self._closed.is_set():
            asked = self._asked.wait(self._watch_s or None)
            if self._closed.is_set():
                return
            self._asked.clear()
            try:
                self._plan(reread=asked)
            except Exception:  # a bug here must not end reloads for good: say so, and look again next time
                log.exception("model_reload_failed")

    def _plan(self, reread: bool) -> None:
        table = self._table
        if reread:
            try:
                file = read_config_file(self._table.source)
            except WorkerError as exc:
                log.warning("model_reload_refused", reason=str(exc), serving="the models as they were")
                return
            left = left_until_restart(self._file, file) if self._file is not None else []
            if left:
                log.warning("settings_left_until_restart", keys=left,
                            detail="a SIGHUP loads models and switches canaries and the default model; these need "
                                   "a restart (a model's batching: its next load)")
            self._file, table = file, topics_kept(file.models, self._table)
        entries, before = _entries(table), _entries(self._table)
        stamps = {name: stamp(entry) for name, entry in entries.items()}
        changed = []
        for name, entry in entries.items():
            if name in before and made_of(before[name]) == made_of(entry) and stamps[name] == self._stamps.get(name):
                self._refused.pop(name, None)  # as it serves (put back after a refusal, say): nothing to load
            elif reread or self._refused.get(name) != (made_of(entry), stamps[name]):
                changed.append(entry)  # a version refused as it is now is tried again by a SIGHUP only
        if not changed and table == self._table:
            return
        resident, pinned = self._resident(), table.pinned()
        loaded, refused = [], set()
        for entry in changed:
            if self._on_first_use and entry.name not in resident and entry.name not in pinned:
                continue  # not loaded now: its next load on first use reads it as it is
            new = self._loaded(entry, resident.get(entry.name))
            if new is UNCHANGED:
                continue  # its file was written again as it was (a put-back): what serves is what it holds
            if new is None and entry.name not in resident:
                log.warning("model_reload_refused", reason=f"the new model {entry.name!r} did not load",
                            serving="the models as they were")
                return  # the table would route to a model that is not there: keep the old one whole
            if new is None:
                self._refused[entry.name] = (made_of(entry), stamps[entry.name])
                refused.add(entry.name)
            else:
                loaded.append(new)
        # What serves from now on: a refused entry's version before it, so that the next change (its file put
        # back, say) is told against what serves, not against what was refused.
        served = replace(table, entries=tuple(before[e.name] if e.name in refused else e for e in table.entries))
        unfit = routes_refusal(served, {**resident, **{new.name: new for new in loaded}})
        if unfit is not None:  # checked here, not only by the switch: this thread must not take it for served
            log.warning("model_reload_refused", reason=unfit, serving="the models as they were")
            return
        same_table = served == self._table
        self._table = served
        self._stamps = {name: self._stamps[name] if name in refused else at for name, at in stamps.items()}
        if loaded or not same_table:
            self._plans.put(Plan(served, tuple(loaded)))

    def _loaded(self, entry: ModelEntry, old: LoadedEntry | None) -> LoadedEntry | None | Unchanged:
        """The new version, None when refused, UNCHANGED when its files hold what serves: no version given, and
        the one made of its content is the serving one's (a file written again as it was)."""
        log.info("model_reloading", model=entry.name)
        self._refused.pop(entry.name, None)
        try:
            new = self._load(entry)
        except Exception as exc:  # the user's model code may raise anything while it loads
            self._refuse(entry.name, f"it did not load: {type(exc).__name__}: {exc}")
            return None
        if old is not None and not entry.version and new.version == old.version:
            log.info("model_unchanged", model=entry.name, version=new.version,
                     detail="its files were written again as they were: the version serving stays")
            return UNCHANGED
        reason = self._check(old, new) if old is not None else None
        if reason is not None:
            self._refuse(entry.name, reason)
            return None
        return new

    def _refuse(self, name: str, reason: str) -> None:
        log.warning("model_version_refused", model=name, reason=reason, serving="the version before")
        self._stats.record_refusal(name)


def made_of(entry: ModelEntry) -> tuple[object, ...]:
    """What an entry's loaded version is built from: its model keys and its version. A change to its other keys
    loads nothing (a new load of the same files would be refused, its version being the serving one's): its
    ``canary`` and weight switch with the table; its batching, ``topic`` and ``shadow`` wait
    (``left_until_restart``)."""
    return _keys(entry, MODEL_KEYS), entry.version


def _keys(entry: ModelEntry, keys: tuple[str, ...]) -> tuple[tuple[str, object], ...]:
    return tuple((key, value) for key, value in entry.overrides if key in keys)


def topics_kept(table: ModelTable, served: ModelTable) -> ModelTable:
    """``table`` with each model served now keeping the topic it has: the worker subscribes to its topics at
    start, so a new one would not be consumed, and an old one's requests would lose their model."""
    topics = {entry.name: entry.topic for entry in served.entries}
    kept = tuple(replace(entry, topic=topics[entry.name]) if entry.name in topics else entry
                 for entry in table.entries)
    return replace(table, entries=kept) if kept != table.entries else table


def left_until_restart(before: ConfigFile, after: ConfigFile) -> list[str]:
    """The keys of the file whose change a reload does not apply: its settings, its client properties, each
    model's shadow (the shadow thread's candidates are loaded once, at start) and topic (subscribed at start),
    and the batching of a model loaded before (its batcher is built with it)."""
    keys = sorted(key for key in before.values.keys() | after.values.keys()
                  if before.values.get(key) != after.values.get(key))
    if before.properties != after.properties:
        keys.append("kafka")
    was = {entry.name: entry for entry in before.models.entries}
    for entry in after.models.entries:
        old = was.get(entry.name, ModelEntry(entry.name))
        if (entry.shadow, entry.shadow_fraction) != (old.shadow, old.shadow_fraction):
            keys.append(f"models.{entry.name}.shadow")
        if entry.topic != old.topic:
            keys.append(f"models.{entry.name}.topic")
        if entry.name in was and _keys(entry, BATCHING_KEYS) != _keys(old, BATCHING_KEYS):
            keys.append(f"models.{entry.name}.batching")
    return keys


def _read_or(table: ModelTable) -> ConfigFile | None:
    """The table's file as it reads now; None when it cannot be read meanwhile (a change is then told from the
    next read on)."""
    try:
        return read_config_file(table.source)
    except WorkerError:
        return None


def _entries(table: ModelTable) -> dict[str, ModelEntry]:
    return {entry.name: entry for entry in table.entries}


def stamp(entry: ModelEntry) -> Stamp:
    """When and how large the files the entry is made of were last written (a file not there counts as such)."""
    files = [value for key, value in entry.overrides
             if key in ("model_config", "weights") and value or key == "model" and str(value).endswith(FILE_SUFFIXES)]
    stamps = []
    for path in files:
        try:
            status = os.stat(path)
        except OSError:
            stamps.append((path, -1, -1))
            continue
        stamps.append((path, status.st_mtime_ns, status.st_size))
    return tuple(stamps)


def switch_in(plan: Plan, models: ServedModels, stats: WorkerStats) -> None:
    """Between two steps: switch ``models`` to ``plan``; one they refuse is logged, and they stay as they were."""
    try:
        models.switch(plan.table, plan.loaded)
    except ConfigError as exc:
        log.warning("model_reload_refused", reason=str(exc), serving="the models as they were")
        return
    stats.serve(models.served(), models.routes.reply_names())
    for loaded in plan.loaded:
        stats.record_switch(loaded.name)
        log.info("model_version_switched", model=loaded.name, version=loaded.version)
    log.info("models_switched", served=models.routes.served())
