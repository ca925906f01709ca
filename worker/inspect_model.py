"""``python -m worker inspect-model``: what the worker would serve, before it serves it.

Loads the model exactly as the worker does (the same settings, the same
checks), warms it up as the worker does (batches growing towards
``--max-batch-size``, within warmup's memory and time bounds), and prints its input and output
spec, a valid sample request, its version, its size, the device, and what
one warm batch costs. A user's mistake stops it with exit code 2 and the
same message the worker would give.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from typing import Any

import orjson

from worker.app import build_one_model
from worker.core.settings import Settings, add_flags
from worker.core.wire import encode_request
from worker.models.base import Servable
from worker.models.runner import TorchRunner, Warmup

DESCRIPTION = """\
Load a model the way the worker would (--model, --model-config, --weights, --allow-pickle,
--device, --amp), warm it up with batches of sample inputs built from its input spec (growing
towards --max-batch-size, but never more than 16 MiB of inputs), and print: the input and output
spec, a valid sample request and its reply, the version (a hash of the files that define the
model), parameter count and size, the device, and the time of one warm batch of --max-batch-size
(measured, or scaled from warmup's largest batch). Nothing is consumed or published.
"""


@dataclass(frozen=True)
class ModelReport:
    name: str
    version: str
    spec: dict[str, Any]
    sample_request: dict[str, Any]
    sample_reply_outputs: Any
    parameters: int
    parameter_bytes: int
    device: str
    batch_size: int
    warm_batch_ms: float  # a full batch of batch_size: measured, or scaled from warmed_batch_size
    warmed_batch_size: int
    warmed_batch_ms: float

    def as_text(self) -> str:
        return "\n".join([
            f"model        {self.name}",
            f"version      {self.version}",
            f"device       {self.device}",
            f"parameters   {self.parameters:,} ({self.parameter_bytes / 2**20:.2f} MiB)",
            f"warm batch   {self.warm_batch_ms:.2f} ms for {self.batch_size} items "
            f"({self.batch_size / max(self.warm_batch_ms, 1e-6) * 1000:,.0f} items/s)" + self._estimated(),
            f"inputs       {_json(self.spec.get('inputs', 'declared by the model itself'))}",
            f"outputs      {_json(self.spec.get('outputs', 'declared by the model itself'))}",
            "sample request (one line of a requests topic or a score-file input):",
            f"  {_json(self.sample_request)}",
            f"its reply's outputs: {_json(self.sample_reply_outputs)}",
        ])


    def _estimated(self) -> str:
        if self.warmed_batch_size == self.batch_size:
            return ""
        return (f", estimated in proportion from {self.warmed_batch_ms:.2f} ms for {self.warmed_batch_size} "
                "(warmup's largest batch)")


def add_inspect_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("inspect-model", help="load and warm up a model, print its spec and a sample request",
                                 description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_flags(parser)


def inspect_model(settings: Settings) -> ModelReport:
    """Raises ConfigError or ModelError as the worker would at start."""
    runner = build_one_model(settings)
    return _report(runner, runner.last_warmup or runner.warmup(settings.batching.max_batch_size))


def run_inspect(settings: Settings, as_json: bool) -> int:
    report = inspect_model(settings)
    print(orjson.dumps(report.__dict__, option=orjson.OPT_INDENT_2).decode() if as_json else report.as_text())
    return 0


def _report(runner: TorchRunner, warmup: Warmup) -> ModelReport:
    model: Servable = runner.model
    inputs = model.sample_inputs(random.Random(0))
    outcome = runner.run([runner.prepare(inputs)])[0]
    describe = getattr(model, "describe", None)
    params = list(model.module.parameters()) + list(model.module.buffers())
    return ModelReport(
        name=runner.name, version=runner.version, spec=describe() if describe else {},
        sample_request=orjson.loads(encode_request(inputs, "sample-1")), sample_reply_outputs=outcome.output,
        parameters=sum(p.numel() for p in model.module.parameters()),
        parameter_bytes=sum(p.numel() * p.element_size() for p in params),
        device=str(runner.device), batch_size=warmup.batch_size, warm_batch_ms=warmup.batch_s * 1000,
        warmed_batch_size=warmup.warmed_size, warmed_batch_ms=warmup.warmed_s * 1000)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
