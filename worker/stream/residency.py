"""Models loaded on first use under a memory budget, and the requests that wait for them.

With ``max_loaded_models`` or ``model_memory_mb`` set, a worker starts with
only its pinned models loaded (canary splits and shadow pairs:
worker/core/model_table.py). A request for a model not loaded is decoded and
claimed as any other, but its inputs are kept as they came
(messages.Unprepared): ``park`` holds it until its model is there. Each step,
on the loop's thread, ``step``:

1. switches in a finished load (stream/served.py): the requests waiting for it
   are prepared by it and batched, or refused as admission refuses (their
   claims released, so a corrected retry is scored). A load that failed
   answers them ``model_unavailable``, and so every request for that model
   for LOAD_RETRY_S: the next one after that tries again;
2. answers ``deadline_exceeded`` to a waiting request whose deadline passed
   (one without a deadline waits for the load, which ends, loaded or failed);
3. lets go of idle models, the least recently used first, while those loaded
   are over the budget (a first load's size is known only once it is in);
4. starts loading the model that has waited longest, on the loader's thread,
   once letting go of idle models makes room for it (core/model_cache.py).
   A model holding requests, or scoring, is never let go: when no idle one
   can go, the load waits for one to be.

One load at a time: a load shares the cores and the device with scoring.
Nothing is dropped: a waiting request holds its offset back from commits like
a batched one, and goes to the partition's next owner if the partition leaves
(``drop``) or the worker stops first. The dedup lease (dedup_lease_ms) must
outlast a load, as it outlasts a batch's wait: a load longer than that lets
another worker claim the request again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import structlog
from msgspec import structs

from worker.core.clock import Clock
from worker.core.errors import InvalidInput
from worker.core.messages import Request, Unprepared
from worker.core.model_cache import ModelCache
from worker.core.model_table import ModelEntry
from worker.core.offsets import TopicPartition as TP
from worker.core.stats import WorkerStats
from worker.core.wire import ERR_MODEL_UNAVAILABLE, ERR_UNKNOWN_MODEL, prepared
from worker.ports import Outcome
from worker.stream.replies import EXPIRED, Responder
from worker.stream.served import LoadedEntry, ServedModels

log = structlog.get_logger(__name__)

LOAD_RETRY_S = 30.0  # after a failed load, requests for that model are answered at once for this long
MIB = 1024 * 1024


@dataclass(frozen=True)
class ModelLoads:
    """What loading on first use needs (the composition root has it): the budget's ``cache`` of what is loaded,
    ``load``, which loads and warms an entry (raising what loading raises) on the loader's thread, and
    ``free_memory``, which gives back to the device what models let go held."""

    cache: ModelCache
    load: Callable[[ModelEntry], LoadedEntry]
    free_memory: Callable[[], None]


@dataclass(frozen=True)
class _Load:
    name: str
    future: Future[LoadedEntry]


class Residency:
    def __init__(self, models: ServedModels, loads: ModelLoads, responder: Responder, stats: WorkerStats,
                 clock: Clock) -> None:
        """``responder`` answers the waiting requests that cannot be scored."""
        self._models, self._cache, self._loads = models, loads.cache, loads
        self._responder, self._stats, self._clock = responder, stats, clock
        self._ready: list[Request] = []  # prepared by their model, now loaded, for the loop to batch
        self._waiting: dict[str, list[Request]] = {}  # by model name, in the order they first waited
        self._loading: _Load | None = None
        self._failed: dict[str, tuple[float, str]] = {}  # model name: when its load failed, and why
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="streamscore-loads")

    @property
    def waiting(self) -> int:
        """Requests waiting for their model's load."""
        return sum(len(requests) for requests in self._waiting.values())

    def park(self, request: Request) -> None:
        """Hold a claimed request whose inputs wait for its model (``request.item`` is Unprepared)."""
        name = _model_of(request)
        if self._models.is_loaded(name):  # loaded while its claim waited on the dedup store
            self._release(request)
            return
        failed = self._failed.get(name)
        if failed is not None and self._clock.monotonic() - failed[0] < LOAD_RETRY_S:
            self._unavailable(request, failed[1])
            return
        self._failed.pop(name, None)
        self._waiting.setdefault(name, []).append(request)
        self._publish()

    def touch(self, name: str) -> None:
        """A batch of model ``name`` goes to be scored: it is the most recently used."""
        self._cache.touch(name)

    def step(self, scoring: str | None, claiming: bool, held: Collection[str] = ()) -> list[Request]:
        """The four steps above; returns the requests prepared by their model, now loaded, for the loop to batch
        (stream/admission.py). ``scoring``: the key of the batch being scored; ``claiming``: requests wait on the
        dedup store (their routes name the models loaded now: none is let go meanwhile); ``held``: the models
        that requests held for another record of their id name (those stay; the others may go)."""
        self._take_load()
        self._expire()
        idle = self._idle(scoring, claiming, held)
        victims, _ = self._cache.victims(idle)
        self._evict(victims)
        self._start_load(idle)
        ready, self._ready = self._ready, []
        return ready

    def drop(self, partitions: set[TP]) -> int:
        """Forget the waiting requests of partitions we no longer own (their next owner has them); how many."""
        dropped = 0
        for name, requests in self._waiting.items():
            kept = [r for r in requests if (r.position.topic, r.position.partition) not in partitions]
            dropped += len(requests) - len(kept)
            self._waiting[name] = kept
        self._waiting = {name: requests for name, requests in self._waiting.items() if requests}
        self._publish()
        return dropped

    def close(self) -> None:
        """Stop loading: a load under way finishes on its thread and is dropped."""
        self._loader.shutdown(wait=False, cancel_futures=True)

    def _take_load(self) -> None:
        loading = self._loading
        if loading is None or not loading.future.done():
            return
        self._loading = None
        try:
            loaded = loading.future.result()
        except Exception as exc:  # the user's model code may raise anything while it loads
            self._load_failed(loading.name, f"{type(exc).__name__}: {exc}")
            return
        size = loaded.info.memory_bytes
        if self._cache.too_large(size):
            self._load_failed(loading.name, f"its parameters and buffers take {size / MIB:.1f} MiB, more than "
                                            f"model_memory_mb={self._cache.max_bytes / MIB:g} leaves beside the "
                                            "models that stay loaded")
            return
        if loading.name not in {entry.name for entry in self._models.table.entries}:
            log.info("model_load_dropped", model=loading.name, reason="no longer in the configuration file")
            return
        self._models.add(loaded)
        self._cache.add(loading.name, size)
        self._stats.serve(self._models.served(), self._models.routes.reply_names())
        self._stats.record_model_load(loading.name, "loaded")
        log.info("model_loaded_on_first_use", model=loading.name, version=loaded.version,
                 load_s=round(loaded.info.load_s, 2), memory_mib=round(size / MIB, 1),
                 waiting=len(self._waiting.get(loading.name, ())))
        for request in self._waiting.pop(loading.name, []):
            self._release(request)
        self._publish()

    def _release(self, request: Request) -> None:
        """Prepare a waiting request with its model, now loaded, and batch it (or refuse it)."""
        assert isinstance(request.item, Unprepared) and request.route is not None
        asked = request.item.version
        route = self._models.routes.pick(request.position.topic, request.route.model, asked, request.id)
        if route is None or not route.loaded:
            self._responder.answer(request, "error", Outcome(
                None, ERR_UNKNOWN_MODEL, f"this worker does not serve model {request.route.model!r} version "
                                         f"{asked!r}; served: {self._models.routes.served()}"))
            return
        try:
            item = prepared(route.prepare, request.item.inputs)
        except InvalidInput as exc:
            self._responder.answer(structs.replace(request, route=route), "error", Outcome(None, exc.code, exc.message))
            return
        self._ready.append(structs.replace(request, item=item, route=route))

    def _load_failed(self, name: str, why: str) -> None:
        log.warning("model_load_failed", model=name, reason=why, retry_after_s=LOAD_RETRY_S,
                    consequence="its waiting requests are answered model_unavailable")
        self._stats.record_model_load(name, "failed")
        self._failed[name] = (self._clock.monotonic(), why)
        for request in self._waiting.pop(name, []):
            self._unavailable(request, why)
        self._publish()

    def _unavailable(self, request: Request, why: str) -> None:
        self._responder.answer(request, "error", Outcome(
            None, ERR_MODEL_UNAVAILABLE, f"model {_model_of(request)!r} did not load ({why}); it is tried again "
                                         f"on a request after {LOAD_RETRY_S:g} s"))

    def _expire(self) -> None:
        now_ms = self._clock.wall_ms()
        for name, requests in self._waiting.items():
            late = [r for r in requests if r.deadline_ms is not None and r.deadline_ms <= now_ms]
            for request in late:
                self._responder.answer(request, "expired", EXPIRED)
            if late:
                self._waiting[name] = [r for r in requests if r not in late]
        self._waiting = {name: requests for name, requests in self._waiting.items() if requests}
        self._publish()

    def _idle(self, scoring: str | None, claiming: bool, held: Collection[str]) -> Callable[[str], bool]:
        """Whether a loaded model may be let go: no request waits on the dedup store, none held names it, and
        it is not scoring and holds none, batched or just prepared for the loop to batch."""
        ready = {_model_of(request) for request in self._ready}
        return lambda name: (not claiming and name not in held and name not in ready
                             and self._models.idle(name, scoring))

    def _evict(self, names: list[str]) -> None:
        for name in names:
            self._models.evict(name)
            self._cache.remove(name)
            self._stats.record_model_load(name, "let_go")
            log.info("model_let_go", model=name, reason="the least recently used idle model, to keep the budget",
                     loaded=self._cache.loaded, loaded_mib=round(self._cache.loaded_bytes / MIB, 1))
        if names:
            self._stats.serve(self._models.served(), self._models.routes.reply_names())
            self._loads.free_memory()

    def _start_load(self, idle: Callable[[str], bool]) -> None:
        if self._loading is not None or not self._waiting:
            return
        name = next(iter(self._waiting))
        victims, room = self._cache.victims(idle, self._cache.size_of(name), 1)
        if not room:
            return  # every model that would have to go is busy: try again next step
        self._evict(victims)
        entry = self._models.table.entry(name)
        log.info("model_loading_on_first_use", model=name, waiting=len(self._waiting[name]))
        self._loading = _Load(name, self._loader.submit(self._loads.load, entry))

    def _publish(self) -> None:
        self._stats.waiting_for_model = {name: len(requests) for name, requests in self._waiting.items()}


def _model_of(request: Request) -> str:
    assert request.route is not None  # every request of a table's model has its route
    return request.route.model
