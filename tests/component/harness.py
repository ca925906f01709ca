"""The Worker wired to fakes, for component tests: one harness, set up per test by its arguments.

Every part is a public attribute, so a test drives the source, the clock and
the sink directly and reads what landed: ``source`` (FakeSource), ``sink``
(FakeSink, or FakeTransactionalSink with ``exactly_once``), ``dedup``
(InMemoryDedupStore), ``clock`` (FakeClock, shared by all of them),
``runner`` and ``worker``. A test that swaps a part (a flaky dedup store, a
runner with a cost) builds the worker again with ``build_worker``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.component.fakes import FakeExactlyOnce, FakeSink, FakeSource, FakeTransactionalSink
from tests.fakes import FakeClock
from worker.core.clock import Clock
from worker.core.settings import Settings
from worker.core.stats import WorkerStats
from worker.dedup.memory import InMemoryDedupStore
from worker.models import load_model
from worker.models.runner import TorchRunner
from worker.ports import DedupStore, ModelRunner, Scorer
from worker.stream.json_requests import JsonRequests
from worker.stream.loop import Worker
from worker.stream.parts import Extras, assemble
from worker.stream.residency import ModelLoads
from worker.stream.served import ServedModels

INPUTS = [0.25] * 16  # a valid input row for the churn model

ScorerFactory = Callable[[ModelRunner, Clock], Scorer]


class Harness:
    """A Worker over FakeSource, a fake sink and in-memory dedup, on one FakeClock.

    ``exactly_once``: delivery=exactly-once, with FakeTransactionalSink and
    FakeExactlyOnce (as ``transactions``). ``runner``: the model runner
    (default: the churn model on CPU, batches of ``max_batch_size``).
    ``scorer``: builds the Scorer from the runner and the clock (default: the
    Worker's inline one; e.g. ``ThreadScorer``). ``settings``: Settings fields
    to override.
    """

    def __init__(self, *, exactly_once: bool = False, runner: ModelRunner | None = None,
                 scorer: ScorerFactory | None = None, models: ServedModels | None = None, reloads: Any = None,
                 loads: ModelLoads | None = None, **settings: Any) -> None:
        self.clock = FakeClock()
        if exactly_once:
            settings = {"delivery": "exactly-once", **settings}
        self.settings = Settings.from_values(kafka_bootstrap_servers="fake:1", redis_url="memory://",
                                             requests_topic="requests", **settings).with_derived_defaults()
        self.source = FakeSource(self.clock)
        self.sink: FakeSink = FakeSink()
        self.transactions: FakeExactlyOnce | None = None
        if exactly_once:
            self.sink = sink = FakeTransactionalSink()
            self.transactions = FakeExactlyOnce(sink, self.source)
        self.dedup = InMemoryDedupStore(self.clock)
        self.runner = runner or TorchRunner(load_model("churn"), "cpu", self.settings.batching.max_batch_size)
        self._scorer = scorer
        self.models, self.reloads = models, reloads  # several models, and new versions of them (default: runner's)
        self.loads = loads  # models loaded on first use (stream/residency.py)
        self.worker = self.build_worker()

    def build_worker(self, dedup: DedupStore | None = None) -> Worker:
        """A Worker over this harness's parts as they are now (``settings``, ``runner``), and ``dedup`` if given."""
        s = self.settings
        models = self.models or ServedModels.single(self.runner, s.batching)
        scorer = self._scorer(models.runners, self.clock) if self._scorer else None
        stats = WorkerStats()
        parts = assemble(self.source, self.sink, dedup or self.dedup, models,
                         JsonRequests(models.routes, s.batching.max_record_bytes), self.clock, stats, s.kafka,
                         s.delivery, s.operations,
                         Extras(transactions=self.transactions, scorer=scorer, reloads=self.reloads, loads=self.loads))
        return Worker(parts, self.clock, stats, kafka=s.kafka, batching=s.batching, operations=s.operations)

    def steps(self, count: int = 5) -> None:
        for _ in range(count):
            self.worker.step()

    def replies(self) -> list[dict]:
        """The replies on the default reply topic, in the order they were sent (committed, with exactly_once)."""
        return [s.json() for s in self.sink.to("requests.replies")]

    def reply_ids(self) -> list[str]:
        return sorted(reply["id"] for reply in self.replies())
