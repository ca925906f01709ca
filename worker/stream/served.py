"""The models a worker serves: each entry's runner and batcher, the routes to them, and new versions switched in.

A served version is keyed by its entry's name, and by ``name@N`` for the N-th
version switched in without a restart (worker/stream/reloads.py loads it). A
switch happens between two of the loop's steps: from then on new requests are
routed to the new version, while the requests already batched for the old one
(their route names its key) are scored by it; once it holds none and is not
scoring, the old version is let go. So no request is dropped, none is
answered twice, and each reply carries the version that really answered it.
For the loop's thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    only model), its ``runner``, the ``version`` its replies carry, its ``batcher``, and what the metrics say."""

    entry: ModelEntry | None
    runner: ModelRunner
    version: str
    batcher: Batcher[Request]
    info: ServedModel

    @property
    def name(self) -> str:
        return self.entry.name if self.entry is not None else self.runner.name


class ServedModels:
    """``runners`` and ``batchers`` by key; ``routes`` say which key answers a request. The scorer is given
    ``runners`` itself: a version switched in is there before its first batch."""

    def __init__(self, table: ModelTable, loaded: Sequence[LoadedEntry]) -> None:
        """Raises ConfigError for a canary of the same version as the model it splits."""
        self.table = table
        self._live: dict[str, tuple[str, LoadedEntry]] = {one.name: (one.name, one) for one in loaded}
        self.runners: dict[str, ModelRunner] = {one.name: one.runner for one in loaded}
        default = table.default if table.entries else loaded[0].name
        self.batchers = ModelBatchers({one.name: one.batcher for one in loaded}, default)
        self.routes = _routes(table, self._live)
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
        """Each model name's version serving new requests."""
        return {name: loaded for name, (_, loaded) in self._live.items()}

    def switch(self, table: ModelTable, changed: Sequence[LoadedEntry]) -> None:
        """From now on, ``table``'s models with ``changed``'s versions answer new requests; an entry not in
        ``table`` takes none. Raises ConfigError (a canary of its split's version), and then nothing changed."""
        live = {name: held for name, held in self._live.items() if name in {e.name for e in table.entries}}
        for loaded in changed:
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
        self.batchers.default = live[table.default][0]

    def retire_idle(self, scoring: str | None) -> list[str]:
        """Let go of the old versions that hold no request and are not ``scoring``; returns their keys."""
        idle = [key for key in self._retiring if key != scoring and not self.batchers.pending_of(key)]
        for key in idle:
            self._retiring.discard(key)
            del self.runners[key]
            self.batchers.remove_entry(key)
            log.info("model_version_retired", key=key)
        return idle


def _routes(table: ModelTable, live: Mapping[str, tuple[str, LoadedEntry]]) -> Routes:
    """Each served name's arms: its live version, and its canary's when it has one. Raises ConfigError for a
    canary whose version is its split's (their replies could not be told apart)."""
    if not table.entries:
        ((key, only),) = live.values()
        return Routes.single(Route(key, only.name, only.version, only.runner.prepare))
    arms: dict[str, list[Arm]] = {}
    for entry in table.entries:
        key, loaded = live[entry.name]
        route = Route(key, entry.name, loaded.version, loaded.runner.prepare)
        if not entry.canary:
            arms[entry.name] = [Arm(route, 1.0)]
            continue
        canary_key, canary = live[entry.canary]
        if canary.version == loaded.version:
            raise ConfigError(f"[models.{entry.name}] and its canary [models.{entry.canary}] are both version "
                              f"{loaded.version!r}: their replies could not be told apart; set version = \"...\" "
                              f"in [models.{entry.canary}]")
        arms[entry.name] = [Arm(route, 1.0 - entry.canary_weight),
                            Arm(Route(canary_key, entry.name, canary.version, canary.runner.prepare),
                                entry.canary_weight)]
    return Routes(arms, table.default, table.topics())
