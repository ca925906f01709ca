"""A table of request rows scored into a table of reply rows, in memory: score-file's pass over one Arrow batch.

What a Ray Data ``map_batches`` step does with each batch (worker.ray_data);
nothing here needs Ray. The request rows are a score-file Parquet table's
(worker.jobs.tables: ``id``; ``inputs`` as JSON text, a list or a struct, or
field columns; optional ``deadline_ms`` / ``reply_to``), each decoded, batched
and scored by worker.jobs.scoring_pass as score-file scores it. The reply
table has one row per request row, in the same order, with score-file's reply
columns (``TABLE_REPLY_SCHEMA``: ``id``, ``status``, ``outputs`` as JSON text,
``error_code``, ``error_message``, ``model``, ``model_version``).

A batch has no file beside it for dead letters, so a row without a usable id
(null, empty, too long, a request that is not JSON) keeps its place as a
reply row with status ``dead_letter``: its ``id`` cell as it was (null when
null), ``error_code`` and ``error_message`` as score-file's dead-letter line
has them, no ``outputs``. No row is dropped: the reply table always has as
many rows as the request table.
"""

from __future__ import annotations

import orjson
import pyarrow as pa

from worker.core.batcher import request_batcher
from worker.core.clock import Clock, SystemClock
from worker.core.messages import InvalidRecord, Reply
from worker.core.sections import BatchingSettings
from worker.jobs.scoring_pass import FileSummary, ScoringPass
from worker.jobs.tables import REPLY_SCHEMA, input_fields, require_id_column, rows_records
from worker.ports import ModelRunner

DEAD_LETTER = "dead_letter"
# score-file's reply columns, but a dead letter's id may be null: the row's own id cell.
TABLE_REPLY_SCHEMA = REPLY_SCHEMA.set(0, pa.field("id", pa.string(), nullable=True))


def score_table(runner: ModelRunner, batching: BatchingSettings, requests: pa.Table | pa.RecordBatch,
                clock: Clock | None = None) -> pa.Table:
    """The reply rows of a table of request rows, one per row and in its order: score-file's pass, in memory.

    Each row is decoded as score-file decodes a Parquet row, and scored in the
    stream's model batches (``max_batch_size``, ``max_batch_tokens``), cut
    within this table only. A row without a usable id (null, empty, too long,
    a request that is not JSON) keeps its place as a reply row with status
    ``dead_letter``, its ``id`` cell as it was and no ``outputs``: no row is
    dropped. Blocks while the model runs. Needs no Ray: ``ScoreBatches`` calls
    it for each Ray Data batch.

    Args:
        runner: The loaded model: ``build_one_model(settings)`` builds the one score-file would.
        batching: The batching settings (``settings.batching``).
        requests: Request rows: ``id``; ``inputs`` as JSON text, a list or a struct, or else one column per
            field of ``inputs``; optional ``deadline_ms`` and ``reply_to``.
        clock: The clock a request's ``deadline_ms`` is compared with when its batch is scored (None: the
            system's); a passed deadline is answered ``expired``.

    Returns:
        The reply rows (``TABLE_REPLY_SCHEMA``): ``id``, ``status``, ``outputs`` as JSON text, ``error_code``,
            ``error_message``, ``model``, ``model_version``.

    Raises:
        ConfigError: ``requests`` has no string ``id`` column (as score-file refuses such a file).
        ModelError: What the runner raises, as it is.
    """
    require_id_column("a batch of request rows", requests.schema, "scoring", "the batch's")
    answers = _ReplyColumns(requests.column("id").to_pylist(), runner.name, runner.version)
    batcher = request_batcher(batching, getattr(runner, "cost", None))
    records = rows_records(requests, input_fields(requests.schema.names), "batch")
    ScoringPass(runner, batching, batcher, answers, FileSummary(total=requests.num_rows),
                clock=clock or SystemClock()).run((record.position.offset, record) for record in records)
    return answers.table()


class _ReplyColumns:
    """The answers of one table, as columns of TABLE_REPLY_SCHEMA; ``ids``: the table's ``id`` cells; a dead
    letter was never a request for the model, but its row still names the model the job ran."""

    def __init__(self, ids: list[str | None], model: str, version: str) -> None:
        self._ids, self._model, self._version = ids, model, version
        self._columns: dict[str, list[str | None]] = {name: [] for name in TABLE_REPLY_SCHEMA.names}

    def reply(self, reply: Reply) -> None:
        ok = reply.status == "ok"
        outputs = orjson.dumps(reply.outputs, option=orjson.OPT_SERIALIZE_NUMPY).decode() if ok else None
        self._add(reply.id, reply.status, outputs, None if ok else reply.error_code,
                  None if ok else reply.error_message, reply.model, reply.model_version)

    def dead_letter(self, entry: InvalidRecord) -> None:
        # The row's number from 1 in this table (worker.jobs.tables.rows_records): its own id cell, as it was.
        self._add(self._ids[entry.position.offset - 1], DEAD_LETTER, None, entry.code, entry.message,
                  self._model, self._version)

    def _add(self, *row: str | None) -> None:
        for cells, cell in zip(self._columns.values(), row, strict=True):
            cells.append(cell)

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self._columns, schema=TABLE_REPLY_SCHEMA)
