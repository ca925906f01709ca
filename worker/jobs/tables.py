"""The batch file job's files: requests read from, and replies written to, JSONL or Parquet, chosen by suffix.

Both formats stream: JSONL a line at a time, Parquet ``chunk_rows`` rows at a
time (read with ``iter_batches``, written as row groups), so memory is bounded
by the chunk, not the file.

JSONL (``.jsonl``, ``.ndjson``): one request per line in the wire format; one
reply value per line.

Parquet requests (``.parquet``), one request per row, by column name:

- ``id``: the request id, a string (1-256 characters). A file without a
  string ``id`` column is refused (every row would be a dead letter); a row
  without a usable id (null, empty, too long) is a dead letter, as in JSONL.
- ``inputs``: a string column holds JSON text (``[0.1, 0.2]``, ``"some
  text"`` with its quotes); a column of any other type (a list of numbers, a
  struct) is the value itself. Without an ``inputs`` column, every column
  other than the request fields becomes one field of an ``inputs`` object:
  columns ``tenure, plan_price`` give ``{"tenure": 3, "plan_price": 19.9}``,
  what a model with ``"kind": "fields"`` inputs expects.
- ``deadline_ms``, ``reply_to``, ``model``, ``model_version``: optional, as in
  the wire format (never input fields: ``python -m producer send --file`` reads
  a table the same way).

Each row becomes the request JSON a JSONL line would carry, with its id also
as the record key (as a Kafka record keyed by its id), and is validated by
the same ``decode_request``: a row's error replies are a line's. The key
means an ``inputs`` cell that is not JSON gets an ``invalid_json`` error reply
under the row's id rather than a dead letter.

Parquet replies: one row per reply, in input order, with ``REPLY_SCHEMA``.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from worker.core.errors import ConfigError
from worker.core.messages import Position, RawRecord, Reply
from worker.core.table_cells import plain
from worker.core.wire import MAX_ID_LENGTH, encode_reply
from worker.ports import ReplyWriter

Format = Literal["jsonl", "parquet"]
SUFFIXES: dict[str, Format] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
REQUEST_FIELDS = ("id", "reply_to", "deadline_ms", "model", "model_version")  # a request's own, not its inputs'
REQUEST_COLUMNS = (*REQUEST_FIELDS, "inputs")
REPLY_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),  # ok | error | expired
    pa.field("outputs", pa.string()),  # JSON text; null unless status is ok
    pa.field("error_code", pa.string()),  # null when status is ok
    pa.field("error_message", pa.string()),
    pa.field("model", pa.string(), nullable=False),
    pa.field("model_version", pa.string(), nullable=False),
])


def file_format(path: Path) -> Format:
    """The format of ``path`` by its suffix; ConfigError naming the valid ones for any other."""
    found = SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise ConfigError(f"{path}: unknown file format {path.suffix!r}; expected one of {', '.join(SUFFIXES)}")
    return found


def count_requests(path: Path) -> int:
    """How many requests ``path`` holds (lines that are not blank, as ``read_requests`` reads them, or rows);
    Parquet reads only the footer."""
    if file_format(path) == "parquet":
        with _open_parquet(path) as table:
            return int(table.metadata.num_rows)
    with path.open("rb") as lines:
        return sum(1 for number, line in enumerate(lines, start=1)
                   if (line.removeprefix(codecs.BOM_UTF8) if number == 1 else line).strip())


def check_requests(path: Path) -> None:
    """ConfigError now for an input ``read_requests`` would refuse; for Parquet, reads the footer only."""
    if file_format(path) == "parquet":
        with _open_parquet(path) as table:
            _require_id_column(path, table.schema_arrow)


def row_group_rows(path: Path) -> list[int]:
    """The rows of each row group of the Parquet file ``path``, in order, read from its footer alone.

    ConfigError for a file ``read_requests`` would refuse (not Parquet, no string ``id`` column); OSError
    for one that cannot be read.
    """
    with _open_parquet(path) as table:
        _require_id_column(path, table.schema_arrow)
        return [table.metadata.row_group(index).num_rows for index in range(table.metadata.num_row_groups)]


def read_requests(path: Path, chunk_rows: int) -> Iterator[RawRecord]:
    """The records of ``path`` in order, positioned at (``path``, 0, line or row number from 1).

    Opens ``path`` now, so OSError, or ConfigError for a ``.parquet`` file
    that is not Parquet or has no string ``id`` column, come before any
    record. Blank JSONL lines are skipped.
    """
    if file_format(path) == "parquet":
        table = _open_parquet(path)
        try:
            _require_id_column(path, table.schema_arrow)
        except ConfigError:
            table.close()
            raise
        return _parquet_requests(str(path), table, chunk_rows)
    return _jsonl_requests(path, path.open("rb"))


def read_row_groups(path: Path, name: str, row_groups: Sequence[int], first_row: int,
                    chunk_rows: int) -> Iterator[RawRecord]:
    """The records of consecutive ``row_groups`` of the Parquet file ``path``, in order, positioned at
    (``name``, 0, row number in the file from 1), the first row group's first row being ``first_row`` + 1.

    Opens ``path`` now, with the errors of ``read_requests``. The row numbers are those a ``read_requests``
    of the whole file gives the same rows, when ``first_row`` is the rows of the row groups before.
    """
    table = _open_parquet(path)
    try:
        _require_id_column(path, table.schema_arrow)
    except ConfigError:
        table.close()
        raise
    return _parquet_requests(name, table, chunk_rows, row_groups, first_row)


def _require_id_column(path: Path, schema: pa.Schema) -> None:
    require_id_column(str(path), schema, "score-file", "the file's")


def require_id_column(where: str, schema: pa.Schema, job: str, whose: str) -> None:
    """ConfigError, naming ``where`` (a file, a batch) and ``job``, unless ``schema`` has a string ``id`` column;
    ``whose``: the table's columns, for the message ("the file's"). Pure."""
    if "id" not in schema.names:
        raise ConfigError(f"{where} has no 'id' column: {job} needs each row's request id in a string column "
                          f"named 'id' ({whose} columns: {', '.join(schema.names) or 'none'})")
    kind = schema.field("id").type
    if not (_is_text(kind) or (pa.types.is_dictionary(kind) and _is_text(kind.value_type))):
        raise ConfigError(f"{where}: column 'id' is {kind}; {job} needs strings (1-{MAX_ID_LENGTH} characters), "
                          "every row would be a dead letter: cast it to string")


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))


def _open_parquet(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except pa.ArrowInvalid as exc:  # not Parquet at all; unreadable files raise OSError
        raise ConfigError(f"{path} is not a Parquet file: {exc}") from exc


def _jsonl_requests(path: Path, lines: IO[bytes]) -> Iterator[RawRecord]:
    """A request a line; a UTF-8 byte order mark before the first (Excel and PowerShell write one) is no part
    of it."""
    with lines:
        for number, line in enumerate(lines, start=1):
            if number == 1:
                line = line.removeprefix(codecs.BOM_UTF8)
            if line.strip():
                yield RawRecord(Position(str(path), 0, number), None, line.rstrip(b"\r\n"), [], 0, 0.0)


def _parquet_requests(name: str, table: pq.ParquetFile, chunk_rows: int, row_groups: Sequence[int] | None = None,
                      first_row: int = 0) -> Iterator[RawRecord]:
    with table:
        fields = input_fields(table.schema_arrow.names)
        number = first_row
        for chunk in table.iter_batches(batch_size=chunk_rows, row_groups=row_groups):
            yield from rows_records(chunk, fields, name, number)
            number += chunk.num_rows


def input_fields(columns: Sequence[str]) -> list[str]:
    """The columns that make each row's ``inputs`` object: none when there is an ``inputs`` column, else every
    column but the request fields. Pure."""
    return [] if "inputs" in columns else [column for column in columns if column not in REQUEST_COLUMNS]


def rows_records(rows: pa.RecordBatch | pa.Table, fields: Sequence[str], name: str,
                 first_row: int = 0) -> Iterator[RawRecord]:
    """The record of each of ``rows`` (``row_record``), in order, positioned at (``name``, 0, ``first_row`` + its
    row number from 1)."""
    columns = {column: rows.column(column).to_pylist() for column in rows.schema.names}
    for row in range(rows.num_rows):
        yield row_record({column: cells[row] for column, cells in columns.items()}, fields,
                         Position(name, 0, first_row + row + 1))


def row_record(row: dict[str, Any], fields: Sequence[str], position: Position) -> RawRecord:
    """The record a table row stands for: its request JSON, keyed by its id. Pure.

    With ``fields``, those columns make the ``inputs`` object; without, the
    ``inputs`` cell is used (a string as JSON text). Null request fields are
    left out, so a null id is a missing one; a whole-number double ``deadline_ms``
    is the integer it holds (pandas writes an integer column with nulls so).
    """
    body = {name: row[name] for name in REQUEST_FIELDS if row.get(name) is not None}
    deadline = body.get("deadline_ms")
    if isinstance(deadline, float) and deadline.is_integer():  # pandas keeps an integer column with nulls as doubles
        body["deadline_ms"] = int(deadline)
    key = body["id"].encode("utf-8", "replace") if isinstance(body.get("id"), str) else None
    if fields:
        body["inputs"] = {name: row[name] for name in fields}
    elif row.get("inputs") is not None:
        inputs = row["inputs"]
        if isinstance(inputs, (str, bytes)):
            try:
                inputs = orjson.loads(inputs)
            except orjson.JSONDecodeError:
                # The cell itself as the value: decode_request reports where it stops being JSON.
                return RawRecord(position, key, inputs.encode() if isinstance(inputs, str) else inputs, [], 0, 0.0)
        body["inputs"] = inputs
    return RawRecord(position, key, orjson.dumps(body, default=plain), [], 0, 0.0)


def open_replies(path: Path, chunk_rows: int, fmt: Format | None = None) -> ReplyWriter:
    """A writer for ``path`` in ``fmt``, by default the format of its suffix (ConfigError for another);
    creates or truncates it."""
    if (fmt or file_format(path)) == "parquet":
        return ParquetReplies(path, chunk_rows)
    return JsonlReplies(path)


class JsonlReplies:
    """Each reply's wire value on a line of its own."""

    def __init__(self, path: Path) -> None:
        self._out = path.open("wb")

    def write(self, reply: Reply) -> None:
        self._out.write(encode_reply(reply)[1] + b"\n")

    def close(self) -> None:
        self._out.close()


class ParquetReplies:
    """Replies as rows of ``REPLY_SCHEMA``, a row group every ``rows_per_group`` replies (and at close)."""

    def __init__(self, path: Path, rows_per_group: int) -> None:
        self._writer = pq.ParquetWriter(path, REPLY_SCHEMA)
        self._rows_per_group = rows_per_group
        self._columns: dict[str, list[str | None]] = {name: [] for name in REPLY_SCHEMA.names}

    def write(self, reply: Reply) -> None:
        ok = reply.status == "ok"
        outputs = orjson.dumps(reply.outputs, option=orjson.OPT_SERIALIZE_NUMPY).decode() if ok else None
        row = (reply.id, reply.status, outputs, None if ok else reply.error_code, None if ok else reply.error_message,
               reply.model, reply.model_version)
        for cells, cell in zip(self._columns.values(), row, strict=True):
            cells.append(cell)
        if len(self._columns["id"]) >= self._rows_per_group:
            self._flush()

    def close(self) -> None:
        self._flush()
        self._writer.close()

    def _flush(self) -> None:
        if self._columns["id"]:
            self._writer.write_table(pa.Table.from_pydict(self._columns, schema=REPLY_SCHEMA))
            self._columns = {name: [] for name in REPLY_SCHEMA.names}
