"""The models a worker serves: each entry's runner and batcher, and the routes from requests to them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from worker.core.batcher import request_batcher
from worker.core.model_batchers import ModelBatchers
from worker.core.routes import Route, Routes
from worker.core.sections import BatchingSettings
from worker.ports import ModelRunner


@dataclass(frozen=True)
class ServedModels:
    """``runners`` and ``batchers`` by entry; ``routes`` say which entry answers a request."""

    runners: Mapping[str, ModelRunner]
    batchers: ModelBatchers
    routes: Routes

    @classmethod
    def single(cls, runner: ModelRunner, batching: BatchingSettings) -> ServedModels:
        """One model, under its own name, answering every request that names no other."""
        route = Route(runner.name, runner.name, runner.version, runner.prepare)
        batcher = request_batcher(batching, getattr(runner, "cost", None))
        return cls({runner.name: runner}, ModelBatchers({runner.name: batcher}, runner.name), Routes.single(route))
