"""score-file's scoring as a Ray Data step: ``ScoreBatches``, a callable class for ``Dataset.map_batches``.

For users who already run Ray (the ``ray`` extra)::

    settings = scoring_settings(["--model", "churn", "--max-batch-size", "256"])
    replies = ray.data.read_parquet(files).map_batches(
        ScoreBatches, fn_constructor_kwargs={"settings": settings}, concurrency=4,
        batch_format="pyarrow", batch_size=10_000)

Each actor loads and warms the model once, as score-file does, from the
settings the driver read (flags, ``STREAMSCORE_*`` variables, ``--config``;
not the services' credentials: ``for_actors``);
each batch of request rows becomes its reply rows, in order, by
worker.jobs.table_scoring (score-file's own pass; dead letters stay in place
as ``dead_letter`` rows). Nothing here imports Ray, and torch only when an
actor loads the model: ``python -m worker score-ray`` (worker.score_ray_command)
is the command around it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import NoReturn

import pyarrow as pa

from worker.core.errors import ConfigError
from worker.core.security import KafkaSecurity
from worker.core.settings import FILE_JOB_SECTIONS, Settings, add_flags
from worker.jobs.table_scoring import score_table


class ScoreBatches:
    """A ``map_batches`` callable class: each call scores a pyarrow batch of request rows into its reply rows.

    Pass the class, not an instance, to ``Dataset.map_batches``, with ``fn_constructor_kwargs={"settings":
    settings}`` and ``batch_format="pyarrow"``. Ray builds one per actor: the constructor loads and warms the
    model, as score-file does.

    Calling an instance, ``scorer(batch)``, takes a ``pyarrow.Table`` or ``RecordBatch`` of request rows, as
    score-file reads them (``id``; ``inputs`` as JSON text, a list or a struct, or field columns; optional
    ``deadline_ms`` and ``reply_to``), and returns a ``pyarrow.Table`` of its reply rows, one per row and in the
    same order, with score-file's reply columns (``score_table``). It blocks while the model runs; one call at
    a time (Ray's default for a class). It raises ConfigError for a batch that is not pyarrow (numpy and pandas
    batches turn a null ``deadline_ms`` into NaN) or has no string ``id`` column, and what the model raises
    (ModelError).

    Args:
        settings: What to score with, from ``scoring_settings`` on the driver.

    Raises:
        ConfigError: A setting does not fit this machine or the model (what score-file refuses).
        ModelError: The model cannot be loaded, or fails its warmup batch.
    """

    def __init__(self, settings: Settings) -> None:
        from worker.app import build_one_model  # torch and the model: on the actor, not where this is imported

        self._runner = build_one_model(settings)
        self._batching = settings.batching

    def __call__(self, batch: pa.Table) -> pa.Table:
        """The reply rows of ``batch``, one per row, in its order (see the class docstring)."""
        if not isinstance(batch, (pa.Table, pa.RecordBatch)):
            raise ConfigError(f"ScoreBatches takes pyarrow batches, got {type(batch).__module__}."
                              f"{type(batch).__name__}: pass batch_format=\"pyarrow\" to map_batches (numpy and "
                              "pandas batches turn a null deadline_ms into NaN)")
        return score_table(self._runner, self._batching, batch)


class _Refusing(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"scoring_settings: {message}")


def scoring_settings(flags: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> Settings:
    """The settings ``score-file --model ... FLAGS`` would score with, for ``ScoreBatches``.

    Read on the driver and checked at once, so that a bad setting fails before Ray starts an actor. Of a
    configuration file's models, only the one ``--model`` names (or the file's default) is kept. The Kafka
    security settings and the Redis URL are left out: scoring never uses them, and the settings travel pickled
    through Ray's object store.

    Args:
        flags: score-file's setting flags (``--model``, ``--model-config``, ``--weights``,
            ``--max-batch-size``, ``--max-batch-tokens``, ``--config``, ...), as on its command line.
        environ: The ``STREAMSCORE_*`` variables under the flags (None: this process's environment).

    Returns:
        The settings, to pass to ``ScoreBatches`` as its ``settings``.

    Raises:
        ConfigError: A flag or variable is unknown or has a bad value (the message names it).
    """
    parser = _Refusing(prog="scoring_settings", add_help=False)
    add_flags(parser, FILE_JOB_SECTIONS)
    args = parser.parse_args(list(flags))
    return for_actors(Settings.from_sources(args, environ).only_model(args.model))


def for_actors(settings: Settings) -> Settings:
    """``settings`` without what scoring never uses and should not travel pickled through Ray's object store:
    the Kafka security settings (SASL passwords, key files) and the Redis URL (it may hold a password)."""
    return settings.replace(kafka_security=KafkaSecurity(), redis_url="")
