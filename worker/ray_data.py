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

    Built once per actor: loads and warms the model of ``settings`` (``scoring_settings``), raising what
    score-file raises for it (ConfigError, ModelError). Each call blocks while the model runs; one call at a
    time (Ray's default for a class). Returns a pyarrow table of as many rows as the batch, in its order
    (worker.jobs.table_scoring). ConfigError for a batch that is not pyarrow, or has no string ``id`` column.
    """

    def __init__(self, settings: Settings) -> None:
        from worker.app import build_one_model  # torch and the model: on the actor, not where this is imported

        self._runner = build_one_model(settings)
        self._batching = settings.batching

    def __call__(self, batch: pa.Table) -> pa.Table:
        if not isinstance(batch, (pa.Table, pa.RecordBatch)):
            raise ConfigError(f"ScoreBatches takes pyarrow batches, got {type(batch).__module__}."
                              f"{type(batch).__name__}: pass batch_format=\"pyarrow\" to map_batches (numpy and "
                              "pandas batches turn a null deadline_ms into NaN)")
        return score_table(self._runner, self._batching, batch)


class _Refusing(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"scoring_settings: {message}")


def scoring_settings(flags: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> Settings:
    """The settings ``score-file --model ... FLAGS`` would score with: ``flags`` are score-file's setting flags
    (``--model``, ``--model-config``, ``--weights``, ``--max-batch-size``, ``--config``, ...), over the
    ``STREAMSCORE_*`` variables of ``environ`` (this process's by default), and of a configuration file's
    models the one ``--model`` names, less the services' credentials (``for_actors``). ConfigError naming the
    flag or variable for a bad or unknown one."""
    parser = _Refusing(prog="scoring_settings", add_help=False)
    add_flags(parser, FILE_JOB_SECTIONS)
    args = parser.parse_args(list(flags))
    return for_actors(Settings.from_sources(args, environ).only_model(args.model))


def for_actors(settings: Settings) -> Settings:
    """``settings`` without what scoring never uses and should not travel pickled through Ray's object store:
    the Kafka security settings (SASL passwords, key files) and the Redis URL (it may hold a password)."""
    return settings.replace(kafka_security=KafkaSecurity(), redis_url="")
