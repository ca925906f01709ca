"""Which models stay in memory under a budget: the least recently used idle one is let go first. Pure: no I/O.

A worker with a memory budget (``max_loaded_models``, ``model_memory_mb``) loads
its models on first use (worker/stream/residency.py). Each loaded model is noted
with its size (the bytes of its parameters and buffers, measured once loaded)
and touched whenever a request for it arrives. To make room, the models touched
longest ago that are idle (they hold no request and are not scoring) are let go;
a busy one never is, so a model's batch is never lost to another's load.
Pinned models (of a canary split or a shadow pair) count against the budget and
are never let go. Not thread-safe.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable


class ModelCache:
    def __init__(self, max_models: int = 0, max_bytes: int = 0, pinned: Iterable[str] = ()) -> None:
        """``max_models``, ``max_bytes``: the budget (0: no limit of that kind); ``pinned``: never let go."""
        self.max_models, self.max_bytes = max_models, max_bytes
        self._pinned = frozenset(pinned)
        self._sizes: OrderedDict[str, int] = OrderedDict()  # loaded models, the least recently used first
        self._known: dict[str, int] = {}  # the size of every model loaded once, let go since or not

    @property
    def loaded(self) -> list[str]:
        """The loaded models, the least recently used first."""
        return list(self._sizes)

    @property
    def loaded_bytes(self) -> int:
        return sum(self._sizes.values())

    def size_of(self, name: str) -> int:
        """The size of ``name`` when it was last loaded (0: never loaded yet, so not known)."""
        return self._known.get(name, 0)

    def add(self, name: str, size_bytes: int) -> None:
        """``name`` is loaded (the most recently used now)."""
        self._sizes[name] = self._known[name] = size_bytes
        self._sizes.move_to_end(name)

    def remove(self, name: str) -> None:
        self._sizes.pop(name, None)

    def touch(self, name: str) -> None:
        """A request for ``name`` arrived."""
        if name in self._sizes:
            self._sizes.move_to_end(name)

    def too_large(self, size_bytes: int) -> bool:
        """Whether a model this large could never fit beside the pinned ones, whatever else is let go."""
        pinned = sum(size for name, size in self._sizes.items() if name in self._pinned)
        return bool(self.max_bytes) and pinned + size_bytes > self.max_bytes

    def victims(self, idle: Callable[[str], bool], incoming_bytes: int = 0,
                incoming: int = 0) -> tuple[list[str], bool]:
        """The idle models to let go, least recently used first, so that ``incoming`` more models of
        ``incoming_bytes`` in all fit beside the rest (0 and 0: so that the loaded ones fit); and whether that is
        enough (when not, the list holds every idle model that would help: the rest are busy for now)."""
        count, size = len(self._sizes) + incoming, self.loaded_bytes + incoming_bytes
        chosen: list[str] = []
        for name, held in self._sizes.items():
            if self._fits(count, size):
                break
            if name in self._pinned or not idle(name):
                continue
            chosen.append(name)
            count, size = count - 1, size - held
        return chosen, self._fits(count, size)

    def _fits(self, count: int, size: int) -> bool:
        return (not self.max_models or count <= self.max_models) and (not self.max_bytes or size <= self.max_bytes)
