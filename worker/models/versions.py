"""Whether a new version of a model may replace the one serving: the checks of a switch without a restart."""

from __future__ import annotations

import random
from typing import Any, Protocol

from worker.models.runner import TorchRunner
from worker.ports import ModelRunner

SAMPLE_BATCH = 8  # requests of the model's own sample inputs the new version must score


class Version(Protocol):
    """A version of a model, loaded: what the stream's LoadedEntry is to these checks."""

    @property
    def version(self) -> str: ...

    @property
    def runner(self) -> ModelRunner: ...


def refusal(old: Version, new: Version) -> str | None:
    """Why ``new`` may not take ``old``'s requests, or None: its version must differ (replies must tell them
    apart), its declared inputs and outputs must be the old one's (its clients send and read those), and it must
    score a sample batch, with outputs of the same shape as the old one's."""
    if new.version == old.version:
        return (f"its version {new.version!r} is the serving one's: replies could not tell them apart; give it "
                "another (a new file, or version = \"...\" in its [models] table)")
    old_spec, new_spec = declared_contract(old.runner), declared_contract(new.runner)
    if old_spec != new_spec:
        return (f"its declared inputs and outputs differ from the serving version's ({old_spec} -> {new_spec}): "
                "serve it under a new model name")
    sample = _sample(new.runner)
    if sample is None:
        return None  # the model offers no sample inputs: nothing more to try
    new_outcomes = new.runner.run([new.runner.prepare(inputs) for inputs in sample])
    failed = [outcome for outcome in new_outcomes if not outcome.ok]
    if failed:
        return (f"{len(failed)} of a sample batch of {len(sample)} failed: {failed[0].error_code}: "
                f"{failed[0].error_message}")
    old_outcomes = old.runner.run([old.runner.prepare(inputs) for inputs in sample])
    if old_outcomes[0].ok and _shape(old_outcomes[0].output) != _shape(new_outcomes[0].output):
        return (f"its outputs are shaped {_shape(new_outcomes[0].output)}, the serving version's "
                f"{_shape(old_outcomes[0].output)}: serve it under a new model name")
    return None


def declared_contract(runner: ModelRunner) -> Any:
    """What a model declares it takes and gives (its spec's inputs and outputs), which its clients send and read;
    None for a model that declares none."""
    describe = getattr(runner.model, "describe", None) if isinstance(runner, TorchRunner) else None
    return describe() if describe is not None else None


def _sample(runner: ModelRunner) -> list[Any] | None:
    if not isinstance(runner, TorchRunner):
        return None
    rng = random.Random(0)
    return [runner.model.sample_inputs(rng) for _ in range(SAMPLE_BATCH)]


def _shape(output: Any) -> Any:
    """An output's structure without its values: keys, lengths and kinds."""
    if isinstance(output, dict):
        return {key: _shape(value) for key, value in output.items()}
    if isinstance(output, list):
        return [len(output), _shape(output[0]) if output else None]
    return type(output).__name__
