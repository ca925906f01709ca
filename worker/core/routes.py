"""Which model answers a request: the one it names, or its topic's, or the default; a canary arm by its id.

A worker serves one or more model entries (worker/core/model_table.py), each
with its own runner and batcher. A request names the model it wants by its
``model`` field or header; one that names none goes to its topic's model, else
to the default. A name may be split between arms (a live entry and its canary)
by weight: the arm is picked by a hash of the request id, so a retry or a
duplicate of a request always lands on the arm that answered it first. A
request that names a ``model_version`` gets the arm of that version. Pure:
no I/O; built once at start, read for every request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

Prepare = Callable[[Any], Any]


class PlainReader(NamedTuple):
    """A model's reader of plain requests (a value of its id and inputs, nothing else), straight into its id and
    the model's item: ``decode`` reads a value into an object with ``id`` and ``inputs``, checked, or raises
    ``refused`` for any other value, which the wire contract's full path then decides (worker/core/wire.py);
    ``item`` makes the model's item of the inputs read (None: they are the item)."""

    decode: Callable[[bytes], Any]
    refused: type[Exception]
    item: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Route:
    """Where a request goes: the ``entry`` that scores it (its runner and batcher), and the ``model`` name and
    ``version`` its reply carries; ``prepare`` turns its JSON inputs into that entry's item. Not ``loaded``: the
    model loads on first use (worker/stream/residency.py); ``version`` is the declared one, or empty, and
    ``prepare`` runs once it is loaded. ``read_plain``: the model's reader of plain requests, when its declared
    inputs have one (worker/models/spec.py); the same reader for every model of the same inputs."""

    entry: str
    model: str
    version: str
    prepare: Prepare
    loaded: bool = True
    read_plain: PlainReader | None = None


class Plain(NamedTuple):
    """How a topic's plain requests are read: ``reader``, its model's; ``route``, the route of every one of them
    when the model has one arm (None: each is picked by its id)."""

    reader: PlainReader
    route: Route | None


@dataclass(frozen=True)
class Arm:
    """One way a model name is answered, and the share of its requests that go there (0 < weight <= 1)."""

    route: Route
    weight: float


class Routes:
    """The served model names, their arms, the default name and the topics with a model of their own."""

    def __init__(self, arms: Mapping[str, Sequence[Arm]], default: str,
                 by_topic: Mapping[str, str] | None = None) -> None:
        """``arms``: each served name's arms, the live one first, weights summing to 1. Raises ValueError
        for a default or topic model that is not served, or weights that do not sum to 1."""
        for name, split in arms.items():
            if not split or abs(sum(arm.weight for arm in split) - 1.0) > 1e-9:
                raise ValueError(f"the arms of model {name!r} must have weights summing to 1")
        by_topic = dict(by_topic or {})
        for named in (default, *by_topic.values()):
            if named not in arms:
                raise ValueError(f"model {named!r} is not served (served: {', '.join(arms)})")
        self._arms = {name: tuple(split) for name, split in arms.items()}
        self._default = default
        self._by_topic = by_topic
        self._plain: dict[str, Plain | None] = {}

    def update(self, other: Routes) -> None:
        """Route as ``other`` does from now on (a new configuration, or a new version switched in)."""
        self._arms, self._default, self._by_topic = other._arms, other._default, other._by_topic
        self._plain = {}

    def plain(self, topic: str) -> Plain | None:
        """How plain requests (no model named) from ``topic`` are read: its model's reader, when every arm of it
        is loaded and reads them alike, and the arm when it has only one; else None."""
        if topic not in self._plain:
            split = self._arms[self._by_topic.get(topic, self._default)]
            readers = {arm.route.read_plain for arm in split}
            reader = next(iter(readers)) if len(readers) == 1 and all(arm.route.loaded for arm in split) else None
            self._plain[topic] = Plain(reader, split[0].route if len(split) == 1 else None) if reader else None
        return self._plain[topic]

    @classmethod
    def single(cls, route: Route) -> Routes:
        """One model, answering every request that names no other."""
        return cls({route.model: [Arm(route, 1.0)]}, route.model)

    @property
    def default(self) -> Route:
        """The default model's live arm: whose name and version an unreadable request's error reply carries."""
        return self._arms[self._default][0].route

    def live(self) -> dict[str, Route]:
        """Each served name's live arm (its first)."""
        return {name: split[0].route for name, split in self._arms.items()}

    def entries(self) -> list[str]:
        """Every entry an arm routes to, each once, in the order served."""
        return list(dict.fromkeys(arm.route.entry for split in self._arms.values() for arm in split))

    def pick(self, topic: str, model: str | None, version: str | None, request_id: str) -> Route | None:
        """The route of a request from ``topic`` that names ``model`` and ``version`` (None: not named);
        None when no served model (or no arm of it) has that name (or version)."""
        name = model if model is not None else self._by_topic.get(topic, self._default)
        split = self._arms.get(name)
        if split is None:
            return None
        if version is not None:  # a model not loaded, of no declared version: its version is checked once loaded
            return next((arm.route for arm in split
                         if arm.route.version == version or not (arm.route.loaded or arm.route.version)), None)
        if len(split) == 1:
            return split[0].route
        point = arm_point(request_id)
        for arm in split:
            point -= arm.weight
            if point < 0:
                return arm.route
        return split[-1].route  # the weights' rounding left the point past the last arm

    def reply_names(self) -> list[tuple[str, str]]:
        """Every (model, version) a reply of a scored request may carry."""
        return [(arm.route.model, arm.route.version) for split in self._arms.values() for arm in split
                if arm.route.loaded]

    def served(self) -> str:
        """The served names and their versions, for an ``unknown_model`` reply: ``churn (1, 2), fraud (3)``."""
        return ", ".join(f"{name} ({', '.join(_shown(arm.route) for arm in split)})"
                         for name, split in self._arms.items())


def _shown(route: Route) -> str:
    if route.loaded:
        return route.version
    return f"{route.version}, loaded on first use" if route.version else "loaded on first use"


def arm_point(request_id: str) -> float:
    """Where a request id falls in [0, 1): the same on every worker and every run (not Python's salted hash)."""
    digest = hashlib.blake2b(request_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
