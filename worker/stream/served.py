"""The models a worker serves: each entry's runner and batcher, the routes to them, and new versions switched in.

A served version is keyed by its entry's name, and by ``name@N`` for the N-th
version switched in without a restart (worker/stream/reloads.py loads it). A
switch happens between two of the loop's steps: from then on new requests are
routed to the new version, while the requests already batched for the old one
(their route names its key) are scored by it; once it holds none and is not
scoring, the old version is let go. So no request is dropped, none is
answered twice, and each reply carries the version that really answered it.

Under a memory budget a model may be not loaded: its route says so, and the
requests for it wait until worker/stream/residency.py has loaded it (``add``)
or answers them; an idle model is let go to make room (``evict``). For the
loop's thread only, but ``resident``, which the reloads thread reads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import structlog

from worker.core.batcher import Batcher, request_batcher
from worker.core.errors import ConfigError
from worker.core.messages import Request
from worker.core.model_batchers import ModelBatchers
from worker.core.model_table import ModelEntry, ModelTable
from worker.core.routes import Arm, Route, Routes
from worker.core.sections import BatchingSettings
from worker.core.stats import ServedModel
from worker.ports import ModelRunner

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LoadedEntry:
    """A version of a model entry, loaded and warm: the ``entry`` as declared (None: the ``model`` setting's
    only model), its ``runner``, the ``version`` its replies carry, its ``batcher``, what the metrics say, and
    the inputs and outputs it declares (``contract``: worker/models/versions.py; None, none declared)."""

    entry: ModelEntry | None
    runner: ModelRunner
    version: str
    batcher: Batcher[Request]
    info: ServedModel
    contract: object = None

    @property
    def name(self) -> str:
        return self.entry.name if self.entry is not None else self.runner.name


class ServedModels:
    """``runners`` and ``batchers`` by key; ``routes`` say which key answers a request. The scorer is given
    ``runners`` itself: a version switched in is there before its first batch."""

    def __init__(self, table: ModelTable, loaded: Sequence[LoadedEntry], on_first_use: bool = False) -> None:
        """``loaded``: the table's models loaded at start; with ``on_first_use`` (a memory budget) the others are
        loaded when a request needs them, else there are none. Raises ConfigError for a canary of the same version
        as the model it splits."""
        self.table = table
        self.on_first_use = on_first_use
        self._live: dict[str, tuple[str, LoadedEntry]] = {one.name: (one.name, one) for one in loaded}
        self.runners: dict[str, ModelRunner] = {one.name: one.runner for one in loaded}
        self.batchers = ModelBatchers({one.name: one.batcher for one in loaded}, self._default_key())
        self.routes = _routes(table, self._live)
        self.resident: Mapping[str, LoadedEntry] = self.live()  # replaced whole on each change: another thread reads
        self._retiring: set[str] = set()
        self._switches = 0

    @classmethod
    def single(cls, runner: ModelRunner, batching: BatchingSettings) -> ServedModels:
        """One model, under its own name, answering every request that names no other."""
        info = ServedModel(runner.name, runner.name, runner.version, "", 0.0)
        loaded = LoadedEntry(None, runner, runner.version, request_batcher(batching, getattr(runner, "cost", None)),
                             info)
        return cls(ModelTable(), [loaded])

    def served(self) -> tuple[ServedModel, ...]:
        """What the metrics say of each version serving new requests (``entry``: its key)."""
        return tuple(replace(loaded.info, entry=key) for key, loaded in self._live.values())

    def live(self) -> dict[str, LoadedEntry]:
        """Each loaded model name's version serving new requests."""
        return {name: loaded for name, (_, loaded) in self._live.items()}

    def is_loaded(self, name: str) -> bool:
        return name in self._live

    def idle(self, name: str, scoring: str | None) -> bool:
        """Whether loaded model ``name`` holds no request and is not ``scoring`` (so it may be let go)."""
        key = self._live[name][0]
        return key != scoring and not self.batchers.pending_of(key)

    def add(self, loaded: LoadedEntry) -> None:
        """A model loaded on first use answers new requests from now on."""
        key = self._new_key(loaded.name)
        self._live[loaded.name] = (key, loaded)
        self.runners[key] = loaded.runner
        self.batchers.add_entry(key, loaded.batcher)
        self._changed()

    def evict(self, name: str) -> None:
        """Let go of idle model ``name`` (ServedModels.idle): its requests wait for its next load from now on."""
        key, _ = self._live.pop(name)
        del self.runners[key]
        self.batchers.remove_entry(key)
        self._changed()

    def switch(self, table: ModelTable, changed: Sequence[LoadedEntry]) -> None:
        """From now on, ``table``'s models with ``changed``'s versions answer new requests; an entry not in
        ``table`` takes none. Raises ConfigError (a canary of its split's version), and then nothing changed."""
        live = {name: held for name, held in self._live.items() if name in {e.name for e in table.entries}}
        pinned = table.pinned()
        for loaded in changed:
            if self.on_first_use and loaded.name not in live and loaded.name not in pinned:
                log.info("model_version_not_switched", model=loaded.name, version=loaded.version,
                         reason="let go meanwhile: its next load on first use reads its new files")
                continue
            self._switches += 1
            live[loaded.name] = (f"{loaded.name}@{self._switches}", loaded)
        routes = _routes(table, live)  # before any change: a refused plan leaves everything as it was
        for key, loaded in (held for held in live.values() if held[0] not in self.runners):
            self.runners[key] = loaded.runner
            self.batchers.add_entry(key, loaded.batcher)
        kept = {key for key, _ in live.values()}
        self._retiring |= {key for key, _ in self._live.values() if key not in kept}
        self._live, self.table = live, table
        self.routes.update(routes)
        self.batchers.default = self._default_key()
        self.resident = self.live()

    def retire_idle(self, scoring: str | None, keep: Collection[str] = ()) -> list[str]:
        """Let go of the old versions that hold no request and are not ``scoring`` or in ``keep`` (named by
        requests held for their claim); returns their keys."""
        idle = [key for key in self._retiring
                if key != scoring and key not in keep and not self.batchers.pending_of(key)]
        for key in idle:
            self._retiring.discard(key)
            del self.runners[key]
            self.batchers.remove_entry(key)
            log.info("model_version_retired", key=key)
        return idle

    def _new_key(self, name: str) -> str:
        """``name``, or ``name@N`` while an older version under ``name`` still answers what it holds."""
        if name not in self.runners:
            return name
        self._switches += 1
        return f"{name}@{self._switches}"

    def _default_key(self) -> str | None:
        """The key of the default model's version (None: the default is not loaded)."""
        if not self.table.entries:
            return next(iter(self._live.values()))[0]
        held = self._live.get(self.table.default)
        return held[0] if held is not None else None

    def _changed(self) -> None:
        self.routes.update(_routes(self.table, self._live))
        self.batchers.default = self._default_key()
        self.resident = self.live()


def routes_refusal(table: ModelTable, versions: Mapping[str, LoadedEntry]) -> str | None:
    """Why ``table`` cannot be served with these loaded ``versions`` by name (a canary whose version or declared
    inputs and outputs do not fit its model's), or None: the switch's own checks, made ahead of it."""
    try:
        _routes(table, {name: (name, loaded) for name, loaded in versions.items()})
    except ConfigError as exc:
        return str(exc)
    return None


def _routes(table: ModelTable, live: Mapping[str, tuple[str, LoadedEntry]]) -> Routes:
    """Each served name's arms: its live version, and its canary's when it has one; a model not loaded, one arm
    that says so. Raises ConfigError for a canary whose version is its split's (their replies could not be told
    apart)."""
    if not table.entries:
        ((key, only),) = live.values()
        return Routes.single(_route(key, only.name, only))
    arms: dict[str, list[Arm]] = {}
    for entry in table.entries:
        if entry.name not in live:
            arms[entry.name] = [Arm(Route(entry.name, entry.name, entry.version, _not_loaded, loaded=False), 1.0)]
            continue
        key, loaded = live[entry.name]
        route = _route(key, entry.name, loaded)
        if not entry.canary:
            arms[entry.name] = [Arm(route, 1.0)]
            continue
        where = f"{table.source}: " if table.source else ""
        if entry.canary not in live:
            raise ConfigError(f"{where}[models.{entry.name}]'s canary [models.{entry.canary}] is not loaded")
        canary_key, canary = live[entry.canary]
        if canary.version == loaded.version:
            raise ConfigError(f"{where}[models.{entry.name}] and its canary [models.{entry.canary}] are both version "
                              f"{loaded.version!r}: their replies could not be told apart; set version = \"...\" "
                              f"in [models.{entry.canary}]")
        if canary.contract != loaded.contract:  # its share of the requests would be refused, or answered unlike
            raise ConfigError(f"{where}[models.{entry.name}] cannot take [models.{entry.canary}] as its canary: "
                              f"their declared inputs and outputs differ ({loaded.contract} -> {canary.contract}), "
                              "and its clients send and read one kind: serve it under a model name of its own")
        arms[entry.name] = [Arm(route, 1.0 - entry.canary_weight),
                            Arm(_route(canary_key, entry.name, canary), entry.canary_weight)]
    return Routes(arms, table.default, table.topics())


def _route(key: str, name: str, loaded: LoadedEntry) -> Route:
    return Route(key, name, loaded.version, loaded.runner.prepare, read_plain=loaded.runner.read_plain)


def _not_loaded(inputs: object) -> object:
    raise AssertionError("a model not loaded prepares nothing: its requests wait for its load")
